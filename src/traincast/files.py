"""Output files written whole or not at all: a temporary file beside the target, renamed over
it once complete, so an error, a full disk or Ctrl-C never leaves a half-written file.

A write that fails for want of space (``ENOSPC``, ``EDQUOT``) or of a place to write (no
folder, a folder in the way, no permission, a read-only file system) is a
:class:`~traincast.errors.TraincastError` naming the file; the target is left as it was.
"""

from __future__ import annotations

import datetime
import errno
import gzip
import math
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, cast

import numpy as np

from traincast.errors import TraincastError, disk_full

_NO_PLACE = {errno.ENOENT: "no such folder", errno.ENOTDIR: "a folder on the path is a file",
             errno.EISDIR: "is a folder", errno.EACCES: "permission denied",
             errno.EPERM: "permission denied", errno.EROFS: "read-only file system"}


def open_bytes(path: str | Path) -> BinaryIO:
    """``path`` opened for reading bytes: decompressed on the way for a ``.gz`` file (any
    case of the suffix), as it is otherwise."""
    if str(path).lower().endswith(".gz"):
        return cast(BinaryIO, gzip.open(path, "rb"))
    return open(path, "rb")


def content_sha256(path: str | Path) -> str:
    """The sha256 (hex) of a file's bytes, of a ``.gz`` file's decompressed bytes (so a file and
    its gzipped copy have one content), read in blocks (:func:`hashlib.file_digest`). A
    ``.gz`` cut short raises :class:`EOFError`, one that is not gzip :class:`OSError`
    (:class:`gzip.BadGzipFile`), a damaged one :class:`zlib.error`."""
    import hashlib

    with open_bytes(path) as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def stream_kind(path: Path) -> str:
    """What ``path`` is when it is a stream, not a file: ``"a pipe"`` (a FIFO, ``/dev/stdin``
    of a pipe, ``<(cmd)``), ``"a socket"`` or ``"a device"``; ``""`` otherwise (a regular file,
    a folder, nothing there)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return ""
    return ("a pipe" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "")


def refuse_stream(path: Path) -> None:
    """An error naming ``path`` as given when it is a pipe, a socket or a device
    (``/dev/stdin``, ``<(cmd)``, a FIFO): a trace is read several times (its head, its end, its
    content hash, its rows), which a stream cannot be, and a FIFO without a writer would wait
    for ever."""
    if kind := stream_kind(path):
        raise TraincastError(f"{path}: {kind}, not a regular file: a trace is read more than "
                             "once (its head, its end, its rows)",
                             hint="write it to a file first (cmd > trace.csv), then give that "
                                  "file")


def not_a_file(path: Path) -> str:
    """Why an existing ``path`` cannot take a file written over it (``is a folder``, ``not a
    regular file: a device, pipe or socket``); ``""`` where it can (a regular file, or
    nothing there yet)."""
    if not path.exists() or path.is_file():
        return ""
    return "is a folder" if path.is_dir() else \
        f"not a regular file: {stream_kind(path) or 'a device, pipe or socket'}"


def write_whole(path: str | Path, write: Callable[[Path], object]) -> Path:
    """``write(tmp)`` to a temporary file beside ``path`` (``.STEM.PID.tmpSUFFIX``: the
    suffix kept for writers that choose the format by it), then renamed over ``path``; the
    temporary file is removed when ``write`` fails. A full disk or a path that cannot be
    written is a TraincastError naming ``path`` (nothing written). A symbolic link is written
    through (its target replaced, the link kept); a path that exists and is no regular file (a
    device, a named pipe, a folder) is refused before anything is written, as a rename would
    replace it with a file."""
    target = Path(os.path.realpath(path)) if Path(path).is_symlink() else Path(path)
    if what := not_a_file(target):
        raise TraincastError(f"{path}: cannot write ({what}); nothing written",
                             hint="give the path of a regular file")
    tmp = target.with_name(f".{target.stem}.{os.getpid()}.tmp{target.suffix}")
    try:
        write(tmp)
        tmp.replace(target)
    except TraincastError:
        raise
    except Exception as exc:
        if disk_full(exc):
            raise TraincastError(f"{target}: no space left on device; nothing written",
                                 hint="free some space, or write the file elsewhere") from exc
        if isinstance(exc, OSError) and exc.errno in _NO_PLACE:
            raise TraincastError(f"{target}: cannot write ({_NO_PLACE[exc.errno]}); nothing "
                                 "written", hint="check the path and its permissions") from exc
        raise
    finally:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:  # no folder to hold it: nothing was written
            pass
    return target


def write_text_whole(path: str | Path, text: str) -> Path:
    """``text`` (UTF-8) to ``path``, whole or not at all (``write_whole``)."""
    return write_whole(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_bytes_whole(path: str | Path, data: bytes) -> Path:
    """``data`` to ``path``, whole or not at all (``write_whole``)."""
    return write_whole(path, lambda tmp: tmp.write_bytes(data))


def to_jsonable(obj: Any) -> Any:
    """numpy scalars/arrays, NaN, paths and date-times -> plain JSON values (NaN -> null, a
    date-time -> ISO 8601 text). Plain types are tested
    first by exact type: per-job outputs hold millions of values."""
    t = type(obj)
    if t is str or t is int or t is bool or obj is None:
        return obj
    if t is float:
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return to_jsonable(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, datetime.date):  # dates and date-times: ISO 8601
        return obj.isoformat()
    return obj
