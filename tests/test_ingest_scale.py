"""benchmarks/ingest.py at 100 k kernels, as a correctness check (never a timed assertion):
the real H200 export grown by replication loads whole, and every grown kernel's structured
NVTX path is the one the base export's kernel has (by profkit's row path) plus the ranges the
grower wrapped around its launch call, nested three deep."""
import json
import subprocess
import sys

import pytest
from profdata import ROOT


@pytest.mark.slow
def test_100k_kernels_load_with_their_paths(tmp_path):
    out = tmp_path / "ingest.json"
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "ingest.py"), "--kernels", "100000",
                        "--ranges", "300000", "--out", str(out)], capture_output=True, text=True, timeout=1200)
    assert p.returncode == 0, p.stderr[-2000:]
    r = json.loads(out.read_text())
    assert r["check"]["paths_ok"]
    assert r["source_rows"]["CUPTI_ACTIVITY_KIND_KERNEL"] >= 100_000
    assert r["source_rows"]["NVTX_EVENTS"] > 290_000 and r["ranges_per_launch"] >= 2
    assert f"{r['source_rows']['CUPTI_ACTIVITY_KIND_KERNEL']} kernels" in r["stdout"]
