"""profkit classify: a bottleneck label for each kernel launch, with its evidence."""
from __future__ import annotations

import json

import click

from profkit.cli.plumbing import db_option, handled, out, resolve_run
from profkit.outputs.tables import table as _table
from profkit.store.store import Store

NO_RANGE = "(outside any NVTX range)"


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
      profkit classify --run rmsnorm-llama8b-t32768
    """
    from profkit.analyses.classify import classify as do_classify

    run = resolve_run(db, run)
    with Store(db, create=False) as s:
        rows = do_classify(s, run)
        dur = {r["kernel_id"]: r["duration_ns"] or 0 for r in s.query(
            "SELECT kernel_id, duration_ns FROM kernels WHERE run = ?", (run,))}
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if per_launch:
        out.print(_table([{"kernel_id": r["kernel_id"], "nvtx_path": r["nvtx_path"] or NO_RANGE, "kernel": r["kernel_name"],
                           "label": r["label"], "reason": r["reason"]} for r in rows], f"classification of run {run}"))
        return
    summary: dict = {}
    ncu: dict = {}
    for r in rows:
        key = (r["nvtx_path"] or NO_RANGE, r["label"])
        e = summary.setdefault(key, [0, 0.0, r["reason"]])
        e[0] += 1
        e[1] += dur.get(r["kernel_id"], 0) / 1e3
        ev = json.loads(r["evidence"])
        if ev.get("ncu_rules"):  # ncu's own rule results beside the label (where the report has them)
            n = ncu.setdefault(key, {"agree": 0, "judged": 0, "says": set(), "top": None})
            if ev.get("ncu_agrees") is not None:
                n["judged"] += 1
                n["agree"] += ev["ncu_agrees"]
            n["says"].update(ev.get("ncu_says") or ())
            top = ev["ncu_rules"][0]
            if top.get("estimated_speedup_pct") is not None and n["top"] is None:
                n["top"] = f"{top['rule']} {top['estimated_speedup_pct']:.0f} %"
    table_rows = []
    for k, v in summary.items():
        row = {"nvtx_path": k[0], "label": k[1], "launches": v[0], "GPU us": v[1], "example reason": v[2]}
        if ncu:
            n = ncu.get(k)
            row["ncu's rules"] = "-" if n is None else (
                (f"agree {n['agree']}/{n['judged']}: {', '.join(sorted(n['says']))}" if n["judged"] else "no verdict")
                + (f"; top estimate {n['top']}" if n["top"] else ""))
        table_rows.append(row)
    out.print(_table(table_rows, f"classification of run {run} (--per-launch: every launch)"))
