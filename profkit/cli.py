"""The profkit command line: each command parses arguments, calls one library function,
and prints. Errors become one line on stderr and a non-zero exit code."""
from __future__ import annotations

import csv
import json
import sqlite3
import sys
from functools import wraps
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from . import __version__
from .errors import ProfkitError
from .store import default_db

# wide when piped or captured, so tables stay one row per line
out = Console(highlight=False, width=None if sys.stdout.isatty() else 200)


def _fail(message: str, code: int = 1):
    click.echo(f"profkit: {message}", err=True)
    sys.exit(code)


def handled(fn):
    """Map profkit's typed errors (and a few OS/SQLite ones) to one line and an exit code."""

    @wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ProfkitError as e:
            _fail(str(e), e.exit_code)
        except sqlite3.Error as e:
            _fail(f"SQLite: {e}", 6)
        except (OSError, MemoryError) as e:
            _fail(f"{type(e).__name__}: {e}", 7)
        except KeyboardInterrupt:
            _fail("interrupted", 130)

    return wrapper


def db_option(fn):
    return click.option("--db", default=None, metavar="DB",
                        help="Database file (default: $PROFKIT_DB, else profkit.db).")(fn)


def _table(rows: list[dict], title: str | None = None, floats: str = "{:,.1f}") -> Table:
    t = Table(title=title, show_lines=False, header_style="bold")
    cols = list(rows[0]) if rows else []
    for c in cols:
        t.add_column(c, overflow="fold", justify="right" if rows and isinstance(rows[0][c], (int, float)) else "left")
    for r in rows:
        t.add_row(*["" if r[c] is None else floats.format(r[c]) if isinstance(r[c], float) else str(r[c]) for c in cols])
    return t


@click.group()
@click.version_option(__version__, prog_name="profkit")
def cli():
    """profkit: profile first, name the bottleneck, change one thing, re-profile."""


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@db_option
@click.option("--run", default=None, help="Run to load into (default: the first file's name).")
@click.option("--rank", type=click.IntRange(min=0), default=None,
              help="Process rank of these files (default: RANK recorded by nsys, else 'rankN' in the file name).")
@handled
def ingest(paths, db, run, rank):
    """Load report files (nsys SQLite/.nsys-rep, .ncu-rep[.xz], ncu raw CSV, CUPTI trace)."""
    from .ingest import ingest as do_ingest

    for r in do_ingest(db or default_db(), list(paths), run, rank=rank):
        if r.skipped:
            out.print(f"{r.path}: already loaded{' as ' + r.loaded_as if r.loaded_as else ''} (run {r.run}), nothing added")
        else:
            where = f"run {r.run}" + ("" if r.rank is None else f" rank {r.rank}")
            out.print(f"{r.path}: {r.format} -> {where}: {r.kernels} kernels, {r.ranges} NVTX ranges, "
                      f"{r.counters} counters")


@cli.command()
@click.argument("query")
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array of objects.")
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV with a header row.")
@handled
def sql(query, db, as_json, as_csv):
    """Run QUERY on a read-only connection (views: runs, kernels, counters, classifications)."""
    from .store import open_readonly

    conn = open_readonly(db or default_db())
    try:
        cur = conn.execute(query)
        cols = [d[0] for d in cur.description or []]
        rows = [dict(zip(cols, r)) for r in cur.fetchall()]
    except sqlite3.DatabaseError as e:
        _fail(f"query failed: {e}", 6)
    finally:
        conn.close()
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))
    elif as_csv:
        w = csv.DictWriter(sys.stdout, fieldnames=cols, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    else:
        out.print(_table(rows, floats="{:g}"))


@cli.command()
@db_option
@handled
def runs(db):
    """Summary of the runs in the database."""
    from . import summary
    from .store import Store

    s = Store(db)
    try:
        out.print(_table(summary.runs(s), "runs"))
    finally:
        s.close()


@cli.command()
@db_option
@click.option("--run", default=None, help="Run (default: the newest).")
@click.option("--top", default=20, show_default=True, help="How many rows.")
@handled
def kernels(db, run, top):
    """Where a run's GPU time went: kernels by NVTX range, most total time first."""
    from . import summary
    from .store import Store

    s = Store(db)
    try:
        run = s.require_run(run)
        out.print(_table(summary.kernels(s, run, top), f"kernels of run {run}"))
    finally:
        s.close()


@cli.command()
@click.argument("profiles", default="profiles", type=click.Path(path_type=Path))
@db_option
@click.option("--top", default=10, show_default=True, help="Kernels shown per run.")
@click.option("--html", "html", default="roofline.html", show_default=True, type=click.Path(path_type=Path),
              help="HTML file for the rooflines of all runs (one figure per run).")
@handled
def analyse(profiles, db, top, html):
    """The main job: load every run under PROFILES (one folder per run), summarise, classify it, draw its roofline."""
    from . import summary
    from . import timeline as tl
    from .analyse import load_profiles
    from .store import Store

    db = db or default_db()
    for r in load_profiles(profiles, db):
        state = "already loaded" if r.skipped else f"{r.kernels} kernels, {r.ranges} ranges, {r.counters} counters"
        out.print(f"{r.path} -> run {r.run}{'' if r.rank is None else ' rank ' + str(r.rank)}: {state}")
    from .classify import classify as do_classify

    s = Store(db)
    try:
        out.print(_table(summary.runs(s), "runs"))
        for run in s.runs():
            out.print(_table(summary.kernels(s, run, top), f"top kernels of run {run}"))
            do_classify(s, run)
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
                from . import ranks as rk

                rr = rk.analyse(s, run)
                out.print(_table([{"rank": p["rank"], "steps": p["steps"], "compute_ms": p["compute_ns"] / 1e6,
                                   "nccl_ms": p["comm_ns"] / 1e6, "hidden_%": p["hidden_comm_pct"],
                                   "idle_ms": p["idle_ns"] / 1e6, "waited_ms": p["wait_ns"] / 1e6,
                                   "slowest_in_steps": p["slowest_in_steps"]} for p in rr.per_rank],
                                 f"ranks of run {run}: slowest rank {rr.slowest_rank} (profkit ranks)", floats="{:,.3f}"))
        from .roofline import write_runs

        drawn = write_runs(s, html)
        out.print(_table([{"run": w["run"], "points": w["points"], "note": w["why"]} for w in drawn],
                         f"rooflines in {html} (open it in a browser; `profkit roofline --help` for before/after arrows)"))
    finally:
        s.close()


@cli.command(context_settings={"ignore_unknown_options": True})
@click.argument("target", nargs=-1, required=True)
@db_option
@click.option("--run", default=None, help="Run name (default: the workload or command name).")
@click.option("--out", default="profiles", show_default=True, type=click.Path(path_type=Path),
              help="Raw reports go to OUT/<run>/.")
@click.option("--nsys/--no-nsys", "use_nsys", default=True, help="Record a timeline.")
@click.option("--ncu/--no-ncu", "use_ncu", default=True, help="Collect counters.")
@click.option("--metrics", type=click.Choice(["lean", "roofline", "full"]), default="lean", show_default=True)
@click.option("--nvtx-include", multiple=True, help="ncu NVTX filter (repeatable); default: the workload's ranges.")
@click.option("--variant", multiple=True, help="Workload variant (repeatable).")
@click.option("--shape", multiple=True, help="Workload shape (repeatable).")
@click.option("--tracer", type=click.Choice(["auto", "nsys", "cupti"]), default="auto", show_default=True)
@click.option("--clock-control", default="none", show_default=True, help="ncu --clock-control.")
@click.option("--nsys-path", "nsys_path", default=None, help="Path to nsys (else $NSYS, else PATH).")
@click.option("--ncu-path", "ncu_path", default=None, help="Path to ncu (else $NCU, else PATH).")
@click.option("--ranks", "ranks", is_flag=True,
              help="COMMAND is a torchrun job: one nsys report per rank, loaded with its rank; ncu only on --ncu-ranks.")
@click.option("--ncu-ranks", default="", metavar="0,1", help="With --ranks: ranks to run ncu on (NCCL kernels skipped).")
@handled
def capture(target, db, run, out, use_nsys, use_ncu, metrics, nvtx_include, variant, shape, tracer,
            clock_control, nsys_path, ncu_path, ranks, ncu_ranks):
    """Profile WORKLOAD (a profkit.kernels entry) or `-- COMMAND ARGS...` and load the reports."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from . import kernels as registry
    from .capture import capture as do_capture
    from .ingest import ingest as do_ingest
    from .store import Store

    workload = target[0] if len(target) == 1 and target[0] in registry.workloads() and not ranks else None
    command = None if workload else list(target)
    if ranks:
        from .capture_ranks import capture_ranks, parse_ranks, split_launcher, worker_name

        run = run or worker_name(split_launcher(command)[1])
        on_ranks = parse_ranks(ncu_ranks)
    elif ncu_ranks:
        raise ProfkitError("--ncu-ranks needs --ranks")
    run = run or (workload or Path(command[0]).stem)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("kernels"),
               TimeElapsedColumn())
    with Progress(*columns, transient=True) as bar:
        task = bar.add_task("ncu replay", total=None)

        def expect(n):
            bar.update(task, total=n)

        def progress(line):
            if line.startswith("==PROF== Profiling"):
                bar.advance(task)
                parts = line.split('"')
                bar.update(task, description="ncu: " + (parts[1] if len(parts) > 2 else "kernel"))

        if ranks:
            got = capture_ranks(command, run, out, ncu_ranks=on_ranks, use_nsys=use_nsys, metrics=metrics,
                                include=nvtx_include, clock_control=clock_control, nsys=nsys_path, ncu=ncu_path,
                                progress=progress)
        else:
            got = do_capture(workload, command, run, out, variants=variant, shapes=shape, use_nsys=use_nsys,
                             use_ncu=use_ncu, metrics=metrics, include=nvtx_include, tracer=tracer,
                             clock_control=clock_control, nsys=nsys_path, ncu=ncu_path, progress=progress,
                             expect=expect)
    db = db or default_db()
    for r in do_ingest(db, got.files, run=run, parsed_reports=got.reports):
        out_line = "already loaded" if r.skipped else f"{r.kernels} kernels, {r.ranges} ranges, {r.counters} counters"
        click.echo(f"{r.path} -> run {r.run}{'' if r.rank is None else ' rank ' + str(r.rank)}: {out_line}")
    s = Store(db)
    try:
        s.set_run_meta(run, got.meta)
    finally:
        s.close()


@cli.command()
@db_option
@click.option("--run", default=None, help="Run (default: the newest).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array of objects.")
@click.option("--table", "as_table", is_flag=True, help="Print a table (the default).")
@handled
def classify(db, run, as_json, as_table):
    """Label each kernel: dram, launch_overhead, occupancy, tensor_core (compute, latency, unknown)."""
    from .classify import classify as do_classify
    from .store import Store

    s = Store(db)
    try:
        rows = do_classify(s, run)
    finally:
        s.close()
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    summary: dict = {}
    for r in rows:
        key = (r["nvtx_range"], r["label"])
        summary.setdefault(key, [0, r["reason"]])[0] += 1
    out.print(_table([{"nvtx_range": k[0], "label": k[1], "launches": v[0], "example reason": v[1]}
                      for k, v in summary.items()], f"classification of run {rows[0]['run'] if rows else run}"))


@cli.command()
@click.argument("before")
@click.argument("after")
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array of objects.")
@handled
def compare(before, after, db, as_json):
    """Per NVTX range, BEFORE vs AFTER (RUN or RUN:COMPONENT): time, speed-up, labels, verdict."""
    from .compare import rows as compare_rows
    from .store import Store

    s = Store(db)
    try:
        got = compare_rows(s, before, after)
    finally:
        s.close()
    if as_json:
        click.echo(json.dumps(got, indent=2))
        return

    def pct(x):
        return "-" if x is None else f"{x:.0f} %"

    t = Table(title=f"compare {before} -> {after}", header_style="bold")
    for c, j in (("range", "left"), ("before us/call", "right"), ("after us/call", "right"),
                 ("speed-up [band]", "right"), ("label", "left"), ("% of roofline", "right"),
                 ("verdict", "left"), ("why", "left")):
        t.add_column(c, justify=j, overflow="fold")
    for r in got:
        t.add_row(r["range"], f"{r['before_us']:,.1f}", f"{r['after_us']:,.1f}",
                  f"{r['speedup']:.2f}x [{r['speedup_low']:.2f}-{r['speedup_high']:.2f}]",
                  f"{r['label_before']} -> {r['label_after']}",
                  f"{pct(r['roofline_pct_before'])} -> {pct(r['roofline_pct_after'])}",
                  r["verdict"], r["why"])
    out.print(t)
    methods = dict.fromkeys(r["band_method"] for r in got)
    out.print("band: " + "; ".join(methods) + ". Method: docs/compare.md")


@cli.command()
@db_option
@click.option("--run", default=None, metavar="A", help="Run, or RUN:COMPONENT (e.g. myrun:eager); default: the newest run.")
@click.option("--compare", default=None, metavar="B", help="Draw an arrow from each NVTX range of A to the same range of B.")
@click.option("--by", type=click.Choice(["kernel", "range"]), default="kernel", show_default=True,
              help="One point per kernel, or per NVTX range (its kernels' time-weighted aggregate).")
@click.option("--chain", default=None, metavar="auto|P1,P2,...",
              help="Join ranges in order with arrows: 'auto' (capture order) or NVTX paths / variant names.")
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path), help="HTML file to write.")
@handled
def roofline(db, run, compare, by, chain, output):
    """Hierarchical roofline (DRAM, L2, L1) of a run as one self-contained HTML file."""
    from . import roofline as rl
    from .errors import BadArgument
    from .store import Store

    if compare and chain:
        raise BadArgument("--compare and --chain draw different arrows: choose one")
    steps = None if chain is None else ("auto" if chain == "auto" else [c for c in chain.split(",") if c])
    s = Store(db)
    try:
        r = rl.collect(s, run, compare, by, steps)
    finally:
        s.close()
    path = rl.write_html(rl.figure(r), output)
    click.echo(f"{path}: {sum(1 for _ in rl._drawn(r))} points, {len(r.arrows)} arrows")
    for note in r.notes:
        click.echo(f"  {note}")


@cli.command()
@db_option
@click.option("--run", default=None, help="Run (default: the newest).")
@click.option("--steps", "step_pattern", default=None, metavar="REGEX",
              help="NVTX ranges that are steps (default: '^step[ _#:-]*\\d+$', e.g. 'step 3').")
@click.option("--json", "as_json", is_flag=True, help="Print the whole analysis as JSON.")
@click.option("--html", default=None, type=click.Path(path_type=Path),
              help="Also write per-rank stacked bars per step to this self-contained HTML file.")
@handled
def ranks(db, run, step_pattern, as_json, html):
    """Per rank and step: compute, NCCL communication, hidden communication, idle; stragglers."""
    from . import ranks as rk
    from .store import Store

    s = Store(db)
    try:
        r = rk.analyse(s, run, step_pattern or rk.STEP_PATTERN)
    finally:
        s.close()
    if html:
        rk.write_html(rk.figure(r), html)
    if as_json:
        click.echo(json.dumps(r.as_dict(), indent=2))
        return
    out.print(_table(rk.table_rows(r), f"run {r.run}: GPU time per step and rank (us)"))
    if len(r.ranks) > 1:
        out.print(_table([{k: (v / 1e3 if k.endswith("_ns") and v is not None else v) for k, v in p.items()}
                          for p in r.per_step], "stragglers per step (_ns columns in us)"))
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
        out.print(f"note: {note}")
    if html:
        out.print(f"{html}: per-rank bars per step")


@cli.command()
@db_option
@click.option("--parquet", "directory", required=True, type=click.Path(path_type=Path),
              help="Folder to write VIEW/run=R/rank=N/part-0.parquet into.")
@click.option("--run", default=None, help="Only this run (default: every run).")
@handled
def export(db, directory, run):
    """Write the views runs, kernels, counters, classifications as Parquet partitioned by run and rank."""
    from .export import export_parquet

    for view, n in export_parquet(db or default_db(), directory, run).items():
        click.echo(f"{directory / view}: {n} rows")


@cli.command()
@db_option
@click.option("--run", default=None, help="Run (default: the newest).")
@click.option("--range", "prefix", default=None, metavar="PATH", help="Only NVTX paths equal to or under PATH.")
@click.option("--ops", "scopes", multiple=True, metavar="PATH",
              help="Operator shares of the kernel time under PATH, by innermost range (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print {ranges: [...], operators: {PATH: [...]}} as JSON.")
@handled
def timeline(db, run, prefix, scopes, as_json):
    """Per NVTX range: GPU window, busy, idle (launch overhead) per instance; operator shares."""
    from . import timeline as tl
    from .store import Store

    s = Store(db)
    try:
        run = s.require_run(run)
        rows = tl.ranges(s, run, prefix)
        ops = {scope: tl.operators(s, run, scope) for scope in scopes}
    finally:
        s.close()
    if as_json:
        click.echo(json.dumps({"run": run, "ranges": rows, "operators": ops}, indent=2))
        return
    out.print(_table([{"range": r["path"], "instances": r["instances"], "kernels/inst": r["kernels_per_instance"],
                       "launch calls/inst": r["launch_calls_per_instance"], "window us/inst": r["window_us_per_instance"],
                       "busy us/inst": r["busy_us_per_instance"], "idle us/inst": r["idle_us_per_instance"],
                       "idle %": r["idle_pct"]} for r in rows], f"GPU time per NVTX range, run {run}"))
    for scope, got in ops.items():
        out.print(_table([{"operator": o["operator"], "kernels": o["kernels"], "kernel us": o["kernel_ns"] / 1e3,
                           "share %": o["share_pct"], "top kernel": o["top_kernel"]} for o in got],
                         f"operator shares under {scope}"))


def main():
    cli()


if __name__ == "__main__":
    main()
