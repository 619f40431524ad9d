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

OPS = ("rmsnorm", "add_rmsnorm", "rope", "rmsnorm_rope", "swiglu", "softmax")


def _interpreted(mod) -> bool:
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    kernels = [v for v in vars(mod).values() if isinstance(v, (JITFunction, InterpretedFunction))]
    return all(isinstance(v, InterpretedFunction) for v in kernels)


def _ensure_interpreted() -> None:
    for op in OPS:  # dependency order: rmsnorm, rope before the fused ops importing them
        mod = sys.modules.get(f"profkit.kernels.{op}")
        if mod is not None and not _interpreted(mod):
            importlib.reload(mod)


_ensure_interpreted()

import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_seed():
    """Fresh random inputs every run; the seed is printed so a failure can be replayed."""
    seed = int.from_bytes(os.urandom(4), "little")
    torch.manual_seed(seed)
    print(f"torch seed {seed}")
    yield


DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


@pytest.fixture(params=list(DTYPES))
def dtype(request):
    return request.param


def tdt(name: str):
    return DTYPES[name]
