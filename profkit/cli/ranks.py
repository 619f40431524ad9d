"""profkit ranks: per rank and step, compute, communication, idle; stragglers."""

from __future__ import annotations

import json

import click

from profkit.cli.plumbing import PATH, db_option, handled, out, resolve_run, working
from profkit.outputs.tables import plain
from profkit.outputs.tables import table as _table
from profkit.store.store import Store


@click.command()
@db_option
@click.option("--run", default=None, help="Run (default: the newest).")
@click.option(
    "--steps",
    "step_pattern",
    default=None,
    metavar="REGEX",
    help="NVTX ranges that are steps, case-insensitive (default: '^(profiler)?step[ _#:-]*\\d+$': "
    "'step 3', torch.profiler's 'ProfilerStep#3').",
)
@click.option("--json", "as_json", is_flag=True, help="Print the whole analysis as JSON.")
@click.option(
    "--html",
    default=None,
    type=PATH,
    help="Also write per-rank stacked bars per step to this self-contained HTML file.",
)
@handled
def ranks(db, run, step_pattern, as_json, html):
    """Per rank and step: compute, NCCL communication, hidden communication, idle; stragglers.

    \b
    Example:
      profkit ranks --run ddp-2gpu-slow --html ranks.html"""
    from profkit.analyses import ranks as rk
    from profkit.outputs import ranks_plot
    from profkit.outputs.html import check_output

    if html:
        check_output(html)
    run = resolve_run(db, run)
    with Store(db, readonly=True) as s:
        with working(f"ranks {run}"):
            r = rk.analyse(s, run, step_pattern or rk.STEP_PATTERN)
    if html:
        ranks_plot.write_html(ranks_plot.figure(r), html)
    if as_json:
        click.echo(json.dumps(r.as_dict(), indent=2))
        return
    out.print(_table(rk.table_rows(r), f"run {r.run}: GPU time per step and rank (us)"))
    if len(r.ranks) > 1:
        out.print(
            _table(
                [
                    {
                        (k[:-3] + "_us" if k.endswith("_ns") else k): (
                            v / 1e3 if k.endswith("_ns") and v is not None else v
                        )
                        for k, v in p.items()
                    }
                    for p in r.per_step
                ],
                "stragglers per step (us)",
            )
        )
    for p in r.per_rank:
        hidden = "" if p["hidden_comm_pct"] is None else f", {p['hidden_comm_pct']:.0f} % of NCCL hidden under compute"
        who = "single process" if p["rank"] is None else f"rank {p['rank']}"
        out.print(
            f"{who}: compute {p['compute_ns'] / 1e6:.3f} ms, NCCL {p['comm_ns'] / 1e6:.3f} ms{hidden}, "
            f"idle {p['idle_ns'] / 1e6:.3f} ms, waited {p['wait_ns'] / 1e6:.3f} ms for other ranks "
            f"over {p['steps']} steps"
        )
    if r.slowest_rank is not None:
        n = next(p["slowest_in_steps"] for p in r.per_rank if p["rank"] == r.slowest_rank)
        out.print(f"slowest rank: {r.slowest_rank} (the others waited for it in {n} of {len(r.per_step)} steps)")
    for note in r.notes:
        out.print(f"note: {plain(note)}")
    if html:
        out.print(f"{plain(html)}: per-rank bars per step")
