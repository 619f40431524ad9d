"""The profkit command line: each command parses its arguments, calls the library, and
prints through profkit.outputs. Errors become one line on stderr and a non-zero exit code.

One module a command (or a few related ones) in this package: the group below registers every
click command a module of the package defines, so adding a command is adding a file.
Shared plumbing (errors, --db, the run a command works on, progress) is in plumbing.py."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import click

from profkit import __version__


def _exit_on_signal(signum, frame):
    # SIGTERM/SIGHUP unwind like Ctrl-C: open transactions roll back, scratch folders go
    from profkit.core.signals import record

    record(signum)  # (a statement running in SQLite sees it: core/signals.py)
    raise SystemExit(128 + signum)


def _interrupt(signum, frame):
    from profkit.core.signals import record

    record(signum)
    raise KeyboardInterrupt


def _setup() -> None:
    """Once per command: terminal signals unwind instead of killing mid-write, a name that is not
    encodable prints escaped rather than as a traceback, scratch folders of killed runs go."""
    import signal
    import threading

    from profkit.core.tempfiles import clean_stale

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) is signal.SIG_DFL:
                signal.signal(sig, _exit_on_signal)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _interrupt)
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError):
                pass
    try:
        clean_stale()
    except OSError:
        pass


@click.group()
@click.version_option(__version__, prog_name="profkit")
def cli():
    """profkit: profile first, name the bottleneck, change one thing, re-profile."""
    _setup()


def _register() -> None:
    """Every click command defined in a module of this package (not one it imports from another:
    bench invokes capture's), in module order; `_`-modules (__main__) are not commands."""
    for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if m.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{m.name}")
        for obj in vars(module).values():
            if isinstance(obj, click.Command) and getattr(obj.callback, "__module__", None) == module.__name__:
                cli.add_command(obj)


_register()
