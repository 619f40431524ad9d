"""bf16 / fp16 matmul C = A @ B, A (M, K), B (K, N), C (M, N): a ladder of Triton versions.

    naive           tl.dot on 32x32x32 tiles, one program per tile in row-major order,
                    no software pipelining (num_stages=1)
    tiled           128x256x64 tiles (8 warps, 3 stages), grouped ("swizzled") program order so
                    GROUP_M row-panels of A stay in L2 while B's column panels stream
    autotuned       triton.autotune over tile sizes, warps, stages and GROUP_M, keyed on (M, N, K);
                    ``autotune_choices()`` returns the config chosen for every key
    persistent_tma  one program per SM looping over tiles, operands loaded through tensor
                    descriptors (TMA on Hopper); warp-specialized when the installed Triton
                    accepts tl.range(..., warp_specialize=True) and the compile succeeds;
                    autotuned over tiles that leave a small last wave (e.g. 128x128 at M=4096,
                    N=6144: 1536 tiles, 11.6 waves on 132 SMs, against 5.8 for 128x256)
    splitk          decode shapes (M <= 256): K split over SPLIT programs per output tile so
                    that a few tiles still fill every SM; fp32 partials reduced (and cast) by
                    a second kernel. Weight streaming is the cost: N*K*2 bytes at M = 1..64
    cublas          torch.matmul (the baseline)

float64 reference: ``matmul_reference``. Accumulation is fp32 in every Triton version.
"""

from __future__ import annotations

import functools

import triton
import triton.language as tl

from profkit.model.ops.matmul import MATMUL_SHAPES as SHAPES

from . import Workload, torch_dtype
from ._gemm_common import (
    all_gemm_shapes,
    autotune_cache,
    cast_out,
    ensure_tma_allocator,
    gemm_model,
    has_warp_specialize,
    interpreting,
    num_sms,
    tile_coords,
    tma_supported,
)


@triton.jit
def _matmul_kernel(
    A,
    B,
    C,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    UPCAST: tl.constexpr,
):
    """Pointer-based tile kernel; GROUP_M=1 is plain row-major program order."""
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    if GROUP_M == 1:
        pid_m = pid // num_pid_n
        pid_n = pid % num_pid_n
    else:
        pid_m, pid_n = tile_coords(pid, num_pid_m, num_pid_n, GROUP_M)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptr = A + rm[:, None].to(tl.int64) * stride_am + rk[None, :] * stride_ak
    b_ptr = B + rk[:, None] * stride_bk + rn[None, :].to(tl.int64) * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptr, mask=(rm[:, None] < M) & (rk[None, :] < k_left), other=0.0)
        b = tl.load(b_ptr, mask=(rk[:, None] < k_left) & (rn[None, :] < N), other=0.0)
        if UPCAST:  # interpreter only, see UPCAST_NOTE
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc)
        a_ptr += BLOCK_K * stride_ak
        b_ptr += BLOCK_K * stride_bk
    c_ptr = C + rm[:, None].to(tl.int64) * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptr, cast_out(acc, C.dtype.element_ty, UPCAST), mask=(rm[:, None] < M) & (rn[None, :] < N))


def _autotune_configs():
    if interpreting():  # one config: the interpreter cannot time, and is slow on big tiles
        return [triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 4}, num_warps=4, num_stages=1)]
    cfg = []
    # big tiles for large M, narrow-M tiles for decode-like shapes; kept small: the GPU
    # sweep must stay within its time budget (each config compiles once, times per shape)
    for bm, bn, bk, w, s, g in [
        (128, 256, 64, 8, 3, 8),
        (256, 128, 64, 8, 3, 8),
        (128, 128, 64, 4, 4, 8),
        (128, 128, 128, 8, 3, 16),
        (64, 128, 64, 4, 4, 8),
        (64, 256, 64, 4, 4, 8),
        (16, 128, 128, 4, 4, 1),
        (16, 64, 256, 4, 3, 1),
    ]:
        cfg.append(
            triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": g}, num_warps=w, num_stages=s)
        )
    return cfg


def _prune(configs, named_args, **kw):
    """Drop tile heights far above M (a 256-row tile for M=16 only wastes MMA work)."""
    m = named_args["M"]
    keep = [
        c for c in configs if c.kwargs["BLOCK_M"] <= max(16, triton.next_power_of_2(m)) * 2 or c.kwargs["BLOCK_M"] <= 64
    ]
    return keep or configs


_matmul_autotuned = triton.autotune(
    configs=_autotune_configs(), key=["M", "N", "K"], prune_configs_by={"early_config_prune": _prune}
)(_matmul_kernel)


def _prep(a, b, out):
    import torch

    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul: shapes {tuple(a.shape)} @ {tuple(b.shape)}")
    if a.dtype != b.dtype:
        raise ValueError(f"matmul: dtypes {a.dtype} vs {b.dtype}")
    M, K = a.shape
    N = b.shape[1]
    if out is None:
        out = torch.empty((M, N), dtype=a.dtype, device=a.device)
    elif tuple(out.shape) != (M, N) or out.dtype != a.dtype:
        raise ValueError(f"matmul: out {tuple(out.shape)} {out.dtype}, want {(M, N)} {a.dtype}")
    return M, N, K, out


def _launch(kernel, a, b, out, grid, **meta):
    M, N, K, out = _prep(a, b, out)
    kernel[grid(M, N)](
        a,
        b,
        out,
        M,
        N,
        K,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        out.stride(0),
        out.stride(1),
        UPCAST=interpreting(),
        **meta,
    )
    return out


def matmul_naive(a, b, out=None):
    return _launch(
        _matmul_kernel,
        a,
        b,
        out,
        lambda M, N: (triton.cdiv(M, 32) * triton.cdiv(N, 32),),
        BLOCK_M=32,
        BLOCK_N=32,
        BLOCK_K=32,
        GROUP_M=1,
        num_warps=4,
        num_stages=1,
    )


TILED_CONFIG = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3)


def matmul_tiled(a, b, out=None):
    c = TILED_CONFIG
    return _launch(
        _matmul_kernel, a, b, out, lambda M, N: (triton.cdiv(M, c["BLOCK_M"]) * triton.cdiv(N, c["BLOCK_N"]),), **c
    )


def matmul_autotuned(a, b, out=None):
    return _launch(
        _matmul_autotuned,
        a,
        b,
        out,
        lambda M, N: lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),),
    )


def autotune_choices() -> dict[str, dict[str, str]]:
    """Config chosen per autotune key (M x N x K x dtypes...) for each autotuned kernel."""
    return {
        "matmul.autotuned": autotune_cache(_matmul_autotuned),
        "matmul.persistent_tma": autotune_cache(_matmul_tma_autotuned),
    }


# ---- persistent + tensor descriptors (TMA) --------------------------------------------


@triton.jit
def _matmul_tma_persistent(
    A,
    B,
    C,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    NUM_SMS: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr,
    FLATTEN: tl.constexpr,
    UPCAST: tl.constexpr,
):
    # A (M, K), B (K, N), C (M, N), all row-major; out-of-bounds boxes read zeros and the
    # TMA store clips, so no masks.
    a_desc = tl.make_tensor_descriptor(A, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(B, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(C, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    start = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    for tile_id in tl.range(start, num_tiles, NUM_SMS, flatten=FLATTEN, warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        om = pid_m * BLOCK_M
        on = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            ok = ki * BLOCK_K
            a = a_desc.load([om, ok])
            b = b_desc.load([ok, on])
            if UPCAST:  # interpreter only, see UPCAST_NOTE
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            acc = tl.dot(a, b, acc)
        c_desc.store([om, on], cast_out(acc, C.dtype.element_ty, UPCAST))


def _tma_configs():
    if interpreting():
        return [triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 4}, num_warps=4, num_stages=1)]
    return [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": g}, num_warps=w, num_stages=s)
        for bm, bn, bk, w, s, g in [
            (128, 256, 64, 8, 3, 8),
            (128, 128, 64, 8, 4, 8),
            (64, 128, 128, 4, 4, 8),
            (64, 256, 64, 4, 4, 8),
            (128, 128, 64, 4, 4, 8),
            (256, 128, 64, 8, 3, 8),
            (128, 256, 64, 8, 4, 16),
            (128, 128, 128, 8, 3, 8),
        ]
    ]


_matmul_tma_autotuned = triton.autotune(configs=_tma_configs(), key=["M", "N", "K", "WARP_SPECIALIZE"])(
    _matmul_tma_persistent
)

# None: not tried yet; True/False once a warp-specialized launch compiled or failed
_WS_STATE: dict[str, object] = {"ok": None, "error": None}


def matmul_persistent_tma(a, b, out=None, warp_specialize: bool | None = None):
    """Persistent TMA matmul. warp_specialize=None: try it once where the installed Triton
    has it (on a GPU), fall back to the plain software-pipelined loop if the compile fails."""
    why = tma_supported(a, b)
    M, N, K, out = _prep(a, b, out)
    if why is None and (out.data_ptr() % 16 or not out.is_contiguous()):
        why = "TMA: out must be contiguous and 16-byte aligned"
    if why:
        raise NotImplementedError(f"persistent_tma: {why}")
    ensure_tma_allocator()
    sms = num_sms(a.device)
    grid = lambda meta: (min(sms, triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"])),)
    ws = warp_specialize
    if ws is None:
        # Seen on an H200 with Triton 3.6: the warp-specialized version of this kernel fails in
        # ConvertTritonGPUToLLVM ("PassManager::run failed", with a long MLIR dump on stderr), so
        # by default it is tried on Blackwell (cc >= 10) only; warp_specialize=True forces it.
        import torch

        ws = (
            has_warp_specialize()
            and not interpreting()
            and _WS_STATE["ok"] is not False
            and torch.cuda.get_device_capability(a.device)[0] >= 10
        )
        if not ws and _WS_STATE["error"] is None and not interpreting():
            _WS_STATE["error"] = "not tried: default is cc >= 10 (on H200 + Triton 3.6 the compile failed)"
    upcast = interpreting()
    if ws:
        try:
            # FLATTEN with warp specialization is Blackwell-only; keep the nest on Hopper
            _matmul_tma_autotuned[grid](
                a, b, out, M, N, K, NUM_SMS=sms, WARP_SPECIALIZE=True, FLATTEN=False, UPCAST=upcast
            )
            _WS_STATE["ok"] = True
            return out
        except Exception as e:  # compile error on this Triton / GPU: remember, fall back
            if warp_specialize:
                raise
            _WS_STATE["ok"] = False
            _WS_STATE["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    _matmul_tma_autotuned[grid](
        a, b, out, M, N, K, NUM_SMS=sms, WARP_SPECIALIZE=False, FLATTEN=not interpreting(), UPCAST=upcast
    )
    return out


def warp_specialize_status() -> dict:
    return {"available": has_warp_specialize(), "used": _WS_STATE["ok"], "error": _WS_STATE["error"]}


# ---- split-K for decode shapes ---------------------------------------------------------


@triton.jit
def _matmul_splitk(
    A,
    B,
    P,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    k_per_split,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    UPCAST: tl.constexpr,
):
    """P[s] (fp32, M x N) = A[:, ks] @ B[ks, :] over split s's K range."""
    pid_n = tl.program_id(0)
    pid_s = tl.program_id(1)
    pid_m = tl.program_id(2)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    k0 = pid_s * k_per_split
    k_end = tl.minimum(k0 + k_per_split, K)
    a_ptr = A + rm[:, None].to(tl.int64) * stride_am + (k0 + rk[None, :]) * stride_ak
    b_ptr = B + (k0 + rk[:, None]).to(tl.int64) * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(k0, k_end, BLOCK_K):
        k_left = k_end - k
        a = tl.load(a_ptr, mask=(rm[:, None] < M) & (rk[None, :] < k_left), other=0.0)
        b = tl.load(b_ptr, mask=(rk[:, None] < k_left) & (rn[None, :] < N), other=0.0, eviction_policy="evict_first")
        if UPCAST:  # interpreter only, see UPCAST_NOTE
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc)
        a_ptr += BLOCK_K * stride_ak
        b_ptr += BLOCK_K * stride_bk
    p_ptr = P + (pid_s * M + rm[:, None]).to(tl.int64) * N + rn[None, :]
    tl.store(p_ptr, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def _splitk_reduce(P, C, MN, SPLIT, BLOCK: tl.constexpr, UPCAST: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < MN
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for s in range(0, SPLIT):
        acc += tl.load(P + s * MN + offs, mask=m, other=0.0)
    tl.store(C + offs, cast_out(acc, C.dtype.element_ty, UPCAST), mask=m)


SPLITK_MAX_M = 256


@functools.cache
def splitk_candidates(M: int, N: int, K: int, sms: int) -> tuple[tuple[int, int, int, int, int], ...]:
    """(BLOCK_N, BLOCK_K, SPLIT, num_warps, num_stages), the default first: SPLIT such that the
    grid holds ~2-4 programs per SM, each K range a whole number of BLOCK_K."""
    bm = max(16, min(64, triton.next_power_of_2(M)))
    out = []
    for bn, bk, w, st, per_sm in [
        (64, 128, 4, 4, 2),
        (128, 128, 4, 4, 2),
        (64, 256, 4, 3, 2),
        (32, 256, 4, 4, 4),
        (128, 64, 4, 5, 4),
        (64, 128, 4, 4, 4),
    ]:
        tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
        split = max(1, min(triton.cdiv(per_sm * sms, tiles), K // (2 * bk)))
        c = (bn, bk, split, w, st)
        if c not in out:
            out.append(c)
    return tuple(out)


def matmul_splitk(a, b, out=None, config=None):
    """Split-K matmul for M <= SPLITK_MAX_M (decode); config: (BLOCK_N, BLOCK_K, SPLIT,
    num_warps, num_stages), else the fastest candidate on this GPU (timing.tuned)."""
    import torch

    from .timing import tuned

    M, N, K, out = _prep(a, b, out)
    if M > SPLITK_MAX_M:
        raise NotImplementedError(f"splitk: for decode shapes (M <= {SPLITK_MAX_M}); M = {M}")
    if not out.is_contiguous():
        raise ValueError("splitk: out must be contiguous")
    bm = max(16, min(64, triton.next_power_of_2(M)))
    scratch = {}

    def launch(cfg):
        bn, bk, split, w, st = cfg
        k_per_split = triton.cdiv(triton.cdiv(K, split), bk) * bk
        split = triton.cdiv(K, k_per_split)
        p = scratch.get(split)
        if p is None:
            p = scratch[split] = torch.empty((split, M, N), dtype=torch.float32, device=a.device)
        _matmul_splitk[(triton.cdiv(N, bn), split, triton.cdiv(M, bm))](
            a,
            b,
            p,
            M,
            N,
            K,
            a.stride(0),
            a.stride(1),
            b.stride(0),
            b.stride(1),
            k_per_split,
            BLOCK_M=bm,
            BLOCK_N=bn,
            BLOCK_K=bk,
            UPCAST=interpreting(),
            num_warps=w,
            num_stages=st,
        )
        _splitk_reduce[(triton.cdiv(M * N, 1024),)](
            p, out, M * N, split, BLOCK=1024, UPCAST=interpreting(), num_warps=4
        )

    cands = splitk_candidates(M, N, K, num_sms(a.device))
    launch(config or tuned(("matmul_splitk", M, N, K, a.dtype, a.device), cands, launch, a.device))
    return out


# ---- baseline, reference, workload ---------------------------------------------------


def matmul_cublas(a, b, out=None):
    import torch

    return torch.matmul(a, b, out=out)


def matmul_reference(a, b):
    return a.double() @ b.double()


VARIANTS = {
    "naive": matmul_naive,
    "tiled": matmul_tiled,
    "autotuned": matmul_autotuned,
    "persistent_tma": matmul_persistent_tma,
    "splitk": matmul_splitk,
    "cublas": matmul_cublas,
}


def _setup(p: dict, dtype: str, device: str):
    import torch

    dt = torch_dtype(dtype)
    # scaled so that C has O(1) entries whatever K
    a = torch.randn(p["M"], p["K"], device=device, dtype=torch.float32).div_(p["K"] ** 0.25).to(dt)
    b = torch.randn(p["K"], p["N"], device=device, dtype=torch.float32).div_(p["K"] ** 0.25).to(dt)
    return {"a": a, "b": b, "dtype": dtype}


def all_shapes() -> dict[str, dict]:
    """The full sweep (benchmarks/gemm.py --full): every LLM projection x M, and 8192^3."""
    return all_gemm_shapes()


WORKLOAD = Workload(
    op="matmul",
    setup=_setup,
    variants={name: (lambda fn: lambda s: fn(s["a"], s["b"]))(fn) for name, fn in VARIANTS.items()},
    shapes=SHAPES,
    model=gemm_model,
    dtypes=("bf16", "fp16"),
    default_dtype="bf16",
    description="bf16/fp16 GEMM ladder: naive -> tiled+grouped -> autotuned -> persistent TMA, vs cuBLAS",
    reference=lambda s, v: matmul_reference(s["a"], s["b"]),
    numerics="gemm",
    baselines=("cublas",),
    quick=("llama8b-qkv-m16", "llama8b-gateup-m1024", "llama8b-qkv-m4096", "m8192-n8192-k8192"),
    selftest={"t-m33-n24-k40": {"M": 33, "N": 24, "K": 40}, "t-m1-n48-k64": {"M": 1, "N": 48, "K": 64}},
    bench="gemm",
)
