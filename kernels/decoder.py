"""A Llama/Qwen-shaped decoder stack built from configuration, with the lab kernels swappable.

    cfg = config("llama3-8b", layers=4)
    m = Decoder(cfg, "bf16", "cuda", seed=0)
    y = m.prefill(x, LAB)                      # x [T, hidden] -> final-normed hidden [T, hidden]
    r = DecodeRunner(m, LAB, graph=True)       # one CUDA graph per key-length bucket
    y = r.step(x1, pos)                        # one token at position pos

Random weights (seeded, generated on the device; nothing is downloaded). The stack is the
decoder layers and the final norm: no embedding and no LM head (inputs are hidden states).

Two paths over the same weights and the same GEMMs (cuBLAS through torch):
    EAGER  as Hugging Face writes the layer: LlamaRMSNorm (residual add in the model dtype,
           norm in fp32), rotate_half RoPE with [tokens, head_dim] cos/sin, F.silu(g) * u
    LAB    kernels/: rmsnorm (first layer), fused add + RMSNorm (every other norm), RoPE
           (in place on the fused qkv buffer, tables + positions), SwiGLU
    LAB_FUSED_LINEAR  LAB plus the fused RMSNorm + linear (kernels/rmsnorm_linear.py) for the
           qkv and gate/up projections of single-token steps (its regime: M <= 64)
    LAB_GATED_MLP  LAB with the gate/up GEMM and SwiGLU replaced by the fused gated MLP
           (kernels/gated_mlp.py: silu(h Wg^T) * (h Wu^T) in one kernel, y [T, I]), prefill and decode

Layout shared by both paths: one fused qkv projection (+ bias for Qwen); one gate/up GEMM
written transposed, [2I, T], so that gate and up are contiguous halves (the SwiGLU kernel
reads them with no copy) and the down projection takes the transposed view. Attention is
F.scaled_dot_product_attention: causal with enable_gqa for prefill; for a decode step the
query heads of a KV group are laid out as the group's query rows ([1, kv_heads, group, D],
the usual GQA decode trick), against the static cache cut at the step's bucket with an
additive mask that hides the positions after the current one.

KV cache: static, [layers, 1, kv_heads, max_seq + 1, head_dim] per k and v on the device;
slot max_seq is a scratch slot that warm-up and capture write to, never attended.

Decode buckets: a step at position p attends to p + 1 keys; it runs the graph of the
smallest bucket (powers of two from 128 up to max_seq) holding p + 1 keys, so a graph is
captured once per bucket rather than once per length, and the work per step is bounded by
twice the live length.

Numerics (the lab's policy, kernels/_numerics.py, applied to a whole stack): the check is
the relative L2 error of the final hidden states against a float64 reference forward
written independently (separate q/k/v slices, repeat_kv, explicit softmax, cos/sin from
float64): ``tolerance(dtype, layers) = TOL[dtype] * sqrt(layers)``. Per layer an output in
bf16 carries a few units of 2^-9 (3 rounded norms, GEMM outputs, attention), and the errors
of successive layers add like a random walk; fp32 adds only fp32 accumulation over the
hidden size and the fp32 cos/sin tables (2^-24 relative). Measured, bf16: 0.7-0.9e-2 at
4 Llama/Qwen layers (tolerance 3e-2) and 1.6-1.9e-2 at 32/28 layers (8.5e-2 / 7.9e-2) on
the H200 (benchmarks/results/e2e.md); fp32 ~3e-7 at the tiny CPU config (2.8e-5).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from profkit.model.ops.decoder import CONFIGS, Config, config  # noqa: F401  (the lab imports them from here)

from . import torch_dtype
from .add_rmsnorm import add_rmsnorm, add_rmsnorm_eager
from .gated_mlp import gated_mlp
from .rmsnorm import rmsnorm, rmsnorm_eager, rmsnorm_reference
from .rmsnorm_linear import rmsnorm_linear
from .rope import full_cos_sin, rope, rope_cache, rope_eager
from .swiglu import swiglu, swiglu_eager, swiglu_reference

# relative L2 error per sqrt(layer) of the final hidden states against the float64 reference
# (fp64 models get fp32's: the eager norms compute in fp32 whatever the input, as HF's do)
TOL = {"fp64": 2e-5, "fp32": 2e-5, "bf16": 1.5e-2, "fp16": 3e-3}


def tolerance(dtype: str, layers: int) -> float:
    return TOL[dtype] * math.sqrt(max(1, layers))


@dataclass(frozen=True)
class Lab:
    """Which lab kernels replace eager PyTorch ops."""

    norm: bool = False  # rmsnorm + fused add + RMSNorm
    rope: bool = False
    swiglu: bool = False
    norm_linear: bool = False  # fused RMSNorm + linear, single-token steps only
    gated_mlp: bool = False  # fused gate/up GEMM + SwiGLU


EAGER = Lab()
LAB = Lab(norm=True, rope=True, swiglu=True)
LAB_FUSED_LINEAR = Lab(norm=True, rope=True, swiglu=True, norm_linear=True)
LAB_GATED_MLP = Lab(norm=True, rope=True, swiglu=True, gated_mlp=True)
PATHS = {"eager": EAGER, "lab": LAB, "lab_fused_linear": LAB_FUSED_LINEAR, "lab_gated_mlp": LAB_GATED_MLP}


# --- buckets ------------------------------------------------------------------------------


def buckets(max_seq: int, smallest: int = 128) -> tuple[int, ...]:
    """Key-length buckets: powers of two from `smallest`, and max_seq itself as the last."""
    out, b = [], smallest
    while b < max_seq:
        out.append(b)
        b *= 2
    out.append(max_seq)
    return tuple(out)


def bucket_for(keys: int, bucket_list: tuple[int, ...]) -> int:
    """The smallest bucket holding `keys` keys."""
    for b in bucket_list:
        if keys <= b:
            return b
    raise ValueError(f"{keys} keys exceed the KV cache ({bucket_list[-1]} positions)")


# --- NVTX ---------------------------------------------------------------------------------


@contextmanager
def nvtx_range(name: str, on: bool = True):
    """torch.cuda.nvtx push/pop; nothing on CPU builds (their NVTX functions raise)."""
    if not on:
        yield
        return
    import torch

    torch.cuda.nvtx.range_push(name)
    try:
        yield
    finally:
        torch.cuda.nvtx.range_pop()


# --- weights ------------------------------------------------------------------------------


@dataclass
class LayerWeights:
    w_in: object  # [hidden] input_layernorm
    w_qkv: object  # [(heads + 2 kv_heads) * head_dim, hidden]
    b_qkv: object  # [qkv_dim] or None
    w_o: object  # [hidden, heads * head_dim]
    w_post: object  # [hidden] post_attention_layernorm
    w_gu: object  # [2 * intermediate, hidden]: gate rows, then up rows
    w_down: object  # [hidden, intermediate]


def make_weights(cfg: Config, dtype, device, seed: int = 0):
    """Seeded random weights: linear N(0, 1/fan_in) (unit-variance outputs), norms 1 + 0.1 N(0, 1),
    biases 0.1 N(0, 1). Generated in fp32 on `device`, then cast."""
    import torch

    g = torch.Generator(device=device)
    g.manual_seed(seed)

    def lin(n, k):
        return (torch.randn(n, k, device=device, generator=g) / math.sqrt(k)).to(dtype)

    def vec(n, base, scale):
        return (base + scale * torch.randn(n, device=device, generator=g)).to(dtype)

    h, d = cfg.hidden, cfg.head_dim
    layers = []
    for _ in range(cfg.layers):
        layers.append(
            LayerWeights(
                w_in=vec(h, 1.0, 0.1),
                w_qkv=lin(cfg.qkv_dim, h),
                b_qkv=vec(cfg.qkv_dim, 0.0, 0.1) if cfg.qkv_bias else None,
                w_o=lin(h, cfg.heads * d),
                w_post=vec(h, 1.0, 0.1),
                w_gu=lin(2 * cfg.intermediate, h),
                w_down=lin(h, cfg.intermediate),
            )
        )
    return layers, vec(h, 1.0, 0.1)


# --- the stack ----------------------------------------------------------------------------


class Decoder:
    def __init__(
        self, cfg: Config, dtype: str = "bf16", device: str = "cuda", seed: int = 0, nvtx: bool = False, weights=None
    ):
        import torch

        self.cfg, self.dtype_name, self.device = cfg, dtype, torch.device(device)
        self.dtype = torch_dtype(dtype)
        self.layers, self.w_final = weights if weights is not None else make_weights(cfg, self.dtype, device, seed)
        # NVTX per operator only where CUDA is there to take it
        self.nvtx = bool(nvtx) and self.device.type == "cuda"
        s = cfg.max_seq + 1  # + the scratch slot
        shape = (cfg.layers, 1, cfg.kv_heads, s, cfg.head_dim)
        self.k_cache = torch.zeros(shape, dtype=self.dtype, device=device)
        self.v_cache = torch.zeros(shape, dtype=self.dtype, device=device)
        self.scratch = cfg.max_seq
        self.cos, self.sin = rope_cache(s, cfg.head_dim, cfg.rope_theta, device)  # fp32, as HF keeps them
        self.key_pos = torch.arange(s, device=device)
        self._zero = torch.zeros((), dtype=self.dtype, device=device)
        self._neg_inf = torch.full((), float("-inf"), dtype=self.dtype, device=device)
        self.buckets = buckets(cfg.max_seq, cfg.bucket_min)

    def with_dtype(self, dtype: str) -> Decoder:
        """The same weights in another dtype (references: fp32 / fp64 copies of a bf16 model)."""
        t = torch_dtype(dtype)
        layers = [
            LayerWeights(**{k: (v.to(t) if v is not None else None) for k, v in vars(w).items()}) for w in self.layers
        ]
        return Decoder(self.cfg, dtype, str(self.device), weights=(layers, self.w_final.to(t)))

    def _r(self, name: str):
        return nvtx_range(name, self.nvtx)

    # one decoder layer; x is the previous layer's output (or the input), residual the stream
    def _layer(self, i, x, residual, lab: Lab, positions, cos_sin, attend):
        import torch
        import torch.nn.functional as F

        cfg, w = self.cfg, self.layers[i]
        T = x.shape[0]
        H, HK, D, I = cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.intermediate
        fused_linear = lab.norm_linear and T == 1
        if fused_linear:
            with self._r("norm_qkv"):
                residual = x if residual is None else residual + x
                qkv = rmsnorm_linear(residual, w.w_in, w.w_qkv, cfg.rms_eps)
                if w.b_qkv is not None:
                    qkv += w.b_qkv
        else:
            with self._r("norm"):
                if residual is None:
                    residual = x
                    h = rmsnorm(x, w.w_in, cfg.rms_eps) if lab.norm else rmsnorm_eager(x, w.w_in, cfg.rms_eps)
                elif lab.norm:
                    h, residual = add_rmsnorm(x, residual, w.w_in, cfg.rms_eps)
                else:
                    h, residual = add_rmsnorm_eager(x, residual, w.w_in, cfg.rms_eps)
            with self._r("qkv"):
                qkv = F.linear(h, w.w_qkv, w.b_qkv)
        q = qkv[:, : H * D].view(T, H, D)
        k = qkv[:, H * D : (H + HK) * D].view(T, HK, D)
        v = qkv[:, (H + HK) * D :].view(T, HK, D)
        with self._r("rope"):
            if lab.rope:
                rope(q, k, self.cos, self.sin, positions, q_out=q, k_out=k)  # in place on qkv
            else:
                q, k = rope_eager(q, k, *cos_sin)
        with self._r("attn"):
            a = attend(i, q, k, v)
        with self._r("o_proj"):
            o = F.linear(a, w.w_o)
        if fused_linear:
            with self._r("norm_gate_up"):
                residual = residual + o
                gu_t = rmsnorm_linear(residual, w.w_post, w.w_gu, cfg.rms_eps).view(2 * I, 1)
        elif lab.gated_mlp:
            with self._r("norm"):
                h, residual = add_rmsnorm(o, residual, w.w_post, cfg.rms_eps)
            with self._r("gated_mlp"):
                y = gated_mlp(h, w.w_gu[:I], w.w_gu[I:])  # [T, I]
            with self._r("down"):
                return torch.mm(y, w.w_down.t()), residual
        else:
            with self._r("norm"):
                if lab.norm:
                    h, residual = add_rmsnorm(o, residual, w.w_post, cfg.rms_eps)
                else:
                    h, residual = add_rmsnorm_eager(o, residual, w.w_post, cfg.rms_eps)
            with self._r("gate_up"):
                gu_t = torch.mm(w.w_gu, h.t())  # [2I, T]: gate and up are contiguous halves
        with self._r("swiglu"):
            g_t, u_t = gu_t[:I], gu_t[I:]
            y_t = swiglu(g_t, u_t) if lab.swiglu else swiglu_eager(g_t, u_t)
        with self._r("down"):
            out = torch.mm(y_t.t(), w.w_down.t())  # [T, hidden]
        return out, residual

    def _stack(self, x, lab: Lab, positions, attend):
        cos_sin = None
        if not lab.rope:
            with self._r("rope_tables"):  # HF: cos/sin [tokens, head_dim] once per forward
                cos_sin = full_cos_sin(self.cos, self.sin, positions, dtype=self.dtype)
        residual = None
        for i in range(self.cfg.layers):
            x, residual = self._layer(i, x, residual, lab, positions, cos_sin, attend)
        with self._r("norm"):
            if lab.norm:
                y, _ = add_rmsnorm(x, residual, self.w_final, self.cfg.rms_eps)
            else:
                y, _ = add_rmsnorm_eager(x, residual, self.w_final, self.cfg.rms_eps)
        return y

    # --- prefill: T tokens at positions 0..T-1, causal; fills the cache --------------------
    def prefill(self, x, lab: Lab = EAGER, positions=None):
        import torch
        import torch.nn.functional as F

        T = x.shape[0]
        if T > self.cfg.max_seq:
            raise ValueError(f"prefill of {T} tokens exceeds the KV cache ({self.cfg.max_seq} positions)")
        if positions is None:
            positions = self.key_pos[:T]

        def attend(i, q, k, v):
            self.k_cache[i, 0, :, :T].copy_(k.transpose(0, 1))
            self.v_cache[i, 0, :, :T].copy_(v.transpose(0, 1))
            o = F.scaled_dot_product_attention(
                q.transpose(0, 1)[None],
                k.transpose(0, 1)[None],
                v.transpose(0, 1)[None],
                is_causal=True,
                enable_gqa=True,
            )
            return o[0].transpose(0, 1).reshape(T, -1)

        with torch.no_grad():
            return self._stack(x, lab, positions, attend)

    # --- decode: one token at the position held in `pos` ([1] long), keys cut at `bucket` --
    def decode_step(self, x, pos, bucket: int, lab: Lab = EAGER):
        import torch
        import torch.nn.functional as F

        cfg = self.cfg
        HK, G, D = cfg.kv_heads, cfg.group, cfg.head_dim
        with self._r("mask"):
            mask = torch.where(self.key_pos[:bucket] <= pos, self._zero, self._neg_inf).view(1, 1, 1, bucket)

        def attend(i, q, k, v):
            kc, vc = self.k_cache[i], self.v_cache[i]  # [1, HK, S, D]
            kc.index_copy_(2, pos, k.transpose(0, 1)[None])
            vc.index_copy_(2, pos, v.transpose(0, 1)[None])
            o = F.scaled_dot_product_attention(
                q.reshape(1, HK, G, D), kc[:, :, :bucket], vc[:, :, :bucket], attn_mask=mask
            )
            return o.reshape(1, -1)

        with torch.no_grad():
            return self._stack(x, lab, pos, attend)

    # --- cost model of one forward (for GB/s and TFLOP/s columns) -------------------------
    def weight_bytes(self) -> int:
        return (self.cfg.layer_params() * self.cfg.layers + self.cfg.hidden) * self.dtype.itemsize


class DecodeRunner:
    """Decode steps of one path: eager launches, or CUDA-graph replay with one graph per bucket.

    Static inputs `x` [1, hidden] and `pos` [1]; a step copies its input in (when it is not
    already the static buffer), writes the position, and replays the graph of the bucket that
    holds pos + 1 keys, capturing it on first use (warm-up on a side stream first, as PyTorch's
    recipe asks; warm-up and capture write the cache's scratch slot only). graph=False runs the
    same step eagerly (CPU tests use it for the bucket and cache logic).
    """

    def __init__(self, model: Decoder, lab: Lab = EAGER, graph: bool = False):
        import torch

        self.model, self.lab, self.graph = model, lab, graph
        self.x = torch.zeros(1, model.cfg.hidden, dtype=model.dtype, device=model.device)
        self.pos = torch.zeros(1, dtype=torch.long, device=model.device)
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.outs: dict[int, object] = {}
        self.pool: torch.cuda._POOL_HANDLE | None = None  # made at the first capture

    def bucket(self, position: int) -> int:
        return bucket_for(position + 1, self.model.buckets)

    def capture(self, bucket: int) -> None:
        import torch

        m = self.model
        self.pos.fill_(m.scratch)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):  # compile, autotune, cuBLAS workspaces: nothing new inside capture
                m.decode_step(self.x, self.pos, bucket, self.lab)
        torch.cuda.current_stream().wait_stream(s)
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=self.pool):
            self.outs[bucket] = m.decode_step(self.x, self.pos, bucket, self.lab)
        self.graphs[bucket] = g

    def capture_all(self, positions) -> None:
        for b in sorted({self.bucket(p) for p in positions}):
            if b not in self.graphs:
                self.capture(b)

    def step(self, x, position: int):
        b = self.bucket(position)
        if self.graph and b not in self.graphs:
            self.capture(b)
        if x is not None and x is not self.x:
            self.x.copy_(x)
        self.pos.fill_(position)
        if not self.graph:
            return self.model.decode_step(self.x, self.pos, b, self.lab)
        self.graphs[b].replay()
        return self.outs[b]


# --- float64 reference, written apart from the paths above ------------------------------


def reference_forward(model: Decoder, x, start: int = 0, past=None):
    """float64 forward of tokens at positions start..start+T-1 as a textbook decoder: separate
    q/k/v slices of the fused weight, repeat_kv, explicit causal softmax, cos/sin in float64.
    past: per layer (k, v) [kv_heads, start, head_dim] float64 of the earlier tokens (or None).
    Computed on the model's device. Returns (final hidden [T, hidden], new past)."""
    import torch

    cfg, dev = model.cfg, model.device
    H, HK, D, I = cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.intermediate
    T = x.shape[0]
    pos = torch.arange(start, start + T, dtype=torch.float64, device=dev)
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, D, 2, dtype=torch.float64, device=dev) / D))
    f = torch.outer(pos, inv)
    cos, sin = torch.cat((f.cos(), f.cos()), -1)[:, None], torch.cat((f.sin(), f.sin()), -1)[:, None]

    def rot(t):
        return torch.cat((-t[..., D // 2 :], t[..., : D // 2]), -1)

    h = x.double()
    new_past = []
    for i, w in enumerate(model.layers):
        # float64 copies of the layer's tensors; None where it has none (b_qkv without a bias)
        w64: dict[str, Any] = {k: (v.double() if v is not None else None) for k, v in vars(w).items()}
        a_in = rmsnorm_reference(h, w64["w_in"], cfg.rms_eps)
        wq, wk, wv = w64["w_qkv"][: H * D], w64["w_qkv"][H * D : (H + HK) * D], w64["w_qkv"][(H + HK) * D :]
        b = w64["b_qkv"]
        q = a_in @ wq.T + (b[: H * D] if b is not None else 0)
        k = a_in @ wk.T + (b[H * D : (H + HK) * D] if b is not None else 0)
        v = a_in @ wv.T + (b[(H + HK) * D :] if b is not None else 0)
        q, k, v = q.view(T, H, D), k.view(T, HK, D), v.view(T, HK, D)
        q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
        k, v = k.transpose(0, 1), v.transpose(0, 1)  # [HK, T, D]
        if past is not None:
            k, v = torch.cat((past[i][0], k), 1), torch.cat((past[i][1], v), 1)
        new_past.append((k, v))
        kr, vr = k.repeat_interleave(cfg.group, 0), v.repeat_interleave(cfg.group, 0)  # repeat_kv
        s = q.transpose(0, 1) @ kr.transpose(1, 2) / math.sqrt(D)  # [H, T, start + T]
        keys = torch.arange(start + T, device=dev)
        s = s.masked_fill(keys[None, None, :] > (start + torch.arange(T, device=dev))[None, :, None], float("-inf"))
        o = (s.softmax(-1) @ vr).transpose(0, 1).reshape(T, H * D)
        h = h + o @ w64["w_o"].T
        m_in = rmsnorm_reference(h, w64["w_post"], cfg.rms_eps)
        gu = m_in @ w64["w_gu"].T
        h = h + swiglu_reference(gu[:, :I], gu[:, I:]) @ w64["w_down"].T
    return rmsnorm_reference(h, model.w_final.double(), cfg.rms_eps), new_past
