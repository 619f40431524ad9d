"""profkit runs: the runs in the database."""

from __future__ import annotations

import click

from profkit.cli.plumbing import db_option, handled, out
from profkit.outputs.tables import table as _table
from profkit.store.store import Store


@click.command()
@db_option
@handled
def runs(db):
    """Summary of the runs in the database: GPU, sources, kernels, counters.

    \b
    Example:
      profkit runs --db profkit.db"""
    from profkit.analyses import phases, summary

    with Store(db, readonly=True) as s:
        rows = summary.runs(s)
        for r in rows:  # the steady state each analysis defaults to
            p = phases.of_run(s, r["run"]).steady if r["kernels"] else None
            r["steady state"] = (
                f"{p.name}: {p.steps} x {p.step_ns / 1e6:.2f} ms" if p and p.step_ns else p.name if p else "none found"
            )
        out.print(_table(rows, "runs"))
