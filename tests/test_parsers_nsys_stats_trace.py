"""`nsys stats --report cuda_gpu_trace` CSV read as a timeline (issue 51, item 25).

No nsys runs here: each table is the real export's rows in the report's columns, as
tests/nsys_stats_layout.py reproduces them (NVIDIA's documented cuda_gpu_trace report). The
kernels the CSV yields must be the export's kernels, field for field where the table keeps the
field."""
from __future__ import annotations

import pytest
from nsys_stats_layout import HEADER, gpu_trace_rows, write_gpu_trace
from profdata import DATA, FIELD_H100, KNOWN_NSYS
from profkit.parsers import nsys_sqlite, nsys_stats_trace

from profkit import parsers
from profkit.core.errors import BadInput
from profkit.core.rows import KERNEL_FIELDS

SAME = ("kernel_name", "start_ns", "end_ns", "duration_ns", "grid_x", "grid_y", "grid_z", "block_x", "block_y",
        "block_z", "registers_per_thread", "stream", "device", "correlation_id")


def _fields(rows):
    idx = [KERNEL_FIELDS.index(f) for f in SAME]
    return sorted(tuple(r[i] for i in idx) for r in rows)


@pytest.mark.parametrize("export,stdout", [(FIELD_H100 / "ws.nsys.sqlite", True), (KNOWN_NSYS, False)])
def test_the_table_yields_the_exports_kernels(tmp_path, export, stdout):
    f = write_gpu_trace(export, tmp_path / "x_cuda_gpu_trace.csv", stdout=stdout)
    assert parsers.detect(f) is nsys_stats_trace
    got, want = nsys_stats_trace.parse(f), nsys_sqlite.parse(export)
    assert len(got.kernels) == len(want.kernels) > 0
    assert _fields(got.kernels) == _fields(want.kernels)
    assert got.facts["gpu_name"] == want.facts["gpu_name"]
    assert (got.format, got.source, got.ranges, got.caveat) == ("nsys-stats-trace", "nsys", [], nsys_stats_trace.CAVEAT)
    assert all(r[KERNEL_FIELDS.index("api_name")] is None for r in got.kernels)  # no launch calls in the table


def test_copies_are_counted_in_the_facts(tmp_path):
    export = FIELD_H100 / "ws.nsys.sqlite"
    f = write_gpu_trace(export, tmp_path / "ws_cuda_gpu_trace.csv")
    copies = [r for r in nsys_sqlite.gpu_copies(*_conn_tables(export)) if r[0] == "memcpy"]
    m = nsys_stats_trace.parse(f).facts["memcpy"]
    assert m["count"] == len(copies) == 8
    assert m["duration_ns"] == sum(r[5] - r[4] for r in copies)
    assert abs(m["bytes"] - sum(r[2] for r in copies)) <= 500 * len(copies)  # the table keeps kB


def _conn_tables(export):
    import sqlite3
    c = sqlite3.connect(f"{export.resolve().as_uri()}?mode=ro", uri=True)
    return c, {r[0]: r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def test_the_seed_tables_are_what_the_layout_makes(tmp_path):
    """tests/data/nsys-stats holds two tables the fuzzer starts from: made by the layout from the
    real exports, unchanged since."""
    assert (DATA / "nsys-stats" / "ws_cuda_gpu_trace.csv").read_text() == \
        write_gpu_trace(FIELD_H100 / "ws.nsys.sqlite", tmp_path / "a.csv", stdout=True).read_text()
    assert (DATA / "nsys-stats" / "known_cuda_gpu_trace.csv").read_text() == \
        write_gpu_trace(KNOWN_NSYS, tmp_path / "b.csv").read_text()


def _table(tmp_path, rows, header=HEADER, tail="\n"):
    import csv
    import io
    b = io.StringIO()
    w = csv.writer(b, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    f = tmp_path / "t_cuda_gpu_trace.csv"
    f.write_text(b.getvalue()[: -1] + tail if rows else b.getvalue())
    return f


def test_a_timeunit_other_than_ns_is_scaled(tmp_path):
    """`nsys stats --timeunit usec`: the header says (us), the values are microseconds."""
    rows = gpu_trace_rows(FIELD_H100 / "ws.nsys.sqlite")
    us = [[f"{r[0] / 1000:.3f}", f"{r[1] / 1000:.3f}", *r[2:]] for r in rows]
    f = _table(tmp_path, us, ["Start (us)", "Duration (us)", *HEADER[2:]])
    got = nsys_stats_trace.parse(f).kernels
    ns = nsys_stats_trace.parse(_table(tmp_path, rows)).kernels
    assert len(got) == len(ns) and all(abs(a[5] - b[5]) <= 1 and abs(a[7] - b[7]) <= 1 for a, b in zip(got, ns))


def test_cuts_and_impossible_rows(tmp_path):
    rows = gpu_trace_rows(FIELD_H100 / "ws.nsys.sqlite")
    whole = _table(tmp_path, rows).read_text()
    f = tmp_path / "cut_cuda_gpu_trace.csv"
    f.write_text(whole[: len(whole) - 30])  # inside the last row
    with pytest.raises(BadInput, match="the last row has no line end"):
        nsys_stats_trace.parse(f)
    f.write_text(whole[: whole.rindex("\n", 0, len(whole) - 1) + 1])  # exactly after a row: the note says so
    assert len(nsys_stats_trace.parse(f).kernels) == 51 and nsys_stats_trace.parse(f).caveat
    bad = [list(r) for r in rows]
    bad[3][1] = -5
    with pytest.raises(BadInput, match="row 4: a negative start or duration"):
        nsys_stats_trace.parse(_table(tmp_path, bad))
    bad = [list(r) for r in rows]
    bad[2][0] = "12x"
    with pytest.raises(BadInput, match="row 3: Start '12x' is not a number"):
        nsys_stats_trace.parse(_table(tmp_path, bad))
    with pytest.raises(BadInput, match="without kernel rows"):
        nsys_stats_trace.parse(_table(tmp_path, [r for r in rows if str(r[-1]).startswith("[CUDA mem")]))
    f.write_text(whole + "\nProcessing [ws.sqlite] with [cuda_api_sum.py]... \nTime (%),Total Time (ns)\n")
    with pytest.raises(BadInput, match="more than one nsys stats report"):
        nsys_stats_trace.parse(f)


def test_two_gpu_models_in_one_table_name_none(tmp_path):
    rows = [list(r) for r in gpu_trace_rows(FIELD_H100 / "ws.nsys.sqlite")]
    rows[5][16] = "NVIDIA A100-SXM4-80GB (1)"
    facts = nsys_stats_trace.parse(_table(tmp_path, rows)).facts
    assert "gpu_name" not in facts and facts["gpu_names"] == ["NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"]
