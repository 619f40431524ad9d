"""profkit kernels: where a run's GPU time went, by kernel and NVTX range."""
from __future__ import annotations

import click

from profkit.cli.plumbing import db_option, handled, out, resolve_run
from profkit.outputs.tables import table as _table
from profkit.store.store import Store


@click.command()
@db_option
@click.option("--run", default=None, help="Run (default: the newest).")
@click.option("--top", default=20, type=click.IntRange(0, 2**31 - 1), show_default=True, help="How many rows.")
@handled
def kernels(db, run, top):
    """Where a run's GPU time went: kernels by NVTX range, most total time first.

    \b
    Example:
      profkit kernels --run e2e-decode --top 10"""
    from profkit.analyses import summary

    run = resolve_run(db, run)
    with Store(db, readonly=True) as s:
        out.print(_table(summary.kernels(s, run, top), f"kernels of run {run}"))
