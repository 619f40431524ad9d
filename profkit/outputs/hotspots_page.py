"""profkit hotspots --html: a kernel's source with a bar per line (sampled warp stalls, coloured
by reason), one self-contained HTML file (no script, no network)."""

from __future__ import annotations

import html
import os
from pathlib import Path

from profkit.analyses.hotspots import Hotspots, short_file

# one colour per stall reason (the memory waits warm, issue and pipe states cool)
COLOURS = {
    "long_scoreboard": "#d62728",
    "short_scoreboard": "#ff7f0e",
    "lg_throttle": "#e377c2",
    "mio_throttle": "#bcbd22",
    "tex_throttle": "#8c564b",
    "barrier": "#9467bd",
    "membar": "#c5b0d5",
    "wait": "#1f77b4",
    "math_pipe_throttle": "#17becf",
    "dispatch_stall": "#aec7e8",
    "branch_resolving": "#98df8a",
    "no_instructions": "#c49c94",
    "imc_miss": "#f7b6d2",
    "drain": "#7f7f7f",
    "sleeping": "#dbdb8d",
    "not_selected": "#c7c7c7",
    "selected": "#2ca02c",
    "misc": "#9edae5",
}
STYLE = """
body { font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.25em; } h2 { font-size: 1.05em; margin-top: 1.6em; }
table { border-collapse: collapse; } td, th { padding: 2px 8px; text-align: left; vertical-align: top; }
th { border-bottom: 1px solid #999; } .num { text-align: right; font-variant-numeric: tabular-nums; }
.src { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; }
.src td { padding: 0 6px; white-space: pre; }
.src tr.hot { background: #fff4e5; }
.bar { display: flex; width: 240px; height: 11px; background: #f2f2f2; }
.bar span { display: block; height: 100%; }
.legend span { display: inline-block; margin-right: 12px; }
.legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; }
.note { color: #666; }
"""


def _bar(stalls: dict[str, int], scale: int) -> str:
    parts = "".join(
        f'<span style="width:{100 * v / scale:.2f}%;background:{COLOURS.get(k, "#333")}"></span>'
        for k, v in stalls.items()
        if v
    )
    tip = ", ".join(f"{k} {v:,}" for k, v in stalls.items() if v)
    return f'<div class="bar" title="{html.escape(tip)}">{parts}</div>'


def page(h: Hotspots) -> str:
    e = html.escape
    top = h.top
    out = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>hotspots: {e(h.kernel[:80])}</title>"
        f"<style>{STYLE}</style></head><body>",
        f"<h1>{e(h.kernel)}</h1>",
        f"<p>run {e(h.run)}, {len(h.launches)} launch{'es' if len(h.launches) > 1 else ''}: "
        f"{h.samples:,} warp-state samples"
        + ("" if h.inst_executed is None else f", {h.inst_executed:,} warp instructions executed")
        + "</p>",
    ]
    if top is not None:
        out.append(f"<p><b>{e(top.reading)}</b></p>")
    out.append(
        '<p class="legend">'
        + "".join(
            f'<span><i style="background:{COLOURS.get(k, "#333")}"></i>{e(k)} {v:,}</span>' for k, v in h.stalls.items()
        )
        + "</p>"
    )
    for n in h.notes:
        out.append(f'<p class="note">{e(n)}</p>')
    out.append(
        f"<h2>Top {len(h.lines)} {'lines' if h.by == 'line' else 'instructions'} by samples</h2><table>"
        "<tr><th>where</th><th class='num'>samples</th><th class='num'>%</th><th>stalls</th>"
        "<th class='num'>instructions executed</th><th>reading</th></tr>"
    )
    scale = max((ln.samples for ln in h.lines), default=0) or 1
    for ln in h.lines:
        out.append(
            f"<tr><td>{e(ln.where)}</td><td class='num'>{ln.samples:,}</td>"
            f"<td class='num'>{100 * ln.share:.1f}</td><td>{_bar(ln.stalls, scale)}</td><td class='num'>"
            f"{'' if ln.inst_executed is None else f'{ln.inst_executed:,}'}</td><td>{e(ln.reading)}</td></tr>"
        )
    out.append("</table>")
    hot = {(ln.file, ln.line) for ln in h.lines}
    per_line = {(ln.file, ln.line): ln for ln in _all_lines(h)}
    shown = [f for f in h.files if any(k[0] == f for k in per_line)]
    for f in shown:
        scale = max((ln.samples for (ff, _), ln in per_line.items() if ff == f), default=0) or 1
        out.append(f"<h2>{e(short_file(f))}</h2><p class='note'>{e(f)}</p><table class='src'>")
        for i, text in enumerate(h.files[f], 1):
            at = per_line.get((f, i))
            cls = ' class="hot"' if (f, i) in hot else ""
            bar = _bar(at.stalls, scale) if at is not None and at.samples else ""
            nums = f"{at.samples:,}" if at is not None else ""
            out.append(
                f"<tr{cls}><td class='num'>{i}</td><td>{bar}</td><td class='num'>{nums}</td><td>{e(text)}</td></tr>"
            )
        out.append("</table>")
    if not shown:  # no embedded source: the instructions with their bars
        out.append("<h2>Instructions</h2><table class='src'>")
        rows = [i for ln in _all_lines(h) for i in ln.instructions]
        scale = max((i["samples"] for i in rows), default=0) or 1
        for i in sorted(rows, key=lambda i: i["pc"]):
            out.append(
                f"<tr><td class='num'>{i['pc']:#06x}</td><td>{_bar(i['stalls'], scale)}</td>"
                f"<td class='num'>{i['samples']:,}</td><td>{e(i['instruction'] or '')}</td></tr>"
            )
        out.append("</table>")
    out.append("</body></html>")
    return "\n".join(out)


def _all_lines(h: Hotspots):
    return h.all_lines or h.lines


def write(h: Hotspots, path: str | os.PathLike) -> Path:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(page(h), encoding="utf-8")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path
