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
    from profkit.analyses import summary

    with Store(db, readonly=True) as s:
        out.print(_table(summary.runs(s), "runs"))
