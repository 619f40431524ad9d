"""SwiGLU activation y = silu(gate) * up (Llama / Qwen MLP), forward and backward.

Elementwise and memory-bound: forward reads gate and up and writes y (3 tensors of
[tokens, ffn]); backward reads dy, gate, up and writes dgate, dup (5 tensors), recomputing
sigmoid(gate) rather than storing it. All math in fp32; sigmoid(-1000) = 0 in fp32, so fp16
inputs of large magnitude give 0 / the right limit instead of NaN.

Launch: (BLOCK, num_warps, eviction policy), timed per size on the GPU. Below TUNE_MIN_ELEMS
elements the fixed launch (BLOCK 4096, 8 warps) gives a decode step (1 x 14336) 4 programs, 1.93
us by graph replay on an H100 against torch.compile's 1.28 (14 programs of 1024), so small sizes
pick among SMALL_CANDIDATES (blocks of 256-4096, 1-8 warps: 4-56 programs at 14336) by CUDA-graph
replay (GPU time: at a few microseconds do_bench would time the launcher on the host). Forward
only: the backward keeps the fixed launch there (no decode backward, and its tuning would capture
a graph on autograd's device thread).
"""

from __future__ import annotations

import triton
import triton.language as tl

from profkit.model.ops.elementwise import SWIGLU_BWD_SHAPES, SWIGLU_SHAPES
from profkit.model.ops.elementwise import swiglu_bwd_model as model_bwd
from profkit.model.ops.elementwise import swiglu_model as model

from . import Backward, Workload, torch_dtype
from ._cuda_ops import swiglu_cuda
from ._launch import cdiv, fast, next_pow2
from ._numerics import compiled, has_module
from .timing import tuned

BLOCK = 4096  # the fixed launch (the default candidate)
NUM_WARPS = 8
# (BLOCK, num_warps, load eviction policy) candidates, timed per shape on the GPU
# (kernels/timing.tuned), the fixed launch first
CANDIDATES = [
    (4096, 8, "evict_first"),
    (1024, 4, "evict_first"),
    (2048, 4, "evict_first"),
    (2048, 8, "evict_first"),
    (8192, 8, "evict_first"),
    (8192, 16, "evict_first"),
    (1024, 4, ""),
    (2048, 8, ""),
    (4096, 8, ""),
]
TUNE_MIN_ELEMS = 1 << 22
# below TUNE_MIN_ELEMS: smaller blocks, so that a decode step's few thousand elements still take
# tens of programs; the fixed launch last (the tuner may keep it). No eviction hint: evict_first
# makes the inputs the L2's first victims, and read again once an earlier op has filled the L2 (a
# benchmark's rotated inputs, a replayed graph over static buffers) they came from DRAM, 1.51 us
# against 1.24 on an H100; in the half-empty L2 the tuner times in both took 1.24, so the tuner
# could not have told them apart.
SMALL_CANDIDATES = [
    (1024, 4, ""),
    (256, 1, ""),
    (256, 2, ""),
    (512, 1, ""),
    (512, 2, ""),
    (512, 4, ""),
    (1024, 2, ""),
    (1024, 8, ""),
    (2048, 4, ""),
    (2048, 8, ""),
    (4096, 8, ""),
]


@triton.jit
def _swiglu_fwd(G, U, Y, n, BLOCK: tl.constexpr, EVICT: tl.constexpr = "evict_first"):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    g = tl.load(G + offs, mask=m, other=0.0, eviction_policy=EVICT).to(tl.float32)
    u = tl.load(U + offs, mask=m, other=0.0, eviction_policy=EVICT).to(tl.float32)
    y = g * tl.sigmoid(g) * u
    tl.store(Y + offs, y.to(Y.dtype.element_ty), mask=m)


@triton.jit
def _swiglu_bwd(DY, G, U, DG, DU, n, BLOCK: tl.constexpr, EVICT: tl.constexpr = "evict_first"):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    dy = tl.load(DY + offs, mask=m, other=0.0, eviction_policy=EVICT).to(tl.float32)
    g = tl.load(G + offs, mask=m, other=0.0, eviction_policy=EVICT).to(tl.float32)
    u = tl.load(U + offs, mask=m, other=0.0, eviction_policy=EVICT).to(tl.float32)
    sig = tl.sigmoid(g)
    silu = g * sig
    tl.store(DU + offs, (dy * silu).to(DU.dtype.element_ty), mask=m)
    dg = dy * u * sig * (1.0 + g * (1.0 - sig))
    tl.store(DG + offs, dg.to(DG.dtype.element_ty), mask=m)


def _c(t):
    return t if t.is_contiguous() else t.contiguous()


def _config(name, n, t, launch, config, small: bool = False):
    """small: below TUNE_MIN_ELEMS pick among SMALL_CANDIDATES (the forward: decode steps), else
    the fixed launch there."""
    if config is not None:
        return config
    if n < TUNE_MIN_ELEMS:
        if not small:
            return CANDIDATES[0]
        # GPU time by graph replay: at a few microseconds do_bench would time the host's launch
        return tuned((name, "small", next_pow2(n), t.dtype, t.device), SMALL_CANDIDATES, launch, t.device, graph=True)
    return tuned((name, next_pow2(n), t.dtype, t.device), CANDIDATES, launch, t.device)


def swiglu_fwd(gate, up, out=None, config=None):
    """y = silu(gate) * up. config: (BLOCK, num_warps, eviction policy), else picked per size on the
    GPU."""
    import torch

    assert gate.shape == up.shape
    gate, up = _c(gate), _c(up)
    y = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device) if out is None else out
    n = gate.numel()
    if n:

        def launch(cfg):
            fast(_swiglu_fwd)[(cdiv(n, cfg[0]),)](gate, up, y, n, BLOCK=cfg[0], EVICT=cfg[2], num_warps=cfg[1])

        launch(_config("swiglu_fwd", n, gate, launch, config, small=True))
    return y


def swiglu_bwd(dy, gate, up, dgate=None, dup=None, config=None):
    import torch

    dy, gate, up = _c(dy), _c(gate), _c(up)
    dg = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device) if dgate is None else dgate
    du = torch.empty(up.shape, dtype=up.dtype, device=up.device) if dup is None else dup
    n = gate.numel()
    if n:

        def launch(cfg):
            fast(_swiglu_bwd)[(cdiv(n, cfg[0]),)](dy, gate, up, dg, du, n, BLOCK=cfg[0], EVICT=cfg[2], num_warps=cfg[1])

        launch(_config("swiglu_bwd", n, gate, launch, config))
    return dg, du


def _autograd():
    import torch

    class SwiGLUFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, gate, up, out):
            ctx.save_for_backward(gate, up)
            return swiglu_fwd(gate, up, out)

        @staticmethod
        def backward(ctx, dy):
            gate, up = ctx.saved_tensors
            dg, du = swiglu_bwd(dy, gate, up)
            return dg, du, None

    return SwiGLUFunction


_FN = None


def swiglu(gate, up, out=None):
    """Triton silu(gate) * up; differentiable in gate and up."""
    global _FN
    import torch

    if torch.is_grad_enabled() and (gate.requires_grad or up.requires_grad):
        if _FN is None:
            _FN = _autograd()
        return _FN.apply(gate, up, out)
    return swiglu_fwd(gate, up, out)


def swiglu_eager(gate, up):
    """LlamaMLP: self.act_fn(self.gate_proj(x)) * self.up_proj(x), act_fn = SiLU."""
    import torch.nn.functional as F

    return F.silu(gate) * up


def swiglu_bwd_eager(dy, gate, up):
    """The backward written out in PyTorch (fp32 math): compiled directly, the peer of the
    direct Triton backward (variant compile_direct of swiglu_bwd)."""
    g, u, d = gate.float(), up.float(), dy.float()
    sig = g.sigmoid()
    return (d * u * sig * (1 + g * (1 - sig))).to(gate.dtype), (d * g * sig).to(up.dtype)


def swiglu_reference(gate, up):
    g = gate.double()
    return g * g.sigmoid() * up.double()


def _setup(p: dict, dtype: str, device: str):
    import torch

    dt = torch_dtype(dtype)
    g = torch.randn(p["tokens"], p["ffn"], dtype=dt, device=device)
    u = torch.randn(p["tokens"], p["ffn"], dtype=dt, device=device)
    return {"gate": g, "up": u}


def _liger(s):
    from liger_kernel.ops.swiglu import LigerSiLUMulFunction

    return LigerSiLUMulFunction.apply(s["gate"], s["up"])


_VARIANTS = {
    "eager": lambda s: swiglu_eager(s["gate"], s["up"]),
    "compile": lambda s: compiled("swiglu", swiglu_eager)(s["gate"], s["up"]),
    "triton": lambda s: swiglu(s["gate"], s["up"]),
    "cuda": lambda s: swiglu_cuda(s["gate"], s["up"]),  # kernels/cuda/swiglu.cu
}
if has_module("liger_kernel"):
    _VARIANTS["liger"] = _liger

WORKLOAD = Workload(
    op="swiglu",
    setup=_setup,
    variants=_VARIANTS,
    shapes=SWIGLU_SHAPES,
    model=model,
    dtypes=("bf16", "fp16", "fp32"),
    description="SwiGLU silu(gate) * up forward (backward: workload swiglu_bwd)",
    requires={"liger": "liger_kernel"},
    gpu_only=("cuda",),
    reference=lambda s, v: swiglu_reference(s["gate"], s["up"]),
    quick=("llama8b-t4096", "qwen7b-t4096"),
    selftest={"t-3x300": {"tokens": 3, "ffn": 300}},
    backward=Backward(
        inputs=("gate", "up"),
        forward={
            "eager": swiglu_eager,
            "compile": lambda g, u: compiled("swiglu_bwd", swiglu_eager)(g, u),
            "triton": swiglu,
            "liger": lambda g, u: _liger({"gate": g, "up": u}),
        },
        reference=swiglu_reference,
        model=model_bwd,
        shapes=SWIGLU_BWD_SHAPES,
        quick=("llama8b-t4096",),
        direct={
            "triton": lambda s: swiglu_bwd(s["dy"], s["gate"], s["up"]),
            "compile": lambda s: compiled("swiglu_bwd_direct", swiglu_bwd_eager)(s["dy"], s["gate"], s["up"]),
        },
    ),
    bench="kernels",
)
