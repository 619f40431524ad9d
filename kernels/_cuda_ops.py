"""Python launchers of the CUDA C++ RMSNorm, RoPE, SwiGLU and long-row softmax (kernels/cuda/*.cu).

Same interface and numerics as the Triton launchers in rmsnorm.py / rope.py / swiglu.py
(fp32 math, output rounded once to the input dtype), registered there as variant ``cuda``.
Forward only (no autograd). Arguments are checked here, before anything is compiled or
launched, so a wrong call is a ValueError naming what is wrong rather than a CUDA error.
"""

from __future__ import annotations

import ctypes

from . import _cuda_build

_P = ctypes.c_void_p
_I64 = ctypes.c_longlong
_I32 = ctypes.c_int
_F32 = ctypes.c_float
_PI32 = ctypes.POINTER(ctypes.c_int)

# as kernels/cuda/common.cuh: PK_FP32, PK_FP16, PK_BF16
DTYPE_CODES = {"float32": 0, "float16": 1, "bfloat16": 2}

_SIGNATURES = {
    "rmsnorm": ("profkit_rmsnorm_fwd", [_P, _P, _P, _P, _I64, _I64, _I32, _I32, _F32, _F32, _I32, _P]),
    "rope": ("profkit_rope_fwd", [_P, _P, _P, _P, _P, _P, _P] + [_I64] * 9 + [_I32] * 8 + [_P]),
    "swiglu": ("profkit_swiglu_fwd", [_P, _P, _P, _I64, _I32, _P]),
    "softmax": ("profkit_softmax_cluster_fwd", [_P, _P] + [_I64] * 4 + [_I32] * 6 + [_PI32, _P]),
}


def _fn(name: str):
    lib = _cuda_build.load(name)
    sym, args = _SIGNATURES[name]
    f = getattr(lib, sym)
    if f.argtypes is None:
        f.argtypes, f.restype = args, ctypes.c_int
    return lib, f


def dtype_code(t) -> int:
    name = str(t.dtype).removeprefix("torch.")
    if name not in DTYPE_CODES:
        raise ValueError(f"CUDA kernels take float32, float16 or bfloat16 tensors, not {name}")
    return DTYPE_CODES[name]


def _need_device(*ts) -> None:
    for t in ts:
        if not _cuda_build.on_device(t):
            raise ValueError(f"the CUDA C++ kernels need CUDA tensors (got a tensor on {t.device})")
    if len({str(t.device) for t in ts}) > 1:
        raise ValueError("all tensors must be on one device: " + ", ".join(sorted({str(t.device) for t in ts})))


def _same_dtype(ref, **ts) -> None:
    for name, t in ts.items():
        if t.dtype != ref.dtype:
            raise ValueError(f"{name} is {t.dtype}, the input is {ref.dtype}")


# ---- RMSNorm ---------------------------------------------------------------------------------


def rmsnorm_cuda(x, w, eps: float = 1e-6, gemma: bool = False, out=None, rstd=None):
    """y = x * rsqrt(mean(x^2) + eps) * w  (Gemma: * (1 + w)) over the last dim. out: optional
    preallocated y (shape and dtype of x, contiguous); rstd: optional fp32 [rows] to fill."""
    import torch

    code = dtype_code(x)
    N = x.shape[-1] if x.dim() else 0
    if x.dim() < 1 or N == 0:
        raise ValueError(f"rmsnorm: x needs a non-empty last dim, got shape {tuple(x.shape)}")
    if tuple(w.shape) != (N,):
        raise ValueError(f"rmsnorm: w has shape {tuple(w.shape)}, want ({N},)")
    _same_dtype(x, w=w)
    x2 = x.reshape(-1, N)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    w = w.contiguous()
    M = x2.shape[0]
    if M >= 2**31 or N >= 2**31:
        raise ValueError(f"rmsnorm: {M} rows x {N} is past the kernel's int32 row/column range")
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device) if out is None else out
    if tuple(y.shape) != tuple(x.shape) or y.dtype != x.dtype or not y.is_contiguous():
        raise ValueError(f"rmsnorm: out must be contiguous {tuple(x.shape)} {x.dtype}")
    if rstd is not None and (rstd.dtype != torch.float32 or rstd.numel() != M or not rstd.is_contiguous()):
        raise ValueError(f"rmsnorm: rstd must be a contiguous float32 tensor of {M} elements")
    _need_device(x2, w, y, *([rstd] if rstd is not None else []))
    if M == 0:
        return y
    y2 = y.view(M, N)
    lib, f = _fn("rmsnorm")
    _cuda_build.check(
        lib,
        f(
            x2.data_ptr(),
            w.data_ptr(),
            y2.data_ptr(),
            rstd.data_ptr() if rstd is not None else None,
            x2.stride(0),
            y2.stride(0),
            M,
            N,
            eps,
            1.0 if gemma else 0.0,
            code,
            _cuda_build.stream_of(x2),
        ),
        "rmsnorm (CUDA)",
    )
    return y


# ---- RoPE ------------------------------------------------------------------------------------


def rope_cuda(
    q, k, cos, sin, positions, rotary_dim: int | None = None, interleaved: bool = False, q_out=None, k_out=None
):
    """RoPE on q [T, HQ, D] and k [T, HK, D] with fp32 cos/sin tables [max_pos, rotary_dim // 2];
    returns (q_out, k_out). Pass q_out=q, k_out=k to rotate in place."""
    import torch

    if q.dim() != 3 or k.dim() != 3:
        raise ValueError(f"rope: q and k must be [tokens, heads, head_dim], got {tuple(q.shape)} and {tuple(k.shape)}")
    T, HQ, D = q.shape
    HK = k.shape[1]
    rd = rotary_dim or D
    if k.shape[0] != T or k.shape[2] != D:
        raise ValueError(f"rope: k {tuple(k.shape)} does not match q {tuple(q.shape)}")
    if rd % 2 or rd > D or rd <= 0:
        raise ValueError(f"rope: rotary_dim {rd} must be even and at most head_dim {D}")
    if cos.dim() != 2 or cos.shape[-1] != rd // 2 or tuple(sin.shape) != tuple(cos.shape):
        raise ValueError(f"rope: cos/sin must be [max_pos, {rd // 2}], got {tuple(cos.shape)} / {tuple(sin.shape)}")
    if positions.dim() != 1 or positions.shape[0] != T or positions.dtype.is_floating_point:
        raise ValueError(f"rope: positions must be integer [{T}], got {positions.dtype} {tuple(positions.shape)}")
    code = dtype_code(q)
    _same_dtype(q, k=k)
    if q.stride(-1) != 1:
        q = q.contiguous()
    if k.stride(-1) != 1:
        k = k.contiguous()
    cos = cos.to(torch.float32).contiguous()
    sin = sin.to(torch.float32).contiguous()
    positions = positions.to(torch.int64).contiguous()
    qo = torch.empty(q.shape, dtype=q.dtype, device=q.device) if q_out is None else q_out
    ko = torch.empty(k.shape, dtype=k.dtype, device=k.device) if k_out is None else k_out
    for name, o, i in (("q_out", qo, q), ("k_out", ko, k)):
        if tuple(o.shape) != tuple(i.shape) or o.dtype != i.dtype or o.stride(-1) != 1:
            raise ValueError(f"rope: {name} must be {tuple(i.shape)} {i.dtype} with unit stride on head_dim")
    strides = (
        q.stride(0),
        q.stride(1),
        k.stride(0),
        k.stride(1),
        qo.stride(0),
        qo.stride(1),
        ko.stride(0),
        ko.stride(1),
    )
    if interleaved and any(s % 2 for s in strides):
        raise ValueError("rope: the GPT-J (interleaved) layout needs even token and head strides")
    _need_device(q, k, qo, ko, cos, sin, positions)
    if T == 0:
        return qo, ko
    if max(HQ, HK, D, T) >= 2**31:
        raise ValueError("rope: sizes past the kernel's int32 range")
    in_place = qo.data_ptr() == q.data_ptr() and ko.data_ptr() == k.data_ptr()
    lib, f = _fn("rope")
    _cuda_build.check(
        lib,
        f(
            q.data_ptr(),
            k.data_ptr(),
            qo.data_ptr(),
            ko.data_ptr(),
            cos.data_ptr(),
            sin.data_ptr(),
            positions.data_ptr(),
            *strides,
            cos.stride(0),
            T,
            HQ,
            HK,
            D,
            rd // 2,
            int(interleaved),
            int(rd < D and not in_place),
            code,
            _cuda_build.stream_of(q),
        ),
        "rope (CUDA)",
    )
    return qo, ko


# ---- SwiGLU ----------------------------------------------------------------------------------


def swiglu_cuda(gate, up, out=None):
    """silu(gate) * up, elementwise; out: optional preallocated contiguous output."""
    import torch

    if tuple(gate.shape) != tuple(up.shape):
        raise ValueError(f"swiglu: gate {tuple(gate.shape)} and up {tuple(up.shape)} differ")
    code = dtype_code(gate)
    _same_dtype(gate, up=up)
    gate, up = gate.contiguous(), up.contiguous()
    y = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device) if out is None else out
    if tuple(y.shape) != tuple(gate.shape) or y.dtype != gate.dtype or not y.is_contiguous():
        raise ValueError(f"swiglu: out must be contiguous {tuple(gate.shape)} {gate.dtype}")
    _need_device(gate, up, y)
    n = gate.numel()
    if n:
        lib, f = _fn("swiglu")
        _cuda_build.check(
            lib, f(gate.data_ptr(), up.data_ptr(), y.data_ptr(), n, code, _cuda_build.stream_of(gate)), "swiglu (CUDA)"
        )
    return y


# ---- Softmax over long rows (kernels/cuda/softmax.cu) -------------------------------------------

# as softmax.cu's Shape: one CTA an SM (15 consumer warps, two 16-byte vectors each from a chunk)
# or two (7 warps, four vectors each): the chunk's bytes, the ring's most stages, the most chunks
# of a CTA's slice (the kernel's instances)
SOFTMAX_SHAPES = {1: (15 * 32 * 2 * 16, 13, 8), 2: (7 * 32 * 4 * 16, 7, 5)}
SOFTMAX_MIN_COLUMNS = 8192  # narrower rows leave most of the consumers idle: use softmax()
CLUSTER_SIZES = (1, 2, 3, 4, 5, 6, 7, 8)  # the portable cluster sizes
_TARGET_CHUNKS = 5  # one CTA an SM: up to 5 chunks a slice is held as fp32 exponentials (HOLD_FLOATS)


def softmax_cluster_plan(n: int, esize: int, cluster: int | None = None, per_sm: int = 1) -> tuple[int, int, int]:
    """(cluster, slice, chunks): the CTAs sharing a row, the columns of every CTA but the last
    (which takes the rest), and the chunks the widest slice spans. cluster=None: the smallest
    that keeps every slice within 5 chunks. As softmax.cu's launch_shape()."""
    v = 16 // esize
    if per_sm not in SOFTMAX_SHAPES:
        raise ValueError(f"softmax (CUDA): per_sm {per_sm} is not one of {tuple(SOFTMAX_SHAPES)}")
    chunk_bytes, _, max_chunks = SOFTMAX_SHAPES[per_sm]
    if n % v:
        raise ValueError(
            f"softmax (CUDA): {n} columns is not a multiple of {v} ({esize}-byte elements in a 16-byte vector)"
        )
    if n < SOFTMAX_MIN_COLUMNS:
        raise ValueError(
            f"softmax (CUDA): rows of {n} columns; the cluster kernel is for rows of at least "
            f"{SOFTMAX_MIN_COLUMNS} (use softmax())"
        )
    che = chunk_bytes // esize

    def plan(c: int):
        sl = -(-(n // v) // c) * v
        last = n - (c - 1) * sl
        return (sl, -(-max(sl, last) // che)) if last > 0 else (sl, None)

    if cluster is None:
        cluster = next(
            (c for c in CLUSTER_SIZES if (plan(c)[1] or 99) <= min(_TARGET_CHUNKS, max_chunks)), CLUSTER_SIZES[-1]
        )
    if cluster not in CLUSTER_SIZES:
        raise ValueError(f"softmax (CUDA): cluster {cluster} is not one of {CLUSTER_SIZES}")
    sl, chunks = plan(cluster)
    if chunks is None or chunks > max_chunks:
        why = (
            "leaves the last CTA no columns"
            if chunks is None
            else f"gives slices of {chunks} chunks (at most {max_chunks} at {per_sm} CTA(s) an SM)"
        )
        raise ValueError(f"softmax (CUDA): {n} columns over a cluster of {cluster} {why}")
    return cluster, sl, chunks


def softmax_cuda(
    x, out=None, cluster: int | None = None, stages: int = 12, max_clusters: int = 0, probe: int = 0, per_sm: int = 1
):
    """softmax over the last dim of a 2-D (or flattened) tensor with rows of >= 8192 columns:
    each row's slices held by a thread-block cluster (kernels/cuda/softmax.cu). fp32 math, output
    rounded once. cluster: the CTAs sharing a row (None: softmax_cluster_plan's pick); stages: the
    shared-memory ring's chunks; max_clusters: bound the persistent grid (0: as many clusters as
    fit the GPU); probe (measurements, wrong outputs; bits): 1 no exchange between a cluster's
    CTAs, 2 the loads alone, 4 one store a thread a row; per_sm: CTAs an SM, 1 or 2 (each CTA's
    reduction and exchange then overlap the other's work). Returns (y, the clusters launched)."""
    import torch

    code = dtype_code(x)
    if x.dim() < 1 or x.shape[-1] == 0:
        raise ValueError(f"softmax (CUDA): x needs a non-empty last dim, got shape {tuple(x.shape)}")
    n = x.shape[-1]
    cluster, _, _ = softmax_cluster_plan(n, x.element_size(), cluster, per_sm)
    most = SOFTMAX_SHAPES[per_sm][1]
    if not 2 <= stages <= most:
        raise ValueError(f"softmax (CUDA): stages {stages} not in 2..{most} at {per_sm} CTA(s) an SM")
    x2 = x.reshape(-1, n)
    v = 16 // x.element_size()
    if x2.stride(-1) != 1 or x2.stride(0) % v or x2.data_ptr() % 16:
        x2 = x2.contiguous()
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device) if out is None else out
    if tuple(y.shape) != tuple(x.shape) or y.dtype != x.dtype or not y.is_contiguous() or y.data_ptr() % 16:
        raise ValueError(f"softmax (CUDA): out must be contiguous, 16-byte aligned, {tuple(x.shape)} {x.dtype}")
    _need_device(x2, y)
    rows = x2.shape[0]
    if rows >= 2**31 or n >= 2**31:
        raise ValueError(f"softmax (CUDA): {rows} rows x {n} is past the kernel's int32 range")
    launched = ctypes.c_int(0)
    if rows:
        lib, f = _fn("softmax")
        _cuda_build.check(
            lib,
            f(
                x2.data_ptr(),
                y.data_ptr(),
                rows,
                n,
                x2.stride(0),
                n,
                code,
                cluster,
                stages,
                max_clusters,
                probe,
                per_sm,
                ctypes.byref(launched),
                _cuda_build.stream_of(x2),
            ),
            "softmax (CUDA)",
        )
    return y, launched.value
