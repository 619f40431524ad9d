"""Nsight Compute details-page CSV: `ncu --csv --page details` (ncu's default page), which is
also what `ncu --csv --metrics A,B,...` prints; often with the program's output and ncu's
==PROF== lines in front (stdout redirected to a file).

One row per metric of each launch, long format:
    "ID",...,"Kernel Name",...,"Block Size","Grid Size","Device","CC","Section Name",
    "Metric Name","Metric Unit","Metric Value"[,"Rule Name","Rule Type","Rule Description",
    "Estimated Speedup Type","Estimated Speedup"]
with NVTX columns after "Host Name" when captured with --nvtx, and "Body Item Label" with
--print-details all. Units are display units chosen per row (Mbyte on one row, byte on the
next; `--print-units base` prints base units): each row is normalised on its own.

Metric names are raw ncu names in the "Command line profiler metrics" section (`--metrics`),
and display names in the others ("Duration", "DRAM Throughput"). A display name is stored as
"<Section>: <Name>"; where it means exactly one metric profkit reads (profkit.core.metrics.
DETAILS_NAMES) the value is stored under that metric's name too. Rows with a rule name are
ncu's guided-analysis results (ncu 2023.1+), stored as rules.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from profkit.core.errors import BadInput
from profkit.core.metrics import details_metric
from profkit.core.names import short_name
from profkit.core.rows import Parsed, count, ncu_kernel_row
from profkit.core.units import impossible, normalise, parse_number

from . import _ncu_csv

FORMAT = "ncu-csv-details"
SUFFIXES = (".csv",)  # file name endings it reads (lower case)
ROLE = "counters"  # timeline | counters
SOURCE = "ncu"  # the tool whose launches it yields (launch.source)
PREFERENCE = 30  # among parsers of one role, lower is taken first: the raw page holds every metric
SNIFF_ORDER = 85  # before the raw page's parser, which takes every other .csv
DESCRIPTION = "Nsight Compute details-page CSV (ncu --csv [--page details | --metrics ...])"
_NEEDED = ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value")
_RAW_NAME = re.compile(r"^[a-z0-9]+__[A-Za-z0-9_.:]+$")  # dram__bytes.sum, not "DRAM Throughput"
_SEVERITY = {"INF", "OPT", "WRN", "ERR"}


def sniff(path: Path, head: bytes) -> bool:
    # stdout kept under other names too (out.txt, ncu.log): look past the program's output there
    text_like = path.suffix.lower() in (".csv", ".txt", ".log", ".out") or b'"Process ID"' in head
    line = _ncu_csv.header_line(path, head) if text_like else None
    return line is not None and b'"Metric Name"' in line


def _speedup(cell: str | None) -> float | None:
    v = parse_number(cell)
    return v if v is not None and 0 <= v <= 100 else None


def parse(path: Path) -> Parsed:
    header, rows, skipped = _ncu_csv.read(path)
    missing = [c for c in _NEEDED if c not in header]
    if missing:
        raise BadInput(path, f"an ncu CSV without {', '.join(repr(c) for c in missing)}: not the details page")
    idx = {name: i for i, name in enumerate(header)}
    pp_i, se_i = _ncu_csv.nvtx_columns(header)
    sec_i, body_i = idx.get("Section Name"), idx.get("Body Item Label")
    rule_i = idx.get("Rule Name")
    order: list[str] = []
    launch: dict[str, dict] = {}
    for n, row in enumerate(rows, start=skipped + 2):
        if not any(row):
            continue
        if len(row) < idx["Metric Value"] + 1 or len(row) > len(header):
            raise BadInput(path, f"line {n} has {len(row)} cells, header has {len(header)}: truncated?")
        row = row + [""] * (len(header) - len(row))  # ncu leaves empty rule columns off metric rows
        kid = row[idx["ID"]]
        k = launch.get(kid)
        if k is None:
            order.append(kid)
            k = launch[kid] = {
                "row": row,
                "raw": {},
                "shown": {},
                "mapped": {},
                "rules": [],
                "metric_rows": 0,
                "keys": set(),
            }
        elif row[idx["Kernel Name"]] != k["row"][idx["Kernel Name"]]:
            raise BadInput(path, f"line {n}: launch ID {kid} names two kernels: not one ncu export")
        section = row[sec_i] if sec_i is not None else ""
        if rule_i is not None and row[rule_i]:
            k["rules"].append(_rule(row, idx, section))
        name = row[idx["Metric Name"]]
        if not name:
            continue
        k["metric_rows"] += 1
        k["keys"].add((section, row[body_i] if body_i is not None else "", name))
        v = parse_number(row[idx["Metric Value"]])
        if v is None:  # n/a, or a text value (cache configuration, scheduling policy)
            continue
        value = normalise(v, row[idx["Metric Unit"]])
        why = impossible(*value)
        if why:
            raise BadInput(
                path,
                f"line {n}: launch ID {kid}: {name} {why} "
                f"({row[idx['Metric Value']][:40]} {row[idx['Metric Unit']][:20]})",
            )
        if _RAW_NAME.match(name):
            k["raw"].setdefault(name, value)
            continue
        body = row[body_i] if body_i is not None else ""
        k["shown"].setdefault(": ".join(x for x in (section, body, name) if x), value)
        metric = None if body else details_metric(name, value[1])
        if metric:
            k["mapped"].setdefault(metric, value)
    # every launch of one export has as many metric rows (each section prints its rows for each
    # launch): a last launch with fewer was cut inside its rows
    if len(order) > 1:
        others = min(launch[kid]["metric_rows"] for kid in order[:-1])
        last = launch[order[-1]]["metric_rows"]
        if last < others:
            raise BadInput(
                path,
                f"truncated: the last launch (ID {order[-1]}) has {last} metric rows, every other at least {others}",
            )
    # ...and a launch in the middle that lacks a row every other launch has lost it
    if len(order) > 2:
        have = Counter(key for kid in order for key in launch[kid]["keys"])
        for kid in order:
            lost = [key for key, n in have.items() if n == len(order) - 1 and key not in launch[kid]["keys"]]
            if lost:
                section, body, name = min(lost)
                raise BadInput(
                    path,
                    f"launch ID {kid} lacks the metric row {name!r} ({section or 'no section'}) that "
                    f"every other launch has: rows lost ({len(lost)} of them)",
                )
    kernels: list[tuple] = []
    counters: list[tuple] = []
    rules: list[tuple] = []
    facts: dict = {"preamble_lines": skipped}
    for seq, kid in enumerate(order):
        k = launch[kid]
        row = k["row"]
        values = {**k["shown"], **k["mapped"], **k["raw"]}  # a raw metric row wins over a display name
        cc = _ncu_csv.compute_capability(row[idx["CC"]]) if "CC" in idx else None
        if cc is not None:  # the device attribute, printed in its own column on this page
            values.setdefault("device__attribute_compute_capability_major", (float(cc[0]), ""))
            values.setdefault("device__attribute_compute_capability_minor", (float(cc[1]), ""))
        inner, path_ = _ncu_csv.nvtx(row[pp_i] if pp_i is not None else "", row[se_i] if se_i is not None else "")
        name = row[idx["Kernel Name"]]
        kernels.append(ncu_kernel_row(seq, name, short_name(name), inner, path_, values, _ncu_csv.given(row, idx)))
        counters.extend((seq, m, u, v) for m, (v, u) in values.items())
        rules.extend((seq,) + r for r in k["rules"])
        if cc is not None:
            facts.setdefault("compute_capability", f"{cc[0]}.{cc[1]}")
        sms = values.get("device__attribute_multiprocessor_count")
        if sms:
            facts.setdefault("sm_count", count(sms[0]))
    if not kernels:
        raise BadInput(path, "the CSV holds no profiled kernel")
    # which metrics came from display names (the page had no row of their own)
    facts["from_display_names"] = sorted({m for k in launch.values() for m in k["mapped"] if m not in k["raw"]})
    return Parsed(
        str(path),
        FORMAT,
        SOURCE,
        kernels,
        [],
        counters,
        {k: v for k, v in facts.items() if v},
        rules,
        caveat=_ncu_csv.CAVEAT,
    )


def _rule(row: list[str], idx: dict[str, int], section: str) -> tuple:
    """(section, rule, severity, message, speedup_type, estimated_speedup_pct) of a rule row."""

    def cell(col):
        return row[idx[col]].strip() if col in idx else ""

    severity = cell("Rule Type")
    kind = cell("Estimated Speedup Type").lower()
    return (
        section or None,
        cell("Rule Name"),
        severity if severity in _SEVERITY else (severity or None),
        cell("Rule Description"),
        kind if kind in ("local", "global") else None,
        _speedup(cell("Estimated Speedup")),
    )
