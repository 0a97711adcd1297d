"""The ``traincast`` command line: a thin layer over the Python API.

Each area registers its commands on ``app`` in its own module below; errors from bad input
(:class:`~traincast.errors.TraincastError`) are printed as one line plus a hint, unexpected
ones as one line naming the exception (``--debug`` shows the traceback): see :func:`main`.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from typing import Any, NoReturn

import typer
from rich.text import Text

from traincast.cli.common import err_console, follow_terminal_width, set_quiet
from traincast.errors import TraincastError

app = typer.Typer(
    name="traincast", no_args_is_help=True, add_completion=False,
    pretty_exceptions_enable=False, rich_markup_mode="markdown",
    help="Characterize deep-learning training jobs and forecast their iteration time on other "
         "GPUs, networks and training architectures (after Wang et al., IISWC 2019).\n\n"
         "--debug anywhere on a command line shows the traceback of an unexpected error.")


def _version(value: bool) -> None:
    if value:
        from traincast import __version__

        typer.echo(f"traincast {__version__}")
        raise typer.Exit()


@app.callback()
def _global(
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars or notes on "
                               "stderr (bad rows are still listed); tables and JSON only."),
    version: bool = typer.Option(False, "--version", is_eager=True, callback=_version,
                                 help="Print the version and exit."),
) -> None:
    """Global options (``--debug`` anywhere on the line shows tracebacks)."""
    follow_terminal_width()
    set_quiet(quiet)


hardware_app = typer.Typer(no_args_is_help=True, help="The hardware catalog: GPUs, links, nodes.")
app.add_typer(hardware_app, name="hardware")

# Command modules register themselves on `app` when imported.
from traincast.cli import (  # noqa: E402,F401
    calibrate,
    colocate,
    hardware,
    merge,
    plan,
    predict,
    profile,
    report,
    study,
    trace,
    whatif,
    zoo,
)

_JSON_ERRORS = False
"""The command line asked for ``--json``: errors are one JSON object (:func:`_fail`)."""


def _fail(message: str, hint: str, code: int,
          details: dict[str, Any] | None = None) -> NoReturn:
    """One error line and one hint line on stderr, printed as text (a message with brackets,
    ``[gpu.x]``, is never read as console markup) and never wrapped; with ``--json``, one line
    of JSON on stderr instead: ``{"error": message, "hint": hint, "exit_code": code}`` and the
    error's ``details`` (a ``--strict`` ingest's ``bad_rows`` and ``errors``)."""
    if _JSON_ERRORS:
        import json

        sys.stderr.write(json.dumps({"error": message, "hint": hint, "exit_code": code,
                                     **(details or {})}) + "\n")
        sys.exit(code)
    err_console.print(Text("error: ", style="bold red") + Text(message), highlight=False,
                      soft_wrap=True)
    err_console.print(Text(f"hint: {hint}", style="dim"), highlight=False, soft_wrap=True)
    sys.exit(code)


def _interrupted() -> NoReturn:
    """Ctrl-C: ``interrupted`` on stderr (with ``--json``, as :func:`_fail`'s object), exit 130."""
    if _JSON_ERRORS:
        _fail("interrupted", "stopped by Ctrl-C (SIGINT)", 130)
    err_console.print(Text("interrupted", style="red"))
    sys.exit(130)


def _without_flag_metavars(command: Any) -> None:
    """``--help`` without a value beside an on/off flag (``<bool>``: a flag takes none): the
    flags' metavars set empty, in ``command`` and every sub-command. The help option is one
    object per command from the first call of ``get_help_option`` on (the click of typer >=
    0.20), so its metavar set here is the one ``--help`` shows."""
    settings = getattr(command, "context_settings", None) or {}
    help_option = command.get_help_option(command.context_class(command, **settings))
    for param in [*getattr(command, "params", ()), *([help_option] if help_option else [])]:
        if getattr(param, "is_flag", False):
            param.metavar = ""
    for sub in (getattr(command, "commands", None) or {}).values():
        _without_flag_metavars(sub)


def _run() -> NoReturn:
    """``app``, with click's usage errors (a bad or missing option or value) coming back as
    exceptions, so that :func:`_fail` prints them as every other error: one line and its
    hint, or with ``--json`` one JSON line. A command group called without a command (click's
    ``NoArgsIsHelpError``) shows its help, as click would (typer prints it as the error is
    made)."""
    # click's ClickException, wherever this typer takes click from (its own copy since 0.20)
    usage_error = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
    command = typer.main.get_command(app)
    _without_flag_metavars(command)
    try:
        code = command.main(prog_name="traincast", standalone_mode=False)
    except typer.Abort as exc:  # Ctrl-C, as click reports it; or an EOFError it took for one
        if isinstance(exc.__cause__, EOFError):  # (a truncated gzip file): an error, not Ctrl-C
            raise exc.__cause__ from None
        raise KeyboardInterrupt from None
    except usage_error as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # its help is printed already
            sys.exit(exc.exit_code)
        where = exc.ctx.command_path if getattr(exc, "ctx", None) else "traincast COMMAND"
        message = exc.format_message() + _given(exc, sys.argv[1:])
        _fail(message, f"{where} --help " + (
            "lists the commands" if message.startswith(("No such command", "Missing command"))
            else "shows the options and their units"), exc.exit_code)
    sys.exit(code if isinstance(code, int) else 0)


def _given(exc: Exception, argv: list[str]) -> str:
    """``, got 'VALUE'`` for click's message of a bad option value (``Invalid value for
    '--top': Input should be greater than or equal to 1``), which does not repeat the value:
    the value after the option's last use on the command line (``--top 0`` or ``--top=0``);
    empty when it cannot be told (an argument, a flag) or the message says it (``got ...``)."""
    param = getattr(exc, "param", None)
    opts = [*getattr(param, "opts", []), *getattr(param, "secondary_opts", [])]
    if not opts or getattr(param, "param_type_name", "") != "option":
        return ""
    value = None
    for i, word in enumerate(argv):
        if word in opts and i + 1 < len(argv):
            value = argv[i + 1]
        elif "=" in word and word.split("=", 1)[0] in opts:
            value = word.split("=", 1)[1]
    message = exc.format_message()
    if value is None or repr(value) in message or "got " in message:  # it says the value
        return ""
    return f", got {value!r}"


def _terminated(signum: int, frame: Any) -> None:
    """SIGTERM as Ctrl-C: the work in hand unwinds (its ``finally`` and ``except`` run)."""
    raise KeyboardInterrupt


def main() -> None:
    """Entry point of the ``traincast`` console script.

    Errors: a :class:`~traincast.errors.TraincastError` (bad input: a file, row, field or flag)
    is one line and its hint, exit status 2. A missing optional dependency is one line and the
    extra to install, exit 2. A full disk (``ENOSPC``) is one line naming the file, exit 2; a
    file or folder that cannot be read or written (an ``OSError`` naming a path) likewise.
    Ctrl-C (also inside a DuckDB query) and a termination signal (``kill``, a scheduler's
    time limit: SIGTERM, taken as Ctrl-C so that a study puts back the folder it was writing)
    print ``interrupted``, exit 130. Anything else is
    unexpected (a bug): one line naming the exception, exit 1; ``--debug`` anywhere on the
    command line shows the traceback instead. With ``--json`` on the command line every error,
    a bad option's too, and an interruption are one JSON object on stderr (:func:`_fail`);
    progress and notes on stderr stay text.
    """
    from traincast.errors import DAMAGED_HINT, disk_full, file_cut_short, interrupted, out_of_memory

    global _JSON_ERRORS
    debug = "--debug" in sys.argv
    if debug:
        sys.argv.remove("--debug")
    args = sys.argv[1:]
    _JSON_ERRORS = "--json" in args[:args.index("--") if "--" in args else len(args)]
    with contextlib.suppress(ValueError):  # not the main thread (an embedding): as it was
        signal.signal(signal.SIGTERM, _terminated)
    try:
        _run()
    except SystemExit as exc:  # typer turns Ctrl-C in a command into a silent exit 130
        if exc.code == 130:
            _interrupted()
        raise
    except KeyboardInterrupt:
        _interrupted()
    except TraincastError as exc:
        if debug:
            raise
        hint = exc.hint or "traincast COMMAND --help shows the options and their units"
        command = next((a for a in args if not a.startswith("-")), "")  # the subcommand
        _fail(str(exc), hint.replace("traincast COMMAND", f"traincast {command}".rstrip()), 2,
              exc.details)
    except ImportError as exc:
        if debug:
            raise
        extra = {"torch": "torch", "transformers": "torch", "matplotlib": "report",
                 "dask": "dask", "distributed": "dask"}.get((exc.name or "").split(".")[0])
        _fail(str(exc), f"pip install 'traincast[{extra}]'" if extra else
              "check the installation", 2)
    except Exception as exc:
        if interrupted(exc):
            _interrupted()
        if debug:
            raise
        path = getattr(exc, "filename", None) if isinstance(exc, OSError) else None
        if out_of_memory(exc):
            _fail(f"out of memory ({type(exc).__name__}: {str(exc).splitlines()[0]})",
                  "the job store's DuckDB may use TRAINCAST_DB_MEMORY (default 1GB) and spills "
                  "beyond it to a folder beside the store: raise it, or free disk there", 2)
        if cut := file_cut_short(exc):
            _fail(f"{cut}: damaged or cut short ({str(exc).splitlines()[0]})", DAMAGED_HINT, 2)
        if disk_full(exc):
            message = (f"{path}: no space left on device" if path else
                       f"no space left on device ({type(exc).__name__}: {exc})")
            _fail(message, "free some space, or write the output elsewhere", 2)
        if path is not None:
            _fail(f"{path}: {exc.strerror or exc}", "check the path and its permissions", 2)
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        hint = ("check the path and its permissions" if isinstance(exc, OSError) else
                "this is a bug in traincast, not in your input: run with --debug for the "
                "traceback and report it")
        _fail(f"{type(exc).__name__}: {message}", hint, 1)
