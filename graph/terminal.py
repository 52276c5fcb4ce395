"""What every command of the command line shares: the one console, the one way to exit with an
error, and log lines on stderr. Light on purpose: `kernel-scientist --help` imports it."""

from __future__ import annotations

import logging
import os
import sys
from types import TracebackType
from typing import Any, NoReturn

import typer
from rich.console import Console

PIPE_WIDTH = 160


def make_console(stderr: bool = False) -> Console:
    """A console commands print to (stdout, or stderr for progress). Off a terminal (a pipe, a log
    file, CI) Rich would wrap at 80 columns and cut table cells to `kern…`; a log should keep whole
    ids, times and paths, so there it is PIPE_WIDTH wide unless $COLUMNS says otherwise."""
    stream = sys.stderr if stderr else sys.stdout
    if not stream.isatty() and not os.environ.get("COLUMNS"):
        return Console(stderr=stderr, width=PIPE_WIDTH)
    return Console(stderr=stderr)


console = make_console()
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
RUN_ARGUMENT_HELP = "Run id or directory (default: the latest run)."
RUNS_DIR_HELP = "Where runs live (default $KS_RUNS_DIR or ./runs)."


class StatusLines:
    """console.status off a terminal, where a spinner shows nothing: each text it is given is a line,
    so a pipe or a log sees what a command is waiting for (timing, drawing, asking an endpoint)."""

    def __init__(self, text: str) -> None:
        self.update(text)

    def update(self, text: str) -> None:
        console.print(text, markup=False, highlight=False, soft_wrap=True)

    def __enter__(self) -> StatusLines:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        return None


def working(text: str) -> Any:
    """What a command is doing for the next seconds: a spinner on a terminal, a line otherwise."""
    return console.status(text) if console.is_terminal else StatusLines(text)


def fail(message: str, code: int = 2, details: str = "") -> NoReturn:
    """Exit with one red line: code 2 for what the user can fix (bad input, a missing device,
    an endpoint that does not answer, a seed that does not pass), 1 for a run or evaluation that
    failed. `details` (a compiler's diagnostics, a log's tail) follow it, dimmed and indented."""
    console.print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)  # one line, however long
    for line in details.splitlines():
        console.print(f"  {line}", style="dim", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def setup_logging(verbose: bool) -> None:
    """Warnings by default, everything with -v; on stderr, so that piped output stays clean."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, format=LOG_FORMAT, stream=sys.stderr)
