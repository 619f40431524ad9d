"""What every command shares: the console, path and --db options, the mapping of typed errors
to one line and an exit code, the run a command works on, and progress bars."""

from __future__ import annotations

import sqlite3
import sys
from contextlib import contextmanager
from functools import wraps
from pathlib import Path

import click

from profkit.core.errors import ProfkitError
from profkit.core.names import as_text
from profkit.outputs.tables import console, plain
from profkit.store.store import Store, default_db

out = console()
# paths are checked by the library (one line of error); click's own check of an unreadable path
# would print a three-line usage message
PATH = click.Path(path_type=Path, readable=False)


def fail(message: str, code: int = 1):
    click.echo(f"profkit: {plain(message)}", err=True)
    sys.exit(code)


def _text_arg(v):
    """Command-line text as text SQLite can hold (bytes that are not UTF-8 become \\xNN)."""
    if isinstance(v, str):
        return as_text(v)
    if isinstance(v, tuple):
        return tuple(_text_arg(x) for x in v)
    return v


def _fail_if_stopped() -> None:
    """A signal ended the command (a statement it stopped fails as 'interrupted'): say so."""
    import signal

    from profkit.core.signals import stopped

    sig = stopped()
    if sig is not None:
        fail("interrupted (Ctrl-C)" if sig == signal.SIGINT else f"stopped (signal {sig})", 128 + sig)


def handled(fn):
    """Map profkit's typed errors (and a few OS/SQLite ones) to one line and an exit code."""

    @wraps(fn)
    def wrapper(*args, **kwargs):
        kwargs = {k: _text_arg(v) for k, v in kwargs.items()}
        try:
            return fn(*args, **kwargs)
        except (ProfkitError, sqlite3.Error, KeyboardInterrupt) as e:
            _fail_if_stopped()
            if isinstance(e, sqlite3.Error):
                fail(f"SQLite: {e}", 6)
            if isinstance(e, KeyboardInterrupt):
                fail("interrupted", 130)
            fail(str(e), e.exit_code)
        except BrokenPipeError:  # `profkit sql ... | head`: the reader has what it wanted
            import os

            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # (so the exit's flush does not fail again)
            sys.exit(141)
        except (OSError, MemoryError) as e:
            fail(f"{type(e).__name__}: {e}", 7)

    return wrapper


def resolve_run(db: str, run: str | None) -> str:
    """The run a command works on: --run, else the newest one, said on stderr when there are
    several (a silent pick reads as 'the' run)."""
    if run is not None:
        return run
    with Store(db, readonly=True) as s:
        newest = s.require_run(None)
        n = len(s.runs())
    if n > 1:
        click.echo(
            f"profkit: no --run given: using the newest run, {plain(newest)} (one of {n}; `profkit runs` lists them)",
            err=True,
        )
    return newest


def db_option(fn):
    """--db, resolved here and only here: the library always takes a path."""
    return click.option(
        "--db",
        default=None,
        metavar="DB",
        callback=lambda ctx, param, v: v or default_db(),
        help="Database file (default: $PROFKIT_DB, else profkit.db).",
    )(fn)


def on_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


@contextmanager
def file_progress():
    """on_progress(file, phase, done, total) for the library: one transient rich bar per file
    (rows or bytes done, phase) on a terminal; nothing when piped. Lines printed meanwhile
    through `out` appear above the bar."""
    if not out.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=out,
        transient=True,
    ) as bar:
        now: list = [None, None, None]  # file, phase, task

        def on_progress(file, phase, done, total):
            if (file, phase) != tuple(now[:2]):  # a new phase: a fresh bar (its total may be unknown)
                if now[2] is not None:
                    bar.remove_task(now[2])
                now[:] = [file, phase, bar.add_task(f"{plain(Path(file).name)}: {phase}", total=total)]
            bar.update(now[2], completed=done, total=total)

        yield on_progress


def progress_bar():
    """A rich progress bar on a terminal; nothing when piped."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    # (descriptions hold kernel and variant names: data, so no markup, control characters escaped)
    return Progress(
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=True,
        disable=not sys.stderr.isatty(),
        console=None,
    )


@contextmanager
def working(what: str):
    """A rich bar that pulses with the time spent on one step whose length is not known ahead
    (a million launches read and reduced); nothing when piped."""
    with progress_bar() as bar:
        bar.add_task(what, total=None)
        yield


def phase_option(f):
    """--phase NAME|all: the phase an analysis reads (default: the steady state where found)."""
    return click.option(
        "--phase",
        default=None,
        metavar="NAME|all",
        help="Phase to analyse (profkit phases lists them; default: the steady state; all: the whole run).",
    )(f)


def store_phases(db, runs) -> None:
    """Find and store the phases of each run just loaded (the phases view)."""
    from profkit.analyses import phases
    from profkit.store.store import Store

    with Store(db) as s:
        for run in dict.fromkeys(runs):
            s.replace_phases(run, phases.rows(phases.detect(s, run)))
