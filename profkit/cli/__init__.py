"""The profkit command line: each command parses its arguments, calls the library, and
prints through profkit.outputs. Errors become one line on stderr and a non-zero exit code."""
from __future__ import annotations

import json
import sqlite3
import sys
from contextlib import contextmanager
from functools import wraps
from pathlib import Path

import click
from rich.table import Table
from rich.text import Text

from profkit import __version__
from profkit.core.errors import ProfkitError
from profkit.core.names import as_text
from profkit.outputs.tables import console, plain
from profkit.outputs.tables import table as _table
from profkit.store.store import Store, default_db, lab_op

out = console()
NO_RANGE = "(outside any NVTX range)"
# paths are checked by the library (one line of error); click's own check of an unreadable path
# would print a three-line usage message
PATH = click.Path(path_type=Path, readable=False)


def _fail(message: str, code: int = 1):
    click.echo(f"profkit: {plain(message)}", err=True)
    sys.exit(code)


def _text_arg(v):
    """Command-line text as text SQLite can hold (bytes that are not UTF-8 become \\xNN)."""
    if isinstance(v, str):
        return as_text(v)
    if isinstance(v, tuple):
        return tuple(_text_arg(x) for x in v)
    return v


def handled(fn):
    """Map profkit's typed errors (and a few OS/SQLite ones) to one line and an exit code."""

    @wraps(fn)
    def wrapper(*args, **kwargs):
        kwargs = {k: _text_arg(v) for k, v in kwargs.items()}
        try:
            return fn(*args, **kwargs)
        except ProfkitError as e:
            _fail(str(e), e.exit_code)
        except BrokenPipeError:  # `profkit sql ... | head`: the reader has what it wanted
            import os

            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # (so the exit's flush does not fail again)
            sys.exit(141)
        except sqlite3.Error as e:
            _fail(f"SQLite: {e}", 6)
        except (OSError, MemoryError) as e:
            _fail(f"{type(e).__name__}: {e}", 7)
        except KeyboardInterrupt:
            _fail("interrupted", 130)

    return wrapper


def _resolve_run(db: str, run: str | None) -> str:
    """The run a command works on: --run, else the newest one, said on stderr when there are
    several (a silent pick reads as 'the' run)."""
    if run is not None:
        return run
    with Store(db, readonly=True) as s:
        newest = s.require_run(None)
        n = len(s.runs())
    if n > 1:
        click.echo(f"profkit: no --run given: using the newest run, {plain(newest)} (one of {n}; `profkit runs` "
                   f"lists them)", err=True)
    return newest


def db_option(fn):
    """--db, resolved here and only here: the library always takes a path."""
    return click.option("--db", default=None, metavar="DB", callback=lambda ctx, param, v: v or default_db(),
                        help="Database file (default: $PROFKIT_DB, else profkit.db).")(fn)


def _exit_on_signal(signum, frame):
    # SIGTERM/SIGHUP unwind like Ctrl-C: open transactions roll back, scratch folders go
    raise SystemExit(128 + signum)


def _setup() -> None:
    """Once per command: terminal signals unwind instead of killing mid-write, a name that is not
    encodable prints escaped rather than as a traceback, scratch folders of killed runs go."""
    import signal
    import threading

    from profkit.core.tempfiles import clean_stale

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) is signal.SIG_DFL:
                signal.signal(sig, _exit_on_signal)
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError):
                pass
    try:
        clean_stale()
    except OSError:
        pass


@click.group()
@click.version_option(__version__, prog_name="profkit")
def cli():
    """profkit: profile first, name the bottleneck, change one thing, re-profile."""
    _setup()


@contextmanager
def file_progress():
    """on_progress(file, phase, done, total) for the library: one transient rich bar per file
    (rows or bytes done, phase) on a terminal; nothing when piped. Lines printed meanwhile
    through `out` appear above the bar."""
    if not out.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=out, transient=True) as bar:
        now: list = [None, None, None]  # file, phase, task

        def on_progress(file, phase, done, total):
            if (file, phase) != tuple(now[:2]):  # a new phase: a fresh bar (its total may be unknown)
                if now[2] is not None:
                    bar.remove_task(now[2])
                now[:] = [file, phase, bar.add_task(f"{plain(Path(file).name)}: {phase}", total=total)]
            bar.update(now[2], completed=done, total=total)

        yield on_progress


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=PATH)
@db_option
@click.option("--run", default=None, help="Run to load into (default: the first file's name; a folder's own name).")
@click.option("--rank", type=click.IntRange(min=0), default=None,
              help="Process rank of these files (default: RANK recorded by nsys, else 'rankN' in the file name).")
@click.option("--gpu", default=None, metavar="NAME",
              help="The GPU the reports ran on, where they do not name it (an ncu details CSV names only the compute "
                   "capability): its datasheet peaks label the kernels (profkit/model/gpus.py lists the GPUs known).")
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
      profkit ingest profiles/rmsnorm-qwen7b-t4096
      profkit ingest trace.json.gz
      profkit ingest details.csv --gpu "RTX 4090"   # a details page names no GPU"""
    from profkit.store.ingest import ingest as do_ingest
    from profkit.store.ingest import plan

    def line(r):
        if r.skipped:
            out.print(f"{plain(r.path)}: already loaded{' as ' + plain(r.loaded_as) if r.loaded_as else ''} (run {plain(r.run)}), nothing added")
        else:
            where = f"run {plain(r.run)}" + ("" if r.rank is None else f" rank {r.rank}")
            rules = f", {r.rules} ncu rule results" if getattr(r, "rules", 0) else ""
            out.print(f"{plain(r.path)}: {r.format} -> {where}: {r.kernels} kernels, {r.ranges} NVTX ranges, "
                      f"{r.counters} counters{rules}")
            if r.caveat:
                out.print(f"  note: {plain(r.caveat)}")

    groups = plan(list(paths), run)
    with file_progress() as on_progress:  # each file's line as it lands, a bar meanwhile
        loaded = do_ingest(db, [], rank=rank, on_file=line, on_progress=on_progress, groups=groups)
    for g in groups:
        if g.meta is not None:
            out.print(f"{plain(g.meta_file or g.folder / 'capture.json')}: run metadata of run {plain(g.run)}")
        if g.skipped:
            out.print(f"{plain(g.folder)}: skipped " + "; ".join(f"{plain(p.name)} ({plain(why)})" for p, why in g.skipped))
    if gpu:
        from profkit.model import gpus

        with Store(db) as s:
            for name in dict.fromkeys(r.run for r in loaded):
                s.set_run_meta(name, {"gpu_name": gpu})
                have = s.query("SELECT gpu_name FROM run WHERE run = ?", (name,))[0]["gpu_name"]
                if have != gpu:
                    out.print(f"run {plain(name)}: its reports name the GPU {plain(have)}; --gpu {plain(gpu)} not used")
        if gpus.by_name(gpu) is None:
            out.print(f"--gpu {plain(gpu)}: not in profkit's known-GPU table (profkit/model/gpus.py): no datasheet peaks from it")


@cli.command()
@click.argument("query")
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array of objects.")
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV with a header row.")
@click.option("--timeout", default=60.0, show_default=True, type=click.FloatRange(min=0), metavar="S",
              help="Stop the query after S seconds (0: no limit).")
@click.option("--memory", default=2048, show_default=True, type=click.IntRange(min=16), metavar="MB",
              help="Working memory for sorts, DISTINCT, GROUP BY and temporary results (never temp files).")
@handled
def sql(query, db, as_json, as_csv, timeout, memory):
    """Run QUERY on a read-only connection (views: runs, kernels, counters, classifications,
    rules, advice, tuning, bench; docs/schema.md). Rows stream to the output as they come;
    Ctrl-C stops the query within a second.

    \b
    Examples:
      profkit sql "SELECT short_name, count(*) FROM kernels GROUP BY 1 ORDER BY 2 DESC LIMIT 5"
      profkit sql --csv "SELECT * FROM classifications WHERE label = 'dram'" > dram.csv"""
    import signal

    from profkit.outputs.records import write_csv, write_json
    from profkit.outputs.tables import pages
    from profkit.store.query import Query, QueryStopped

    stopped: list[int] = []
    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    # SQLite does not return to Python during a statement, and an exception raised in its
    # progress callback is swallowed: a signal only marks the query to be stopped, and the
    # query's progress check (every ~1 ms of work) ends it
    previous = {sig: signal.getsignal(sig) for sig in signals} if threading_main() else {}
    for sig in previous:
        signal.signal(sig, lambda signum, frame: stopped.append(signum))
    try:
        with Query(db, query, timeout=timeout or None, stop=lambda: bool(stopped), memory_mb=memory) as r:
            if as_json:
                write_json(sys.stdout, r.columns, r.rows())
            elif as_csv:
                write_csv(sys.stdout, r.columns, r.rows())
            else:
                for t in pages(r.columns, r.rows(), floats="{:g}"):
                    out.print(t)
    except QueryStopped:
        sys.stdout.flush()
        _fail("query stopped (Ctrl-C)" if stopped[0] == signal.SIGINT else f"query stopped (signal {stopped[0]})",
              128 + stopped[0])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def threading_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


@cli.command()
@db_option
@handled
def runs(db):
    """Summary of the runs in the database: GPU, sources, kernels, counters.

    \b
    Example:
      profkit runs --db profkit.db"""
    from profkit.analyses import summary

    with Store(db, readonly=True) as s:
        out.print(_table(summary.runs(s), "runs"))


@cli.command()
@db_option
@click.option("--run", default=None, help="Run (default: the newest).")
@click.option("--top", default=20, show_default=True, help="How many rows.")
@handled
def kernels(db, run, top):
    """Where a run's GPU time went: kernels by NVTX range, most total time first.

    \b
    Example:
      profkit kernels --run e2e-decode --top 10"""
    from profkit.analyses import summary

    run = _resolve_run(db, run)
    with Store(db, readonly=True) as s:
        out.print(_table(summary.kernels(s, run, top), f"kernels of run {run}"))


@cli.command()
@click.argument("profiles", default="profiles", type=PATH)
@db_option
@click.option("--top", default=10, show_default=True, help="Kernels shown per run.")
@click.option("--html", "html", default="roofline.html", show_default=True, type=PATH,
              help="HTML file for the rooflines of all runs (one figure per run).")
@click.option("--peaks", "peaks_file", default=None, type=PATH,
              help="Measured peaks to draw dashed (default: PROFILES/peaks.json when present).")
@click.option("--verbose", is_flag=True, help="Every table: files as they land, top kernels, labels per range, "
              "busy/idle per call, ranks, the top three to fix per run, every before/after pair.")
@handled
def analyse(profiles, db, top, html, peaks_file, verbose):
    """The main job: load every run under PROFILES (one folder per run), label it, say what to
    fix first, list the before/after claims it supports, and draw every run's roofline into one
    self-contained HTML file. One line per run as it lands; --verbose for every table.

    \b
    Example:
      profkit analyse profiles --html roofline.html
    """
    import time

    from profkit.analyses import overview
    from profkit.model import peaks
    from profkit.outputs.roofline_plot import write_runs
    from profkit.store.profiles import load_profiles

    t0 = time.monotonic()
    peaks_file = peaks_file or (Path(profiles) / "peaks.json" if (Path(profiles) / "peaks.json").is_file() else None)
    measured = peaks.read(peaks_file) if peaks_file else None
    summaries = []

    def landed(r):  # --verbose: each file's line as it lands
        state = "already loaded" if r.skipped else f"{r.kernels} kernels, {r.ranges} ranges, {r.counters} counters"
        out.print(f"{plain(r.path)} -> run {plain(r.run)}{'' if r.rank is None else ' rank ' + str(r.rank)}: {state}")

    def run_landed(run, loaded):  # one line per run, labelled and advised as soon as it is in
        row = overview.run_summary(s, run, measured)
        summaries.append(row)
        if not verbose:
            out.print(_run_line(row), no_wrap=True, overflow="ellipsis", crop=True)

    def started(folders):  # while the first counter reports are read: the lab's modules, if a run needs them
        from profkit.analyses.advise import preload_lab
        from profkit.store.ingest import capture_meta

        metas = []
        for f in folders:
            try:
                metas.append(capture_meta(f))
            except ProfkitError:  # refused where that folder loads, in its turn
                pass
        preload_lab(metas)

    if not verbose:
        out.print("run                              launches   counters  labels (% of GPU time)     fix first")
    # one connection for the whole job; each run's counters are read once for classify, advise,
    # the claims and the rooflines (Store.keep_counters)
    with Store(db) as s, s.keep_counters():
        s.conn.execute("PRAGMA cache_size = -65536")  # 64 MB of pages: the job rereads what it wrote (~80 MB here)
        with file_progress() as on_progress:
            loaded = load_profiles(profiles, db, on_file=landed if verbose else None, on_progress=on_progress,
                                   on_run=run_landed, store=s, on_start=started)
        if verbose:
            _analyse_verbose(s, top, summaries)
        claims = overview.claims(s)
        drawn = write_runs(s, html, measured)
    good = [c for c in claims if c["verdict"] == "supported"]
    def claim(c):
        row = {"range": c["range"], "change": f"{c['from']} -> {c['to']}",
               "us/call": f"{c['before_us']:,.1f} -> {c['after_us']:,.1f}",
               "speed-up": f"{c['speedup']:.2f}x [{c['speedup_low']:.2f}-{c['speedup_high']:.2f}]"}
        if verbose:
            row = {"run": c["run"], **row, "label": f"{c['label_before']} -> {c['label_after']}"}
        return {**row, "verdict": c["verdict"]}

    out.print(_table([claim(c) for c in (claims if verbose else good[:6])],
                     f"before/after claims (profkit compare; {len(good)} supported of {len(claims)} "
                     f"eager -> other variant pairs{'' if verbose else ', best 6 shown'})"))
    new_files = sum(1 for r in loaded if not r.skipped)
    out.print(f"{len(summaries)} runs ({new_files} files loaded now, {len(loaded) - new_files} already in {plain(db)}) "
              f"in {time.monotonic() - t0:.0f} s; rooflines of {sum(1 for w in drawn if w['points'])} runs with counters: "
              f"{plain(html)} (open it in a browser)")
    if any("the operator's model" in i.how for sm in summaries for i in sm["advice"]):
        out.print("note: the lab operators' byte and FLOP models need the kernels extra (pip install '.[kernels]'); "
                  "without it the lab runs' 'fix first' floors come from the kernels' counters")
    out.print("next: profkit advise --run RUN (what to fix first, how it was computed), profkit classify --run RUN, "
              "profkit compare RUN:eager RUN:triton; --verbose for every table")


def _run_line(row: dict) -> str:
    labels = ", ".join(f"{k} {v:.0f}%" for k, v in list(row["labels"].items())[:2])
    first = row["advice"][0] if row["advice"] else None
    fix = (f"{first.action.split(':')[0]} [{first.nvtx_path or first.kernel_name}] ({first.recoverable_ns / 1e3:,.0f} us)"
           if first and first.recoverable_ns > 0 else "-")
    # the run name whole (it is what `advise --run` takes): a longer one shifts the columns
    return f"{plain(row['run']):<32} {row['launches']:>8,} {row['counters']:>10,}  {plain(labels)[:26]:<26} {plain(fix)}"


def _analyse_verbose(s, top: int, summaries: list[dict]) -> None:
    from profkit.analyses import summary
    from profkit.analyses import timeline as tl

    out.print(_table(summary.runs(s), "runs"))
    advice = {r["run"]: r["advice"] for r in summaries}
    for run in s.runs():
        out.print(_table(summary.kernels(s, run, top), f"top kernels of run {run}"))
        out.print(_table(s.query("""
            SELECT k.nvtx_path, c.label, count(*) AS launches, sum(k.duration_ns) / 1e3 AS total_us
            FROM classifications c JOIN kernels k USING (kernel_id)
            WHERE c.run = ? AND k.nvtx_path IS NOT NULL GROUP BY 1, 2 ORDER BY 1, 2""", (run,)),
            f"bottleneck labels of run {run} (profkit classify; rules in docs/classification.md)"))
        per_call = tl.calls(tl.ranges(s, run))
        if per_call:
            out.print(_table([{"range": r["path"], "calls": r["instances"], "kernels/call": r["kernels_per_instance"],
                               "launch calls/call": r["launch_calls_per_instance"],
                               "window us/call": r["window_us_per_instance"], "busy us/call": r["busy_us_per_instance"],
                               "idle %": r["idle_pct"]} for r in per_call],
                             f"GPU busy and idle per call of run {run} (idle: launch overhead; profkit timeline)"))
        if len(s.query("SELECT DISTINCT rank FROM kernels WHERE run = ? AND rank IS NOT NULL", (run,))) > 1:
            from profkit.analyses import ranks as rk

            rr = rk.analyse(s, run)
            out.print(_table([{"rank": p["rank"], "steps": p["steps"], "compute_ms": p["compute_ns"] / 1e6,
                               "nccl_ms": p["comm_ns"] / 1e6, "hidden_%": p["hidden_comm_pct"],
                               "idle_ms": p["idle_ns"] / 1e6, "waited_ms": p["wait_ns"] / 1e6,
                               "slowest_in_steps": p["slowest_in_steps"]} for p in rr.per_rank],
                             f"ranks of run {run}: slowest rank {rr.slowest_rank} (profkit ranks)", floats="{:,.3f}"))
        out.print(_table([{"#": i.rank, "item": f"{i.nvtx_path or '(no range)'} [{i.kernel_name}]",
                           "recoverable us": i.recoverable_ns / 1e3, "next step": i.action}
                          for i in advice.get(run, [])[:3]], f"what to fix first in run {run} (profkit advise --run {run})"))


@cli.command()
@db_option
@click.option("--run", default=None, help="Run (default: the newest).")
@click.option("--range", "scope", default=None, metavar="PATH", help="Only the ranges under this NVTX path (e.g. one training step).")
@click.option("--all", "include_unranged", is_flag=True, help="Also the launches outside any NVTX range (left out by default when the run has ranges).")
@click.option("--top", default=10, show_default=True, help="Items shown.")
@click.option("--peaks", "peaks_file", default=None, type=PATH,
              help="Measured peaks (a peaks.json, e.g. profiles/peaks.json): floors at the measured copy bandwidth.")
@click.option("--json", "as_json", is_flag=True, help="Print the whole advice as JSON.")
@click.option("--html", default=None, type=PATH, help="Also write a one-page HTML report here.")
@handled
def advise(db, run, scope, include_unranged, top, peaks_file, as_json, html):
    """What to fix first: ranges and kernels ranked by the GPU time they could give back, each
    with its label, the next step and how the figure was computed (stored in the `advice` view).

    \b
    Example:
      profkit advise --run e2e-decode --range e2e/decode/eager --html advise.html
    """
    from profkit.analyses import advise as adv
    from profkit.model import peaks

    measured = peaks.read(peaks_file) if peaks_file else None
    run = _resolve_run(db, run)
    with Store(db, create=False) as s:
        a = adv.advise(s, run, scope, measured, include_unranged)
        s.replace_advice(a.run, scope, adv.rows(a))
        if html:
            from profkit.outputs import advise_page

            advise_page.write(s, a, html, top, measured)
    if as_json:
        click.echo(json.dumps(a.as_dict(), indent=2, default=str))
        return
    _print_advice(a, top)
    if html:
        out.print(f"{plain(html)}: where the time goes, the ranked list, the roofline of the top items")


def _print_advice(a, top: int, title: str | None = None) -> None:
    rows = []
    for i in a.items[:top]:
        sp = i.predicted_speedup
        rows.append({"#": i.rank, "item": f"{i.nvtx_path or '(no range)'} [{i.kernel_name}]", "label": i.label,
                     "GPU %": 100 * i.share_gpu, "recoverable us": i.recoverable_ns / 1e3,
                     "speed-up": "" if sp is None else f"{sp:.2f}x", "next step": i.action})
    out.print(_table(rows, title or f"what to fix first, run {a.run}" + (f", under {a.scope}" if a.scope else "")))
    for i in a.items[:min(top, 3)]:
        out.print(f"  {i.rank}. how: {plain(i.how)}")
    out.print(f"  device gap between back-to-back kernels: {a.device_gap_ns / 1e3:.2f} us ({plain(a.device_gap_how)})")
    for n in a.notes:
        out.print(f"  note: {plain(n)}")


def _progress_bar():
    """A rich progress bar on a terminal; nothing when piped."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    # (descriptions hold kernel and variant names: data, so no markup, control characters escaped)
    return Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    transient=True, disable=not sys.stderr.isatty(), console=None)


@cli.command()
@click.argument("kernel", metavar="MODULE:KERNEL")
@click.option("--shape", "shapes", multiple=True, required=True, metavar="NAME=VALUE,...",
              help="A problem size handed to your inputs() (repeatable), e.g. --shape n=16777216.")
@click.option("--space", "space_file", default=None, type=PATH,
              help="Configurations: JSON/YAML {param: [candidates]} or a list of configs (default: from the kernel's signature).")
@click.option("--launch", "launch_fn", default="launch", show_default=True, help="Your launcher: launch(inputs, config) -> output.")
@click.option("--inputs", "inputs_fn", default="inputs", show_default=True, help="Your input builder: inputs(shape, device).")
@click.option("--reference", "reference_fn", default="reference", show_default=True, help="Your reference: reference(inputs) -> expected output.")
@click.option("--budget", "budget_s", type=float, default=None, metavar="SECONDS", help="Stop trying new configs after this long (resume later).")
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print every trial as JSON.")
@handled
def tune(kernel, shapes, space_file, launch_fn, inputs_fn, reference_fn, budget_s, db, as_json):
    """Autotune your @triton.jit kernel: every configuration checked against your reference,
    timed with the lab's harness, every trial and the chosen one kept per shape and GPU (the
    `tuning` view); a second run reuses what is done.

    \b
    Example:
      profkit tune docs/examples/vector_add.py:add_kernel --shape n=16777216 --budget 120
    """
    from profkit.capture import tune as t

    target = t.load(kernel, launch_fn, inputs_fn, reference_fn)
    configs = t.read_space(space_file) if space_file else t.expand(t.default_space(target.kernel))
    sizes = [t.parse_shape(s) for s in shapes]
    with _progress_bar() as bar:
        task = bar.add_task("tune", total=len(sizes) * len(configs))

        def progress(done, total, what):
            bar.update(task, completed=done, description=plain(f"tune {what}"[:60]))

        results = t.tune(db, target, sizes, configs, budget_s, progress)
    if as_json:
        click.echo(json.dumps([{"shape": r.shape, "best": r.best and r.best.__dict__, "stopped": r.stopped,
                                "trials": [x.__dict__ for x in r.trials]} for r in results], indent=2, default=str))
        return
    for r in results:
        new = sum(1 for x in r.trials if not x.reused)
        bad = [x for x in r.trials if not x.ok]
        out.print(f"{plain(target.spec)} {json.dumps(r.shape)}: {len(r.trials)} configs ({new} tried now, "
                  f"{len(r.trials) - new} from earlier runs), {len(bad)} failed or wrong")
        if r.best:
            out.print(f"  chosen: {json.dumps(r.best.config)}: {r.best.ms:.4f} ms (rel. error {r.best.rel_err:.1e})")
        else:
            out.print("  no configuration gave a correct result")
        if r.stopped:
            out.print(f"  stopped: {plain(r.stopped)}")
    out.print("every trial: profkit sql \"SELECT * FROM tuning WHERE kernel = '" + plain(target.spec) + "'\"")


@cli.command()
@click.argument("op", metavar="OP|MODULE:WORKLOAD")
@click.option("--variant", "variants", multiple=True, help="Variants to run (default: all but the CUDA C++ ones).")
@click.option("--shape", "shapes", multiple=True, help="Shape names (default: all; on the CPU the self-test shapes).")
@click.option("--dtype", default=None, help="Data type (default: the workload's).")
@click.option("--quick", is_flag=True, help="The workload's quick shapes.")
@click.option("--md", "md_file", default=None, type=PATH, help="Also write the markdown table here.")
@click.option("--capture", "then_capture", is_flag=True,
              help="Then run the same variants and shapes under `profkit capture` (profiles and numbers from one command).")
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

    with _progress_bar() as bar:
        task = bar.add_task("bench", total=None)
        rows, copy = b.run(op, list(variants) or None, list(shapes) or None, dtype, quick,
                           lambda what: bar.update(task, description=plain(f"bench {what}")))
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


@cli.command(context_settings={"ignore_unknown_options": True})
@click.argument("target", nargs=-1, required=True)
@db_option
@click.option("--run", default=None, help="Run name (default: the workload, script or program name).")
@click.option("--out", "out_dir", default="profiles", show_default=True, type=PATH,
              help="Raw reports go to OUT/<run>/.")
@click.option("--nsys/--no-nsys", "use_nsys", default=True, help="Record a timeline.")
@click.option("--ncu/--no-ncu", "use_ncu", default=True, help="Collect counters.")
@click.option("--metrics", type=click.Choice(["lean", "roofline", "full"]), default="lean", show_default=True)
@click.option("--samples", type=click.IntRange(min=1), default=1, show_default=True,
              help="Commands: launches profiled per distinct kernel and launch configuration.")
@click.option("--warmup", type=click.IntRange(min=0), default=0, show_default=True,
              help="Commands: launches of each kernel and configuration skipped before sampling "
                   "(kernels launched no more often get no counters of their own).")
@click.option("--max-kernels", type=click.IntRange(min=1), default=500, show_default=True,
              help="Commands: at most this many launches profiled (kernels with least GPU time left out first).")
@click.option("--all-launches", is_flag=True, help="Commands: profile every launch (no sampling; slow).")
@click.option("--kernel-name-base", "name_base", type=click.Choice(["function", "demangled", "mangled"]),
              default="mangled", show_default=True,
              help="Commands: the kernel name ncu tells configurations apart by (function: template instances of "
                   "one function share one sample).")
@click.option("--range", "range_name", default=None, metavar="NAME",
              help="Commands: profile only launches inside the NVTX range NAME (e.g. one training step).")
@click.option("--step", type=click.IntRange(min=0), default=None, metavar="N",
              help="Commands: profile only step N of a program that marks steps (NVTX ranges 'step N').")
@click.option("--profiler-api/--no-profiler-api", "profiler_api", default=None,
              help="Profile only between cudaProfilerStart and Stop (default: when the program calls them).")
@click.option("--torch-ranges", is_flag=True,
              help="Python commands: PyTorch emits an NVTX range per operator (emit_nvtx), so kernels land "
                   "under operator names (costs CPU time per operator call).")
@click.option("--nvtx-include", multiple=True, help="ncu NVTX filter (repeatable); default: the workload's ranges.")
@click.option("--variant", multiple=True, help="Workload variant (repeatable).")
@click.option("--shape", multiple=True, help="Workload shape (repeatable).")
@click.option("--calls", type=click.IntRange(1, 1000), default=None,
              help="Lab workloads: calls of each variant inside its range (default 3); from 10 a side, profkit "
                   "compare's noise band is a bootstrap interval.")
@click.option("--rotate", type=click.IntRange(1, 64), default=None,
              help="Lab workloads: the calls cycle over this many copies of the inputs (as benchmarks time them).")
@click.option("--l2-fill", "l2_fill", is_flag=True,
              help="Lab workloads: fill the L2 with other data before each range (as an earlier op leaves it).")
@click.option("--tracer", type=click.Choice(["auto", "nsys", "cupti"]), default="auto", show_default=True)
@click.option("--clock-control", default="none", show_default=True, help="ncu --clock-control.")
@click.option("--nsys-path", "nsys_path", default=None, help="Path to nsys (else $NSYS, else PATH).")
@click.option("--ncu-path", "ncu_path", default=None, help="Path to ncu (else $NCU, else PATH).")
@click.option("--ranks", "ranks", is_flag=True,
              help="COMMAND is a torchrun job: one nsys report per rank, loaded with its rank; ncu only on --ncu-ranks.")
@click.option("--ncu-ranks", default="", metavar="0,1", help="With --ranks: ranks to run ncu on (NCCL kernels skipped).")
@handled
def capture(target, db, run, out_dir, use_nsys, use_ncu, metrics, samples, warmup, max_kernels, all_launches,
            name_base, range_name, step, profiler_api, torch_ranges, nvtx_include, variant, shape, calls, rotate,
            l2_fill, tracer, clock_control, nsys_path, ncu_path, ranks, ncu_ranks):
    """Profile WORKLOAD (a profkit.kernels entry) or `-- COMMAND ARGS...` and load the reports.

    A command gets a timeline of every launch, then ncu on a sample: each distinct kernel and
    launch configuration --samples times (docs/capture.md).

    \b
    Examples:
      profkit capture rmsnorm --shape qwen7b-t4096
      profkit capture --run train -- python3 train.py --epochs 1
      profkit capture --range step --step 10 -- python3 train.py"""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from profkit.capture import session as cap
    from profkit.core.errors import BadArgument

    if not use_nsys and not use_ncu:
        raise BadArgument("--no-nsys with --no-ncu records nothing: keep one of them")
    if run is not None:
        cap.check_run_name(run)
    workload, command = cap.resolve_target(list(target), ranks)
    lab_only = [o for o, v in (("--calls", calls is not None), ("--rotate", rotate is not None), ("--l2-fill", l2_fill))
                if v]
    if ranks and lab_only:
        raise BadArgument(f"{' and '.join(lab_only)} {'is' if len(lab_only) == 1 else 'are'} for lab workloads; "
                          "--ranks captures a command")
    if ranks:
        from profkit.capture.ranks import capture_ranks, parse_ranks, split_launcher, worker_name

        run = run or worker_name(split_launcher(command)[1])
        on_ranks = parse_ranks(ncu_ranks)
    elif ncu_ranks:
        raise ProfkitError("--ncu-ranks needs --ranks")
    run = cap.check_run_name(run or workload or cap.default_run_name(command))
    _refuse_a_second_capture(db, run, use_nsys, use_ncu)
    # (a kernel name in the description is data: no markup, control characters escaped)
    columns = (TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(), TextColumn("kernels"),
               TimeElapsedColumn())
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
            got = capture_ranks(command, run, out_dir, ncu_ranks=on_ranks, use_nsys=use_nsys, metrics=metrics,
                                include=nvtx_include, clock_control=clock_control, nsys=nsys_path, ncu=ncu_path,
                                progress=progress)
        else:
            got = cap.capture(workload, command, run, out_dir, variants=variant, shapes=shape, use_nsys=use_nsys,
                              use_ncu=use_ncu, metrics=metrics, include=nvtx_include, tracer=tracer,
                              clock_control=clock_control, nsys=nsys_path, ncu=ncu_path, progress=progress,
                              expect=expect, on_plan=on_plan, note=note, range_name=range_name, step=step,
                              profiler_api=profiler_api, torch_ranges=torch_ranges, calls=calls,
                              rotate=rotate, l2_fill=l2_fill,
                              sample=cap.Sampling(samples=samples, warmup=warmup, max_kernels=max_kernels,
                                                  all_launches=all_launches, key=name_base))
    failures = list(getattr(got, "failures", []))
    loaded = _load_capture(db, got, failures)
    if loaded:
        with Store(db) as s:
            s.set_run_meta(run, got.meta)
            if getattr(got, "plan", None) is not None:
                out.print(plain(_sampled_summary(s, run)))
    if failures:
        for f in failures[:-1]:
            click.echo(f"profkit: {plain(f)}", err=True)
        where = (f"; loaded as run {run}" if loaded else "; nothing loaded") + f"; reports in {got.folder}"
        _fail(failures[-1] + where, 4)


def _refuse_a_second_capture(db, run: str, use_nsys: bool, use_ncu: bool) -> None:
    """Before anything runs: a run holds one timeline and one counter report (per rank), so a
    capture into a run that already has the report it would make is refused now, not after the
    program ran (a before/after pair is two runs: --run NAME-after)."""
    from profkit.core.errors import BadArgument
    from profkit.store.ingest import roles_held

    made = ({"timeline"} if use_nsys else set()) | ({"counters"} if use_ncu else set())
    clash = sorted(roles_held(db, run) & made)
    if clash:
        raise BadArgument(f"run {run!r} in {db} already holds a {' and a '.join(clash)} report: give this capture a "
                          f"run of its own (--run {run}-2, e.g. the after of a before/after pair) or another --db")


def _load_capture(db, got, failures: list[str]) -> int:
    """Load each report of a capture on its own: one that fails is named with its cause and
    stays on disk, the others load. Returns how many loaded."""
    from profkit.store.ingest import ingest as do_ingest

    n = 0
    for f in got.files:
        try:
            for r in do_ingest(db, [f], run=got.run, parsed_reports=got.reports, facts=getattr(got, "facts", None)):
                state = "already loaded" if r.skipped else f"{r.kernels} kernels, {r.ranges} ranges, {r.counters} counters"
                out.print(f"{plain(r.path)} -> run {plain(r.run)}{'' if r.rank is None else ' rank ' + str(r.rank)}: "
                          f"{state}")
                n += not r.skipped
        except ProfkitError as e:
            failures.append(f"{f}: not loaded: {e}")
    return n


def _sampled_summary(s: Store, run: str) -> str:
    r = s.query("""SELECT count(*) AS launches,
                          sum(EXISTS (SELECT 1 FROM launch n WHERE n.timeline_id = k.kernel_id)) AS measured,
                          count(sampled_from) AS sampled
                   FROM kernels k WHERE run = ? AND source != 'ncu'""", (run,))[0]
    rest = (r["launches"] or 0) - (r["measured"] or 0) - (r["sampled"] or 0)
    return (f"run {run}: {r['launches']:,} timeline launches: {r['measured'] or 0:,} measured by ncu, "
            f"{r['sampled']:,} labelled from a measured launch of the same kernel and configuration (sampled_from), "
            f"{rest:,} without counters (timeline evidence only)")


@cli.command()
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

    run = _resolve_run(db, run)
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


@cli.command()
@click.argument("before")
@click.argument("after")
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array of objects.")
@click.option("--by", type=click.Choice(["gpu", "host"]), default="gpu", show_default=True,
              help="Time per call: the GPU's (its kernels' busy time), or the host's (from one call's "
                   "first launch to the next; timeline runs) for a change to the launcher of a "
                   "host-bound call.")
@handled
def compare(before, after, db, as_json, by):
    """Per NVTX range, BEFORE vs AFTER (each RUN or RUN:VARIANT, a variant being one part of the
    NVTX path such as eager or triton): time per call, speed-up with its noise band, labels, % of
    roofline, and a verdict (supported, caveated with what is missing, rejected).

    \b
    Example:
      profkit compare rmsnorm-qwen7b-t4096:eager rmsnorm-qwen7b-t4096:triton
      profkit compare slow-launch:triton_direct fast-launch:triton_direct --by host
    """
    from profkit.analyses.compare import rows as compare_rows

    with Store(db, readonly=True) as s:
        got = compare_rows(s, before, after, by)
    if as_json:
        click.echo(json.dumps(got, indent=2))
        return

    def pct(x):
        return "-" if x is None else f"{x:.0f} %"

    t = Table(title=Text(plain(f"compare {before} -> {after}")), header_style="bold")
    unit = "us/call" if by == "gpu" else "host us/call"
    for c, j in (("range", "left"), (f"before {unit}", "right"), (f"after {unit}", "right"),
                 ("speed-up [band]", "right"), ("label", "left"), ("% of roofline", "right"),
                 ("verdict", "left"), ("why", "left")):
        t.add_column(c, justify=j, overflow="fold")
    for r in got:
        t.add_row(*(Text(plain(v)) for v in (
            r["range"], f"{r['before_us']:,.1f}", f"{r['after_us']:,.1f}",
            f"{r['speedup']:.2f}x [{r['speedup_low']:.2f}-{r['speedup_high']:.2f}]",
            f"{r['label_before']} -> {r['label_after']}",
            f"{pct(r['roofline_pct_before'])} -> {pct(r['roofline_pct_after'])}", r["verdict"], r["why"])))
    out.print(t)
    for r in got:
        for n in r["notes"]:
            out.print(plain(f"{r['range']}: {n}"))
    methods = dict.fromkeys(r["band_method"] for r in got)
    out.print(plain("band: " + "; ".join(methods) + ". Method: docs/compare.md"))


@cli.command()
@db_option
@click.option("--run", default=None, metavar="A", help="Run, or RUN:VARIANT (e.g. myrun:eager); default: the newest run.")
@click.option("--compare", default=None, metavar="B", help="Draw an arrow from each NVTX range of A to the same range of B.")
@click.option("--by", type=click.Choice(["kernel", "range"]), default="kernel", show_default=True,
              help="One point per kernel, or per NVTX range (its kernels' time-weighted aggregate).")
@click.option("--chain", default=None, metavar="auto|P1,P2,...",
              help="Join ranges in order with arrows: 'auto' (capture order) or NVTX paths / variant names.")
@click.option("--peaks", "peaks_file", default=None, type=PATH,
              help="Measured peaks to draw dashed beside the report's own (a peaks.json, e.g. profiles/peaks.json).")
@click.option("-o", "--output", required=True, type=PATH, help="HTML file to write.")
@handled
def roofline(db, run, compare, by, chain, peaks_file, output):
    """Hierarchical roofline (DRAM, L2, L1) of a run as one self-contained HTML file.

    \b
    Example:
      profkit roofline --run rmsnorm-qwen7b-t4096:eager --compare rmsnorm-qwen7b-t4096:triton -o rmsnorm.html"""
    from profkit.model import peaks
    from profkit.analyses import roofline as rl
    from profkit.core.errors import BadArgument
    from profkit.outputs import roofline_plot

    if compare and chain:
        raise BadArgument("--compare and --chain draw different arrows: choose one")
    steps = None if chain is None else ("auto" if chain == "auto" else [c for c in chain.split(",") if c])
    measured = peaks.read(peaks_file) if peaks_file else None
    with Store(db, readonly=True) as s:
        r = rl.collect(s, run, compare, by, steps, measured)
    path = roofline_plot.write_html(roofline_plot.figure(r), output)
    out.print(f"{plain(path)}: {sum(1 for _ in roofline_plot.drawn(r))} points, {len(r.arrows)} arrows")
    for note in r.notes:
        out.print(f"  {plain(note)}")


@cli.command()
@db_option
@click.option("--run", default=None, help="Run (default: the newest).")
@click.option("--steps", "step_pattern", default=None, metavar="REGEX",
              help="NVTX ranges that are steps, case-insensitive (default: '^(profiler)?step[ _#:-]*\\d+$': "
                   "'step 3', torch.profiler's 'ProfilerStep#3').")
@click.option("--json", "as_json", is_flag=True, help="Print the whole analysis as JSON.")
@click.option("--html", default=None, type=PATH,
              help="Also write per-rank stacked bars per step to this self-contained HTML file.")
@handled
def ranks(db, run, step_pattern, as_json, html):
    """Per rank and step: compute, NCCL communication, hidden communication, idle; stragglers.

    \b
    Example:
      profkit ranks --run ddp-2gpu-slow --html ranks.html"""
    from profkit.analyses import ranks as rk
    from profkit.outputs import ranks_plot

    run = _resolve_run(db, run)
    with Store(db, readonly=True) as s:
        r = rk.analyse(s, run, step_pattern or rk.STEP_PATTERN)
    if html:
        ranks_plot.write_html(ranks_plot.figure(r), html)
    if as_json:
        click.echo(json.dumps(r.as_dict(), indent=2))
        return
    out.print(_table(rk.table_rows(r), f"run {r.run}: GPU time per step and rank (us)"))
    if len(r.ranks) > 1:
        out.print(_table([{(k[:-3] + "_us" if k.endswith("_ns") else k): (v / 1e3 if k.endswith("_ns") and v is not None else v)
                           for k, v in p.items()} for p in r.per_step], "stragglers per step (us)"))
    for p in r.per_rank:
        hidden = "" if p["hidden_comm_pct"] is None else f", {p['hidden_comm_pct']:.0f} % of NCCL hidden under compute"
        who = "single process" if p["rank"] is None else f"rank {p['rank']}"
        out.print(f"{who}: compute {p['compute_ns'] / 1e6:.3f} ms, NCCL {p['comm_ns'] / 1e6:.3f} ms{hidden}, "
                  f"idle {p['idle_ns'] / 1e6:.3f} ms, waited {p['wait_ns'] / 1e6:.3f} ms for other ranks "
                  f"over {p['steps']} steps")
    if r.slowest_rank is not None:
        n = next(p["slowest_in_steps"] for p in r.per_rank if p["rank"] == r.slowest_rank)
        out.print(f"slowest rank: {r.slowest_rank} (the others waited for it in {n} of {len(r.per_step)} steps)")
    for note in r.notes:
        out.print(f"note: {plain(note)}")
    if html:
        out.print(f"{plain(html)}: per-rank bars per step")


@cli.command()
@db_option
@click.option("--parquet", "directory", required=True, type=PATH,
              help="Folder to write VIEW/run=R/rank=N/part-0.parquet into.")
@click.option("--run", default=None, help="Only this run (default: every run).")
@handled
def export(db, directory, run):
    """Write the views runs, kernels, counters, classifications, rules (by run and rank) and advice (by run) as Parquet.

    \b
    Example:
      profkit export --parquet parquet/ --run e2e-decode"""
    from profkit.outputs.parquet import export_parquet

    for view, n in export_parquet(db, directory, run).items():
        out.print(f"{plain(directory / view)}: {n} rows")


@cli.command()
@db_option
@click.option("--run", default=None, help="Run (default: the newest).")
@click.option("--range", "prefix", default=None, metavar="PATH", help="Only NVTX paths equal to or under PATH.")
@click.option("--ops", "scopes", multiple=True, metavar="PATH",
              help="Operator shares of the kernel time under PATH, by innermost range (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print {ranges: [...], operators: {PATH: [...]}} as JSON.")
@handled
def timeline(db, run, prefix, scopes, as_json):
    """Per NVTX range: GPU window, busy, idle (launch overhead) per instance; operator shares.

    \b
    Example:
      profkit timeline --run e2e-decode --range e2e/decode --ops e2e/decode/eager"""
    from profkit.analyses import timeline as tl

    run = _resolve_run(db, run)
    with Store(db, readonly=True) as s:
        rows = tl.ranges(s, run, prefix)
        ops = {scope: tl.operators(s, run, scope) for scope in scopes}
        op = lab_op(s.run_meta(run))
    if as_json:
        click.echo(json.dumps({"run": run, "ranges": rows, "operators": ops}, indent=2))
        return

    def table(rs, title):
        out.print(_table([{"range": r["path"], "instances": r["instances"], "kernels/inst": r["kernels_per_instance"],
                           "launch calls/inst": r["launch_calls_per_instance"],
                           "window us/inst": r["window_us_per_instance"], "busy us/inst": r["busy_us_per_instance"],
                           "idle us/inst": r["idle_us_per_instance"], "idle %": r["idle_pct"]} for r in rs], title))

    # a lab workload's warm-up (compilation, autotuning, graph capture) runs outside its op/variant/shape
    # ranges but pushes the same operator ranges: shown apart, so they are not read as the workload
    inside = [r for r in rows if op is None or r["path"] == op or r["path"].startswith(op + "/")]
    table(inside, f"GPU time per NVTX range, run {run}")
    outside = [r for r in rows if r not in inside]
    if outside:
        table(outside, f"ranges outside the workload's {op}/VARIANT/SHAPE ranges: warm-up, compilation and "
                       f"set-up before each timed range opened (their idle time is host work, not launch overhead)")
    for scope, got in ops.items():
        out.print(_table([{"operator": o["operator"], "kernels": o["kernels"], "kernel us": o["kernel_ns"] / 1e3,
                           "share %": o["share_pct"], "top kernel": o["top_kernel"]} for o in got],
                         f"operator shares under {scope}"))


from profkit.cli.gate import baseline as _baseline_group
from profkit.cli.gate import gate as _gate_command

cli.add_command(_gate_command)
cli.add_command(_baseline_group)

def main():
    cli()


if __name__ == "__main__":
    main()
