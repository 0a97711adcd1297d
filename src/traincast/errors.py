"""User-facing errors: the CLI prints them as one line with a hint, no traceback."""


class TraincastError(ValueError):
    """Bad input from the user (a file, a row, a flag); the message says which and why."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


class UnknownNameError(TraincastError, KeyError):
    """A name the catalog (or a registry) does not know; also a ``KeyError`` for lookups."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""
