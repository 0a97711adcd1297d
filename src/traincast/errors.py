"""User-facing errors: the CLI prints them as one line with a hint, no traceback."""

import os


class TraincastError(ValueError):
    """Bad input from the user (a file, a row, a flag); the message says which and why."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


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
