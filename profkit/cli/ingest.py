"""profkit ingest: load report files and capture folders into the database."""

from __future__ import annotations

import click

from profkit.cli.plumbing import PATH, db_option, file_progress, handled, out, store_phases
from profkit.outputs.tables import plain
from profkit.store.store import Store


@click.command()
@click.argument("paths", nargs=-1, required=True, type=PATH)
@db_option
@click.option("--run", default=None, help="Run to load into (default: the first file's name; a folder's own name).")
@click.option(
    "--rank",
    type=click.IntRange(0, 2**31 - 1),
    default=None,
    help="Process rank of these files (default: RANK recorded by nsys, else 'rankN' in the file name).",
)
@click.option(
    "--gpu",
    default=None,
    metavar="NAME",
    help="The GPU the reports ran on, where they do not name it (an ncu details CSV names only the compute "
    "capability): its datasheet peaks label the kernels (profkit/model/gpus.py lists the GPUs known).",
)
@handled
def ingest(paths, db, run, rank, gpu):
    """Load report files (nsys SQLite/.nsys-rep/.qdrep, .ncu-rep[.xz], ncu CSV pages, CUPTI trace, torch.profiler trace
    .json[.gz]) or capture folders (one run each: its reports, one per role and rank, and capture.json as run metadata).

    Each file loads whole or not at all; files named together join one run (the ncu launches
    attach to the timeline's). A run takes one timeline and one counter report per rank: a
    second from another file (two exports both named report2.sqlite) is refused, nothing
    loaded; give each its own --run NAME (or --rank N).

    \b
    Examples:
      profkit ingest report.nsys-rep report.ncu-rep --run step10
      profkit ingest profiles/rmsnorm-eager-vs-triton-h200
      profkit ingest trace.json.gz
      profkit ingest details.csv --gpu "RTX 4090"   # a details page names no GPU"""
    from profkit.store.ingest import ingest as do_ingest
    from profkit.store.ingest import plan

    def line(r):
        if r.skipped:
            out.print(
                f"{plain(r.path)}: already loaded{' as ' + plain(r.loaded_as) if r.loaded_as else ''} (run {plain(r.run)}), nothing added"
            )
        else:
            where = f"run {plain(r.run)}" + ("" if r.rank is None else f" rank {r.rank}")
            rules = f", {r.rules} ncu rule results" if getattr(r, "rules", 0) else ""
            out.print(
                f"{plain(r.path)}: {r.format} -> {where}: {r.kernels} kernels, {r.ranges} NVTX ranges, "
                f"{r.counters} counters{rules}"
            )
            if r.caveat:
                out.print(f"  note: {plain(r.caveat)}")
            if getattr(r, "gpu_note", None):
                out.print(f"  note: {plain(r.gpu_note)}")

    from profkit.core.errors import ProfkitError
    from profkit.core.signals import stopped

    groups = plan(list(paths), run)
    refused: list[str] = []
    with file_progress() as on_progress:  # each file's line as it lands, a bar meanwhile
        if len(groups) > 1 and all(g.folder is not None for g in groups):
            # a folder of run folders: each run loads whole or is refused on its own line, and
            # one bad run does not keep the others out
            loaded = []
            for g in groups:
                try:
                    loaded += do_ingest(db, [], rank=rank, on_file=line, on_progress=on_progress, groups=[g])
                except ProfkitError as e:
                    if stopped() is not None:  # a signal ended it: the command stops here
                        raise
                    refused.append(str(e))
                    click.echo(f"profkit: {plain(str(e))}", err=True)
        else:
            loaded = do_ingest(db, [], rank=rank, on_file=line, on_progress=on_progress, groups=groups)
    if loaded:
        store_phases(db, [r.run for r in loaded if not r.skipped])
    for g in groups:
        if g.meta is not None:
            out.print(f"{plain(g.meta_file or g.folder / 'capture.json')}: run metadata of run {plain(g.run)}")
        if g.skipped:
            out.print(
                f"{plain(g.folder)}: skipped " + "; ".join(f"{plain(p.name)} ({plain(why)})" for p, why in g.skipped)
            )
    if gpu:
        from profkit.model import gpus

        with Store(db) as s:
            for name in dict.fromkeys(r.run for r in loaded):
                if s.set_gpu(name, gpu):  # (also on a run loaded before: --gpu corrects it)
                    out.print(f"run {plain(name)}: GPU {plain(gpu)}")
                else:
                    have = s.query("SELECT gpu_name FROM run WHERE run = ?", (name,))[0]["gpu_name"]
                    out.print(f"run {plain(name)}: its reports name the GPU {plain(have)}; --gpu {plain(gpu)} not used")
        if gpus.by_name(gpu) is None:
            out.print(
                f"--gpu {plain(gpu)}: not in profkit's known-GPU table (profkit/model/gpus.py): no datasheet peaks from it"
            )
    if refused:
        raise SystemExit(2)  # (each refusal said on its own line above)
