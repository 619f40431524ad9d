"""Build the lab's CUDA C++ sources for the CPU (cuda_emu.h beside this file) and make the
launchers use them: the same exported functions, run on host tensors, thread by thread."""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from pathlib import Path

from profkit.kernels import _cuda_build

HERE = Path(__file__).resolve().parent


def cuda_include() -> Path | None:
    """A CUDA toolkit include dir (the fp16/bf16 headers give host conversions), or None."""
    cands = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            cands.append(Path(os.environ[var]) / "include")
    nvcc = shutil.which("nvcc")
    if nvcc:
        cands.append(Path(nvcc).resolve().parents[1] / "include")
    cands.append(Path("/usr/local/cuda/include"))
    return next((c for c in cands if (c / "cuda_fp16.h").exists() and (c / "driver_types.h").exists()), None)


def why_not() -> str | None:
    """None if the CPU build can be made here, else why not (for pytest.skip)."""
    if not shutil.which("g++"):
        return "no g++ for the CPU build of the CUDA kernels"
    if cuda_include() is None:
        return "no CUDA toolkit headers (cuda_fp16.h): the CPU build of the CUDA kernels needs them"
    return None


def build(name: str, out_dir: Path) -> Path:
    out = out_dir / f"emu_{name}.so"
    args = ["g++", "-std=c++20", "-O1", "-fPIC", "-shared", "-pthread", "-DPROFKIT_CPU_EMULATION",
            f"-I{cuda_include()}", f"-I{_cuda_build.SOURCES}", "-include", str(HERE / "cuda_emu.h"),
            "-x", "c++", str(_cuda_build.source(name)), "-o", str(out)]
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(f"CPU build of {name}.cu failed:\n{p.stderr[-3000:]}")
    return out


def install(out_dir: Path) -> dict:
    """Build every source for the CPU and point the launchers at it; returns what to restore."""
    saved = {"libs": dict(_cuda_build._LIBS), "emulated": _cuda_build.EMULATED}
    for name in _cuda_build.NAMES:
        lib = ctypes.CDLL(str(build(name, out_dir)))
        lib.profkit_cuda_error_string.restype = ctypes.c_char_p
        lib.profkit_cuda_error_string.argtypes = [ctypes.c_int]
        _cuda_build._LIBS[name] = lib
    _cuda_build.EMULATED = True
    return saved


def uninstall(saved: dict) -> None:
    _cuda_build._LIBS.clear()
    _cuda_build._LIBS.update(saved["libs"])
    _cuda_build.EMULATED = saved["emulated"]
