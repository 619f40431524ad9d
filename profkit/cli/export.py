"""profkit export: the views as Parquet."""

from __future__ import annotations

import click

from profkit.cli.plumbing import PATH, db_option, handled, out
from profkit.outputs.tables import plain


@click.command()
@db_option
@click.option(
    "--parquet", "directory", required=True, type=PATH, help="Folder to write VIEW/run=R/rank=N/part-0.parquet into."
)
@click.option("--run", default=None, help="Only this run (default: every run).")
@handled
def export(db, directory, run):
    """Write the views runs, kernels, counters, classifications, rules (by run and rank) and advice (by run) as Parquet.

    \b
    Example:
      profkit export --parquet parquet/ --run e2e-decode"""
    from profkit.outputs.parquet import export_parquet

    for view, n in export_parquet(db, directory, run).items():
        out.print(f"{plain(directory / view)}: {n} rows")
