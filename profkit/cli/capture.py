"""profkit capture: profile a lab workload or a command and load its reports."""

from __future__ import annotations

import click

from profkit.cli.plumbing import PATH, db_option, fail, handled, out, store_phases
from profkit.core.errors import ProfkitError
from profkit.outputs.tables import plain
from profkit.store.store import Store


@click.command(context_settings={"ignore_unknown_options": True})
@click.argument("target", nargs=-1, required=True)
@db_option
@click.option("--run", default=None, help="Run name (default: the workload, script or program name).")
@click.option(
    "--out", "out_dir", default="profiles", show_default=True, type=PATH, help="Raw reports go to OUT/<run>/."
)
@click.option("--nsys/--no-nsys", "use_nsys", default=True, help="Record a timeline.")
@click.option("--ncu/--no-ncu", "use_ncu", default=True, help="Collect counters.")
@click.option("--metrics", type=click.Choice(["lean", "roofline", "full"]), default="lean", show_default=True)
@click.option(
    "--source",
    is_flag=True,
    help="ncu also records Source Counters and embeds the source files (for `profkit hotspots`; "
    "CUDA C++ needs -lineinfo).",
)
@click.option(
    "--samples",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Commands: launches profiled per distinct kernel and launch configuration.",
)
@click.option(
    "--warmup",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Commands: launches of each kernel and configuration skipped before sampling "
    "(kernels launched no more often get no counters of their own).",
)
@click.option(
    "--max-kernels",
    type=click.IntRange(min=1),
    default=500,
    show_default=True,
    help="Commands: at most this many launches profiled (kernels with least GPU time left out first).",
)
@click.option("--all-launches", is_flag=True, help="Commands: profile every launch (no sampling; slow).")
@click.option(
    "--kernel-name-base",
    "name_base",
    type=click.Choice(["function", "demangled", "mangled"]),
    default="mangled",
    show_default=True,
    help="Commands: the kernel name ncu tells configurations apart by (function: template instances of "
    "one function share one sample).",
)
@click.option(
    "--range",
    "range_name",
    default=None,
    metavar="NAME",
    help="Commands: profile only launches inside the NVTX range NAME (e.g. one training step).",
)
@click.option(
    "--step",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="Commands: profile only step N of a program that marks steps (NVTX ranges 'step N').",
)
@click.option(
    "--profiler-api/--no-profiler-api",
    "profiler_api",
    default=None,
    help="Profile only between cudaProfilerStart and Stop (default: when the program calls them).",
)
@click.option(
    "--torch-ranges",
    is_flag=True,
    help="Python commands: PyTorch emits an NVTX range per operator (emit_nvtx), so kernels land "
    "under operator names (costs CPU time per operator call).",
)
@click.option("--nvtx-include", multiple=True, help="ncu NVTX filter (repeatable); default: the workload's ranges.")
@click.option("--variant", multiple=True, help="Workload variant (repeatable).")
@click.option("--shape", multiple=True, help="Workload shape (repeatable).")
@click.option(
    "--calls",
    type=click.IntRange(1, 1000),
    default=None,
    help="Lab workloads: calls of each variant inside its range (default 3); from 10 a side, profkit "
    "compare's noise band is a bootstrap interval.",
)
@click.option(
    "--rotate",
    type=click.IntRange(1, 64),
    default=None,
    help="Lab workloads: the calls cycle over this many copies of the inputs (as benchmarks time them).",
)
@click.option(
    "--l2-fill",
    "l2_fill",
    is_flag=True,
    help="Lab workloads: fill the L2 with other data before each range (as an earlier op leaves it).",
)
@click.option("--tracer", type=click.Choice(["auto", "nsys", "cupti"]), default="auto", show_default=True)
@click.option("--clock-control", default="none", show_default=True, help="ncu --clock-control.")
@click.option("--nsys-path", "nsys_path", default=None, help="Path to nsys (else $NSYS, else PATH).")
@click.option("--ncu-path", "ncu_path", default=None, help="Path to ncu (else $NCU, else PATH).")
@click.option(
    "--ranks",
    "ranks",
    is_flag=True,
    help="COMMAND is a torchrun job: one nsys report per rank, loaded with its rank; ncu only on --ncu-ranks.",
)
@click.option(
    "--ncu-ranks", default="", metavar="0,1", help="With --ranks: ranks to run ncu on (NCCL kernels skipped)."
)
@handled
def capture(
    target,
    db,
    run,
    out_dir,
    use_nsys,
    use_ncu,
    metrics,
    source,
    samples,
    warmup,
    max_kernels,
    all_launches,
    name_base,
    range_name,
    step,
    profiler_api,
    torch_ranges,
    nvtx_include,
    variant,
    shape,
    calls,
    rotate,
    l2_fill,
    tracer,
    clock_control,
    nsys_path,
    ncu_path,
    ranks,
    ncu_ranks,
):
    """Profile WORKLOAD (a profkit.kernels entry) or `-- COMMAND ARGS...` and load the reports.

    A command gets a timeline of every launch, then ncu on a sample: each distinct kernel and
    launch configuration --samples times (docs/capture.md).

    \b
    Examples:
      profkit capture rmsnorm --shape qwen7b-t4096
      profkit capture --run train -- python3 train.py --epochs 1
      profkit capture --range step --step 10 -- python3 train.py"""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from profkit.analyses import summary
    from profkit.capture import session as cap
    from profkit.capture.load import load_capture, refuse_a_second_capture
    from profkit.capture.options import CaptureOptions, Hooks, Sampling
    from profkit.core.errors import BadArgument

    if not use_nsys and not use_ncu:
        raise BadArgument("--no-nsys with --no-ncu records nothing: keep one of them")
    if run is not None:
        cap.check_run_name(run)
    workload, command = cap.resolve_target(list(target), ranks)
    lab_only = [
        o for o, v in (("--calls", calls is not None), ("--rotate", rotate is not None), ("--l2-fill", l2_fill)) if v
    ]
    if ranks and lab_only:
        raise BadArgument(
            f"{' and '.join(lab_only)} {'is' if len(lab_only) == 1 else 'are'} for lab workloads; "
            "--ranks captures a command"
        )
    on_ranks: list[int] = []
    if ranks:
        from profkit.capture.ranks import capture_ranks, parse_ranks, split_launcher, worker_name

        run = run or worker_name(split_launcher(command)[1])
        on_ranks = parse_ranks(ncu_ranks)
    elif ncu_ranks:
        raise ProfkitError("--ncu-ranks needs --ranks")
    run = cap.check_run_name(run or workload or cap.default_run_name(command))
    opts = CaptureOptions(
        run=run,
        out=out_dir,
        workload=workload,
        command=command,
        variants=variant,
        shapes=shape,
        use_nsys=use_nsys,
        use_ncu=use_ncu,
        metrics=metrics,
        source=source,
        include=nvtx_include,
        tracer=tracer,
        clock_control=clock_control,
        nsys=nsys_path,
        ncu=ncu_path,
        sample=Sampling(
            samples=samples, warmup=warmup, max_kernels=max_kernels, all_launches=all_launches, key=name_base
        ),
        range_name=range_name,
        step=step,
        profiler_api=profiler_api,
        torch_ranges=torch_ranges,
        calls=calls,
        rotate=rotate,
        l2_fill=l2_fill,
        ncu_ranks=on_ranks,
    )
    refuse_a_second_capture(db, opts)
    # (a kernel name in the description is data: no markup, control characters escaped)
    columns = (
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("kernels"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, transient=True, console=out) as bar:
        task = bar.add_task("ncu replay", total=None, visible=False)

        def expect(n):
            bar.update(task, total=n, visible=True)

        def progress(line):
            if line.startswith("==PROF== Profiling"):
                bar.update(task, visible=True)
                bar.advance(task)
                parts = line.split('"')
                bar.update(task, description="ncu: " + plain(parts[1] if len(parts) > 2 else "kernel"))

        def on_plan(plan):
            out.print(plain(plan.describe(metrics)))

        def note(text):
            out.print(plain(text))

        if ranks:
            got = capture_ranks(opts, progress=progress)
        else:
            got = cap.capture(opts, Hooks(progress=progress, expect=expect, on_plan=on_plan, note=note))

    def landed(r):
        state = "already loaded" if r.skipped else f"{r.kernels} kernels, {r.ranges} ranges, {r.counters} counters"
        out.print(f"{plain(r.path)} -> run {plain(r.run)}{'' if r.rank is None else ' rank ' + str(r.rank)}: {state}")

    failures = list(getattr(got, "failures", []))
    loaded = load_capture(db, got, failures, on_file=landed)
    if loaded:
        with Store(db) as s:
            s.set_run_meta(run, got.meta)
        store_phases(db, [run])
        with Store(db) as s:
            if getattr(got, "plan", None) is not None:
                out.print(plain(summary.sampling(s, run)))
    if failures:
        for f in failures[:-1]:
            click.echo(f"profkit: {plain(f)}", err=True)
        where = (f"; loaded as run {run}" if loaded else "; nothing loaded") + f"; reports in {got.folder}"
        fail(failures[-1] + where, 4)
