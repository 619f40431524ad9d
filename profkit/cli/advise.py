"""profkit advise: what to fix first in a run, and how each figure was computed."""

from __future__ import annotations

import json

import click

from profkit.cli.plumbing import PATH, db_option, handled, out, phase_option, progress_bar, resolve_run
from profkit.outputs.tables import plain
from profkit.outputs.tables import table as _table
from profkit.store.store import Store


@click.command()
@db_option
@click.option("--run", default=None, help="Run (default: the newest).")
@click.option(
    "--range",
    "scope",
    default=None,
    metavar="PATH",
    help="Only the ranges under this NVTX path (e.g. one training step).",
)
@click.option(
    "--all",
    "include_unranged",
    is_flag=True,
    help="Also the launches outside any NVTX range (left out by default when the run has ranges).",
)
@click.option("--top", default=10, type=click.IntRange(0, 2**31 - 1), show_default=True, help="Items shown.")
@click.option(
    "--peaks",
    "peaks_file",
    default=None,
    type=PATH,
    help="Measured peaks (a peaks.json, e.g. profiles/peaks.json): floors at the measured copy bandwidth.",
)
@phase_option
@click.option("--json", "as_json", is_flag=True, help="Print the whole advice as JSON.")
@click.option("--html", default=None, type=PATH, help="Also write a one-page HTML report here.")
@handled
def advise(db, run, scope, include_unranged, top, peaks_file, phase, as_json, html):
    """What to fix first: ranges and kernels ranked by the GPU time they could give back, each
    with its label, the next step and how the figure was computed (stored in the `advice` view).

    \b
    Example:
      profkit advise --run e2e-decode --range e2e/decode/eager --html advise.html
    """
    from profkit.analyses import advise as adv
    from profkit.model import peaks
    from profkit.outputs.html import check_output

    if html:
        check_output(html)  # before the advice is stored: --html profkit.db names the database itself
    measured = peaks.read(peaks_file) if peaks_file else None
    run = resolve_run(db, run)
    with Store(db, create=False) as s:
        with progress_bar() as bar:
            task = bar.add_task(f"advise {run}", total=len(adv.STEPS))
            seen: list[str] = []

            def step(what: str) -> None:
                if seen:
                    bar.advance(task)
                seen.append(what)
                bar.update(task, description=f"advise {run}: {what}")

            a = adv.advise(s, run, scope, measured, include_unranged, phase=phase, step=step)
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
        rows.append(
            {
                "#": i.rank,
                "item": f"{i.nvtx_path or '(no range)'} [{i.kernel_name}]",
                "label": i.label,
                "GPU %": 100 * i.share_gpu,
                "recoverable us": i.recoverable_ns / 1e3,
                "speed-up": "" if sp is None else f"{sp:.2f}x",
                "next step": i.action,
            }
        )
    out.print(_table(rows, title or f"what to fix first, run {a.run}" + (f", under {a.scope}" if a.scope else "")))
    for i in a.items[: min(top, 3)]:
        out.print(f"  {i.rank}. how: {plain(i.how)}")
    out.print(f"  device gap between back-to-back kernels: {a.device_gap_ns / 1e3:.2f} us ({plain(a.device_gap_how)})")
    for n in a.notes:
        out.print(f"  note: {plain(n)}")
