"""CPU tests of the decoder stack (kernels/decoder.py) and its e2e workloads.

The eager path runs in fp32 / fp64 / bf16 on the CPU, the lab path under TRITON_INTERPRET=1
(conftest), all at the tiny config (2 layers, hidden 64, 4 q heads over 2 KV heads, qkv
bias). Each is checked against the float64 reference forward written apart from the paths
(decoder.reference_forward), with decoder.tolerance(dtype, layers).
"""
import pytest
import torch
from profkit.kernels import decoder as D
from profkit.kernels._numerics import rel_err

PATH_NAMES = list(D.PATHS)


def _model(dtype="fp32", **kw):
    return D.Decoder(D.config("tiny", **kw), dtype, "cpu", seed=3)


def _x(m, n):
    return torch.randn(n, m.cfg.hidden, dtype=torch.float64).to(m.dtype)


def _ok(out, ref, dtype, layers, what):
    e, tol = rel_err(out, ref), D.tolerance(dtype, layers)
    assert e <= tol, f"{what}: relative error {e:.3e} > {tol:.1e} ({dtype})"
    return e


def test_published_shapes():
    ll, qw = D.config("llama3-8b"), D.config("qwen2.5-7b", layers=4)
    assert (ll.hidden, ll.heads, ll.kv_heads, ll.head_dim, ll.intermediate, ll.layers) == (4096, 32, 8, 128, 14336, 32)
    assert (ll.rope_theta, ll.qkv_bias, ll.group, ll.qkv_dim) == (500000.0, False, 4, 6144)
    assert (qw.hidden, qw.heads, qw.kv_heads, qw.intermediate, qw.layers) == (3584, 28, 4, 18944, 4)
    assert (qw.rope_theta, qw.qkv_bias, qw.group, qw.qkv_dim) == (1e6, True, 7, 4608)
    # 218 M parameters per Llama-3-8B layer (x32 + embeddings/head = 8.0 B)
    assert ll.layer_params() == 218_112_000
    with pytest.raises(KeyError, match="no decoder config"):
        D.config("gpt5")


def test_buckets():
    assert D.buckets(4096) == (128, 256, 512, 1024, 2048, 4096)
    assert D.buckets(1000) == (128, 256, 512, 1000)
    assert D.buckets(64, 8) == (8, 16, 32, 64)
    b = D.buckets(4096)
    assert [D.bucket_for(n, b) for n in (1, 128, 129, 449, 512, 513, 4096)] == [128, 128, 256, 512, 512, 1024, 4096]
    with pytest.raises(ValueError, match="exceed the KV cache"):
        D.bucket_for(4097, b)


@pytest.mark.parametrize("dtype", ["fp64", "fp32", "bf16"])
def test_eager_prefill_vs_reference(dtype):
    m = _model(dtype)
    x = _x(m, 11)
    ref, _ = D.reference_forward(m, x)
    _ok(m.prefill(x, D.EAGER), ref, dtype, m.cfg.layers, "eager prefill")


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("path", ["lab", "lab_fused_linear", "lab_gated_mlp"])
def test_lab_prefill_vs_reference_and_eager(path, dtype):
    m = _model(dtype)
    x = _x(m, 9)
    ref, _ = D.reference_forward(m, x)
    lab = m.prefill(x, D.PATHS[path])
    eager = m.prefill(x, D.EAGER)
    _ok(lab, ref, dtype, m.cfg.layers, f"{path} prefill")
    # both within tol of the reference, so within 2 tol of each other
    assert rel_err(lab, eager) <= 2 * D.tolerance(dtype, m.cfg.layers)
    if dtype == "fp32":
        assert rel_err(lab, eager) < 1e-5  # same math, fp32 roundings only


def test_prefill_fills_the_cache_with_rotated_keys():
    m = _model("fp64")
    x = _x(m, 6)
    m.prefill(x)
    _, past = D.reference_forward(m, x)
    for i, (k, v) in enumerate(past):
        assert rel_err(m.k_cache[i, 0, :, :6], k) < 1e-6  # keys after RoPE
        assert rel_err(m.v_cache[i, 0, :, :6], v) < 1e-6
    assert m.k_cache[:, :, :, 6:].abs().max() == 0  # nothing written past the prompt


@pytest.mark.parametrize("path", PATH_NAMES)
def test_decode_steps_match_the_full_forward(path):
    """Prefill 6 tokens, decode 5 (keys 7..11 cross the bucket boundary 8 -> 16): each step's
    output equals the reference forward of the whole sequence at that row, and the same
    path's prefill of all 11 tokens."""
    dtype = "fp32"
    m = _model(dtype)
    x = _x(m, 11)
    ref, _ = D.reference_forward(m, x)
    full = m.prefill(x, D.PATHS[path])
    m.k_cache.zero_(), m.v_cache.zero_()
    m.prefill(x[:6], D.PATHS[path])
    r = D.DecodeRunner(m, D.PATHS[path], graph=False)
    seen = []
    for p in range(6, 11):
        seen.append(r.bucket(p))
        y = r.step(x[p:p + 1], p)
        _ok(y, ref[p:p + 1], dtype, m.cfg.layers, f"{path} decode at {p}")
        assert rel_err(y, full[p:p + 1]) < 1e-5
    assert seen == [8, 8, 16, 16, 16]


def test_decode_continues_from_reference_past():
    """The decode step against the reference's own incremental form (start, past)."""
    m = _model("fp64")
    x = _x(m, 8)
    _, past = D.reference_forward(m, x[:7])
    ref, _ = D.reference_forward(m, x[7:], start=7, past=past)
    m.prefill(x[:7])
    y = D.DecodeRunner(m).step(x[7:], 7)
    _ok(y, ref, "fp64", m.cfg.layers, "decode vs incremental reference")


def test_mask_hides_stale_cache_entries():
    """Keys past the current position inside the bucket are masked: garbage there changes nothing."""
    m = _model("fp32")
    x = _x(m, 6)
    m.prefill(x[:5])
    r = D.DecodeRunner(m)
    y0 = r.step(x[5:], 5).clone()
    m.prefill(x[:5])
    m.k_cache[:, :, :, 6:].fill_(1e4)
    m.v_cache[:, :, :, 6:].normal_(0, 1e4)
    y1 = r.step(x[5:], 5)
    assert torch.equal(y0, y1)


def test_scratch_slot_is_outside_every_bucket():
    m = _model("fp32")
    x = _x(m, 4)
    m.prefill(x)
    before_k, before_v = m.k_cache[:, :, :, :m.cfg.max_seq].clone(), m.v_cache[:, :, :, :m.cfg.max_seq].clone()
    r = D.DecodeRunner(m, D.LAB)
    r.pos.fill_(m.scratch)  # what capture() does before warm-up and capture
    m.decode_step(r.x, r.pos, m.buckets[-1], D.LAB)
    assert m.scratch == m.cfg.max_seq == m.buckets[-1]
    assert torch.equal(m.k_cache[:, :, :, :m.cfg.max_seq], before_k)
    assert torch.equal(m.v_cache[:, :, :, :m.cfg.max_seq], before_v)
    assert m.k_cache[:, :, :, m.scratch].abs().sum() > 0


def test_too_long_is_refused():
    m = _model("fp32")
    with pytest.raises(ValueError, match="exceeds the KV cache"):
        m.prefill(_x(m, 65))
    with pytest.raises(ValueError, match="exceed the KV cache"):
        D.DecodeRunner(m).step(_x(m, 1), 64)


def test_known_wrong_references_fail():
    """The check tells a wrong stack from a right one: another RoPE base, or query heads
    grouped with the wrong KV head."""
    from dataclasses import replace

    m = _model("fp32")
    x = _x(m, 8)
    y = m.prefill(x, D.LAB)
    tol = D.tolerance("fp32", m.cfg.layers)
    other_base = D.Decoder(replace(m.cfg, rope_theta=20000.0), "fp32", "cpu", weights=(m.layers, m.w_final))
    assert rel_err(y, D.reference_forward(other_base, x)[0]) > 100 * tol
    # swap the two KV heads' rows of the fused qkv weight: each query group meets the other KV head
    cfg, hd = m.cfg, m.cfg.head_dim
    swapped = []
    for w in m.layers:
        wq = w.w_qkv.clone()
        k0 = cfg.heads * hd
        for base in (k0, k0 + cfg.kv_heads * hd):  # k rows, then v rows
            wq[base:base + 2 * hd] = torch.cat((w.w_qkv[base + hd:base + 2 * hd], w.w_qkv[base:base + hd]))
        b = w.b_qkv.clone()
        for base in (k0, k0 + cfg.kv_heads * hd):
            b[base:base + 2 * hd] = torch.cat((w.b_qkv[base + hd:base + 2 * hd], w.b_qkv[base:base + hd]))
        swapped.append(D.LayerWeights(**{**vars(w), "w_qkv": wq, "b_qkv": b}))
    wrong_group = D.Decoder(m.cfg, "fp32", "cpu", weights=(swapped, m.w_final))
    assert rel_err(y, D.reference_forward(wrong_group, x)[0]) > 100 * tol


def test_with_dtype_keeps_the_weights():
    m = _model("bf16")
    m64 = m.with_dtype("fp64")
    assert m64.layers[1].w_gu.dtype == torch.float64
    assert torch.equal(m64.layers[1].w_gu.to(torch.bfloat16), m.layers[1].w_gu)
    x = _x(m, 5)
    assert rel_err(m.prefill(x), m64.prefill(x.double())) <= D.tolerance("bf16", m.cfg.layers)


# --- the e2e workloads ------------------------------------------------------------------------

def test_e2e_workloads_registered():
    from profkit.kernels import get, range_name, workloads

    assert {"e2e/prefill", "e2e/decode"} <= set(workloads())
    pre, dec = get("e2e/prefill"), get("e2e/decode")
    assert set(pre.variants) == {"eager", "lab"}
    assert set(dec.variants) == {"eager", "lab", "lab_fused_linear", "lab_gated_mlp", "graph", "graph_lab",
                                 "graph_lab_fused_linear", "graph_lab_gated_mlp"}
    assert "llama3-8b-l4-t4096" in pre.shapes and "qwen2.5-7b-l4-t128" in pre.shapes
    assert {"llama3-8b-l4-ctx448", "qwen2.5-7b-l4-ctx448", "llama3-8b-l32-ctx448"} <= set(dec.shapes)
    for w in (pre, dec):
        for name, p in w.shapes.items():
            assert "/" not in name
            mdl = w.model(p, "bf16")
            assert mdl["bytes"] > 0 and mdl["flops"] > 0
    # nested NVTX ranges e2e > prefill > eager > shape
    assert range_name("e2e/prefill", "eager", "llama3-8b-l4-t1024").split("/") == [
        "e2e", "prefill", "eager", "llama3-8b-l4-t1024"]
    # 8 B parameters read per token at full depth: the decode bytes model is the weights
    full = dec.model(dec.shapes["llama3-8b-l32-ctx448"], "bf16")
    assert 13.9e9 < full["bytes"] < 14.1e9


def test_e2e_workloads_run_on_cpu_at_tiny_size():
    from profkit.kernels import e2e, get

    pre = get("e2e/prefill")
    s = pre.setup({"model": "tiny", "layers": 2, "tokens": 8}, "fp32", "cpu")
    ref, _ = D.reference_forward(s["model"], s["x"])
    for v in ("eager", "lab"):
        _ok(pre.variants[v](s), ref, "fp32", 2, f"e2e/prefill/{v}")

    dec = get("e2e/decode")
    s = dec.setup({"model": "tiny", "layers": 2, "context": 6, "max_seq": 8}, "fp32", "cpu")
    outs = {}
    for v in ("eager", "lab", "lab_fused_linear", "lab_gated_mlp"):
        outs[v] = [dec.variants[v](s).clone() for _ in range(3)]  # positions 6, 7, then back to 6
        assert s["pos"][v] == 7
        assert not s["runners"][v].graph
    for v in ("lab", "lab_fused_linear", "lab_gated_mlp"):
        for a, b in zip(outs[v], outs["eager"]):
            assert rel_err(a, b) < 1e-5
    assert rel_err(outs["eager"][2], outs["eager"][0]) < 1e-6  # wrapped to the context: same step again
    assert e2e._runner(s, "graph_lab").graph and e2e._runner(s, "graph_lab").lab == D.LAB
    assert e2e._runner(s, "graph").lab == D.EAGER


def test_benchmark_selftest(tmp_path):
    """benchmarks/e2e.py --selftest: the device script's Python on the CPU (tiny config, fp32)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "e2e.py"
    r = subprocess.run([sys.executable, str(script), "--selftest", "--out", str(tmp_path)], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    d = json.loads((tmp_path / "e2e.json").read_text())
    (m,) = d["models"]
    assert all(c["ok"] for c in m["checks"]) and len(m["checks"]) == 8
    assert [p["tokens"] for p in m["prefill"]] == [8]
    assert [x["variant"] for x in m["decode"]] == ["eager", "lab", "lab_fused_linear", "lab_gated_mlp"]
    assert m["decode"][0]["buckets"] == [8, 16]
    assert set(m["decode_skipped"]) == {"graph", "graph_lab", "graph_lab_fused_linear", "graph_lab_gated_mlp"}
    assert "| tiny | 2 | 8 |" in (tmp_path / "e2e.md").read_text()
