"""Nsight Compute raw CSV (`ncu --import R.ncu-rep --csv --page raw`).

Row 1 holds names, row 2 units (Mbyte, ms, Tbyte/s, %...), then one row per launch with
thousands separators and 'n/a'. NVTX state sits in two columns, e.g.
    1271  "<default domain>:known:none:..."  "<default domain>:gemm:none:..."
    "0:profkit:gemm_window:none:none:RGB:0xff:REGISTERED:gemm_window"
Yields the same rows as the .ncu-rep path for the same report.
"""
from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from profkit.errors import BadInput
from profkit.names import short_name
from profkit.rows import Parsed, count, ncu_kernel_row
from profkit.units import normalise, parse_number

FORMAT = "ncu-csv"
SUFFIXES = ('.csv',)  # file name endings it reads (lower case)
ROLE = "counters"  # timeline | counters
SOURCE = "ncu"  # the tool whose launches it yields (launch.source)
PREFERENCE = 20  # among parsers of one role, lower is taken first (analyse: one file per role)
SNIFF_ORDER = 90  # lower is asked first: the most specific recognisers first
DESCRIPTION = "Nsight Compute CSV (ncu --csv --page raw)"
_ID_COLS = ("ID", "Kernel Name")
_PP_PREFIX = "thread Domain:Push/Pop_Range"
_SE_PREFIX = "Id:Domain:Start/Stop_Range"
_QUOTED = re.compile(r'"([^"]*)"')
_NON_METRIC = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
               "Block Size", "Grid Size", "Device", "CC"}


def sniff(path: Path, head: bytes) -> bool:
    first = head.split(b"\n", 1)[0]
    return path.suffix.lower() == ".csv" or first.startswith(b'"ID","Process ID"')


def _nvtx(pp_cell: str, se_cell: str) -> tuple[str | None, str | None]:
    se = []
    for entry in _QUOTED.findall(se_cell or ""):
        parts = entry.split(":")
        if len(parts) >= 9:
            se.append(":".join(parts[2:-6]))
    pp_default, pp_other = [], []
    for entry in _QUOTED.findall(pp_cell or ""):
        parts = entry.split(":")
        if len(parts) >= 8:
            (pp_default if parts[0] == "<default domain>" else pp_other).append(":".join(parts[1:-6]))
    names = se + pp_default + pp_other
    return (names[-1], "/".join(names)) if names else (None, None)


def parse(path: Path) -> Parsed:
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark (a spreadsheet saved it) is fine
    except UnicodeDecodeError as e:
        raise BadInput(path, f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as e:  # e.g. a field over the csv module's limit (131072 characters)
        raise BadInput(path, f"malformed CSV ({e})") from None
    if not rows or not any(rows[0]):
        raise BadInput(path, "empty CSV")
    header = rows[0]
    if "Metric Name" in header or "Section Name" in header or "Rule Name" in header:
        raise BadInput(path, "an ncu CSV of another page: export with --page raw")
    if header[:1] != ["ID"] or "Kernel Name" not in header:
        raise BadInput(path, "not an ncu raw CSV (first column is not 'ID')")
    if len(rows) < 2 or len(rows[1]) != len(header):
        raise BadInput(path, "no units row: expected ncu --page raw output (row 2 holds units)")
    units = rows[1]
    idx = {name: i for i, name in enumerate(header)}
    pp_i = next((i for i, h in enumerate(header) if h.startswith(_PP_PREFIX)), None)
    se_i = next((i for i, h in enumerate(header) if h.startswith(_SE_PREFIX)), None)
    metric_cols = [i for i, h in enumerate(header) if h not in _NON_METRIC and i not in (pp_i, se_i)]
    kernels, counters = [], []
    facts: dict = {}
    for seq, row in enumerate(r for r in rows[2:] if any(r)):
        if len(row) != len(header):
            raise BadInput(path, f"row {seq + 3} has {len(row)} cells, header has {len(header)}: truncated?")
        values = {}
        for i in metric_cols:
            v = parse_number(row[i])
            if v is not None:
                values[header[i]] = normalise(v, units[i])
        inner, path_ = _nvtx(row[pp_i] if pp_i is not None else "", row[se_i] if se_i is not None else "")
        name = row[idx["Kernel Name"]]
        kernels.append(ncu_kernel_row(seq, name, short_name(name), inner, path_, values))
        counters.extend((seq, k, u, v) for k, (v, u) in values.items())
        if not facts and "device__attribute_display_name" in idx:
            sms = values.get("device__attribute_multiprocessor_count")
            facts = {"gpu_name": row[idx["device__attribute_display_name"]] or None, "sm_count": sms and count(sms[0])}
    if not kernels:
        raise BadInput(path, "the CSV holds no profiled kernel")
    return Parsed(str(path), FORMAT, SOURCE, kernels, [], counters, {k: v for k, v in facts.items() if v})
