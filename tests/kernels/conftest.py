"""CPU tests of the kernel lab: every Triton kernel runs under the interpreter.

TRITON_INTERPRET is read by @triton.jit when a kernel module is imported, so it is set
here at conftest import time; if another test module imported a kernel module earlier (its
kernels are then compiled JITFunctions that cannot run on CPU tensors), those modules are
reloaded so their kernels are rebuilt as interpreted functions.
"""
from __future__ import annotations

import importlib
import os
import sys

os.environ["TRITON_INTERPRET"] = "1"

def _interpreted(mod) -> bool:
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    kernels = [v for v in vars(mod).values() if isinstance(v, (JITFunction, InterpretedFunction))]
    return all(isinstance(v, InterpretedFunction) for v in kernels)


def _ensure_interpreted() -> None:
    """Make kernels imported before this conftest (without TRITON_INTERPRET) interpretable."""
    if "triton" not in sys.modules:
        return  # the normal case: everything imported from here on is interpreted
    import triton.language as tl

    # tl.sum, tl.max, tl.sigmoid, tl.zeros ... are themselves @triton.jit functions in
    # triton.language.standard: rebuild them (and their re-exports in triton.language)
    if not _interpreted(tl.standard):
        std = importlib.reload(tl.standard)
        for name, obj in vars(std).items():
            if getattr(tl, name, None) is not None and callable(obj) and not name.startswith("__"):
                if getattr(getattr(tl, name), "__module__", None) == std.__name__ or hasattr(obj, "fn"):
                    setattr(tl, name, obj)
    # then every already imported kernel module, in import order (dependencies first)
    for name in list(sys.modules):
        mod = sys.modules[name]
        if name.startswith("profkit.kernels.") and mod is not None and not _interpreted(mod):
            importlib.reload(mod)


_ensure_interpreted()

import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_seed():
    """Fresh random inputs every run; the seed is printed so a failure can be replayed
    (PROFKIT_TEST_SEED=<seed> replays it)."""
    fixed = os.environ.get("PROFKIT_TEST_SEED")
    seed = int(fixed) if fixed else int.from_bytes(os.urandom(4), "little")
    torch.manual_seed(seed)
    print(f"torch seed {seed}")
    yield


DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


@pytest.fixture(params=list(DTYPES))
def dtype(request):
    return request.param


def tdt(name: str):
    return DTYPES[name]
