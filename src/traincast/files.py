"""Output files written whole or not at all: a temporary file beside the target, renamed over
it once complete, so an error, a full disk or Ctrl-C never leaves a half-written file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def write_whole(path: str | Path, write: Callable[[Path], object]) -> Path:
    """``write(tmp)`` to ``.NAME.tmp`` beside ``path``, then renamed over ``path``; the
    temporary file is removed when ``write`` fails."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp")
    try:
        write(tmp)
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def write_text_whole(path: str | Path, text: str) -> Path:
    """``text`` (UTF-8) to ``path``, whole or not at all (``write_whole``)."""
    return write_whole(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_bytes_whole(path: str | Path, data: bytes) -> Path:
    """``data`` to ``path``, whole or not at all (``write_whole``)."""
    return write_whole(path, lambda tmp: tmp.write_bytes(data))
