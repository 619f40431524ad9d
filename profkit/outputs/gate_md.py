"""`profkit gate` as text: a markdown page for a pull-request comment, and the terminal lines."""

from __future__ import annotations

from profkit.analyses.gate import MAX_CALLS, Decision, GateResult

ICON = {"pass": "✅", "improvement": "🚀", "regression": "❌", "undecided": "❔"}


def band_text(d: Decision) -> str:
    if d.slowdown != d.slowdown:  # NaN: no time to compare
        return "-"
    return f"{d.change_pct:+.1f} % [{100 * (d.band[0] - 1):+.1f} .. {100 * (d.band[1] - 1):+.1f}]"


def detect_text(d: Decision) -> str:
    return "-" if d.detectable_pct is None else f"could tell {d.detectable_pct:.1f} % at 95 %"


def more_text(d: Decision) -> str:
    if d.verdict != "undecided" or d.more_calls is None:
        return ""
    if d.more_calls >= MAX_CALLS:
        return "the change sits at the threshold"
    return f"about {d.more_calls:,} more calls would settle it"


def short(name: str, width: int = 60) -> str:
    """A long kernel name's head and tail (generated names differ at the end)."""
    if len(name) <= width:
        return name
    half = (width - 1) // 2
    return name[:half] + "…" + name[-(width - 1 - half) :]


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(r: GateResult) -> str:
    lines = [
        f"### profkit gate: {ICON[r.verdict]} {r.verdict}",
        "",
        f"{_cell(r.summary())}",
        "",
        (
            f"Baseline `{_cell(r.baseline)}` (run `{_cell(r.baseline_run)}`) against run"
            f"{'s' if len(r.runs) > 1 else ''} {', '.join(f'`{_cell(x)}`' for x in r.runs)}; "
            f"{'GPU' if r.by == 'gpu' else 'host'} time per call, change = run / baseline − 1 with its 95 % band."
        ),
        "",
    ]
    if r.differences:
        lines += ["**Compared despite differences** (`--allow " + ",".join(r.allowed) + "`):", ""]
        lines += [f"- {_cell(d.line())}" for d in r.differences] + [""]
    lines += [
        "| range | verdict | baseline µs | run µs | change [band] | resolution | calls | label |",
        "|---|---|---:|---:|---|---|---|---|",
    ]
    for row in r.ranges:
        d = row.decision
        label = row.label_baseline or "-"
        if row.label_run != row.label_baseline:
            label = f"{row.label_baseline or '-'} → {row.label_run or '-'}"
        more = more_text(d)
        lines.append(
            f"| `{_cell(row.path)}` | {ICON[d.verdict]} {d.verdict}{': ' + more if more else ''} | "
            f"{row.baseline_us:,.2f} | {row.run_us:,.2f} | {band_text(d)} | {detect_text(d)} | "
            f"{d.n_baseline} / {d.n_run} | {_cell(label)} |"
        )
    for row in r.ranges:
        if not row.kernels:
            continue
        lines += [
            "",
            (f"<details><summary>kernels of <code>{_cell(row.path)}</code> ({row.decision.verdict})</summary>"),
            "",
            "| kernel | verdict | baseline µs | run µs | change [band] | label |",
            "|---|---|---:|---:|---|---|",
        ]
        for k in row.kernels:
            verdict = k.decision.verdict if k.decision else k.note
            change = band_text(k.decision) if k.decision else "-"
            label = (
                f"**{k.label_baseline} → {k.label_run}**"
                if k.label_changed
                else (k.label_run or k.label_baseline or "-")
            )
            lines.append(
                f"| `{_cell(short(k.kernel))}` | {_cell(verdict)} | "
                f"{'-' if k.baseline_us is None else f'{k.baseline_us:,.2f}'} | "
                f"{'-' if k.run_us is None else f'{k.run_us:,.2f}'} | {change} | {_cell(label)} |"
            )
        lines += ["", "</details>"]
    if r.notes or r.rerun:
        lines += [""] + [f"- {_cell(n)}" for n in r.rerun + r.notes]
    lines += [
        "",
        "<sub>Method: docs/gate.md (profkit). Exit 0 pass or improvement, 1 regression, 3 undecided.</sub>",
        "",
    ]
    return "\n".join(lines)


def text_lines(r: GateResult) -> list[str]:
    """The terminal report: one line a range, kernel lines under the worst, then notes."""
    out = []
    for diff in r.differences:
        out.append(f"allowed difference: {diff.line()}")
    for row in r.ranges:
        d = row.decision
        more = more_text(d)
        out.append(
            f"{d.verdict:<11} {row.path}: {row.baseline_us:,.2f} -> {row.run_us:,.2f} us, {band_text(d)}, "
            f"{detect_text(d)} ({d.n_baseline}/{d.n_run} calls){': ' + more if more else ''}"
        )
        for k in row.kernels:
            what = k.decision.verdict if k.decision else k.note
            label = f"; label {k.label_baseline} -> {k.label_run}" if k.label_changed else ""
            change = f", {band_text(k.decision)}" if k.decision else ""
            out.append(
                f"    {what}: {short(k.kernel)}: "
                f"{'-' if k.baseline_us is None else f'{k.baseline_us:,.2f}'} -> "
                f"{'-' if k.run_us is None else f'{k.run_us:,.2f}'} us{change}{label}"
            )
    out += r.rerun + r.notes
    out.append(r.summary())
    return out
