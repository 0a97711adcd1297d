"""The ``traincast`` command line: a thin layer over the Python API.

Each area registers its commands on ``app`` in its own module below; errors from bad input are
printed as one line plus a hint (``--debug`` shows the traceback).
"""

from __future__ import annotations

import sys

import typer

from traincast.cli.common import err_console, set_quiet

app = typer.Typer(
    name="traincast", no_args_is_help=True, add_completion=False,
    pretty_exceptions_enable=False, rich_markup_mode="markdown",
    help="Characterize deep-learning training jobs and forecast their iteration time on other "
         "GPUs, networks and training architectures (after Wang et al., IISWC 2019).")


def _version(value: bool) -> None:
    if value:
        from traincast import __version__

        typer.echo(f"traincast {__version__}")
        raise typer.Exit()


@app.callback()
def _global(
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars or notes; "
                               "tables and JSON only."),
    version: bool = typer.Option(False, "--version", is_eager=True, callback=_version,
                                 help="Print the version and exit."),
) -> None:
    """Global options (``--debug`` anywhere on the line shows tracebacks)."""
    set_quiet(quiet)


hardware_app = typer.Typer(no_args_is_help=True, help="The hardware catalog: GPUs, links, nodes.")
app.add_typer(hardware_app, name="hardware")

# Command modules register themselves on `app` when imported.
from traincast.cli import (  # noqa: E402,F401
    calibrate,
    hardware,
    plan,
    predict,
    profile,
    report,
    study,
    trace,
    whatif,
)


def main() -> None:
    """Entry point of the ``traincast`` console script."""
    debug = "--debug" in sys.argv
    if debug:
        sys.argv.remove("--debug")
    try:
        app(prog_name="traincast")
    except KeyboardInterrupt:
        err_console.print("[red]interrupted[/red]")
        sys.exit(130)
    except ImportError as exc:
        if debug:
            raise
        extra = {"torch": "torch", "transformers": "torch", "matplotlib": "report",
                 "dask": "dask", "distributed": "dask"}.get((exc.name or "").split(".")[0])
        err_console.print(f"[bold red]error:[/bold red] {exc}", highlight=False)
        hint = f"pip install 'traincast[{extra}]'" if extra else "check the installation"
        err_console.print(f"[dim]hint: {hint}[/dim]", highlight=False)
        sys.exit(2)
    except (ValueError, KeyError, OSError) as exc:
        if debug:
            raise
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        err_console.print(f"[bold red]error:[/bold red] {message}", highlight=False)
        hint = getattr(exc, "hint", "")
        err_console.print(f"[dim]hint: {hint or 'run with --debug for the full traceback'}[/dim]",
                          highlight=False)
        sys.exit(2)
