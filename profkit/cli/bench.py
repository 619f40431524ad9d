"""profkit bench: an operator's variants across shapes, correctness first."""

from __future__ import annotations

from pathlib import Path

import click

from profkit.cli.capture import capture
from profkit.cli.plumbing import PATH, db_option, handled, out, progress_bar
from profkit.outputs.tables import plain
from profkit.store.store import Store


@click.command()
@click.argument("op", metavar="OP|MODULE:WORKLOAD")
@click.option("--variant", "variants", multiple=True, help="Variants to run (default: all but the CUDA C++ ones).")
@click.option("--shape", "shapes", multiple=True, help="Shape names (default: all; on the CPU the self-test shapes).")
@click.option("--dtype", default=None, help="Data type (default: the workload's).")
@click.option("--quick", is_flag=True, help="The workload's quick shapes.")
@click.option("--md", "md_file", default=None, type=PATH, help="Also write the markdown table here.")
@click.option(
    "--capture",
    "then_capture",
    is_flag=True,
    help="Then run the same variants and shapes under `profkit capture` (profiles and numbers from one command).",
)
@db_option
@click.pass_context
@handled
def bench(ctx, op, variants, shapes, dtype, quick, md_file, then_capture, db):
    """Benchmark an operator's variants across shapes, correctness first: GB/s and TFLOP/s from
    its model, % of the copy bandwidth measured in the same run, speed-up over each baseline
    (rows in the `bench` view and a markdown table).

    \b
    Example:
      profkit bench rmsnorm --shape llama8b-t4096 --variant eager --variant triton
    """
    from profkit.capture import bench as b

    with progress_bar() as bar:
        task = bar.add_task("bench", total=None)
        rows, copy = b.run(
            op,
            list(variants) or None,
            list(shapes) or None,
            dtype,
            quick,
            lambda what: bar.update(task, description=plain(f"bench {what}")),
        )
    with Store(db) as s:
        s.add_bench_rows(rows)
    table = b.markdown(rows, copy)
    if md_file:
        Path(md_file).write_text(table, encoding="utf-8")
    click.echo(table)
    bad = [r for r in rows if not r["ok"]]
    for r in bad:
        out.print(f"{plain(r['op'])}/{plain(r['variant'])}/{plain(r['shape'])}: {plain(r.get('note'))}")
    if then_capture:
        ctx.invoke(capture, target=(op,), variant=variants, shape=tuple(shapes), db=db)
