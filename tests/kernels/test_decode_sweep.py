"""benchmarks/gpu/decode_sweep.py --cpu-smoke: the device sweep's plumbing on the CPU (interpreter,
no torch.compile), run from outside the checkout as the device script runs it."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu" / "decode_sweep.py"


def test_decode_sweep_cpu_smoke(tmp_path):
    import os

    from profkit.kernels import rmsnorm, rope, softmax, swiglu

    if not SCRIPT.exists():
        pytest.skip("benchmarks/gpu/decode_sweep.py not in this checkout")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, str(SCRIPT), "--cpu-smoke", "--out", str(tmp_path)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    d = json.loads((tmp_path / "decode_sweep.json").read_text())
    rows = d["rows"]
    assert {x["op"] for x in rows} == {"softmax", "swiglu", "rope", "rmsnorm", "add_rmsnorm"}
    assert all(x["gpu"] == "cpu" and x["torch"] and x["triton"] and x["date"] for x in rows)
    mine = [x for x in rows if x["role"] != "peer"]
    assert all(x.get("ok") and "us" in x for x in mine), [x for x in mine if not x.get("ok")]
    old = {x["op"]: x["variant"] for x in rows if x["role"] == "old"}
    assert old == {"softmax": "triton_rowprog", "swiglu": "triton_v1", "rope": "triton_tokenprog",
                   "rmsnorm": "triton_untuned", "add_rmsnorm": "triton_untuned"}
    n = {op: sum(x["op"] == op and x["role"] == "candidate" for x in rows) for op in old}
    assert n == {"softmax": len(softmax.SPLIT_CANDIDATES), "swiglu": len(swiglu.SMALL_CANDIDATES),
                 "rope": len(rope.head_candidates(32, 8, 64)), "rmsnorm": 2 * len(rmsnorm.decode_candidates(4096)),
                 "add_rmsnorm": 2 * len(rmsnorm.decode_candidates(4096))}
    assert "op/shape" in r.stdout and "fastest of" in r.stdout
