"""profkit compare: BEFORE vs AFTER per NVTX range, with a noise band and a verdict."""

from __future__ import annotations

import click
from rich.table import Table
from rich.text import Text

from profkit.cli.plumbing import db_option, handled, out, working
from profkit.outputs.jsonstream import pieces
from profkit.outputs.tables import plain
from profkit.store.store import Store


@click.command()
@click.argument("before")
@click.argument("after")
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array of objects.")
@click.option(
    "--by",
    type=click.Choice(["gpu", "host"]),
    default="gpu",
    show_default=True,
    help="Time per call: the GPU's (its kernels' busy time), or the host's (from one call's "
    "first launch to the next; timeline runs) for a change to the launcher of a "
    "host-bound call.",
)
@handled
def compare(before, after, db, as_json, by):
    """Per NVTX range, BEFORE vs AFTER (each RUN or RUN:VARIANT, a variant being one part of the
    NVTX path such as eager or triton): time per call, speed-up with its noise band, labels, % of
    roofline, and a verdict (supported, caveated with what is missing, rejected).

    \b
    Example:
      profkit compare rmsnorm-eager-vs-triton-h200:eager rmsnorm-eager-vs-triton-h200:triton
      profkit compare slow-launch:triton_direct fast-launch:triton_direct --by host
    """
    from profkit.analyses.compare import rows as compare_rows

    with Store(db, readonly=True) as s:
        with working(f"compare {before} -> {after}"):
            got = compare_rows(s, before, after, by)
    if as_json:
        # json.dumps(got, indent=2)'s text, a piece at a time: each call's times, millions of
        # numbers at 16 M ranges, never all as text at once
        for piece in pieces(got):
            click.echo(piece, nl=False)
        click.echo()
        return

    def pct(x):
        return "-" if x is None else f"{x:.0f} %"

    t = Table(title=Text(plain(f"compare {before} -> {after}")), header_style="bold")
    unit = "us/call" if by == "gpu" else "host us/call"
    for c, j in (
        ("range", "left"),
        (f"before {unit}", "right"),
        (f"after {unit}", "right"),
        ("speed-up [band]", "right"),
        ("label", "left"),
        ("% of roofline", "right"),
        ("verdict", "left"),
        ("why", "left"),
    ):
        t.add_column(c, justify=j, overflow="fold")
    for r in got:
        t.add_row(
            *(
                Text(plain(v))
                for v in (
                    r["range"],
                    f"{r['before_us']:,.1f}",
                    f"{r['after_us']:,.1f}",
                    f"{r['speedup']:.2f}x [{r['speedup_low']:.2f}-{r['speedup_high']:.2f}]",
                    f"{r['label_before']} -> {r['label_after']}",
                    f"{pct(r['roofline_pct_before'])} -> {pct(r['roofline_pct_after'])}",
                    r["verdict"],
                    r["why"],
                )
            )
        )
    out.print(t)
    for r in got:
        for n in r["notes"]:
            out.print(plain(f"{r['range']}: {n}"))
    methods = dict.fromkeys(r["band_method"] for r in got)
    out.print(plain("band: " + "; ".join(methods) + ". Method: docs/compare.md"))
