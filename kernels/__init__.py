"""The kernel lab: operators with a PyTorch baseline, Triton versions, a float64 reference
and a bytes/FLOPs model, registered as NVTX-annotated workloads that `profkit capture`
runs by name.

Each operator module defines ``WORKLOAD`` (a :class:`Workload`); this registry finds them.
A run of workload ``op``, variant ``v`` and shape ``s`` happens inside an NVTX range named
``op/v/s``; the warm-up launches (compilation, autotuning) happen outside any range.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class Workload:
    """One operator (or scenario) that can be run by name.

    setup(shape_params: dict, dtype: str, device: str) -> state (inputs, weights, ...)
    variants: name -> fn(state) -> output; each call is one forward (or step) of the op
    shapes: name -> params, the benchmark shapes (names use no '/')
    model(shape_params, dtype) -> {"bytes": minimum HBM bytes, "flops": FLOPs} of one call
    """

    op: str
    setup: Callable[[dict, str, str], Any]
    variants: dict[str, Callable[[Any], Any]]
    shapes: dict[str, dict]
    model: Callable[[dict, str], dict] | None = None
    dtypes: tuple[str, ...] = ("bf16",)
    default_dtype: str = "bf16"
    description: str = ""
    requires: dict[str, str] = field(default_factory=dict)  # variant -> python module it needs
    gpu_only: tuple[str, ...] = ()  # variants that run on a CUDA GPU only (CUDA C++ built with nvcc)
    main: Callable[[list[str]], int] | None = None  # scenarios with their own NVTX layout


_REGISTRY: dict[str, Workload] = {}


def register(w: Workload) -> Workload:
    _REGISTRY[w.op] = w
    return w


def _discover() -> None:
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_") or info.name in ("run",):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        w = getattr(mod, "WORKLOAD", None)
        if isinstance(w, Workload):
            register(w)
        for w in getattr(mod, "WORKLOADS", ()):  # a module holding several scenarios (e2e)
            register(w)


def workloads() -> dict[str, Workload]:
    if not _REGISTRY:
        _discover()
    return dict(sorted(_REGISTRY.items()))


def get(op: str) -> Workload:
    ws = workloads()
    if op not in ws:
        raise KeyError(f"no workload named {op!r}; known: {', '.join(ws)}")
    return ws[op]


def range_name(op: str, variant: str, shape: str) -> str:
    return f"{op}/{variant}/{shape}"


TORCH_DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64", "fp8": "float8_e4m3fn"}


def torch_dtype(name: str):
    import torch

    return getattr(torch, TORCH_DTYPES.get(name, name))
