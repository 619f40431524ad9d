"""fp8 (e4m3) GEMM with promotion, warp-specialized, in CUDA C++ (variants "cuda_ws112_tma8*").

The kernel in kernels/cuda/fp8_gemm.cu issues cuBLAS's own instruction, wgmma m64n112k32: one
TMA producer warpgroup, two consumer warpgroups of 64 rows, an mbarrier ring, promotion every
`chunk` k tiles into fp32, staggered between the warpgroups, persistent grouped tile order; see
the source's header. The registered launch: no cluster (launched plainly, so the SMs of a GPC take
neighbouring tiles and the L2 request coalescer merges their reads), GROUP_M 8 (B read from DRAM
about once), the epilogue through shared memory and TMA stores (per-tensor at parity with
cuBLAS, per-row 1.12-1.16x; benchmarks/results/gemm.md). Its other arguments (clusters sharing a
tile by TMA multicast, steer, kflip, diagnostic, trace) are the probes that measured it.

Operands: a (M, K) and b (N, K) contiguous e4m3, K a multiple of 16, N of 8; scales fp32 per
tensor (one each) or per row ((M,) and (N,)); bf16 out. Needs a Hopper GPU (sm_90) and nvcc
(the source is built once, for sm_90a, and cached: kernels/_cuda_build.py).
"""

from __future__ import annotations

from . import _cuda_build

DEFAULT = dict(bn=112, stages=7, chunk=16, stagger=True, group_m=8, cluster=2, cluster_n=1)  # measured on an H100
CLUSTERS = (1, 2)
TILE_N = (112, 128)
MAX_STAGES = {112: 7, 128: 7}  # the ring within the 227 KB a block may have (1 KB for alignment)
_SIGNATURE = ("profkit_fp8_gemm_ws", ["p"] * 5 + ["i"] * 16 + ["p", "p"])


def available() -> str | None:
    """None if the kernel can run here, else why not (the build needs nvcc: ToolMissing then)."""
    return hopper_missing("wgmma, setmaxnreg and TMA")


def hopper_missing(needs: str) -> str | None:
    """None on a Hopper GPU (sm_90), else why not, naming what the kernel `needs` of it."""
    import torch

    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        return f"needs a Hopper GPU (sm_90): {needs}"
    return None


def host_args(variant: str, a, b, sa, sb, out, need=None):
    """The kernel's launch checks and operands: (M, N, K, out, sa, sb), out allocated (bf16) if
    None, the scales as flat fp32 vectors (one element: per-tensor); NotImplementedError naming the
    variant where the GPU or the operands do not suit (TMA: contiguous, K a multiple of 16, N of 8)."""
    import torch

    why = (need or available)()
    if why:
        raise NotImplementedError(f"{variant}: {why}")
    M, K = a.shape
    N = b.shape[0]
    if not (a.is_contiguous() and b.is_contiguous() and K % 16 == 0 and N % 8 == 0):
        raise NotImplementedError(f"{variant}: contiguous operands, K a multiple of 16 and N of 8 (TMA)")
    if out is None:
        out = torch.empty((M, N), device=a.device, dtype=torch.bfloat16)
    return M, N, K, out, sa.reshape(-1).float(), sb.reshape(-1).float()


def _fn():
    import ctypes

    lib = _cuda_build.load("fp8_gemm")
    f = getattr(lib, _SIGNATURE[0])
    if f.argtypes is None:
        f.argtypes = [{"p": ctypes.c_void_p, "i": ctypes.c_int}[c] for c in _SIGNATURE[1]]
        f.restype = ctypes.c_int
    return lib, f


# the epilogue (Params::epi): bf16 pairs stored from registers, or through shared memory and TMA
# stores
EPILOGUES = {"registers": 0, "tma": 1}


def smem_bytes(bn: int, stages: int, epilogue: str = "registers") -> int:
    """The kernel's shared memory (the source's smem_bytes): the ring, its barriers, the epilogue's staging."""
    ring = 1024 + stages * (128 * 128 + bn * 128) + 16 * stages
    return -(-ring // 128) * 128 + 2 * 64 * (bn // 2) * 2 if EPILOGUES[epilogue] else ring


def check_config(
    bn: int, stages: int, chunk: int, group_m: int, cluster: int = 1, cluster_n: int = 1, epilogue: str = "registers"
) -> None:
    """ValueError naming the first argument outside what the kernel takes."""
    for what, v in (("cluster", cluster), ("cluster_n", cluster_n)):
        if v not in CLUSTERS:
            raise ValueError(f"cuda_ws: {what} {v} is not one of {CLUSTERS}")
    if bn not in TILE_N:
        raise ValueError(f"cuda_ws: bn {bn} is not one of {TILE_N}")
    if not 2 <= stages <= MAX_STAGES[bn]:
        raise ValueError(f"cuda_ws: stages {stages} not in 2..{MAX_STAGES[bn]} at bn {bn} (shared memory)")
    if epilogue not in EPILOGUES:
        raise ValueError(f"cuda_ws: epilogue {epilogue!r} is not one of {', '.join(EPILOGUES)}")
    if smem_bytes(bn, stages, epilogue) > 227 * 1024:
        raise ValueError(
            f"cuda_ws: {stages} stages and the {epilogue} epilogue need "
            f"{smem_bytes(bn, stages, epilogue)} bytes of shared memory, over 227 KB"
        )
    if chunk < 1 or group_m < 1:
        raise ValueError(f"cuda_ws: chunk ({chunk}) and group_m ({group_m}) must be at least 1")


def fp8_gemm_cuda(
    a,
    b,
    sa,
    sb,
    out=None,
    programs: int | None = None,
    bn: int = DEFAULT["bn"],
    stages: int = DEFAULT["stages"],
    chunk: int = DEFAULT["chunk"],
    stagger: bool = bool(DEFAULT["stagger"]),
    group_m: int = DEFAULT["group_m"],
    cluster: int = DEFAULT["cluster"],
    cluster_n: int = DEFAULT["cluster_n"],
    steer: bool = False,
    kflip: bool = False,
    l2_promotion: int = 256,
    diagnostic: int = 0,
    epilogue: str = "registers",
    trace=None,
):
    """a (M, K) fp8 e4m3, b (N, K) fp8 e4m3, sa/sb fp32 scalars (per-tensor) or (M,)/(N,)
    (per-row); bf16 out. Promotion every `chunk` k tiles of 128; bn the tile's columns (112, or
    128 as the control); the cluster is `cluster` CTAs along M, sharing B's tile by TMA multicast,
    by `cluster_n` along N, sharing A's (each 1 or 2); programs: the persistent grid's CTAs at
    most (default: the SMs); steer: the clusters take their places in the tile order GPC by GPC,
    as measured once per device and launch shape (the source's steer()); kflip: every other tile
    of a CTA runs its k loop from K's end down, where the previous tile's last reads are still in
    the L2; l2_promotion: the operands' TMA L2 promotion, 0, 128 (Triton's) or 256 bytes.
    diagnostic (probes only, the product is wrong): 1 loads k tiles 0 and 1 only (operands
    L2-resident), 2 loads nothing (the MMAs run without waiting for data). epilogue: "registers"
    (bf16 pairs stored from registers) or "tma" (through shared memory, TMA stores).
    trace (probes): a CUDA int64 tensor of 32 entries a CTA at least; each consumer warpgroup's
    thread 0 writes 16 clock64 stamps at (CTA * 2 + consumer) * 16: its start, per tile (the first
    4) the k loop's start and end and the epilogue's end, then its SM, tiles and end."""
    import torch

    check_config(bn, stages, chunk, group_m, cluster, cluster_n, epilogue)
    if l2_promotion not in (0, 128, 256):
        raise ValueError(f"cuda_ws: l2_promotion {l2_promotion} is not 0, 128 or 256")
    if diagnostic not in (0, 1, 2):
        raise ValueError(f"cuda_ws: diagnostic {diagnostic} is not 0, 1 or 2")
    if diagnostic and kflip:
        raise ValueError("cuda_ws: kflip and a diagnostic both choose the k tiles loaded: pass one")
    kmode = {0: int(kflip), 1: 2, 2: 3}[diagnostic]
    M, N, K, out, sa, sb = host_args(f"cuda_ws{bn}", a, b, sa, sb, out, need=available)
    per_row = sa.numel() != 1
    if sa.numel() != (M if per_row else 1) or sb.numel() != (N if per_row else 1):
        raise ValueError(
            f"cuda_ws: scales of {sa.numel()} and {sb.numel()} elements for M {M}, N {N} (per row: M and "
            "N; per tensor: one each)"
        )
    if max(M, N, K) >= 2**31:
        raise ValueError(f"cuda_ws: {M} x {N} x {K} is past the kernel's int32 range")
    if tuple(out.shape) != (M, N) or out.dtype != torch.bfloat16 or not out.is_contiguous():
        raise ValueError(f"cuda_ws: out must be a contiguous ({M}, {N}) bfloat16 tensor")
    if per_row and sb.data_ptr() % 8:  # the epilogue reads column scales in pairs (8 bytes)
        sb = sb.clone()
    progs = programs or torch.cuda.get_device_properties(a.device).multi_processor_count
    if trace is not None and (
        trace.dtype != torch.int64
        or trace.device != a.device
        or not trace.is_contiguous()
        or trace.numel() < 32 * progs
    ):
        raise ValueError(
            f"cuda_ws: trace must be a contiguous int64 tensor on {a.device} of {32 * progs} entries at least"
        )
    lib, f = _fn()
    _cuda_build.check(
        lib,
        f(
            a.data_ptr(),
            b.data_ptr(),
            sa.data_ptr(),
            sb.data_ptr(),
            out.data_ptr(),
            M,
            N,
            K,
            int(per_row),
            bn,
            stages,
            chunk,
            int(stagger),
            group_m,
            cluster,
            cluster_n,
            progs,
            int(steer),
            kmode,
            l2_promotion,
            EPILOGUES[epilogue],
            trace.data_ptr() if trace is not None else None,
            _cuda_build.stream_of(a),
        ),
        f"cuda_ws{bn}",
    )
    return out
