import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from _kernel_helpers import check, nan_like, randn, spy
from profkit.kernels import rope as K

# (q heads, kv heads, head_dim, rotary_dim): GQA, non-power-of-two heads, partial rotary
GEOMS = [(4, 2, 16, 16), (7, 1, 20, 8), (3, 3, 24, 12)]


@pytest.mark.parametrize("geom", GEOMS, ids=lambda g: "hq{}-hk{}-d{}-rd{}".format(*g))
@pytest.mark.parametrize("interleaved", [False, True], ids=["neox", "gptj"])
def test_rope(dtype, geom, interleaved, monkeypatch):
    """The per-token program against float64."""
    hq, hk, d, rd = geom
    T = 6
    q, k = randn(T, hq, d, dtype=dtype, scale=300.0), randn(T, hk, d, dtype=dtype)
    cos, sin = K.rope_cache(512, rd)
    pos = torch.randint(0, 512, (T,))
    kernels = spy(monkeypatch, K, "_rope_fwd")
    qo, ko = K.rope(q, k, cos, sin, pos, rd, interleaved, q_out=nan_like(q), k_out=nan_like(k), split=False)
    assert len(kernels["_rope_fwd"].kwargs) == 1
    qr, kr = K.rope_reference(q, k, cos, sin, pos, rd, interleaved)
    check(qo, qr, dtype, "q")
    check(ko, kr, dtype, "k")
    if rd < d:  # pass-through dims are copied bit-exactly
        assert torch.equal(qo[..., rd:], q[..., rd:]) and torch.equal(ko[..., rd:], k[..., rd:])
    cf, sf = K.full_cos_sin(cos, sin, pos, interleaved, q.dtype)
    qe, ke = K.rope_eager(q, k, cf, sf, interleaved)
    check(qe, qr, dtype, "eager q")
    check(ke, kr, dtype, "eager k")


def _rope_fused_qkv_in_place(T, hq, hk, d, **kw):
    """q and k as views of one fused [T, hq + 2 hk, d] qkv, rotated in place; v must be untouched."""
    qkv = randn(T, hq + 2 * hk, d, dtype="bf16")
    q, k = qkv[:, :hq], qkv[:, hq:hq + hk]
    cos, sin = K.rope_cache(64, d)
    pos = torch.arange(T) + 3
    qr, kr = K.rope_reference(q, k, cos, sin, pos)
    v = qkv[:, hq + hk:].clone()
    K.rope(q, k, cos, sin, pos, q_out=q, k_out=k, **kw)
    check(q, qr, "bf16", "q in place")
    check(k, kr, "bf16", "k in place")
    assert torch.equal(qkv[:, hq + hk:], v)  # v untouched


def test_rope_views_of_fused_qkv_in_place():
    _rope_fused_qkv_in_place(5, 4, 2, 16, split=False)


# --- few tokens: heads split over programs --------------------------------------------------

SPLIT_CONFIGS = [(1, 1), (2, 2), (4, 2), (8, 4), (0, 4)]  # (BLOCK_H, num_warps); 0: one program per token


@pytest.mark.parametrize("config", SPLIT_CONFIGS, ids=str)
@pytest.mark.parametrize("geom", GEOMS, ids=lambda g: "hq{}-hk{}-d{}-rd{}".format(*g))
@pytest.mark.parametrize("interleaved", [False, True], ids=["neox", "gptj"])
def test_rope_head_split(dtype, geom, interleaved, config, monkeypatch):
    """Head groups of 1-8 q or k heads (7 q heads: a last group partly empty; 1 k head), token
    and head strides of views into a padded buffer whose padding holds NaN (a read past a head
    or a group shows), positions out of order."""
    hq, hk, d, rd = geom
    T = 3
    qbuf = randn(T, hq + 1, d + 4, dtype=dtype, scale=300.0)
    kbuf = randn(T, hk + 1, d + 4, dtype=dtype)
    qbuf[:, hq:], qbuf[..., d:], kbuf[:, hk:], kbuf[..., d:] = (float("nan"),) * 4
    q, k = qbuf[:, :hq, :d], kbuf[:, :hk, :d]
    cos, sin = K.rope_cache(512, rd)
    pos = torch.tensor([301, 7, 150])
    kernels = spy(monkeypatch, K, "_rope_fwd", "_rope_fwd_heads")
    qo, ko = K.rope(q, k, cos, sin, pos, rd, interleaved, q_out=nan_like(q), k_out=nan_like(k), config=config)
    bh, nw = config
    if bh:  # launched as asked
        assert kernels["_rope_fwd_heads"].grids == [(T, -(-hq // bh) + -(-hk // bh))]
        assert (kernels["_rope_fwd_heads"].kwargs[0]["BLOCK_H"], kernels["_rope_fwd_heads"].kwargs[0]["num_warps"]) == config
    else:
        assert kernels["_rope_fwd"].grids == [(T,)] and kernels["_rope_fwd"].kwargs[0]["num_warps"] == nw
    qr, kr = K.rope_reference(q, k, cos, sin, pos, rd, interleaved)
    check(qo, qr, dtype, f"q {config}")
    check(ko, kr, dtype, f"k {config}")
    if rd < d:  # pass-through dims are copied bit-exactly
        assert torch.equal(qo[..., rd:], q[..., rd:]) and torch.equal(ko[..., rd:], k[..., rd:])


def test_rope_head_split_in_place_on_fused_qkv():
    _rope_fused_qkv_in_place(2, 7, 3, 16, config=(2, 1))


def test_dispatch_few_tokens_split_heads(monkeypatch):
    """Fewer tokens than SMs (4 under the interpreter): the head-split kernel, grid (tokens, q
    groups + k groups) of the default candidate; more tokens, or split=False: one program per token."""
    assert K.num_sms("cpu") == 4
    kernels = spy(monkeypatch, K, "_rope_fwd", "_rope_fwd_heads")
    cos, sin = K.rope_cache(64, 16)

    def ran(T, **kw):
        for s in kernels.values():
            s.grids.clear()
        q, k, pos = randn(T, 7, 16), randn(T, 3, 16), torch.arange(T)
        qo, ko = K.rope(q, k, cos, sin, pos, **kw)
        qr, kr = K.rope_reference(q, k, cos, sin, pos)
        check(qo, qr, "fp32")
        check(ko, kr, "fp32")
        return {n: s.grids for n, s in kernels.items() if s.grids}

    bh = K.head_candidates(7, 3, 8)[0][0]
    assert ran(1) == {"_rope_fwd_heads": [(1, -(-7 // bh) + -(-3 // bh))]}
    assert ran(3) == {"_rope_fwd_heads": [(3, -(-7 // bh) + -(-3 // bh))]}
    assert ran(4) == {"_rope_fwd": [(4,)]}
    assert ran(1, split=False) == {"_rope_fwd": [(1,)]}


def test_head_candidates():
    """The default first, the per-token launch last (BLOCK_H 0, the many-token num_warps), and in
    between 2-16 rotated pairs per thread with no group wider than the heads."""
    c = K.head_candidates(32, 8, 64)
    assert c[0] == (4, 2) and c[-1] == (0, 4) and len(set(c)) == len(c)
    assert all(2 <= bh * 64 // (32 * nw) <= 16 and bh <= 32 for bh, nw in c[1:-1])
    assert K.head_candidates(1, 1, 64)[0] == (1, 2)


@pytest.mark.parametrize("interleaved", [False, True], ids=["neox", "gptj"])
def test_rope_tables_in_the_model_dtype(interleaved):
    """bf16 cos/sin tables (the workload's, as HF and vLLM keep them): the kernel
    reads them as they are and does the math in fp32; the reference is built from the same tables."""
    T, hq, hk, d = 5, 4, 2, 16
    q, k = randn(T, hq, d, dtype="bf16", scale=300.0), randn(T, hk, d, dtype="bf16")
    cos, sin = K.rope_cache(512, d, dtype=torch.bfloat16)
    assert cos.dtype == sin.dtype == torch.bfloat16
    pos = torch.tensor([511, 0, 17, 300, 2])
    qo, ko = K.rope(q, k, cos, sin, pos, interleaved=interleaved, q_out=nan_like(q), k_out=nan_like(k))
    qr, kr = K.rope_reference(q, k, cos, sin, pos, interleaved=interleaved)
    check(qo, qr, "bf16", "q")
    check(ko, kr, "bf16", "k")
    s = K.WORKLOAD.setup(K.WORKLOAD.selftest["t-3-gqa"], "bf16", "cpu")
    assert s["cos"].dtype == torch.bfloat16 and s["cos32"].dtype == torch.float32
    assert K.WORKLOAD.check(s, "triton", K.WORKLOAD.variants["triton"](s), "bf16").ok


_PTX_CODE = textwrap.dedent("""
    import json, re, sys, triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from profkit.kernels import rope as R
    sig = {n: "*bf16" for n in ("Q", "K", "QO", "KO", "COS", "SIN")}
    sig["POS"] = "*i64"
    for n in ("sq_t", "sq_h", "sk_t", "sk_h", "sqo_t", "sqo_h", "sko_t", "sko_h", "stride_cs", "HQ", "HK", "HALF",
              "PASS"):
        sig[n] = "i32"
    base = {"INTERLEAVED": False, "COPY_PASS": False, "BLOCK_HQ": 32, "BLOCK_HK": 8, "BLOCK_HALF": 64,
            "BLOCK_PASS": 1, "HAS_POS": True}
    sig.update(dict.fromkeys(base, "constexpr"))
    out = {}
    for name, flags in json.loads(sys.argv[1]).items():
        src = ASTSource(fn=R._rope_fwd, signature=sig, constexprs={**base, **flags})
        ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4}).asm["ptx"]
        out[name] = {"pos_param_reads": len(re.findall(r"ld\\.param\\.[bu]64\\s+%rd\\d+,\\s*\\[_rope_fwd_param_6\\]", ptx))}
    print(json.dumps(out))
""")


def _rope_fwd_ptx(variants: dict) -> dict:
    """The per-token kernel compiled for an H100 (sm_90a) without a GPU, in a child process (the
    tests' TRITON_INTERPRET gives interpreted kernels), once per {name: constexpr flags}: counts
    in its PTX of reads of the POS parameter."""
    r = subprocess.run([sys.executable, "-c", _PTX_CODE, json.dumps(variants)], capture_output=True, text=True,
                       env={**os.environ, "TRITON_INTERPRET": "0"}, timeout=300)
    if r.returncode and ("ptxas" in r.stderr.lower() or "GPUTarget" in r.stderr):
        pytest.skip(f"this Triton cannot compile for sm_90 here: {r.stderr.strip().splitlines()[-1]}")
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_many_token_tuner_times_by_graph_over_rotated_copies(monkeypatch):
    """At >= TUNE_MIN_TOKENS (1024) tokens the per-token launch's num_warps is timed by CUDA-graph replay over q/k
    copies rotated past the L2 (by do_bench the launcher's host time decided), once per table
    dtype and program order; an in-place call takes the out-of-place call's pick and times nothing."""
    calls = []

    def fake_tuned(key, cands, run, device, **kw):
        calls.append((key, cands, kw))
        n = len(kernels["_rope_fwd"].args)
        for _ in range(5):
            run(cands[0])
        rotated = {a[0].data_ptr() for a in kernels["_rope_fwd"].args[n:]}  # q as launched
        assert len(rotated) == 4 and q.data_ptr() in rotated  # q and 3 copies (tiny inputs: the most)
        return cands[-1]

    monkeypatch.setattr(K, "tuned", fake_tuned)
    monkeypatch.setattr(K, "tuned_cached", lambda key: next((c[1][-1] for c in calls if c[0] == key), None))
    kernels = spy(monkeypatch, K, "_rope_fwd")
    monkeypatch.setattr(K, "TUNE_MIN_TOKENS", 16)  # 1024 in use: a CPU-sized stand-in
    T = 16
    q, k, pos = randn(T, 2, 8), randn(T, 1, 8), torch.arange(T)
    for dt in (torch.float32, torch.bfloat16):
        cos, sin = K.rope_cache(T, 8, dtype=dt)
        qo, ko = K.rope(q, k, cos, sin, pos, split=False)
        check(qo, K.rope_reference(q, k, cos, sin, pos)[0], "fp32" if dt == torch.float32 else "bf16")
    assert len(calls) == 2 and calls[0][0] != calls[1][0]  # the table dtype is part of the key
    assert {c[0][-2] for c in calls} == {torch.float32, torch.bfloat16}
    assert all(kw == {"graph": True} for _, _, kw in calls)
    assert kernels["_rope_fwd"].kwargs[-1]["num_warps"] == calls[-1][1][-1]
    K.rope(q, k, cos, sin, pos, split=False, q_out=q, k_out=k)  # in place: no timing, the cached pick
    assert len(calls) == 2 and kernels["_rope_fwd"].kwargs[-1]["num_warps"] == calls[-1][1][-1]


def test_a_tuned_call_copies_nothing(monkeypatch):
    """Once the pick is cached a call launches the kernel and nothing else: the tuner's rotated
    copies are made only when it times (made on every call, they cost 4x the kernel at 4096 tokens)."""
    monkeypatch.setattr(K, "TUNE_MIN_TOKENS", 16)
    monkeypatch.setattr(K, "tuned", lambda key, cands, run, device, **kw: cands[0])  # cached: run never called
    clones = []
    real = torch.Tensor.clone
    monkeypatch.setattr(torch.Tensor, "clone", lambda self, *a, **kw: clones.append(1) or real(self, *a, **kw))
    T = 16
    q, k, pos = randn(T, 2, 8), randn(T, 1, 8), torch.arange(T)
    cos, sin = K.rope_cache(T, 8)
    qo, ko = K.rope(q, k, cos, sin, pos, split=False)
    check(qo, K.rope_reference(q, k, cos, sin, pos)[0], "fp32")
    assert clones == []


# --- cos/sin gathered per token (HF's cos_full / sin_full), no position load -------------------

@pytest.mark.parametrize("table", ["full", "half"])
@pytest.mark.parametrize("config", [None, (2, 1), (0, 2)], ids=["tokenprog", "heads-2", "heads-0"])
@pytest.mark.parametrize("geom", GEOMS, ids=lambda g: "hq{}-hk{}-d{}-rd{}".format(*g))
@pytest.mark.parametrize("interleaved", [False, True], ids=["neox", "gptj"])
def test_rope_gathered_tables_equal_the_position_path(geom, interleaved, config, table, monkeypatch):
    """positions=None with HF's full-width tables (each row's angles twice: NeoX's two halves,
    GPT-J's pairs) or the half tables gathered by position: bit-equal to the position-indexed
    launch on the same angles, per-token and head-split, partial rotary included; the kernels are
    told HAS_POS=False."""
    hq, hk, d, rd = geom
    T = 5
    q, k = randn(T, hq, d, dtype="bf16", scale=30.0), randn(T, hk, d, dtype="bf16")
    cos, sin = K.rope_cache(512, rd, dtype=torch.bfloat16)
    pos = torch.tensor([301, 7, 150, 0, 511])
    if table == "full":
        cg, sg = K.full_cos_sin(cos, sin, pos, interleaved)
        assert cg.shape == (T, rd)
    else:
        cg, sg = cos[pos], sin[pos]
    kw = dict(split=False) if config is None else dict(config=config)
    want = K.rope(q, k, cos, sin, pos, rd, interleaved, **kw)
    kernels = spy(monkeypatch, K, "_rope_fwd", "_rope_fwd_heads")
    got = K.rope(q, k, cg, sg, None, rd, interleaved, q_out=nan_like(q), k_out=nan_like(k), **kw)
    assert [kw_["HAS_POS"] for s in kernels.values() for kw_ in s.kwargs] == [False]
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    qr, kr = K.rope_reference(q, k, cos, sin, pos, rd, interleaved)
    check(got[0], qr, "bf16", "q")
    check(got[1], kr, "bf16", "k")


def test_rope_gathered_tables_refuse_a_wrong_shape():
    q, k = randn(4, 2, 8), randn(4, 1, 8)
    cos, sin = K.rope_cache(16, 8)
    with pytest.raises(ValueError, match="gathered cos/sin"):
        K.rope(q, k, cos, sin, None)  # a [max_pos, 4] table, not one row a token
    cg, sg = K.full_cos_sin(cos, sin, torch.arange(4))
    with pytest.raises(ValueError, match="gathered cos/sin"):
        K.rope(q, k, cg, sg[:, :4], None)


def test_rope_gathered_variant_takes_the_peers_inputs():
    """The registered triton_gathered reads the cos_full / sin_full that compile and Liger get;
    triton_gathered_inplace rotates q and k where they are, as Liger does."""
    for name in ("t-3-gqa", "t-3-partial"):
        s = K.WORKLOAD.setup(K.WORKLOAD.selftest[name], "bf16", "cpu")
        assert K.WORKLOAD.check(s, "triton_gathered", K.WORKLOAD.variants["triton_gathered"](s), "bf16").ok
        ref = K.WORKLOAD.reference(s, "triton_gathered_inplace")
        q0 = s["q"].clone()
        qo, ko = K.WORKLOAD.variants["triton_gathered_inplace"](s)
        assert qo.data_ptr() == s["q"].data_ptr() and ko.data_ptr() == s["k"].data_ptr()
        assert not torch.equal(s["q"], q0)
        check(qo, ref[0], "bf16", "q in place")
        check(ko, ref[1], "bf16", "k in place")


def test_rope_gathered_ptx_loads_no_position():
    """With HAS_POS=False the POS pointer is never read (no load waits on another); with it the
    position is loaded once."""
    counts = _rope_fwd_ptx({"pos": {}, "gathered": {"HAS_POS": False}})
    assert counts["pos"]["pos_param_reads"] == 1 and counts["gathered"]["pos_param_reads"] == 0


@pytest.mark.parametrize("gathered", [False, True], ids=["positions", "gathered"])
def test_rope_launch_plans(gathered, monkeypatch):
    """The RoPE launcher's plans: a call like an earlier one (no outputs,
    split or config given) takes that call's plan, bit-equal to the full path, with new values
    read through it; the gathered call's plan is handed HF's full-width tables (their first half
    starts where they do); a call the key does not hold (outputs, split or config given, a GPT-J
    full table that had to be copied, another token count) takes the full path, and so does every
    call with the plans off."""
    from profkit.kernels import _launch as L

    monkeypatch.setattr(K, "_PLANS", L.Plans())
    used = []
    real = L.Plan.launch
    monkeypatch.setattr(L.Plan, "launch", lambda self, ts: used.append(self) or real(self, ts))
    T, hq, hk, d = 6, 4, 2, 16
    cos, sin = K.rope_cache(64, d, dtype=torch.bfloat16)
    pos = torch.tensor([5, 0, 63, 7, 31, 2])

    def qk(t=T):
        return randn(t, hq, d, dtype="bf16", scale=30.0), randn(t, hk, d, dtype="bf16")

    def call(q, k, interleaved=False, **kw):
        p = pos[:q.shape[0]]
        c, s = K.full_cos_sin(cos, sin, p, interleaved) if gathered else (cos, sin)
        return K.rope(q, k, c, s, None if gathered else p, interleaved=interleaved, **kw)

    q, k = qk()
    first = call(q, k)
    assert len(K._PLANS.d) == 1 and used == []
    second = call(q, k)
    assert len(used) == 1 and all(torch.equal(a, b) for a, b in zip(first, second))
    assert used[0].kernel.fn is K._rope_fwd and used[0].grid == (T,)
    q2, k2 = qk()  # new values, same key: the plan, and the new values' result
    out = call(q2, k2)
    assert len(used) == 2
    qr, kr = K.rope_reference(q2, k2, cos, sin, pos)
    check(out[0], qr, "bf16", "q")
    check(out[1], kr, "bf16", "k")
    call(q, k, q_out=nan_like(q), k_out=nan_like(k))
    call(q, k, split=False)
    call(q, k, config=(1, 1))
    assert len(used) == 2 and len(K._PLANS.d) == 1
    gptj = call(q, k, interleaved=True)  # a new key; gathered, its full table is copied: no plan
    call(q, k, interleaved=True)
    assert len(used) == (2 if gathered else 3) and len(K._PLANS.d) == (1 if gathered else 2)
    check(gptj[0], K.rope_reference(q, k, cos, sin, pos, interleaved=True)[0], "bf16", "gptj q")
    q3, k3 = qk(3)  # fewer tokens than the interpreter's 4 SMs: the head-split launch's plan
    few = call(q3, k3)
    assert torch.equal(call(q3, k3)[0], few[0]) and used[-1].kernel.fn is K._rope_fwd_heads
    n = len(used)
    monkeypatch.setattr(L, "PLANS", False)
    call(q, k)
    assert len(used) == n


def test_rope_plans_key_the_table_dtype(monkeypatch):
    """fp32 and bf16 tables are tuned apart (the tuned key holds the table dtype), so a plan made
    with one is not taken for the other."""
    from profkit.kernels import _launch as L

    monkeypatch.setattr(K, "_PLANS", L.Plans())
    q, k, pos = randn(6, 4, 16, dtype="bf16"), randn(6, 2, 16, dtype="bf16"), torch.arange(6)
    for dt in (torch.bfloat16, torch.float32):
        cos, sin = K.rope_cache(64, 16, dtype=dt)
        K.rope(q, k, cos, sin, pos)
    assert len(K._PLANS.d) == 2 and {key[10] for key in K._PLANS.d} == {torch.bfloat16, torch.float32}  # qk_plan_key's table dtype
