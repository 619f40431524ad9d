"""profkit roofline: a run's hierarchical roofline as one HTML file."""

from __future__ import annotations

import click

from profkit.cli.plumbing import PATH, db_option, handled, out
from profkit.outputs.tables import plain
from profkit.store.store import Store


@click.command()
@db_option
@click.option(
    "--run", default=None, metavar="A", help="Run, or RUN:VARIANT (e.g. myrun:eager); default: the newest run."
)
@click.option(
    "--compare", default=None, metavar="B", help="Draw an arrow from each NVTX range of A to the same range of B."
)
@click.option(
    "--by",
    type=click.Choice(["kernel", "range"]),
    default="kernel",
    show_default=True,
    help="One point per kernel, or per NVTX range (its kernels' time-weighted aggregate).",
)
@click.option(
    "--chain",
    default=None,
    metavar="auto|P1,P2,...",
    help="Join ranges in order with arrows: 'auto' (capture order) or NVTX paths / variant names.",
)
@click.option(
    "--peaks",
    "peaks_file",
    default=None,
    type=PATH,
    help="Measured peaks to draw dashed beside the report's own (a peaks.json, e.g. profiles/peaks.json).",
)
@click.option("-o", "--output", required=True, type=PATH, help="HTML file to write.")
@handled
def roofline(db, run, compare, by, chain, peaks_file, output):
    """Hierarchical roofline (DRAM, L2, L1) of a run as one self-contained HTML file.

    \b
    Example:
      profkit roofline --run rmsnorm-eager-vs-triton-h200:eager --compare rmsnorm-eager-vs-triton-h200:triton -o rmsnorm.html"""
    from profkit.analyses import roofline as rl
    from profkit.core.errors import BadArgument
    from profkit.model import peaks
    from profkit.outputs import roofline_plot
    from profkit.outputs.html import check_output

    check_output(output)
    if compare and chain:
        raise BadArgument("--compare and --chain draw different arrows: choose one")
    steps = None if chain is None else ("auto" if chain == "auto" else [c for c in chain.split(",") if c])
    measured = peaks.read(peaks_file) if peaks_file else None
    with Store(db, readonly=True) as s:
        r = rl.collect(s, run, compare, by, steps, measured)
    points = sum(1 for _ in roofline_plot.drawn(r))
    if not points:  # an empty page is no roofline: say why instead, and write nothing
        why = "; ".join(r.notes) or "no launch has both FLOPs and bytes counted"
        raise BadArgument(f"{run or 'the newest run'}: no point to draw, nothing written ({why})")
    path = roofline_plot.write_html(roofline_plot.figure(r), output)
    out.print(f"{plain(path)}: {points} points, {len(r.arrows)} arrows")
    for note in r.notes:
        out.print(f"  {plain(note)}")
