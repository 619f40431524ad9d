"""profkit classify: a bottleneck label for each kernel launch, with its evidence."""

from __future__ import annotations

import json

import click

from profkit.cli.plumbing import db_option, handled, out, phase_option, progress_bar, resolve_run
from profkit.outputs.tables import table as _table
from profkit.store.store import Store


@click.command()
@db_option
@click.option("--run", default=None, help="Run (default: the newest).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array of objects.")
@click.option("--per-launch", "per_launch", is_flag=True, help="One row per launch instead of per NVTX path and label.")
@click.option("--table", "as_table", is_flag=True, hidden=True)  # the default; kept so old scripts still run
@phase_option
@handled
def classify(db, run, as_json, per_launch, as_table, phase):
    """Label each kernel launch: dram, launch_overhead, occupancy, tensor_core (communication,
    compute, latency, unknown), with its evidence, and store the labels (the `classifications` view).
    The table: one row per NVTX path and label (launches, GPU time, an example reason).

    \b
    Example:
      profkit classify --run rmsnorm-eager-vs-triton-h200
    """
    from profkit.analyses import classify as cl
    from profkit.analyses import phases

    run = resolve_run(db, run)
    with Store(db, create=False) as s:
        win, line = phases.selected(s, run, phase)
        if as_json or per_launch or win is not None:
            rows = cl.classify(s, run)  # every launch labelled and stored; the summary is the phase's
            if win is not None:
                start = {
                    r["kernel_id"]: r["start_ns"]
                    for r in s.query("SELECT kernel_id, start_ns FROM kernels WHERE run = ?", (run,))
                }
                shown = [
                    r
                    for r in rows
                    if start.get(r["kernel_id"]) is not None and win[0] <= start[r["kernel_id"]] < win[1]
                ]
            else:
                shown = rows
            table_rows = None if as_json or per_launch else cl.by_range(s, run, shown)
        else:  # the whole run's table alone: labels written and summed as they come, no list of every launch
            n = s.conn.execute(
                "SELECT count(*) FROM launch_row WHERE run = ? AND timeline_id IS NULL", (run,)
            ).fetchone()[0]
            with progress_bar() as bar:
                task = bar.add_task(f"classify {run}", total=n)
                table_rows = cl.classify_by_range(s, run, lambda k: bar.advance(task, k))
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if line:
        out.print(line)
    if per_launch:
        out.print(_table(cl.per_launch(shown), f"classification of run {run}"))
        return
    out.print(_table(table_rows, f"classification of run {run} (--per-launch: every launch)"))
