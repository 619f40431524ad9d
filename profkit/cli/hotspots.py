"""profkit hotspots: a kernel's source lines ranked by sampled warp stalls."""

from __future__ import annotations

import json

import click

from profkit.cli.plumbing import PATH, db_option, handled, out, resolve_run
from profkit.outputs.tables import plain
from profkit.outputs.tables import table as _table
from profkit.store.store import Store


@click.command("hotspots")
@db_option
@click.option("--run", default=None, help="Run (default: the newest).")
@click.option(
    "--kernel",
    default=None,
    metavar="K",
    help="A substring of the kernel's name, or a launch's kernel_id (default: the kernel with most samples).",
)
@click.option("--top", default=10, show_default=True, type=click.IntRange(min=1), help="How many lines.")
@click.option("--json", "as_json", is_flag=True, help="Print the hotspots as JSON.")
@click.option("--html", default=None, type=PATH, help="Also write the source with a bar per line to this HTML file.")
@handled
def hotspots(db, run, kernel, top, as_json, html):
    """A kernel's source lines ranked by sampled warp stalls (Nsight Compute's Source Counters:
    capture with ncu --section SourceCounters --import-source yes), each with its stall reasons,
    executed instructions and a one-line reading.

    \b
    Examples:
      profkit hotspots --run softmax --kernel _softmax --top 5
      profkit hotspots --run softmax --html softmax-lines.html"""
    from profkit.analyses import hotspots as hs
    from profkit.outputs import hotspots_page

    run = resolve_run(db, run)
    with Store(db, readonly=True) as s:
        h = hs.report(s, run, kernel, top)
    if html:
        hotspots_page.write(h, html)
    if as_json:
        click.echo(json.dumps(h.as_dict(), indent=2))
        return
    out.print(
        plain(
            f"{h.kernel}: run {h.run}, {len(h.launches)} launch(es), {h.samples:,} warp-state samples"
            + (f", {h.inst_executed:,} warp instructions executed" if h.inst_executed is not None else "")
        )
    )
    if h.top is not None:
        out.print(plain(h.top.reading))
    rows = []
    for ln in h.lines:
        stalls = ", ".join(f"{k} {v:,}" for k, v in list(ln.stalls.items())[:3])
        row = {
            "where": ln.where,
            "samples": ln.samples,
            "%": round(100 * ln.share, 1),
            "top stalls": stalls,
            "inst executed": ln.inst_executed,
        }
        if h.by == "line":
            row["source"] = (ln.text or "").strip()[:70]
        else:
            row["instruction"] = " / ".join(i["instruction"] or "?" for i in ln.instructions)[:70]
        rows.append(row)
    out.print(_table(rows, f"top {len(rows)} {'lines' if h.by == 'line' else 'instructions'} by stall samples"))
    for ln in h.lines[1:3]:
        out.print(plain(f"  {ln.reading}"))
    for n in h.notes:
        out.print(plain(f"note: {n}"))
    if h.others:
        out.print(
            plain(
                "other kernels with Source Counters: "
                + ", ".join(f"{k['kernel_name'][:50]} ({k['samples'] or 0:,} samples)" for k in h.others[:5])
            )
        )
    if html:
        out.print(f"{plain(html)}: the source with a bar per line")
