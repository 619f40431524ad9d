"""A decoder stack (Llama / Qwen geometry): its published configs and the minimum work of a
prefill and of one decode step, for the lab's end-to-end workloads."""

from __future__ import annotations

from dataclasses import dataclass, replace

from .dtypes import ESIZE


@dataclass(frozen=True)
class Config:
    name: str
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    rope_theta: float
    rms_eps: float
    qkv_bias: bool
    layers: int
    max_seq: int = 4096  # KV cache capacity (tokens)
    bucket_min: int = 128  # smallest decode bucket (keys)

    @property
    def group(self) -> int:
        return self.heads // self.kv_heads

    @property
    def qkv_dim(self) -> int:
        return (self.heads + 2 * self.kv_heads) * self.head_dim

    def layer_params(self) -> int:
        h, d = self.hidden, self.head_dim
        return (
            self.qkv_dim * h
            + (self.qkv_dim if self.qkv_bias else 0)
            + self.heads * d * h
            + 3 * self.intermediate * h
            + 2 * h
        )


# published shapes (config.json of meta-llama/Meta-Llama-3-8B and Qwen/Qwen2.5-7B); Llama 3.1's
# rope scaling is left out (it changes the tables, not the kernels)
CONFIGS = {
    "llama3-8b": Config(
        "llama3-8b",
        hidden=4096,
        heads=32,
        kv_heads=8,
        head_dim=128,
        intermediate=14336,
        rope_theta=500000.0,
        rms_eps=1e-5,
        qkv_bias=False,
        layers=32,
    ),
    "qwen2.5-7b": Config(
        "qwen2.5-7b",
        hidden=3584,
        heads=28,
        kv_heads=4,
        head_dim=128,
        intermediate=18944,
        rope_theta=1000000.0,
        rms_eps=1e-6,
        qkv_bias=True,
        layers=28,
    ),
    # CPU tests: GQA (group 2), qkv bias, odd intermediate
    "tiny": Config(
        "tiny",
        hidden=64,
        heads=4,
        kv_heads=2,
        head_dim=16,
        intermediate=88,
        rope_theta=10000.0,
        rms_eps=1e-6,
        qkv_bias=True,
        layers=2,
        max_seq=64,
        bucket_min=8,
    ),
}


def config(name: str, layers: int | None = None, max_seq: int | None = None, **kw) -> Config:
    if name not in CONFIGS:
        raise KeyError(f"no decoder config {name!r}; known: {', '.join(CONFIGS)}")
    c = CONFIGS[name]
    return replace(c, layers=layers or c.layers, max_seq=max_seq or c.max_seq, **kw)


def prefill_model(p: dict, dtype: str) -> dict:
    """Every weight read once, the T input tokens read and T hidden states written; FLOPs 2 per
    weight per token, plus causal attention (half of 4*T*T*H*D per layer)."""
    cfg = config(p["model"], layers=p["layers"])
    t, e = p["tokens"], ESIZE[dtype]
    attn = 2 * t * t * cfg.heads * cfg.head_dim * cfg.layers
    return {
        "flops": 2 * t * cfg.layer_params() * cfg.layers + attn,
        "bytes": (cfg.layer_params() * cfg.layers + 2 * t * cfg.hidden) * e,
    }


def decode_model(p: dict, dtype: str) -> dict:
    """One token: every weight and the KV cache read once; 2 FLOPs per weight, and q.K plus
    p.V over the cached keys (2 * 2 * keys * H * D per layer)."""
    cfg = config(p["model"], layers=p["layers"])
    e = ESIZE[dtype]
    keys = p["context"]
    kv = 2 * keys * cfg.kv_heads * cfg.head_dim * cfg.layers
    return {
        "flops": 2 * cfg.layer_params() * cfg.layers + 2 * keys * cfg.heads * cfg.head_dim * 2 * cfg.layers,
        "bytes": (cfg.layer_params() * cfg.layers + kv) * e,
    }


E2E_MODELS = ("llama3-8b", "qwen2.5-7b")
PREFILL_TOKENS = (128, 256, 512, 1024, 2048, 4096)
E2E_LAYERS = 4  # the benchmark stack; full depth is a shape of its own where it is run
DECODE_CONTEXT = 448  # decode starts at 448 keys: bucket 512, crossing into 1024 after 64 steps

PREFILL_SHAPES = {
    f"{m}-l{E2E_LAYERS}-t{t}": {"model": m, "layers": E2E_LAYERS, "tokens": t}
    for m in E2E_MODELS
    for t in PREFILL_TOKENS
}
DECODE_SHAPES = {
    **{
        f"{m}-l{E2E_LAYERS}-ctx{DECODE_CONTEXT}": {"model": m, "layers": E2E_LAYERS, "context": DECODE_CONTEXT}
        for m in E2E_MODELS
    },
    **{
        f"{m}-l{CONFIGS[m].layers}-ctx{DECODE_CONTEXT}": {
            "model": m,
            "layers": CONFIGS[m].layers,
            "context": DECODE_CONTEXT,
        }
        for m in E2E_MODELS
    },
}
