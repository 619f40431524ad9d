"""Build and load the lab's CUDA C++ sources (kernels/cuda/*.cu) with nvcc, cached between runs.

Each ``kernels/cuda/NAME.cu`` is plain CUDA C++ (no torch headers) exporting ``extern "C"``
launch functions that take raw pointers, sizes and a cudaStream_t. ``load(NAME)`` compiles it
once into a shared library

    nvcc -O3 -std=c++17 -gencode=arch=compute_XY,code=sm_XY -shared -Xcompiler -fPIC ...

under ``$PROFKIT_CACHE/cuda`` (default ``~/.cache/profkit/cuda``), named by a hash of the
sources (the .cu and every header beside it), the flags and nvcc's version, so a change to any
of them builds anew and an unchanged build is reused by every later process; then opens it
with ctypes. The target defaults to the current GPU's compute capability (sm_90 on an H100 or
H200, sm_90 without a GPU) and can be set with ``$PROFKIT_CUDA_ARCH`` (e.g. ``sm_90a``).

Where no nvcc is found (``$PROFKIT_NVCC``, ``$CUDA_HOME/bin``, ``PATH``, ``/usr/local/cuda/bin``)
``ToolMissing`` says so in one line; a failing compile raises ``ToolFailed`` with nvcc's first
error lines. Compiles write to a temporary name and rename, so concurrent processes never load
a half-written library.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from profkit.core.errors import ToolFailed, ToolMissing

SOURCES = Path(__file__).resolve().parent / "cuda"
NAMES = ("rmsnorm", "rope", "swiglu", "sgemm", "softmax", "fp8_gemm")
# sources with sm_90a-only instructions (wgmma, setmaxnreg): built for sm_90a where sm_90 is asked
ARCH_SPECIFIC = ("fp8_gemm",)
FALLBACK_NVCC = ("/usr/local/cuda/bin/nvcc",)
BASE_FLAGS = ("-O3", "-std=c++17", "-lineinfo", "-Xcompiler", "-fPIC", "-Xcompiler", "-fvisibility=hidden")

_LIBS: dict[str, ctypes.CDLL] = {}
_NVCC_VERSION: dict[str, str] = {}


def find_nvcc() -> str:
    """Path of nvcc, or ToolMissing."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    for cand in (
        os.environ.get("PROFKIT_NVCC"),
        home and os.path.join(home, "bin", "nvcc"),
        shutil.which("nvcc"),
        *FALLBACK_NVCC,
    ):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    raise ToolMissing(
        "nvcc (the CUDA compiler) is not installed: the CUDA C++ kernels need it; install the CUDA "
        "toolkit, or set CUDA_HOME or PROFKIT_NVCC"
    )


def nvcc_version(nvcc: str) -> str:
    if nvcc not in _NVCC_VERSION:
        try:
            out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ToolMissing(f"{nvcc}: cannot run ({e})") from None
        line = [ln for ln in out.splitlines() if "release" in ln]
        _NVCC_VERSION[nvcc] = (line[-1] if line else out).strip()
    return _NVCC_VERSION[nvcc]


def target_arch() -> str:
    """sm_XY for -gencode: $PROFKIT_CUDA_ARCH, else the current GPU, else sm_90 (H100/H200)."""
    arch = os.environ.get("PROFKIT_CUDA_ARCH")
    if arch:
        return arch if arch.startswith("sm_") else f"sm_{arch}"
    try:
        import torch

        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            return f"sm_{major}{minor}"
    except Exception:  # noqa: BLE001  (no torch, no driver: build for Hopper)
        pass
    return "sm_90"


def arch_for(name: str, arch: str) -> str:
    """The target `name` is built for: `arch`, or its `a` form (sm_90 -> sm_90a) for ARCH_SPECIFIC."""
    return f"{arch}a" if name in ARCH_SPECIFIC and arch == "sm_90" else arch


def arch_flags(arch: str) -> list[str]:
    """-gencode for one real target (the `a` targets such as sm_90a need this form: the -arch
    shorthand also runs a plain pass that rejects their instructions)."""
    num = arch.removeprefix("sm_")
    return [f"-gencode=arch=compute_{num},code=sm_{num}"]


def source(name: str) -> Path:
    if name not in NAMES:
        raise KeyError(f"no CUDA source {name!r}; known: {', '.join(NAMES)}")
    return SOURCES / f"{name}.cu"


def cache_dir() -> Path:
    root = os.environ.get("PROFKIT_CACHE")
    return Path(root) / "cuda" if root else Path.home() / ".cache" / "profkit" / "cuda"


def cache_key(name: str, flags: list[str], version: str) -> str:
    """Hash of the .cu, every header of kernels/cuda (any may be included), the flags and nvcc."""
    h = hashlib.sha256()
    for p in [source(name)] + sorted(SOURCES.glob("*.cuh")):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    h.update("\0".join(flags).encode() + b"\0" + version.encode())
    return h.hexdigest()[:16]


def build_flags(arch: str) -> list[str]:
    return [*BASE_FLAGS, *arch_flags(arch), "-shared"]


def library_path(name: str, arch: str | None = None) -> Path:
    """Where load(name) finds or puts the library (compiles nothing; needs nvcc for its version)."""
    arch = arch_for(name, arch or target_arch())
    nvcc = find_nvcc()
    return cache_dir() / f"{name}-{arch}-{cache_key(name, build_flags(arch), nvcc_version(nvcc))}.so"


def _nvcc(args: list[str], what: str) -> None:
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        lines = [ln for ln in (p.stderr + p.stdout).splitlines() if "error" in ln.lower()] or (
            p.stderr + p.stdout
        ).strip().splitlines()
        raise ToolFailed(f"nvcc failed on {what}: " + " | ".join(lines[:4]))


def build(name: str, arch: str | None = None) -> Path:
    """The cached library for `name`, compiled first if missing."""
    arch = arch_for(name, arch or target_arch())
    out = library_path(name, arch)
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=out.stem + ".", suffix=".tmp.so", dir=out.parent)
    os.close(fd)
    try:
        _nvcc([find_nvcc(), *build_flags(arch), "-o", tmp, str(source(name))], source(name).name)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def compile_only(name: str, out: Path, arch: str = "sm_90") -> Path:
    """nvcc -c for `arch` into `out` (an object file): the CPU CI check that every source compiles."""
    _nvcc(
        [find_nvcc(), *BASE_FLAGS, *arch_flags(arch_for(name, arch)), "-c", "-o", str(out), str(source(name))],
        source(name).name,
    )
    return out


def load(name: str) -> ctypes.CDLL:
    """The library of kernels/cuda/<name>.cu, built if needed, opened once per process."""
    lib = _LIBS.get(name)
    if lib is None:
        lib = _LIBS[name] = ctypes.CDLL(str(build(name)))
        lib.profkit_cuda_error_string.restype = ctypes.c_char_p
        lib.profkit_cuda_error_string.argtypes = [ctypes.c_int]
    return lib


def check(lib: ctypes.CDLL, code: int, what: str) -> None:
    """Raise with CUDA's message where a launch function returned an error."""
    if code != 0:
        msg = lib.profkit_cuda_error_string(code)
        raise RuntimeError(f"{what}: CUDA error {code} ({msg.decode() if msg else 'unknown'})")


# Tests run the same sources compiled for the CPU (tests/kernels/cuda_emu.h) with host tensors:
# they set this, and the launchers then accept CPU tensors and pass a null stream.
EMULATED = False


def stream_of(t) -> int | None:
    """The current CUDA stream of t's device as an integer handle (None: the emulated CPU build)."""
    if EMULATED:
        return None
    import torch

    return torch.cuda.current_stream(t.device).cuda_stream


def on_device(t) -> bool:
    return t.is_cuda or (EMULATED and t.device.type == "cpu")
