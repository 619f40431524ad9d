"""Fused gated MLP (Llama / Qwen): y = silu(x @ Wg^T) * (x @ Wu^T), one Triton kernel.

x (M, H) activations, Wg and Wu (I, H) in nn.Linear layout (the two halves of the decoder's
concatenated gate/up weight), y (M, I). Each program owns an (BLOCK_M, BLOCK_N) tile of y and
walks K = H once, loading the x tile once for two MMAs (one against Wg, one against Wu) into
two fp32 accumulators; the epilogue applies silu(g) * u in fp32 and writes y. Against the
unfused block (one cuBLAS GEMM writing gate and up, [M, 2I], then the SwiGLU kernel reading
them back) this saves the 2 x M x I intermediate's write and read and a launch.

Two numbers (bf16, Llama-3-8B H = 4096, I = 14336):
    decode, M <= 64: bytes ~ 2 x I x H x 2 = 235 MB of weights (x and y are < 4 MB), FLOPs
        4 M I H <= 15 GFLOP: memory-bound at any M here (intensity <= 64 FLOP/B, ridge ~ 200-300):
        the floor is the weight stream, 55 us at 4.3 TB/s (H200), 78 us at 3.0 TB/s (H100).
    prefill, M = 4096: 0.96 TFLOP, 1.2 ms at ~800 TFLOP/s; the unfused intermediate (470 MB
        written and read, 235 MB more written by SwiGLU) costs ~0.1-0.2 ms on top of the GEMM.
So at decode the fused kernel must stream weights at least as fast as cuBLAS's GEMV-like
kernels and wins the launch and intermediate; at prefill it must reach cuBLAS's MMA rate
within the ~10 % the intermediate costs.

Variants: "triton" (fused); baselines "cublas_swiglu" (the decoder's lab path: one cuBLAS GEMM
of the concatenated weight, [2I, M], then the lab SwiGLU on its contiguous halves), "eager"
(F.silu(F.linear(x, Wg)) * F.linear(x, Wu)), "compile" (torch.compile of eager), "liger"
(Liger's SwiGLU MLP without its down projection: two F.linear and LigerSiLUMulFunction).
Reference: float64; check: relative L2 error (kernels/_numerics.py rel_l2).
"""

from __future__ import annotations

import triton
import triton.language as tl

from profkit.model.ops.matmul import GATED_MLP_SHAPES as SHAPES
from profkit.model.ops.matmul import gated_mlp_all_shapes as all_shapes  # noqa: F401  (benchmarks/gemm.py --full)
from profkit.model.ops.matmul import gated_mlp_model as model

from . import Workload, torch_dtype
from ._gemm_common import autotune_cache, cast_out, interpreting, tile_coords
from ._numerics import compiled, has_module


@triton.jit
def _gated_mlp_kernel(
    X,
    WG,
    WU,
    Y,
    M,
    N,
    K,
    stride_xm,
    stride_wn,
    stride_ym,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    UPCAST: tl.constexpr,
):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = tile_coords(pid, num_pid_m, num_pid_n, GROUP_M)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    x_ptr = X + rm[:, None].to(tl.int64) * stride_xm + rk[None, :]
    w_off = rn[None, :].to(tl.int64) * stride_wn + rk[:, None]  # (BK, BN) tile of W^T
    g_ptr = WG + w_off
    u_ptr = WU + w_off
    mmask = rm[:, None] < M
    nmask = rn[None, :] < N
    acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_u = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        kmask = rk < k_left
        x = tl.load(x_ptr, mask=mmask & kmask[None, :], other=0.0)
        wg = tl.load(g_ptr, mask=kmask[:, None] & nmask, other=0.0)
        wu = tl.load(u_ptr, mask=kmask[:, None] & nmask, other=0.0)
        if UPCAST:  # interpreter only (see _gemm_common.UPCAST_NOTE)
            x = x.to(tl.float32)
            wg = wg.to(tl.float32)
            wu = wu.to(tl.float32)
        acc_g = tl.dot(x, wg, acc_g)
        acc_u = tl.dot(x, wu, acc_u)
        x_ptr += BLOCK_K
        g_ptr += BLOCK_K
        u_ptr += BLOCK_K
    y = acc_g * tl.sigmoid(acc_g) * acc_u
    y_ptr = Y + rm[:, None].to(tl.int64) * stride_ym + rn[None, :]
    tl.store(y_ptr, cast_out(y, Y.dtype.element_ty, UPCAST), mask=mmask & nmask)


DECODE_M = 64  # at or below: the decode tiles (narrow M, narrow N: many programs stream the weights)


def _configs():
    if interpreting():
        return [triton.Config({"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 4}, num_warps=4, num_stages=1)]
    cfg = []
    # decode: BLOCK_M 16 / 64, narrow N so that I / BLOCK_N programs cover every SM several times
    for bm, bn, bk, w, s in [
        (16, 32, 256, 4, 4),
        (16, 64, 128, 4, 4),
        (16, 64, 256, 4, 3),
        (16, 32, 128, 4, 6),
        (16, 128, 128, 4, 4),
        (64, 32, 128, 4, 4),
        (64, 64, 128, 4, 4),
        (64, 64, 64, 4, 5),
    ]:
        cfg.append(
            triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 1}, num_warps=w, num_stages=s)
        )
    # prefill: two accumulators, so 128 x 128 holds as many registers as one 128 x 256 tile
    for bm, bn, bk, w, s in [
        (128, 128, 64, 8, 3),
        (128, 128, 64, 8, 4),
        (128, 64, 64, 4, 4),
        (64, 128, 64, 4, 4),
        (128, 64, 64, 8, 4),
        (256, 64, 64, 8, 3),
    ]:
        cfg.append(
            triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_warps=w, num_stages=s)
        )
    return cfg


def _prune(configs, named_args, **kw):
    m = named_args["M"]
    if m <= DECODE_M:
        keep = [c for c in configs if c.kwargs["GROUP_M"] == 1 and c.kwargs["BLOCK_M"] == (16 if m <= 16 else 64)]
    else:
        keep = [c for c in configs if c.kwargs["GROUP_M"] > 1]
    return keep or configs


_fused = triton.autotune(configs=_configs(), key=["M", "N", "K"], prune_configs_by={"early_config_prune": _prune})(
    _gated_mlp_kernel
)


def gated_mlp(x, w_gate, w_up, out=None):
    """y = silu(x @ w_gate^T) * (x @ w_up^T); x (M, H), w_gate/w_up (I, H), y (M, I)."""
    import torch

    if x.ndim != 2 or w_gate.shape != w_up.shape or w_gate.shape[1] != x.shape[1]:
        raise ValueError(
            f"gated_mlp: x {tuple(x.shape)}, w_gate {tuple(w_gate.shape)}, w_up {tuple(w_up.shape)} "
            "(weights are (I, H))"
        )
    if x.stride(1) != 1:
        x = x.contiguous()
    if w_gate.stride(1) != 1 or w_up.stride(1) != 1 or w_gate.stride(0) != w_up.stride(0):
        w_gate, w_up = w_gate.contiguous(), w_up.contiguous()
    M, K = x.shape
    N = w_gate.shape[0]
    if out is None:
        out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if out.stride(1) != 1:
        raise ValueError("gated_mlp: out must have unit column stride")
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)
    _fused[grid](x, w_gate, w_up, out, M, N, K, x.stride(0), w_gate.stride(0), out.stride(0), UPCAST=interpreting())
    return out


def gated_mlp_eager(x, w_gate, w_up):
    """LlamaMLP / Qwen2MLP without the down projection: act_fn(gate_proj(x)) * up_proj(x)."""
    import torch.nn.functional as F

    return F.silu(F.linear(x, w_gate)) * F.linear(x, w_up)


def gated_mlp_cublas_swiglu(x, w_gu):
    """The decoder's lab path: gate and up in one cuBLAS GEMM written transposed ([2I, M], so
    the halves are contiguous), then the lab SwiGLU; returns y as a (M, I) view."""
    import torch

    from .swiglu import swiglu

    inter = w_gu.shape[0] // 2
    gu_t = torch.mm(w_gu, x.t())
    return swiglu(gu_t[:inter], gu_t[inter:]).t()


def gated_mlp_reference(x, w_gate, w_up):
    x64 = x.double()
    g = x64 @ w_gate.double().T
    return g * g.sigmoid() * (x64 @ w_up.double().T)


def _liger(x, w_gate, w_up):
    import torch.nn.functional as F
    from liger_kernel.ops.swiglu import LigerSiLUMulFunction

    return LigerSiLUMulFunction.apply(F.linear(x, w_gate), F.linear(x, w_up))


def autotune_choices() -> dict[str, dict[str, str]]:
    return {"gated_mlp.triton": autotune_cache(_fused)}


def _setup(p: dict, dtype: str, device: str):
    import torch

    dt = torch_dtype(dtype)
    x = torch.randn(p["M"], p["K"], device=device, dtype=dt)
    w_gu = (torch.randn(2 * p["N"], p["K"], device=device) / p["K"] ** 0.5).to(dt)
    return {"x": x, "w_gu": w_gu, "w_gate": w_gu[: p["N"]], "w_up": w_gu[p["N"] :]}


WORKLOAD = Workload(
    op="gated_mlp",
    setup=_setup,
    variants={
        "triton": lambda s: gated_mlp(s["x"], s["w_gate"], s["w_up"]),
        "cublas_swiglu": lambda s: gated_mlp_cublas_swiglu(s["x"], s["w_gu"]),
        "eager": lambda s: gated_mlp_eager(s["x"], s["w_gate"], s["w_up"]),
        "compile": lambda s: compiled("gated_mlp", gated_mlp_eager)(s["x"], s["w_gate"], s["w_up"]),
        **({"liger": lambda s: _liger(s["x"], s["w_gate"], s["w_up"])} if has_module("liger_kernel") else {}),
    },
    shapes=SHAPES,
    model=model,
    dtypes=("bf16", "fp16"),
    default_dtype="bf16",
    description="fused gate + up projection with SwiGLU (silu(x Wg^T) * x Wu^T) vs cuBLAS + SwiGLU, compile, Liger",
    requires={"liger": "liger_kernel"},
    reference=lambda s, v: gated_mlp_reference(s["x"], s["w_gate"], s["w_up"]),
    # relative L2 error: silu(g) * u is heavy-tailed (max |y| ~ 30 x rms at 58M elements), so the
    # GEMM family's max|err| / rms bound fails on the bf16 output rounding alone (every
    # baseline failed it on an H100, 8.9e-2 to 2.0e-1 against 5e-2)
    numerics="rel_l2",
    baselines=("cublas_swiglu", "compile", "liger", "eager"),
    peers={"triton": "cublas_swiglu"},
    quick=("llama8b-m1", "llama8b-m16", "llama8b-m64", "llama8b-m4096"),
    selftest={"t-m1-n40-k64": {"M": 1, "N": 40, "K": 64}, "t-m20-n40-k72": {"M": 20, "N": 40, "K": 72}},
    bench="gemm",
)
