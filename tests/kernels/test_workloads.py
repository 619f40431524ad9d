"""Registry contract of the operator modules, and each registered shape run small.

Every test here iterates the registry (profkit.kernels.workloads): a new operator file with a
``WORKLOAD`` is picked up without editing this file.
"""
import pytest
import torch
from profkit.kernels import Backward, Workload, benched, get, workloads
from profkit.kernels._numerics import POLICIES, measure
from profkit.kernels.timing import fresh

KERNELS = sorted(benched("kernels"))
GEMMS = sorted(benched("gemm"))
FORWARD = [op for op in KERNELS if not op.endswith("_bwd")]


def test_registry_finds_every_operator():
    assert {"rmsnorm", "add_rmsnorm", "rope", "rmsnorm_rope", "swiglu", "softmax"} <= set(FORWARD)
    assert {"rmsnorm_bwd", "swiglu_bwd"} <= set(KERNELS)
    assert {"matmul", "fp8_gemm", "rmsnorm_linear"} <= set(GEMMS)


@pytest.mark.parametrize("op", KERNELS + GEMMS)
def test_contract(op):
    w = get(op)
    assert isinstance(w, Workload) and w.op == op
    assert callable(w.reference) and w.numerics in POLICIES
    assert set(w.baselines) & set(w.variants), "no baseline to compare with"
    assert any(v not in w.baselines for v in w.variants), "no variant of the lab's own"
    assert set(w.peers) <= set(w.variants) and set(w.peers.values()) <= set(w.baselines)
    assert set(w.inexact) <= set(w.variants)
    for v, mod in w.requires.items():
        assert isinstance(mod, str) and mod
    assert 1 <= len(w.shapes) <= 12
    assert w.quick and set(w.quick) <= set(w.shapes)
    assert w.selftest and not set(w.selftest) & set(w.shapes)
    for name, p in {**w.shapes, **w.selftest}.items():
        assert "/" not in name
        for dt in w.dtypes:
            mdl = w.model(p, dt)
            assert mdl["bytes"] > 0 and mdl["flops"] > 0
    if w.bench == "kernels" and not w.grad:
        assert {"eager", "compile"} <= set(w.variants)


@pytest.mark.parametrize("op", FORWARD)
def test_backward_is_its_own_workload(op):
    w = get(op)
    if w.backward is None:
        assert f"{op}_bwd" not in workloads()
        return
    assert isinstance(w.backward, Backward)
    b = get(f"{op}_bwd")
    assert b.grad and set(b.variants) == ({v for v in w.backward.forward if v not in w.requires or w.available(v) is None}
                                          | {f"{v}_direct" for v in w.backward.direct})
    assert set(b.shapes) <= set(w.shapes)
    assert b.selftest == w.selftest and set(b.quick) <= set(b.shapes)


def test_direct_backward_launches_on_the_calling_thread(monkeypatch):
    """The *_direct variants of a backward workload call the lab's launcher on this thread
    (what a profile's NVTX range can see) and give the autograd variant's gradients."""
    import threading

    from profkit.kernels import rmsnorm

    seen = []
    real = rmsnorm.rmsnorm_bwd

    def spy(*a, **k):
        seen.append(threading.get_ident())
        return real(*a, **k)

    b = get("rmsnorm_bwd")
    s = b.setup({"tokens": 5, "hidden": 64}, "fp32", "cpu")
    monkeypatch.setattr(rmsnorm, "rmsnorm_bwd", spy)
    direct = rmsnorm._direct(rmsnorm.rmsnorm_bwd)(s)
    assert seen == [threading.get_ident()]
    for g, r in zip(direct, b.variants["triton"](s)):
        assert torch.allclose(g, r, rtol=1e-6, atol=1e-6)
    assert b.check(s, "triton_direct", b.variants["triton_direct"](s), "fp32").ok


def _small(p):
    p = dict(p)
    for key in ("tokens", "rows"):
        if key in p:
            p[key] = 2
    return p


def _own(w):
    return [v for v in w.variants if v not in w.baselines and v not in w.gpu_only and w.available(v) is None]


@pytest.mark.parametrize("op", KERNELS)
def test_shapes_run_small(op):
    """Every registered geometry (tokens cut to 2), eager and the lab's own variants, against
    the workload's reference through its own check (fp32: the tight tolerance)."""
    w = get(op)
    for name, p in w.shapes.items():
        for v in ["eager"] + _own(w):
            s = w.setup(_small(p), "fp32", "cpu")
            ref = fresh(s)  # the inputs as read: an in-place variant (RoPE's triton_inplace) rotates s
            r = w.check(ref, v, w.variants[v](s), "fp32")
            assert r.ok, f"{op}/{v}/{name}: {r}"


@pytest.mark.parametrize("op", KERNELS)
def test_selftest_shapes_and_the_check_catches_a_wrong_output(op):
    """The selftest shapes in bf16, and the same check fails on an output off by 3 %."""
    w = get(op)
    for name, p in w.selftest.items():
        s = w.setup(p, "bf16", "cpu")
        for v in _own(w):
            ref = fresh(s)  # the inputs as read (triton_inplace rotates s)
            out = w.variants[v](s)
            assert w.check(ref, v, out, "bf16").ok
            outs = out if isinstance(out, tuple) else (out,)
            wrong = tuple(o.float() * 1.03 for o in outs)
            r = w.check(ref, v, wrong if isinstance(out, tuple) else wrong[0], "bf16")
            assert not r.ok and r.rel_err > r.tol, f"{op}/{v}/{name}: a 3 % error passed ({r})"


def test_a_nan_fails_every_policy():
    ref = torch.randn(8, 8, dtype=torch.float64)
    out = ref.float().clone()
    out[3, 4] = float("nan")
    for policy in POLICIES:
        assert not measure(out, ref, "fp32", policy=policy).ok


def test_reload_makes_interpreted():
    from profkit.kernels import rmsnorm
    from triton.runtime.interpreter import InterpretedFunction

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
    assert {x["op"] for x in ran} == set(KERNELS)  # the registry, not a list kept here
    assert all(x["ok"] for x in ran), [x for x in ran if not x["ok"]]
    assert all(x["gpu"] == "cpu" and x["torch"] and x["triton"] and x["date"] for x in d["rows"])
    assert "| op | shape |" in r.stdout


def test_benchmark_shapes_filter(tmp_path):
    """--shapes: only the shapes whose names contain one of the strings (a device call times only
    the cells it is about); the other ops' shapes that do not match are not run."""
    import json
    import subprocess
    import sys

    script = _HERE.parents[1] / "benchmarks" / "kernels.py"
    r = subprocess.run([sys.executable, str(script), "--selftest", "--ops", "softmax,rmsnorm", "--shapes", "2x300",
                        "--variants", "triton", "--out", str(tmp_path)], cwd=tmp_path, env=_env_without_interpret(),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = json.loads((tmp_path / "kernels.json").read_text())["rows"]
    assert {(x["op"], x["shape"]) for x in rows} == {("softmax", "t-2x300")} and all(x["ok"] for x in rows)


def test_gemm_benchmark_selftest(tmp_path):
    """benchmarks/gemm.py --selftest: every bench='gemm' workload at its selftest shapes, on CPU."""
    import json
    import subprocess
    import sys

    script = _HERE.parents[1] / "benchmarks" / "gemm.py"
    r = subprocess.run([sys.executable, str(script), "--selftest", "--out", str(tmp_path)], cwd=tmp_path,
                       env=_env_without_interpret(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    d = json.loads((tmp_path / "gemm.json").read_text())
    ran = [x for x in d["rows"] if "ms" in x]
    assert {x["op"] for x in ran} == set(GEMMS)
    assert all(x["ok"] for x in ran), [x for x in ran if not x["ok"]]
    assert all(x["gpu"] == "cpu" and x["date"] for x in d["rows"])
    fp8 = {x["variant"]: x for x in ran if x["op"] == "fp8_gemm"}
    assert fp8["triton_tensor"]["baseline"] == "scaled_mm_tensor"  # Workload.peers
