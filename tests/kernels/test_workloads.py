"""Registry contract of the operator modules, and each registered shape run small."""
import importlib

import pytest
import torch

from _kernel_helpers import check
from profkit.kernels import Workload

OPS = ("rmsnorm", "add_rmsnorm", "rope", "rmsnorm_rope", "swiglu", "softmax")


def _mod(op):
    return importlib.import_module(f"profkit.kernels.{op}")


@pytest.mark.parametrize("op", OPS)
def test_contract(op):
    m = _mod(op)
    w = m.WORKLOAD
    assert isinstance(w, Workload) and w.op == op
    assert {"eager", "compile", "triton"} <= set(w.variants)
    for v, mod in w.requires.items():
        assert v == "liger" and mod == "liger_kernel"
    if "liger" in w.variants:
        assert "liger" in w.requires
    assert 1 <= len(w.shapes) <= 6
    for name, p in w.shapes.items():
        assert "/" not in name
        for dt in w.dtypes:
            mdl = w.model(p, dt)
            assert mdl["bytes"] > 0 and mdl["flops"] > 0
    assert callable(m.reference_from_state)


def _small(p):
    p = dict(p)
    for key in ("tokens", "rows"):
        if key in p:
            p[key] = 2
    return p


@pytest.mark.parametrize("op", OPS)
def test_shapes_run_small(op):
    """Every registered geometry (tokens cut to 2), eager and triton vs the reference."""
    m = _mod(op)
    w = m.WORKLOAD
    for name, p in w.shapes.items():
        s = w.setup(_small(p), "fp32", "cpu")
        ref = m.reference_from_state(s)
        for v in ("eager", "triton"):
            out = w.variants[v](s)
            outs, refs = (out, ref) if isinstance(out, tuple) else ((out,), (ref,))
            for o, r in zip(outs, refs):
                check(o, r, "fp32", f"{op}/{v}/{name}", baseline=v != "triton")


def test_reload_makes_interpreted():
    from triton.runtime.interpreter import InterpretedFunction

    from profkit.kernels import rmsnorm

    assert isinstance(rmsnorm._rmsnorm_fwd, InterpretedFunction)


_HERE = __import__("pathlib").Path(__file__).resolve().parent


def _env_without_interpret():
    import os

    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    return env


def test_conftest_rescues_kernels_imported_before_it():
    """Another test (or plugin) imported triton and a kernel module without the interpreter."""
    import subprocess
    import sys

    code = ("import profkit.kernels.rmsnorm as R, profkit.kernels.softmax as S, sys, torch\n"
            f"sys.path.insert(0, {str(_HERE)!r})\n"
            "import conftest\n"
            "x = torch.randn(3, 40); w = torch.randn(40)\n"
            "from profkit.kernels._numerics import check\n"
            "check(R.rmsnorm(x, w), R.rmsnorm_reference(x, w), 'fp32')\n"
            "check(S.softmax(x), S.softmax_reference(x), 'fp32')\n")
    r = subprocess.run([sys.executable, "-c", code], env=_env_without_interpret(), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]


def test_benchmark_selftest(tmp_path):
    """benchmarks/kernels.py --selftest: the GPU script's logic on tiny CPU shapes."""
    import json
    import subprocess
    import sys

    script = _HERE.parents[1] / "benchmarks" / "kernels.py"
    if not script.exists():
        pytest.skip("benchmarks/kernels.py not in this checkout")
    r = subprocess.run([sys.executable, str(script), "--selftest", "--out", str(tmp_path)], cwd=tmp_path,
                       env=_env_without_interpret(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    d = json.loads((tmp_path / "kernels.json").read_text())
    ran = [x for x in d["rows"] if "ms" in x]
    assert {x["op"] for x in ran} >= {"rmsnorm", "add_rmsnorm", "rope", "rmsnorm_rope", "swiglu", "softmax",
                                       "rmsnorm_bwd", "swiglu_bwd"}
    assert all(x["ok"] for x in ran), [x for x in ran if not x["ok"]]
    assert "| op | shape |" in r.stdout
