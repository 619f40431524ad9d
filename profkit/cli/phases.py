"""profkit phases: a run's phases (start-up, compile/autotune, warm-up, steps, later phases)."""

from __future__ import annotations

import json

import click

from profkit.cli.plumbing import db_option, handled, out, resolve_run
from profkit.outputs.tables import plain
from profkit.outputs.tables import table as _table
from profkit.store.store import Store


@click.command()
@db_option
@click.option("--run", default=None, help="Run (default: the newest).")
@click.option("--json", "as_json", is_flag=True, help="Print the phases as JSON.")
@handled
def phases(db, run, as_json):
    """A run's phases, as stored at load (found now for a database from before phases): what
    `--phase NAME` takes on kernels, timeline, classify and advise; the steady state is the default.

    \b
    Example:
      profkit phases --run gpt2-train-compile"""
    from profkit.analyses import phases as ph

    run = resolve_run(db, run)
    with Store(db, readonly=True) as s:
        got = ph.of_run(s, run)
    rows = ph.rows(got)
    if as_json:
        click.echo(json.dumps({"run": run, "note": got.note, "phases": rows}, indent=2))
        return
    out.print(
        _table(
            [
                {
                    "phase": r["name"],
                    "kind": r["kind"],
                    "steady": "yes" if r["steady"] else "",
                    "launches": r["launches"],
                    "window ms": (r["end_ns"] - r["start_ns"]) / 1e6,
                    "GPU ms": r["gpu_ns"] / 1e6,
                    "steps": r["steps"] or "",
                    "ms/step": "" if not r["step_ns"] else f"{r['step_ns'] / 1e6:.2f}",
                    "how": r["how"],
                }
                for r in rows
            ],
            f"phases of run {run}",
        )
    )
    out.print(f"  {plain(got.note)}")
