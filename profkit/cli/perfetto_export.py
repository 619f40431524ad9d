"""profkit export-perfetto: a run's timeline as a Perfetto / Chrome trace JSON file."""

from __future__ import annotations

import click

from profkit.cli.plumbing import PATH, db_option, handled, out, resolve_run
from profkit.outputs.tables import plain
from profkit.store.store import Store


@click.command("export-perfetto")
@click.argument("file", type=PATH)
@db_option
@click.option("--run", default=None, help="Run (default: the newest).")
@handled
def export_perfetto(file, db, run):
    """Write a run as a trace JSON for ui.perfetto.dev: one slice per kernel launch on its stream
    (label, roofline %, advice rank in its args), NVTX ranges on their threads, phases and GPU
    idle gaps as tracks of their own.

    \b
    Example:
      profkit export-perfetto trace.json --run hf-llama-decode   # then open it in ui.perfetto.dev"""
    from profkit.outputs import perfetto

    run = resolve_run(db, run)
    with Store(db, readonly=True) as s:
        path, trace = perfetto.export(s, run, file)
    out.print(
        f"{plain(path)}: run {plain(run)}, {trace.launches():,} launches on "
        f"{sum(1 for t in trace.tracks if t.process.startswith('GPU'))} stream tracks"
    )
    for n in trace.notes:
        out.print(f"  {plain(n)}")
