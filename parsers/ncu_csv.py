"""Nsight Compute raw CSV (`ncu --import R.ncu-rep --csv --page raw`, or `ncu --csv --page raw`
with the program's output and ncu's ==PROF== lines in front).

Row 1 holds names, row 2 units (Mbyte, ms, Tbyte/s, %...), then one row per launch with
thousands separators and 'n/a'. NVTX state sits in two columns, e.g.
    1271  "<default domain>:known:none:..."  "<default domain>:gemm:none:..."
    "0:profkit:gemm_window:none:none:RGB:0xff:REGISTERED:gemm_window"
Yields the same rows as the .ncu-rep path for the same report. The details page and
`--metrics` output (one row per metric) are parsers/ncu_csv_details.py.
"""

from __future__ import annotations

from pathlib import Path

from profkit.core.errors import BadInput
from profkit.core.names import short_name
from profkit.core.rows import Parsed, count, ncu_kernel_row
from profkit.core.units import impossible, normalise, parse_number

from . import _ncu_csv

FORMAT = "ncu-csv"
SUFFIXES = (".csv",)  # file name endings it reads (lower case)
ROLE = "counters"  # timeline | counters
SOURCE = "ncu"  # the tool whose launches it yields (launch.source)
PREFERENCE = 20  # among parsers of one role, lower is taken first (analyse: one file per role)
SNIFF_ORDER = 90  # lower is asked first: the most specific recognisers first
DESCRIPTION = "Nsight Compute raw-page CSV (ncu --csv --page raw)"
_NON_METRIC = {
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
}


def sniff(path: Path, head: bytes) -> bool:
    # every other .csv ends here too: parse names what it is not, in one line
    return path.suffix.lower() == ".csv" or _ncu_csv.header_line(path, head) is not None


def parse(path: Path) -> Parsed:
    header, rows, skipped = _ncu_csv.read(path)
    if "Metric Name" in header or "Section Name" in header or "Rule Name" in header:
        raise BadInput(path, "an ncu CSV of the details page (one row per metric): not a raw page")
    if "Kernel Name" not in header:
        raise BadInput(
            path,
            "an Nsight Compute CSV without a 'Kernel Name' column: not a page profkit reads "
            "(export with --page raw or --page details)",
        )
    if not rows or len(rows[0]) != len(header):
        raise BadInput(path, "no units row: expected ncu --page raw output (row 2 holds units)")
    units, rows = rows[0], rows[1:]
    idx = {name: i for i, name in enumerate(header)}
    pp_i, se_i = _ncu_csv.nvtx_columns(header)
    metric_cols = [i for i, h in enumerate(header) if h not in _NON_METRIC and i not in (pp_i, se_i)]
    kernels: list[tuple] = []
    counters: list[tuple] = []
    facts: dict = {}
    for seq, row in enumerate(r for r in rows if any(r)):
        if len(row) != len(header):
            raise BadInput(path, f"kernel row {seq + 1} has {len(row)} cells, header has {len(header)}: truncated?")
        values = {}
        for i in metric_cols:
            v = parse_number(row[i])
            if v is not None:
                values[header[i]] = normalise(v, units[i])
                why = impossible(*values[header[i]])
                if why:
                    kid = row[idx["ID"]] if "ID" in idx else seq
                    raise BadInput(path, f"launch ID {kid}: {header[i]} {why} ({row[i][:40]} {units[i][:20]})")
        inner, path_ = _ncu_csv.nvtx(row[pp_i] if pp_i is not None else "", row[se_i] if se_i is not None else "")
        name = row[idx["Kernel Name"]]
        kernels.append(ncu_kernel_row(seq, name, short_name(name), inner, path_, values, _ncu_csv.given(row, idx)))
        counters.extend((seq, k, u, v) for k, (v, u) in values.items())
        if not facts:
            sms = values.get("device__attribute_multiprocessor_count")
            name_i = idx.get("device__attribute_display_name")
            cc = _ncu_csv.compute_capability(row[idx["CC"]]) if "CC" in idx else None
            facts = {
                "gpu_name": row[name_i] if name_i is not None else None,
                "sm_count": sms and count(sms[0]),
                "compute_capability": cc and f"{cc[0]}.{cc[1]}",
                "preamble_lines": skipped,
            }
    if not kernels:
        raise BadInput(path, "the CSV holds no profiled kernel")
    return Parsed(
        str(path), FORMAT, SOURCE, kernels, [], counters, {k: v for k, v in facts.items() if v}, caveat=_ncu_csv.CAVEAT
    )
