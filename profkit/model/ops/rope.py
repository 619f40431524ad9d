"""Rotary position embedding (RoPE) on q and k, alone and fused with the per-head q/k RMSNorm
(Qwen3's qk-norm). Each rotated pair costs 3 FLOPs per element (two products and an add for
each of the two outputs, over the pair's two elements)."""

from __future__ import annotations

from typing import Any

from .dtypes import ESIZE


def rope_model(p: dict, dtype: str) -> dict:
    """q and k read and written once, int64 positions, and one cos+sin row per token in the
    tables' dtype: the model's."""
    e = ESIZE[dtype]
    t, hq, hk, d = p["tokens"], p["q_heads"], p["kv_heads"], p["head_dim"]
    rd = p.get("rotary_dim", d)
    return {"bytes": 2 * t * (hq + hk) * d * e + 8 * t + 2 * e * t * (rd // 2), "flops": 3 * t * (hq + hk) * rd}


def rmsnorm_rope_model(p: dict, dtype: str) -> dict:
    """q and k read and written once, int64 positions, fp32 cos+sin rows, the two norm weights;
    RMSNorm's 4 FLOPs per element plus RoPE's 3 per rotated element."""
    e = ESIZE[dtype]
    t, hq, hk, d = p["tokens"], p["q_heads"], p["kv_heads"], p["head_dim"]
    rd = p.get("rotary_dim", d)
    return {
        "bytes": 2 * t * (hq + hk) * d * e + 8 * t + 2 * 4 * t * (rd // 2) + 2 * d * e,
        "flops": t * (hq + hk) * (4 * d + 3 * rd),
    }


ROPE_SHAPES: dict[str, dict[str, Any]] = {
    "llama8b-t1": {"tokens": 1, "q_heads": 32, "kv_heads": 8, "head_dim": 128},
    "llama8b-t4096": {"tokens": 4096, "q_heads": 32, "kv_heads": 8, "head_dim": 128},
    "qwen7b-t4096": {"tokens": 4096, "q_heads": 28, "kv_heads": 4, "head_dim": 128, "base": 1e6},
    "llama8b-t32768": {"tokens": 32768, "q_heads": 32, "kv_heads": 8, "head_dim": 128},
    "phi2partial-t4096": {"tokens": 4096, "q_heads": 32, "kv_heads": 32, "head_dim": 80, "rotary_dim": 32},
}

RMSNORM_ROPE_SHAPES = {
    # Qwen3-8B: 32 q / 8 kv heads; Qwen2.5-7B geometry (28 / 4) as if it had qk-norm
    "qwen3-8b-t1": {"tokens": 1, "q_heads": 32, "kv_heads": 8, "head_dim": 128},
    "qwen3-8b-t4096": {"tokens": 4096, "q_heads": 32, "kv_heads": 8, "head_dim": 128},
    "qwen7b-t4096": {"tokens": 4096, "q_heads": 28, "kv_heads": 4, "head_dim": 128},
    "qwen3-8b-t32768": {"tokens": 32768, "q_heads": 32, "kv_heads": 8, "head_dim": 128},
}
