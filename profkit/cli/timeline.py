"""profkit timeline: per NVTX range, GPU window, busy and idle; operator shares."""

from __future__ import annotations

import json

import click

from profkit.cli.plumbing import db_option, handled, out, phase_option, resolve_run, working
from profkit.outputs.tables import table as _table
from profkit.store.store import Store, lab_op


@click.command()
@db_option
@click.option("--run", default=None, help="Run (default: the newest).")
@click.option("--range", "prefix", default=None, metavar="PATH", help="Only NVTX paths equal to or under PATH.")
@click.option(
    "--ops",
    "scopes",
    multiple=True,
    metavar="PATH",
    help="Operator shares of the kernel time under PATH, by innermost range (repeatable).",
)
@phase_option
@click.option(
    "--json", "as_json", is_flag=True, help="Print {ranges: [...], operators: {PATH: [...]}, idle: {...}} as JSON."
)
@handled
def timeline(db, run, prefix, scopes, phase, as_json):
    """Per NVTX range: GPU window, busy, idle (launch overhead) per instance; operator shares.

    \b
    Example:
      profkit timeline --run e2e-decode --range e2e/decode --ops e2e/decode/eager"""
    from profkit.analyses import idle, phases
    from profkit.analyses import timeline as tl

    run = resolve_run(db, run)
    with Store(db, readonly=True) as s:
        win, line = phases.selected(s, run, phase)
        with working(f"timeline {run}"):
            rows = tl.ranges(s, run, prefix, window=win)
            ops = {scope: tl.operators(s, run, scope) for scope in scopes}
            op = lab_op(s.run_meta(run))
            gaps = idle.analyse(s, run, win)
    if as_json:
        click.echo(json.dumps({"run": run, "ranges": rows, "operators": ops, "idle": gaps.as_dict()}, indent=2))
        return
    if line:
        out.print(line)

    def table(rs, title):
        out.print(
            _table(
                [
                    {
                        "range": r["path"],
                        "instances": r["instances"],
                        "kernels/inst": r["kernels_per_instance"],
                        "launch calls/inst": r["launch_calls_per_instance"],
                        "window us/inst": r["window_us_per_instance"],
                        "busy us/inst": r["busy_us_per_instance"],
                        "idle us/inst": r["idle_us_per_instance"],
                        "idle %": r["idle_pct"],
                    }
                    for r in rs
                ],
                title,
            )
        )

    inside, outside = tl.workload_split(rows, op)
    table(inside, f"GPU time per NVTX range, run {run}")
    if outside:
        table(
            outside,
            f"ranges outside the workload's {op}/VARIANT/SHAPE ranges: warm-up, compilation and "
            f"set-up before each timed range opened (their idle time is host work, not launch overhead)",
        )
    out.print(f"idle by cause: {idle.describe(gaps)}")
    for cause, calls in gaps.top_calls.items():
        if gaps.by_cause.get(cause):
            out.print(
                f"  {cause}: "
                + ", ".join(f"{c['name']} ({c['gaps']} gaps)" for c in calls[:3])
                + (f"; fix: {idle.FIX[cause]}" if idle.FIX.get(cause) else "")
            )
    if gaps.note:
        out.print(f"  note: {gaps.note}")
    for scope, got in ops.items():
        out.print(
            _table(
                [
                    {
                        "operator": o["operator"],
                        "kernels": o["kernels"],
                        "kernel us": o["kernel_ns"] / 1e3,
                        "share %": o["share_pct"],
                        "top kernel": o["top_kernel"],
                    }
                    for o in got
                ],
                f"operator shares under {scope}",
            )
        )
