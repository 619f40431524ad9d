"""The advise page: where the time goes (GPU busy and idle per range), the ranked list of what
to fix first, and the roofline of the top items, as one self-contained HTML file. The numbers
are profkit.analyses.advise's (and the roofline analysis's); this module only lays them out."""

from __future__ import annotations

from profkit.analyses.advise import Advice
from profkit.analyses.roofline import Roofline, collect
from profkit.core.errors import BadArgument
from profkit.outputs.html import figure_html, text, write_page
from profkit.outputs.roofline_plot import figure as roofline_figure
from profkit.store.store import Store

MAX_BARS = 25


def time_figure(store: Store, a: Advice):
    """Horizontal stacked bars: GPU busy and idle of each range (all its instances)."""
    import plotly.graph_objects as go

    from profkit.analyses import timeline as tl

    rows = [r for r in tl.ranges(store, a.run, a.scope) if r["window_ns"]]
    rows = sorted(rows, key=lambda r: -r["window_ns"])[:MAX_BARS][::-1]
    fig = go.Figure()
    names = [text(r["path"]) for r in rows]
    fig.add_bar(
        y=names,
        x=[r["busy_ns"] / 1e3 for r in rows],
        orientation="h",
        name="GPU busy",
        marker_color="#4C78A8",
        hovertemplate="%{y}<br>busy %{x:,.1f} us<extra></extra>",
    )
    fig.add_bar(
        y=names,
        x=[r["idle_ns"] / 1e3 for r in rows],
        orientation="h",
        name="GPU idle (launch gaps, waits)",
        marker_color="#BAB0AC",
        hovertemplate="%{y}<br>idle %{x:,.1f} us<extra></extra>",
    )
    fig.update_layout(
        barmode="stack",
        template="plotly_white",
        height=160 + 26 * len(rows),
        title=f"Where the time goes: GPU busy and idle per NVTX range (largest {len(rows)})",
        xaxis_title="microseconds, all instances",
        legend_orientation="h",
        margin=dict(l=20),
        meta={"bars": len(rows)},
    )
    return fig


def top_roofline(store: Store, a: Advice, top: int, peaks) -> tuple[object | None, str]:
    """The roofline (one point per range) of the top items that have counters."""
    paths = [i.nvtx_path for i in a.items[:top] if i.kind == "range" and i.nvtx_path]
    try:
        r = collect(store, a.run, by="range", peaks=peaks)
    except BadArgument as e:
        return None, str(e)
    pts = [p for p in r.points if p.path in paths]
    if not pts:
        return None, "none of the top items has Nsight Compute counters"
    return roofline_figure(Roofline(pts, r.ceilings, [], r.notes, f"{a.run}: top items", r.levels, r.primary)), ""


def _us(ns) -> str:
    return "" if ns is None else f"{ns / 1e3:,.1f}"


def write(store: Store, a: Advice, path, top: int = 10, peaks=None):
    parts = [f"<h1>What to fix first: {text(a.run)}{' / ' + text(a.scope) if a.scope else ''}</h1>"]
    summary = f"GPU time {_us(a.gpu_ns)} us"
    if a.wall_ns:
        summary += f", wall {_us(a.wall_ns)} us, GPU idle {100 * (a.idle_ns or 0) / a.wall_ns:.0f} %"
    parts.append(f"<p>{text(summary)}. Method: docs/advise.md.</p>")
    for n in a.notes:
        parts.append(f"<p><i>{text(n)}</i></p>")
    first = True
    if a.wall_ns:
        parts.append(figure_html(time_figure(store, a), first))
        first = False
    head = ("rank", "item", "label", "share of GPU time", "recoverable us", "predicted speed-up", "next step", "how")
    rows = []
    for i in a.items[:top]:
        sp = i.predicted_speedup
        cells = (
            str(i.rank),
            f"{i.kind}: {i.nvtx_path or '(no range)'} [{i.kernel_name}]",
            i.label or "",
            f"{100 * i.share_gpu:.1f} %",
            _us(i.recoverable_ns),
            "" if sp is None else f"{sp:.2f}x",
            i.action,
            i.how + (f" (ncu's own estimate: {i.ncu_speedup_pct:.0f} %)" if i.ncu_speedup_pct else ""),
        )
        rows.append("<tr>" + "".join(f"<td>{text(c)}</td>" for c in cells) + "</tr>")
    parts.append(
        '<h2>Ranked</h2><table id="advice" border="1" cellpadding="4" style="border-collapse: collapse">'
        "<tr>" + "".join(f"<th>{text(h)}</th>" for h in head) + "</tr>" + "".join(rows) + "</table>"
    )
    fig, why = top_roofline(store, a, top, peaks)
    parts.append("<h2>Roofline of the top items</h2>")
    if fig is not None:
        parts.append(figure_html(fig, first))
    else:
        parts.append(f"<p>{text(why)}</p>")
    return write_page(path, f"profkit advise: {a.run}", "".join(parts))
