"""User-facing errors: the CLI prints them as one line with a hint, no traceback; and the
predicates that recognise Ctrl-C, a full disk and exhausted memory in any library's
exception (and the exceptions it was raised from)."""

import difflib
import errno
import os
import re
from collections.abc import Iterable, Iterator


class TraincastError(ValueError):
    """Bad input from the user (a file, a row, a flag); the message says which and why."""

    def __init__(self, message: str, hint: str = "",
                 details: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.hint = hint
        # what a program reading ``--json`` errors gets beside the message (``errors``: the
        # bad rows of a ``--strict`` ingest, as a successful ingest's report gives them)
        self.details = details or {}


def bare_name(name: str) -> str:
    """A name without case or separators, its letters and digits alone: how two spellings of
    one name compare (``nvidia_a100-sxm4-80gb`` and ``NVIDIA A100-SXM4-80GB``: a GPU;
    ``JobID`` and ``job_id``: a column)."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def close_names(word: str, choices: Iterable[str], n: int = 1,
                cutoff: float = 0.6) -> list[str]:
    """The ``n`` choices closest to ``word`` (case-insensitive ``difflib`` ratio, at least
    ``cutoff``), closest first; of equally close ones the first given."""
    key = str(word).lower()
    scored = [(-difflib.SequenceMatcher(None, key, str(c).lower()).ratio(), i, str(c))
              for i, c in enumerate(choices)]
    return [c for r, _, c in sorted(scored) if -r >= cutoff][:n]


def did_you_mean(word: str, choices: Iterable[str], cutoff: float = 0.6) -> str:
    """``"did you mean 'X'? "`` for the choice closest to ``word`` (:func:`close_names`), else
    ``""``: the start of an unknown name's hint."""
    best = close_names(word, choices, 1, cutoff)
    return f"did you mean {best[0]!r}? " if best else ""


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters for an error line, ``...`` marking the cut."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


class NoSuchFileError(TraincastError, FileNotFoundError):
    """A file the user named does not exist: the message names it (``PATH: no such WHAT
    file``), the hint says where relative paths are looked for."""

    def __init__(self, path: object, what: str = "") -> None:
        super().__init__(f"{path}: no such {what + ' ' if what else ''}file",
                         hint=f"check the path (a relative path starts at {os.getcwd()})")


class UnknownNameError(TraincastError, KeyError):
    """A name the catalog (or a registry) does not know; also a ``KeyError`` for lookups."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo += [e.__cause__, e.__context__]


def interrupted(exc: BaseException) -> bool:
    """``exc`` is (or was raised from) Ctrl-C: a :class:`KeyboardInterrupt`, or DuckDB's
    interrupted query (``RuntimeError: Query interrupted`` when SIGINT arrives during a query,
    ``duckdb.InterruptException`` after ``connection.interrupt()``)."""
    return any(isinstance(e, KeyboardInterrupt) or type(e).__name__ == "InterruptException"
               or (type(e) is RuntimeError and "interrupted" in str(e).lower())
               for e in _chain(exc))


DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def disk_full(exc: BaseException) -> bool:
    """``exc`` is (or was raised from) a full disk or quota: ``ENOSPC``/``EDQUOT``, as an
    :class:`OSError` or in a library's message (pyarrow's, DuckDB's ``IOException ... No space
    left on device``)."""
    return any((isinstance(e, OSError) and e.errno in DISK_FULL)
               or "no space left on device" in str(e).lower()
               or "disk quota exceeded" in str(e).lower() for e in _chain(exc))


DAMAGED_HINT = ("a job store copied or downloaded while it was written, or a disk that filled: "
                "ingest the trace again into a new store (--db FILE)")
"""What to do about a store :func:`file_cut_short` finds damaged."""


def file_cut_short(exc: BaseException) -> str | None:
    """The file a DuckDB read found damaged or cut short (``IOException: Could not read enough
    bytes from file "F"``, a checksum that does not match, ``Corrupt database file`` as DuckDB
    opens it), or None ("a file" where the message names none)."""
    import re

    for e in _chain(exc):
        text = str(e)
        if (type(e).__name__ == "IOException" and ("could not read enough bytes" in text.lower()
                                                   or "checksum" in text.lower())) \
                or text.startswith("Corrupt database file"):  # a checksum met on opening
            found = re.search(r'file "([^"]+)"', text)
            return found.group(1) if found else "a file"
    return None


def out_of_memory(exc: BaseException) -> bool:
    """``exc`` is (or was raised from) DuckDB running out of its memory limit
    (``duckdb.OutOfMemoryException``) or a :class:`MemoryError`."""
    return any(isinstance(e, MemoryError) or type(e).__name__ == "OutOfMemoryException"
               for e in _chain(exc))
