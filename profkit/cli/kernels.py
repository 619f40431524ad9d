"""profkit kernels: where a run's GPU time went, by kernel and NVTX range."""

from __future__ import annotations

import click

from profkit.cli.plumbing import db_option, handled, out, phase_option, resolve_run, working
from profkit.outputs.tables import table as _table
from profkit.store.store import Store


@click.command()
@db_option
@click.option("--run", default=None, help="Run (default: the newest).")
@click.option("--top", default=20, type=click.IntRange(0, 2**31 - 1), show_default=True, help="How many rows.")
@phase_option
@handled
def kernels(db, run, top, phase):
    """Where a run's GPU time went: kernels by NVTX range, most total time first.

    \b
    Example:
      profkit kernels --run e2e-decode --top 10"""
    from profkit.analyses import phases, summary

    run = resolve_run(db, run)
    with Store(db, readonly=True) as s:
        win, line = phases.selected(s, run, phase)
        if line:
            out.print(line)
        with working(f"kernels {run}"):
            got = summary.kernels(s, run, top, window=win)
        out.print(_table(got, f"kernels of run {run}"))
