"""The matmul family: C = A @ B and its relatives (the lab's GEMM ladder, fp8 GEMM, SGEMM,
fused RMSNorm + linear, gated MLP; aten mm, addmm, bmm, baddbmm, linear, matmul, _scaled_mm,
grouped GEMM).

FLOPs: 2*M*N*K per product (one multiply and one add per term of each of the M*N dot products
of length K); a bias or beta*C epilogue adds M*N. Bytes: A, B (and bias / C) read once, C
written once: the traffic of a kernel whose tiles reuse every operand from on-chip memory.
"""

from __future__ import annotations

from .dtypes import ESIZE

# (K, N) of the projections of one decoder layer, x @ W^T with W of shape (N, K); K = hidden and
# N = the output width from the published config.json of Llama-3-8B and Qwen2.5-7B
LLM_PROJ: dict[str, tuple[int, int]] = {
    "llama8b-qkv": (4096, 6144),
    "llama8b-o": (4096, 4096),
    "llama8b-gateup": (4096, 28672),
    "llama8b-gate": (4096, 14336),
    "llama8b-down": (14336, 4096),
    "qwen7b-qkv": (3584, 4608),
    "qwen7b-o": (3584, 3584),
    "qwen7b-gateup": (3584, 37888),
    "qwen7b-gate": (3584, 18944),
    "qwen7b-down": (18944, 3584),
}
LLM_M = (1, 16, 64, 256, 1024, 4096, 8192)


def proj_shape(proj: str, m: int) -> tuple[str, dict]:
    k, n = LLM_PROJ[proj]
    return f"{proj}-m{m}", {"M": m, "N": n, "K": k}


def all_gemm_shapes() -> dict[str, dict]:
    """Every LLM projection x every M, plus 8192^3: the full sweep (benchmarks --full)."""
    out: dict[str, dict] = {}
    for proj in (
        "llama8b-qkv",
        "llama8b-o",
        "llama8b-gateup",
        "llama8b-down",
        "qwen7b-qkv",
        "qwen7b-gateup",
        "qwen7b-down",
    ):
        out.update(proj_shape(proj, m) for m in LLM_M)
    out["m8192-n8192-k8192"] = {"M": 8192, "N": 8192, "K": 8192}
    return out


def gemm_model(p: dict, dtype: str) -> dict:
    """Minimum HBM traffic of C = A @ B: read A and B once, write C once (fp8: bf16 out)."""
    m, n, k = p["M"], p["N"], p["K"]
    e = ESIZE[dtype]
    out_e = 2 if dtype == "fp8" else e
    return {"bytes": (m * k + k * n) * e + m * n * out_e, "flops": 2 * m * n * k}


def fp8_gemm_model(p: dict, dtype: str = "fp8") -> dict:
    """fp8 operands, bf16 out, plus the fp32 per-row and per-column scales (an upper bound: a
    per-tensor scale is 8 bytes)."""
    d = gemm_model(p, "fp8")
    d["bytes"] += 4 * (p["M"] + p["N"])
    return d


def rmsnorm_linear_model(p: dict, dtype: str) -> dict:
    """RMSNorm(x) @ W^T in one kernel: x, the norm weight and W read once, y written once; the
    norm's 4*M*K FLOPs are noise beside the product's."""
    m, n, k = p["M"], p["N"], p["K"]
    e = ESIZE[dtype]
    return {"bytes": (m * k + k + n * k + m * n) * e, "flops": 2 * m * n * k}


def gated_mlp_model(p: dict, dtype: str) -> dict:
    """silu(x @ Wg^T) * (x @ Wu^T): x and both weights read once, y written (the minimum); two
    GEMMs and the activation, counted as 6 FLOPs per output element."""
    m, n, k = p["M"], p["N"], p["K"]
    e = ESIZE[dtype]
    return {"bytes": (m * k + 2 * n * k + m * n) * e, "flops": 4 * m * n * k + 6 * m * n}


# --- the lab's named shapes ------------------------------------------------------------------

MATMUL_SHAPES = dict(
    [
        proj_shape("llama8b-qkv", 1),
        proj_shape("llama8b-qkv", 16),
        proj_shape("qwen7b-qkv", 64),
        proj_shape("llama8b-o", 256),
        proj_shape("llama8b-gateup", 1024),
        proj_shape("qwen7b-down", 1024),
        proj_shape("llama8b-qkv", 4096),
        proj_shape("llama8b-down", 4096),
        proj_shape("qwen7b-gateup", 8192),
        ("m8192-n8192-k8192", {"M": 8192, "N": 8192, "K": 8192}),
    ]
)

FP8_GEMM_SHAPES = dict(
    [
        proj_shape("llama8b-qkv", 16),
        proj_shape("llama8b-gateup", 1024),
        proj_shape("qwen7b-down", 1024),
        proj_shape("llama8b-qkv", 4096),
        proj_shape("llama8b-down", 4096),
        ("m8192-n8192-k8192", {"M": 8192, "N": 8192, "K": 8192}),
    ]
)


def fp8_all_shapes() -> dict[str, dict]:
    """The fp8 full sweep: every LLM projection x M >= 16, and 8192^3."""
    return {k: v for k, v in all_gemm_shapes().items() if v["M"] >= 16}


SGEMM_SHAPES = {
    "1024": {"M": 1024, "N": 1024, "K": 1024},
    "2048": {"M": 2048, "N": 2048, "K": 2048},
    "4096": {"M": 4096, "N": 4096, "K": 4096},
    "m4096-n2048-k1024": {"M": 4096, "N": 2048, "K": 1024},
}

RMSNORM_LINEAR_DECODE_M = (1, 2, 4, 8, 16, 32, 64)
RMSNORM_LINEAR_PROJS = ("llama8b-qkv", "llama8b-gate", "qwen7b-qkv", "qwen7b-gate")


def rmsnorm_linear_all_shapes() -> dict[str, dict]:
    return dict(proj_shape(proj, m) for proj in RMSNORM_LINEAR_PROJS for m in RMSNORM_LINEAR_DECODE_M)


RMSNORM_LINEAR_SHAPES = {name: p for name, p in rmsnorm_linear_all_shapes().items() if p["M"] in (1, 16, 64)}


def gated_mlp_shape(proj: str, m: int) -> tuple[str, dict]:
    k, n = LLM_PROJ[proj]  # (hidden, intermediate) of the gate projection
    return f"{proj.split('-')[0]}-m{m}", {"M": m, "N": n, "K": k}


GATED_MLP_SHAPES = dict(
    [gated_mlp_shape("llama8b-gate", m) for m in (1, 16, 64, 1024, 4096)]
    + [gated_mlp_shape("qwen7b-gate", m) for m in (1, 16, 64, 4096)]
)


def gated_mlp_all_shapes() -> dict[str, dict]:
    return dict(
        gated_mlp_shape(p, m)
        for p in ("llama8b-gate", "qwen7b-gate")
        for m in (1, 2, 4, 8, 16, 32, 64, 256, 1024, 4096, 8192)
    )
