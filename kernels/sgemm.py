"""SGEMM (fp32) ladder in CUDA C++, C = A @ B, from a naive kernel to warp tiling.

    naive, coalesced, smem, blocktile_1d, blocktile_2d, vectorized, tuned, warptile
                    kernels/cuda/sgemm.cu (what each step changes is written there)
    cublas          torch.matmul with TF32 off (allow_tf32 = False, float32 matmul precision
                    "highest"): cuBLAS's own fp32 SGEMM, the baseline in the same run

``tuned`` and ``warptile`` each have a table of tile shapes; the first call for a (GPU, M, N,
K) times every shape that divides the problem (triton.testing.do_bench, median) and keeps the
fastest, also on disk next to the built library (``autotune.json``), so a later process (a
profiler run, say) uses the same choice without timing again. ``autotune_choices()`` returns
what was picked and the times it was picked on.

float64 reference: ``sgemm_reference``; the check is the GEMM family's (kernels/_numerics.py, policy "gemm":
relative Frobenius error <= 1e-5 and max error <= 1e-3 of the reference's RMS, for fp32).
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import tempfile

from profkit.model.ops.matmul import SGEMM_SHAPES
from profkit.model.ops.matmul import gemm_model as model

from . import Workload, _cuda_build

STEPS = ("naive", "coalesced", "smem", "blocktile_1d", "blocktile_2d", "vectorized", "tuned", "warptile")
TUNED_STEPS = ("tuned", "warptile")
VECTOR_STEPS = ("vectorized", "tuned", "warptile")  # float4 global access: 16-byte aligned operands

_AUTOTUNE: dict[str, dict] = {}  # key -> {"config": name, "ms": {name: ms}}


def _lib():
    lib = _cuda_build.load("sgemm")
    if lib.profkit_sgemm.argtypes is None:
        P, I = ctypes.c_void_p, ctypes.c_int
        lib.profkit_sgemm.argtypes, lib.profkit_sgemm.restype = [I, I, I, I, I, P, P, P, P], I
        lib.profkit_sgemm_step_name.restype = ctypes.c_char_p
        lib.profkit_sgemm_config_name.restype = ctypes.c_char_p
        lib.profkit_sgemm_tile.argtypes = [I, I, ctypes.POINTER(I), ctypes.POINTER(I), ctypes.POINTER(I)]
        names = tuple(lib.profkit_sgemm_step_name(i).decode() for i in range(lib.profkit_sgemm_num_steps()))
        if names != STEPS:
            raise RuntimeError(f"sgemm.cu steps {names} do not match sgemm.py {STEPS}")
    return lib


@functools.cache  # launches ask on every call: keep them cheap
def configs(step: str) -> tuple[str, ...]:
    """Names of the compiled tile configurations of a step (one for the fixed steps)."""
    lib, i = _lib(), STEPS.index(step)
    return tuple(lib.profkit_sgemm_config_name(i, c).decode() for c in range(lib.profkit_sgemm_num_configs(i)))


@functools.cache
def tile(step: str, config: int = 0) -> tuple[int, int, int]:
    """(bm, bn, bk): M, N, K must be multiples of these (1: any size)."""
    bm, bn, bk = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    if _lib().profkit_sgemm_tile(STEPS.index(step), config, ctypes.byref(bm), ctypes.byref(bn), ctypes.byref(bk)):
        raise ValueError(f"sgemm: {step} has no configuration {config}")
    return bm.value, bn.value, bk.value


def fits(step: str, config: int, M: int, N: int, K: int) -> bool:
    bm, bn, bk = tile(step, config)
    return M % bm == 0 and N % bn == 0 and K % bk == 0


def _prep(a, b, out, step):
    import torch

    if step not in STEPS:
        raise ValueError(f"sgemm: no step {step!r}; known: {', '.join(STEPS)}")
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"sgemm: shapes {tuple(a.shape)} @ {tuple(b.shape)}")
    if a.dtype != torch.float32 or b.dtype != torch.float32:
        raise ValueError(f"sgemm: fp32 operands only, got {a.dtype} and {b.dtype}")
    if not (a.is_contiguous() and b.is_contiguous()):
        raise ValueError("sgemm: A and B must be row-major contiguous")
    M, K = a.shape
    N = b.shape[1]
    if min(M, N, K) <= 0 or max(M, N, K) >= 2**31 or max(M * K, K * N, M * N) >= 2**40:
        raise ValueError(f"sgemm: sizes M={M} N={N} K={K} out of range")
    if out is None:
        out = torch.empty((M, N), dtype=torch.float32, device=a.device)
    elif tuple(out.shape) != (M, N) or out.dtype != torch.float32 or not out.is_contiguous():
        raise ValueError(f"sgemm: out must be contiguous float32 {(M, N)}")
    if step in VECTOR_STEPS and any(t.data_ptr() % 16 for t in (a, b, out)):
        raise ValueError(f"sgemm: {step} loads float4: A, B and out must be 16-byte aligned")
    return M, N, K, out


def sgemm(a, b, step: str = "warptile", out=None, config: int | str | None = None):
    """C = A @ B (fp32, row-major) with one step of the ladder. config: index or name in the
    step's table; None = the only one, or the autotuned one for tuned / warptile."""
    M, N, K, out = _prep(a, b, out, step)
    for t in (a, b, out):
        if not _cuda_build.on_device(t):
            raise ValueError(f"sgemm: the CUDA C++ kernels need CUDA tensors (got a tensor on {t.device})")
    names = configs(step)
    if isinstance(config, str):
        if config not in names:
            raise ValueError(f"sgemm: {step} has no configuration {config!r}; known: {', '.join(names)}")
        config = names.index(config)
    if config is None:
        config = autotune(step, a, b, out) if step in TUNED_STEPS else 0
    if not fits(step, config, M, N, K):
        bm, bn, bk = tile(step, config)
        raise ValueError(
            f"sgemm: {step} ({names[config]}) needs M % {bm} == N % {bn} == K % {bk} == 0, got M={M} N={N} K={K}"
        )
    lib = _lib()
    _cuda_build.check(
        lib,
        lib.profkit_sgemm(
            STEPS.index(step), config, M, N, K, a.data_ptr(), b.data_ptr(), out.data_ptr(), _cuda_build.stream_of(a)
        ),
        f"sgemm {step} (CUDA)",
    )
    return out


# ---- autotuning of the tuned / warptile tables ------------------------------------------------


def _autotune_file():
    return _cuda_build.cache_dir() / "autotune.json"


def _autotune_key(step: str, M: int, N: int, K: int, device) -> str:
    if _cuda_build.EMULATED:
        return f"emulated|{step}|{M}x{N}x{K}"
    return f"{_device_name(str(device))}|{_lib_stem()}|{step}|{M}x{N}x{K}"


@functools.cache
def _device_name(device: str) -> str:
    import torch

    return torch.cuda.get_device_name(device)


@functools.cache  # once per process: hashing the sources on every call cost ~40 us
def _lib_stem() -> str:
    return _cuda_build.library_path("sgemm").stem  # the hash: a rebuilt library tunes again


def _read_disk() -> dict:
    try:
        return json.loads(_autotune_file().read_text())
    except (OSError, ValueError):
        return {}


def _write_disk(key: str, rec: dict) -> None:
    path = _autotune_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = _read_disk()
    data[key] = rec
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="autotune.", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def autotune(step: str, a, b, out) -> int:
    """Index of the fastest configuration of `step` for these sizes (timed once, then kept)."""
    M, K = a.shape
    N = b.shape[1]
    names = configs(step)
    key = _autotune_key(step, M, N, K, a.device)
    rec = _AUTOTUNE.get(key) or _read_disk().get(key)
    if rec and rec.get("config") in names:
        _AUTOTUNE[key] = rec
        return names.index(rec["config"])
    ok = [i for i in range(len(names)) if fits(step, i, M, N, K)]
    if not ok:
        raise ValueError(f"sgemm: no {step} configuration divides M={M} N={N} K={K}")
    if _cuda_build.EMULATED:  # nothing to time on the CPU build: the first that fits
        _AUTOTUNE[key] = {"config": names[ok[0]], "ms": {}}
        return ok[0]
    from triton.testing import do_bench

    ms = {}
    for i in ok:
        ms[names[i]] = float(do_bench(lambda: sgemm(a, b, step, out, config=i), warmup=5, rep=25, return_mode="median"))
    best = min(ms, key=lambda n: ms[n])
    rec = _AUTOTUNE[key] = {"config": best, "ms": ms}
    _write_disk(key, rec)
    return names.index(best)


def autotune_choices() -> dict[str, dict]:
    """{key: {"config": chosen, "ms": {config: median ms}}} for everything tuned in this process."""
    return dict(_AUTOTUNE)


# ---- reference, model, workload --------------------------------------------------------------


def sgemm_reference(a, b):
    return a.double() @ b.double()


def sgemm_cublas(a, b):
    """cuBLAS SGEMM through torch.matmul, TF32 off (set here: the flags are process-wide)."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    return torch.matmul(a, b)


def _setup(p: dict, dtype: str, device: str):
    import torch

    if dtype != "fp32":
        raise ValueError(f"sgemm is fp32 only, not {dtype}")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    a = torch.randn(p["M"], p["K"], dtype=torch.float32, device=device)
    b = torch.randn(p["K"], p["N"], dtype=torch.float32, device=device)
    return {"a": a, "b": b}


def _step(name):
    return lambda s: sgemm(s["a"], s["b"], name)


_VARIANTS = {name: _step(name) for name in STEPS}
_VARIANTS["cublas"] = lambda s: sgemm_cublas(s["a"], s["b"])

WORKLOAD = Workload(
    op="sgemm",
    setup=_setup,
    variants=_VARIANTS,
    shapes=SGEMM_SHAPES,
    model=model,
    dtypes=("fp32",),
    default_dtype="fp32",
    description="SGEMM ladder in CUDA C++ (naive -> warp tiling) against cuBLAS fp32",
    gpu_only=STEPS,
    reference=lambda s, v: sgemm_reference(s["a"], s["b"]),
    numerics="gemm",
    baselines=("cublas",),
)
