"""End-to-end workloads over the decoder stack (kernels/decoder.py), run by name:

    python -m profkit.kernels.run e2e/prefill --variant eager --variant lab --shape llama3-8b-l4-t1024
    python -m profkit.kernels.run e2e/decode --variant eager --variant graph --shape llama3-8b-l4-ctx448 --iters 20

NVTX, nested (ncu's filter reads '/' as nesting): e2e > prefill|decode > variant > shape, then
one range per call (`forward` for a prefill, `step` for a decode step) and, inside the
eager launches, one range per operator (`norm`, `qkv`, `rope`, `attn`, `o_proj`,
`gate_up`, `swiglu`, `down`; `rope_tables` and `mask` once per call; `norm_qkv` and
`norm_gate_up` for the fused RMSNorm + linear). A replayed graph launches inside `step`
only: its operator ranges were pushed at capture time, not at replay.

Every call ends with a device synchronize, so each prefill and each decode step is timed
and traced as a user waiting for it sees it. A decode variant starts at the context length
(the cache filled by an eager prefill in setup) and moves one position per step; past the
cache it starts again at the context (the positions after it are masked, so stale keys are
never read).
"""

from __future__ import annotations

from profkit.model.ops.decoder import DECODE_SHAPES, PREFILL_SHAPES, decode_model, prefill_model

from . import Workload, torch_dtype
from .decoder import PATHS, Decoder, DecodeRunner, config, nvtx_range

DECODE_VARIANTS = (
    "eager",
    "lab",
    "lab_fused_linear",
    "lab_gated_mlp",
    "graph",
    "graph_lab",
    "graph_lab_fused_linear",
    "graph_lab_gated_mlp",
)


def _sync(device) -> None:
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def _inputs(cfg, n: int, dtype: str, device: str, seed: int):
    import torch

    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return torch.randn(n, cfg.hidden, device=device, generator=g).to(torch_dtype(dtype))


# --- prefill --------------------------------------------------------------------------------


def prefill_setup(p: dict, dtype: str, device: str):
    cfg = config(p["model"], layers=p["layers"], max_seq=max(p["tokens"], p.get("max_seq", 0)))
    m = Decoder(cfg, dtype, device, seed=p.get("seed", 0), nvtx=True)
    return {"model": m, "x": _inputs(cfg, p["tokens"], dtype, device, 1), "device": device}


def _prefill(path: str):
    lab = PATHS[path]

    def fn(s):
        with nvtx_range("forward", s["model"].nvtx):
            y = s["model"].prefill(s["x"], lab)
        _sync(s["device"])
        return y

    return fn


# --- decode ---------------------------------------------------------------------------------


def decode_setup(p: dict, dtype: str, device: str):
    cfg = config(p["model"], layers=p["layers"], max_seq=p.get("max_seq", 4096))
    m = Decoder(cfg, dtype, device, seed=p.get("seed", 0), nvtx=True)
    ctx = p["context"]
    m.prefill(_inputs(cfg, ctx, dtype, device, 1))
    _sync(device)
    return {
        "model": m,
        "x": _inputs(cfg, 1, dtype, device, 2),
        "context": ctx,
        "runners": {},
        "pos": {},
        "device": device,
    }


def _runner(s, variant: str) -> DecodeRunner:
    r = s["runners"].get(variant)
    if r is None:
        graph = variant.startswith("graph")
        path = variant[len("graph_") :] if variant.startswith("graph_") else ("eager" if graph else variant)
        r = s["runners"][variant] = DecodeRunner(s["model"], PATHS[path], graph=graph)
        r.x.copy_(s["x"])  # the step reads its static input; nothing is copied per step
    return r


def decode_one(s, variant: str):
    """One decode step of `variant` at its next position; returns the final hidden state."""
    r = _runner(s, variant)
    m = s["model"]
    p = s["pos"].get(variant, s["context"])
    with nvtx_range("step", m.nvtx):
        y = r.step(None, p)
    s["pos"][variant] = p + 1 if p + 1 < m.cfg.max_seq else s["context"]
    _sync(s["device"])
    return y


WORKLOADS = (
    Workload(
        op="e2e/prefill",
        setup=prefill_setup,
        variants={path: _prefill(path) for path in ("eager", "lab")},
        shapes=PREFILL_SHAPES,
        model=prefill_model,
        description="decoder stack prefill (T tokens, causal), eager PyTorch vs lab kernels",
    ),
    Workload(
        op="e2e/decode",
        setup=decode_setup,
        variants={v: (lambda v: lambda s: decode_one(s, v))(v) for v in DECODE_VARIANTS},
        shapes=DECODE_SHAPES,
        model=decode_model,
        description="decoder stack decode step (static KV cache, buckets): eager, lab, CUDA-graph replay",
    ),
)
