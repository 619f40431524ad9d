"""profkit analyse: the main job over a folder of runs (load, label, advise, claims, rooflines)."""

from __future__ import annotations

from pathlib import Path

import click

from profkit.cli.plumbing import PATH, db_option, file_progress, handled, out
from profkit.outputs.tables import plain
from profkit.outputs.tables import table as _table
from profkit.store.store import Store


@click.command()
@click.argument("profiles", default="profiles", type=PATH)
@db_option
@click.option("--top", default=10, type=click.IntRange(0, 2**31 - 1), show_default=True, help="Kernels shown per run.")
@click.option(
    "--html",
    "html",
    default="roofline.html",
    show_default=True,
    type=PATH,
    help="HTML file for the rooflines of all runs (one figure per run).",
)
@click.option(
    "--peaks",
    "peaks_file",
    default=None,
    type=PATH,
    help="Measured peaks to draw dashed (default: PROFILES/peaks.json when present).",
)
@click.option(
    "--verbose",
    is_flag=True,
    help="Every table: files as they land, top kernels, labels per range, "
    "busy/idle per call, ranks, the top three to fix per run, every before/after pair.",
)
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

    from profkit.analyses import overview, phases
    from profkit.model import peaks
    from profkit.outputs.html import check_output
    from profkit.outputs.roofline_plot import write_runs
    from profkit.store.profiles import load_profiles

    check_output(html)  # before anything is loaded: --html profkit.db names the database itself
    t0 = time.monotonic()
    peaks_file = peaks_file or (Path(profiles) / "peaks.json" if (Path(profiles) / "peaks.json").is_file() else None)
    measured = peaks.read(peaks_file) if peaks_file else None
    summaries = []

    def landed(r):  # --verbose: each file's line as it lands
        state = "already loaded" if r.skipped else f"{r.kernels} kernels, {r.ranges} ranges, {r.counters} counters"
        out.print(f"{plain(r.path)} -> run {plain(r.run)}{'' if r.rank is None else ' rank ' + str(r.rank)}: {state}")

    def run_landed(run, loaded):  # one line per run, labelled and advised as soon as it is in
        if any(not r.skipped for r in loaded):  # stored first: advise reads them instead of finding them again
            s.replace_phases(run, phases.rows(phases.detect(s, run)))
        row = overview.run_summary(s, run, measured)
        summaries.append(row)
        if not verbose:
            for line in _run_lines(row):  # a run name alone on its line wraps rather than lose its end
                alone = line == plain(row["run"])
                out.print(line, no_wrap=not alone, overflow="fold" if alone else "ellipsis", crop=not alone)

    if not verbose:
        out.print(f"{'run (then what to fix first)':<{RUN_WIDTH}} launches   counters  labels (% of GPU time)")
    # one connection for the whole job; each run's counters are read once for classify, advise,
    # the claims and the rooflines (Store.keep_counters)
    with Store(db) as s, s.keep_counters():
        s.conn.execute("PRAGMA cache_size = -65536")  # 64 MB of pages: the job rereads what it wrote (~80 MB here)
        with file_progress() as on_progress, s.indexes_after():
            loaded = load_profiles(
                profiles, db, on_file=landed if verbose else None, on_progress=on_progress, on_run=run_landed, store=s
            )
        if verbose:
            _analyse_verbose(s, top, summaries)
        claims = overview.claims(s)
        good = [c for c in claims if c["verdict"] == "supported"]
        # the page opens on the best supported claim, drawn as its before -> after arrow
        drawn = write_runs(s, html, measured, story=(good[0]["run"], good[0]["from"], good[0]["to"]) if good else None)

    def claim(c):
        row = {
            "range": c["range"],
            "change": f"{c['from']} -> {c['to']}",
            "us/call": f"{c['before_us']:,.1f} -> {c['after_us']:,.1f}",
            "speed-up": f"{c['speedup']:.2f}x [{c['speedup_low']:.2f}-{c['speedup_high']:.2f}]",
        }
        if verbose:
            row = {"run": c["run"], **row, "label": f"{c['label_before']} -> {c['label_after']}"}
        return {**row, "verdict": c["verdict"]}

    out.print(
        _table(
            [claim(c) for c in (claims if verbose else good[:6])],
            f"before/after claims (profkit compare; {len(good)} supported of {len(claims)} "
            f"eager -> other variant pairs{'' if verbose else ', best 6 shown'})",
        )
    )
    new_files = sum(1 for r in loaded if not r.skipped)
    out.print(
        f"{len(summaries)} runs ({new_files} files loaded now, {len(loaded) - new_files} already in {plain(db)}) "
        f"in {time.monotonic() - t0:.0f} s; rooflines of {sum(1 for w in drawn if w['points'])} runs with counters: "
        f"{plain(html)} (open it in a browser)"
    )
    out.print(
        "next: profkit advise --run RUN (what to fix first, how it was computed), profkit classify --run RUN, "
        "profkit compare RUN:eager RUN:triton; --verbose for every table"
    )


RUN_WIDTH = 42  # the longest shipped run name; a longer one gets a line of its own


def _run_lines(row: dict) -> list[str]:
    """A run's line (name, launches, counters, labels), then its first fix on a line of its own
    so that a terminal's width cuts neither."""
    labels = ", ".join(f"{k} {v:.0f}%" for k, v in list(row["labels"].items())[:2])
    first = row["advice"][0] if row["advice"] else None
    fix = (
        f"{first.action.split(':')[0]} ({first.recoverable_ns / 1e3:,.0f} us) [{first.nvtx_path or first.kernel_name}]"
        if first and first.recoverable_ns > 0
        else "-"
    )
    # the run name whole (it is what `advise --run` takes); one longer than its column goes on a
    # line of its own, its figures under the columns on the next
    name = plain(row["run"])
    figures = f"{row['launches']:>8,} {row['counters']:>10,}  {plain(labels)}"
    head = [f"{name:<{RUN_WIDTH}} {figures}"] if len(name) <= RUN_WIDTH else [name, f"{'':<{RUN_WIDTH}} {figures}"]
    return [*head, f"    fix first: {plain(fix)}"]


def _analyse_verbose(s, top: int, summaries: list[dict]) -> None:
    from profkit.analyses import classify as cl
    from profkit.analyses import ranks as rk
    from profkit.analyses import summary
    from profkit.analyses import timeline as tl

    out.print(_table(summary.runs(s), "runs"))
    advice = {r["run"]: r["advice"] for r in summaries}
    for run in s.runs():
        out.print(_table(summary.kernels(s, run, top), f"top kernels of run {run}"))
        out.print(
            _table(
                cl.stored_by_range(s, run),
                f"bottleneck labels of run {run} (profkit classify; rules in docs/classification.md)",
            )
        )
        per_call = tl.calls(tl.ranges(s, run))
        if per_call:
            out.print(
                _table(
                    [
                        {
                            "range": r["path"],
                            "calls": r["instances"],
                            "kernels/call": r["kernels_per_instance"],
                            "launch calls/call": r["launch_calls_per_instance"],
                            "window us/call": r["window_us_per_instance"],
                            "busy us/call": r["busy_us_per_instance"],
                            "idle %": r["idle_pct"],
                        }
                        for r in per_call
                    ],
                    f"GPU busy and idle per call of run {run} (idle: launch overhead; profkit timeline)",
                )
            )
        if rk.multi_rank(s, run):
            rr = rk.analyse(s, run)
            out.print(
                _table(
                    [
                        {
                            "rank": p["rank"],
                            "steps": p["steps"],
                            "compute_ms": p["compute_ns"] / 1e6,
                            "nccl_ms": p["comm_ns"] / 1e6,
                            "hidden_%": p["hidden_comm_pct"],
                            "idle_ms": p["idle_ns"] / 1e6,
                            "waited_ms": p["wait_ns"] / 1e6,
                            "slowest_in_steps": p["slowest_in_steps"],
                        }
                        for p in rr.per_rank
                    ],
                    f"ranks of run {run}: slowest rank {rr.slowest_rank} (profkit ranks)",
                    floats="{:,.3f}",
                )
            )
        out.print(
            _table(
                [
                    {
                        "#": i.rank,
                        "item": f"{i.nvtx_path or '(no range)'} [{i.kernel_name}]",
                        "recoverable us": i.recoverable_ns / 1e3,
                        "next step": i.action,
                    }
                    for i in advice.get(run, [])[:3]
                ],
                f"what to fix first in run {run} (profkit advise --run {run})",
            )
        )
