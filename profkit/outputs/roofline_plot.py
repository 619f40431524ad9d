"""The roofline as a plotly figure (log-log): ceilings as lines, points coloured by label,
before/after arrows; and the main job's page of every run's roofline. The numbers are the
roofline analysis's (profkit.analyses.roofline); this module only draws them."""

from __future__ import annotations

import math
from typing import Any

from profkit.analyses.roofline import Ceiling, Point, Roofline, collect, step_names
from profkit.core.errors import BadArgument
from profkit.model.perf import LEVEL_LABEL, PRECISIONS
from profkit.outputs.html import figure_html, text, write_figure, write_page
from profkit.store.store import Store, opened

LABEL_COLOURS = {
    "dram": "#1f77b4",
    "tensor_core": "#d62728",
    "compute": "#ff7f0e",
    "occupancy": "#9467bd",
    "launch_overhead": "#8c564b",
    "latency": "#2ca02c",
    "communication": "#17becf",
    "unknown": "#7f7f7f",
    None: "#7f7f7f",
}
LEVEL_SYMBOLS = {"dram": "circle", "l2": "square", "l1": "diamond"}
CEILING_COLOURS = {
    "dram": "#000000",
    "l2": "#555555",
    "l1": "#999999",
    "bf16_tensor": "#b2182b",
    "fp16_tensor": "#e7298a",
    "fp8_tensor": "#6a3d9a",
    "tf32_tensor": "#e6550d",
    "fp32": "#d95f02",
    "fp64": "#1b9e77",
}


def _fmt(v: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {prefix}{unit}"
    return f"{v:.3g} {unit}"


def _hover(p: Point, level: str, ceilings: dict[str, Ceiling]) -> str:
    ai = p.intensity(level)
    bw = p.bytes[level] / (p.time_ns * 1e-9)
    lines = [
        f"<b>{text(p.kernel)}</b>" + (f" ({p.side})" if p.side else ""),
        f"NVTX: {text(p.path or '(none)')}",
        f"label: {p.label}"
        + (
            ""
            if len(p.labels) == 1
            else " ("
            + ", ".join(f"{k} {100 * v:.0f} %" for k, v in sorted(p.labels.items(), key=lambda x: -x[1]))
            + " of time)"
        ),
        f"time: {p.time_ns / 1e3:,.1f} µs per call ({p.launches} launches, {p.calls} calls)",
        f"{LEVEL_LABEL[level]}: AI {ai:.3g} FLOP/B, {_fmt(bw, 'B/s')}",
        f"achieved: {_fmt(p.flop_rate, 'FLOP/s')} ({p.precision and PRECISIONS[p.precision][0]})",
    ]
    c = ceilings.get(level)
    if c:
        lines.append(f"{100 * bw / c.value:.0f} % of {LEVEL_LABEL[level]} peak bandwidth")
    if p.roofline_pct is not None:
        lines.append(f"<b>{p.roofline_pct:.0f} % of roofline</b> (bound: {_bound_name(p.binding)}, at its own clocks)")
    return "<br>".join(lines)


def _log10(v: float | None) -> float:
    """log10 of an arrow end's intensity (roofline.collect keeps arrows whose points have FLOPs
    and bytes at the primary level)."""
    if v is None:
        raise ValueError("internal: an arrow's point has no intensity")
    return math.log10(v)


def _bound_name(key: str | None) -> str:
    if key in PRECISIONS:
        return PRECISIONS[key][0]
    return LEVEL_LABEL.get(key, key) if key is not None else str(key)


def drawn(r: Roofline):
    """(point, level) pairs that appear on the log-log axes.

    With kernel points beside range points (compare by kernel), a range is one star at the
    arrows' level; otherwise each point appears at every level it has bytes for. Points with
    no FLOPs or no bytes at a level have no place on log axes.
    """
    mixed = {p.kind for p in r.points} == {"kernel", "range"}
    for p in r.points:
        for lev in [r.primary] if mixed and p.kind == "range" else r.levels:
            if p.total_flops and p.bytes.get(lev):
                yield p, lev


def figure(r: Roofline):
    """A plotly Figure of the roofline (log-log), ceilings as lines, points coloured by label."""
    import plotly.graph_objects as go

    return go.Figure(figure_dict(r))


def figure_dict(r: Roofline) -> dict:
    """The roofline figure as plotly's plain {data, layout} (figure() validates it into a
    Figure; the main job's page serialises it as it is: figure_html)."""
    data: list[dict] = []
    annotations: list[dict] = []
    mixed = {p.kind for p in r.points} == {"kernel", "range"}
    shown = list(drawn(r))
    xs = [p.intensity(lev) for p, lev in shown]
    ys = [p.flop_rate for p, _ in shown]
    comp = [c for c in r.ceilings if c.kind == "compute"]
    mem = [c for c in r.ceilings if c.kind == "memory" and c.key in r.levels]
    ridges = [f.value / m.value for f in comp for m in mem]
    x_lo = min(xs + ridges + [1.0]) / 4
    x_hi = max(xs + ridges + [1.0]) * 4
    y_top = max([c.value for c in comp] + ys + [1.0]) * 2
    y_lo = min(ys + [m.value * x_lo for m in mem] + [y_top / 1e4]) / 2
    top = max((c.value for c in comp if not c.measured), default=y_top / 2)
    model = {c.key: c for c in r.ceilings if not c.measured}

    # ceilings: horizontal FLOP/s roofs from the DRAM ridge on, diagonal bandwidths up to the top roof
    for c in mem:
        x_end = top / c.value
        data.append(
            dict(
                x=[x_lo, x_end],
                y=[c.value * x_lo, top],
                mode="lines",
                name=f"{c.label} {_fmt(c.value, 'B/s')}",
                line=dict(color=CEILING_COLOURS[c.key], width=1.5, dash="dash" if c.measured else "solid"),
                hovertemplate=f"{c.label}: {_fmt(c.value, 'B/s')}<br>{c.source}<extra></extra>",
                meta="ceiling",
            )
        )
    slowest = min((c.value for c in mem if not c.measured), default=None)
    for c in comp:
        x0 = c.value / slowest if slowest else x_lo
        data.append(
            dict(
                x=[max(x0, x_lo), x_hi],
                y=[c.value, c.value],
                mode="lines",
                name=f"{c.label} {_fmt(c.value, 'FLOP/s')}",
                line=dict(color=CEILING_COLOURS[c.key], width=1.5, dash="dash" if c.measured else "solid"),
                hovertemplate=f"{c.label}: {_fmt(c.value, 'FLOP/s')}<br>{c.source}<extra></extra>",
                meta="ceiling",
            )
        )

    # points: one trace per (side, label); symbol per level; open markers before, filled after
    traces: dict[tuple, list] = {}
    for p, lev in shown:
        kind = "range" if mixed and p.kind == "range" else "shapes" if p.kind == "shapes" else "point"
        traces.setdefault((kind, p.side, p.label), []).append((p, lev))
    for (kind, side, label), items in traces.items():
        # points from shapes (the operator model, no counters) are diamonds: a model, not a measure
        sym = [
            ("star" if kind == "range" else "diamond" if kind == "shapes" else LEVEL_SYMBOLS[lev])
            + ("-open" if side == "before" else "")
            for _, lev in items
        ]
        name = (
            f"{label}"
            + (f" ({side})" if side else "")
            + (" range" if kind == "range" else "")
            + (" (from shapes)" if kind == "shapes" else "")
        )
        data.append(
            dict(
                x=[p.intensity(lev) for p, lev in items],
                y=[p.flop_rate for p, _ in items],
                mode="markers",
                name=name,
                marker=dict(
                    color=LABEL_COLOURS.get(label, "#7f7f7f"),
                    symbol=sym,
                    size=14 if kind == "range" else 10,
                    line=dict(width=1.5, color=LABEL_COLOURS.get(label, "#7f7f7f")),
                ),
                text=[_hover(p, lev, model) for p, lev in items],
                hovertemplate="%{text}<extra></extra>",
                meta="points",
            )
        )
    # a key for the level symbols (no points: nothing to count)
    if len(r.levels) > 1:
        for lev in r.levels:
            data.append(
                dict(
                    x=[None],
                    y=[None],
                    mode="markers",
                    name=f"{LEVEL_LABEL[lev]} intensity",
                    marker=dict(symbol=LEVEL_SYMBOLS[lev], color="#999", size=9),
                    meta="key",
                )
            )
    for t in data:
        t["type"] = "scatter"

    for a, b in r.arrows:
        annotations.append(
            dict(
                # log axes: annotation positions are log10 of the data values
                x=_log10(b.intensity(r.primary)),
                y=math.log10(b.flop_rate),
                ax=_log10(a.intensity(r.primary)),
                ay=math.log10(a.flop_rate),
                xref="x",
                yref="y",
                axref="x",
                ayref="y",
                showarrow=True,
                arrowhead=3,
                arrowsize=1.3,
                arrowwidth=1.8,
                arrowcolor="#333",
                text="",
                name=f"arrow:{a.key}",
                hovertext=(
                    f"{text(a.key)}: {a.time_ns / 1e3:,.1f} → {b.time_ns / 1e3:,.1f} µs per call "
                    f"({a.time_ns / b.time_ns:.2f}x)"
                ),
            )
        )
    if r.arrows and r.arrows[0][0].side == "":  # chain: name each step
        for p, name in zip(
            [r.arrows[0][0]] + [b for _, b in r.arrows],
            step_names([r.arrows[0][0].key or ""] + [b.key or "" for _, b in r.arrows]),  # (a chain's steps are keyed)
        ):
            annotations.append(
                dict(
                    x=_log10(p.intensity(r.primary)),
                    y=math.log10(p.flop_rate),
                    text=text(name),
                    showarrow=False,
                    yshift=14,
                    font=dict(size=11),
                )
            )

    notes = r.notes or ["all levels and ceilings from the report"]
    annotations.append(
        dict(
            xref="paper",
            yref="paper",
            x=0,
            y=-0.1,
            xanchor="left",
            yanchor="top",
            align="left",
            showarrow=False,
            font=dict(size=11, color="#555"),
            text="<br>".join(text(n) for n in notes),
        )
    )
    layout = dict(
        annotations=annotations,
        title=dict(
            text=f"{text(r.title)}<br><sup>solid: from the report's peak metrics at the median clocks; "
            f"hover a point or line for its numbers and sources</sup>",
            x=0.01,
        ),
        margin=dict(b=90 + 16 * len(notes)),
        xaxis=dict(
            type="log",
            title=dict(text="arithmetic intensity (FLOP / byte at the level)"),
            range=[math.log10(x_lo), math.log10(x_hi)],
        ),
        yaxis=dict(type="log", title=dict(text="achieved FLOP/s"), range=[math.log10(y_lo), math.log10(y_top)]),
        template=TEMPLATE,
        height=700,
        legend=dict(font=dict(size=10)),
        hovermode="closest",
        meta={"points": len(shown), "arrows": len(r.arrows), "levels": r.levels, "notes": r.notes},
    )
    return {"data": data, "layout": layout}


TEMPLATE = "plotly_white"


def build(
    db,
    run: str | None = None,
    compare: str | None = None,
    by: str = "kernel",
    chain=None,
    peaks: list[dict] | None = None,
):
    """The roofline figure of a run (or a selector RUN:COMPONENT), optionally against another.
    ``db``: a Store, a database path, or an sqlite3 connection to a database file.
    ``chain``: NVTX paths (or variant names) in order, or "auto" for capture order."""
    with opened(db) as store:
        return figure(collect(store, run, compare, by, chain, peaks))


def write_html(fig, path):
    return write_figure(fig, path)


def write_runs(
    store: Store, path="roofline.html", peaks: list[dict] | None = None, story: tuple[str, str, str] | None = None
) -> list[dict]:
    """The main job's output: one HTML file holding the roofline of every run with counters.

    The page opens on one figure: `story` (run, before variant, after variant) drawn as its
    before -> after arrow where given, else the first run; a menu shows any other run's figure
    instead. plotly.js is inlined once, with the first figure. Returns one row per run: run,
    points drawn (None: no roofline) and notes or the reason.
    """
    rows: list[dict[str, Any]] = []
    parts: list[str] = []
    runs = store.runs()
    if story and story[0] in runs:
        runs = [story[0], *(r for r in runs if r != story[0])]
    for run in runs:
        try:
            r = (
                collect(store, f"{run}:{story[1]}", compare=f"{run}:{story[2]}", peaks=peaks)
                if story and run == story[0]
                else collect(store, run, peaks=peaks)
            )
        except BadArgument as e:
            rows.append({"run": run, "points": None, "why": str(e)})
            continue
        title = f"{run}: {story[1]} -> {story[2]}" if story and run == story[0] else run
        parts.append(
            f'<section class="run{"" if not parts else " off"}" id="{text(run)}">'
            f"<h2>{text(title)}</h2>{figure_html(figure_dict(r), first=not parts)}</section>"
        )
        rows.append({"run": run, "points": sum(1 for _ in drawn(r)), "why": "; ".join(r.notes)})
    if parts:
        options = "".join(
            f'<option value="{text(x["run"])}">{text(x["run"])}</option>' for x in rows if x["points"] is not None
        )
        write_page(
            path,
            "profkit rooflines",
            f'<h1>profkit rooflines</h1><p><label>run: <select id="run">'
            f"{options}</select></label> (how points and ceilings are computed: docs/roofline.md)</p>"
            f"{''.join(parts)}{_MENU}",
        )
    return rows


# the menu shows one run's section at a time (the page's address names it: #run); the others are
# laid out off screen rather than not at all, so plotly draws every figure at its size
_MENU = """<style>section.run.off { position: absolute; left: -100000px; top: 0; visibility: hidden; }</style>
<script>
(function () {
  var menu = document.getElementById("run");
  function show(run) {
    var found = false;
    document.querySelectorAll("section.run").forEach(function (s) { found = found || s.id === run; });
    if (!found) return;
    document.querySelectorAll("section.run").forEach(function (s) { s.classList.toggle("off", s.id !== run); });
    menu.value = run;
  }
  menu.addEventListener("change", function () { history.replaceState(null, "", "#" + encodeURIComponent(menu.value)); show(menu.value); });
  if (location.hash) show(decodeURIComponent(location.hash.slice(1)));
})();
</script>"""
