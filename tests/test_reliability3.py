"""Issue 51 (reliability round 3): each break found by the third attack, reproduced and kept fixed."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from profkit.cli import cli


def kineto_trace(path, calls, kernels_per_call, kernel_us, range_name="op", kernel="k_fused"):
    """A minimal Kineto trace: CALLS instances of the user annotation RANGE_NAME, each launching
    KERNELS_PER_CALL kernels of KERNEL_US microseconds one after another."""
    ev, corr, t = [], 100, 1000.0
    for _ in range(calls):
        start = t
        for _ in range(kernels_per_call):
            corr += 1
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": t + 1, "dur": 2, "args": {"correlation": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": t + 5,
                       "dur": kernel_us, "args": {"correlation": corr, "stream": 7, "device": 0,
                                                  "grid": [64, 1, 1], "block": [128, 1, 1],
                                                  "registers per thread": 32}})
            t += kernel_us + 10
        ev.append({"ph": "X", "cat": "user_annotation", "name": range_name, "pid": 1, "tid": 1,
                   "ts": start, "dur": t - start})
        t += 50
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3",
                                                     "computeMajor": 9, "computeMinor": 0, "numSms": 132}],
           "traceEvents": ev}
    path.write_text(json.dumps(doc))
    return path


def _ingest(db, path, run):
    r = CliRunner().invoke(cli, ["ingest", "--db", str(db), "--run", run, str(path)])
    assert r.exit_code == 0, r.output


# --- item 2: a call is one instance of its range -----------------------------------------------

def test_compare_calls_are_range_instances_when_the_other_side_fuses(tmp_path):
    """Before: each call launches the same kernel twice (2 x 10 us); after fuses them (15 us).
    Splitting by the repeating pattern of names made 10 calls of 10 us on the before side and
    printed 0.67x rejected; the calls are the 5 instances of the range: 20 -> 15 us, 1.33x."""
    db = tmp_path / "p.db"
    _ingest(db, kineto_trace(tmp_path / "before.json", 5, 2, 10.0, kernel="k_add"), "before")
    _ingest(db, kineto_trace(tmp_path / "after.json", 5, 1, 15.0, kernel="k_add"), "after")
    r = CliRunner().invoke(cli, ["compare", "--db", str(db), "before", "after", "--json"])
    assert r.exit_code == 0, r.output
    row = json.loads(r.output)[0] if r.output.lstrip().startswith("[") else json.loads(r.output)
    row = row[0] if isinstance(row, list) else row
    assert row["before_detail"]["calls"] == 5 and row["before_detail"]["kernels_per_call"] == 2
    assert row["before_us"] == pytest.approx(20.0) and row["after_us"] == pytest.approx(15.0)
    assert row["speedup"] == pytest.approx(4 / 3) and row["verdict"] != "rejected"
