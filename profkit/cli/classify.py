"""profkit classify: a bottleneck label for each kernel launch, with its evidence."""
from __future__ import annotations

import json

import click

from profkit.cli.plumbing import db_option, handled, out, progress_bar, resolve_run
from profkit.outputs.tables import table as _table
from profkit.store.store import Store


@click.command()
@db_option
@click.option("--run", default=None, help="Run (default: the newest).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array of objects.")
@click.option("--per-launch", "per_launch", is_flag=True, help="One row per launch instead of per NVTX path and label.")
@click.option("--table", "as_table", is_flag=True, hidden=True)  # the default; kept so old scripts still run
@handled
def classify(db, run, as_json, per_launch, as_table):
    """Label each kernel launch: dram, launch_overhead, occupancy, tensor_core (communication,
    compute, latency, unknown), with its evidence, and store the labels (the `classifications` view).
    The table: one row per NVTX path and label (launches, GPU time, an example reason).

    \b
    Example:
      profkit classify --run rmsnorm-eager-vs-triton-h200
    """
    from profkit.analyses import classify as cl

    run = resolve_run(db, run)
    with Store(db, create=False) as s:
        if as_json or per_launch:
            rows = cl.classify(s, run)
        else:  # the table alone: labels written and summed as they come, no list of every launch
            n = s.conn.execute("SELECT count(*) FROM launch_row WHERE run = ? AND timeline_id IS NULL",
                               (run,)).fetchone()[0]
            with progress_bar() as bar:
                task = bar.add_task(f"classify {run}", total=n)
                table_rows = cl.classify_by_range(s, run, lambda k: bar.advance(task, k))
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if per_launch:
        out.print(_table(cl.per_launch(rows), f"classification of run {run}"))
        return
    out.print(_table(table_rows, f"classification of run {run} (--per-launch: every launch)"))
