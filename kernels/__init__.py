"""The kernel lab: operators with a PyTorch baseline, Triton versions, a float64 reference
and a bytes/FLOPs model, registered as NVTX-annotated workloads that `profkit capture`
runs by name.

Each operator module defines ``WORKLOAD`` (a :class:`Workload`); this registry finds them, so
adding an operator is one new file (kernel, launcher, baselines, float64 reference, bytes/FLOPs
model, shapes) plus its test: the registry tests (tests/kernels/test_workloads.py), the runner's
reference check and the benchmarks iterate the registry.
A run of workload ``op``, variant ``v`` and shape ``s`` happens inside an NVTX range named
``op/v/s``; the warm-up launches (compilation, autotuning) happen outside any range.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Backward:
    """The backward of an operator, registered as its own workload ``<op>_bwd``: each call is
    ``torch.autograd.grad(y, inputs, dy)`` of a forward built (and kept) per variant before
    timing, so a profile of the range holds the backward kernels only.

    inputs: state keys differentiated (the order of the gradients returned)
    forward: variant -> fn(*inputs) -> y, differentiable (variants not listed have no backward)
    reference: float64 forward fn(*inputs) -> y; the reference gradients are its autograd
    model(shape_params, dtype) -> {"bytes", "flops"} of one backward call
    shapes / quick: the forward's shape names timed (all / --quick)
    direct: name -> fn(state) -> gradients: the lab's backward launcher called directly (what
        its autograd Function's backward calls), registered as variant ``<name>_direct``. The
        autograd engine runs CUDA backward nodes on its own device thread, outside the NVTX
        range the runner pushed on the calling thread; a profile of a backward range holds
        only the direct variants' kernels (the benchmark times both: the gap is autograd's
        host overhead).
    """

    inputs: tuple[str, ...]
    forward: dict[str, Callable[..., Any]]
    reference: Callable[..., Any]
    model: Callable[[dict, str], dict]
    shapes: tuple[str, ...]
    quick: tuple[str, ...] = ()
    direct: dict[str, Callable[[Any], Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class Workload:
    """One operator (or scenario) that can be run by name.

    setup(shape_params: dict, dtype: str, device: str) -> state (inputs, weights, ...)
    variants: name -> fn(state) -> output; each call is one forward (or step) of the op
    shapes: name -> params, the benchmark shapes (names use no '/')
    model(shape_params, dtype) -> {"bytes": minimum HBM bytes, "flops": FLOPs} of one call
    reference(state, variant) -> the float64 output(s) that variant must match (a tuple for
        several outputs; the variant is there for workloads whose variants compute different
        things, such as fp8's per-row and per-tensor scales); None: no reference check
    numerics: the check policy of kernels/_numerics.py, "rel_l2" or "gemm"
    grad: the outputs are gradients (GRAD_TOL)
    baselines: variants we do not own (held to BASELINE_TOL, not the lab's TOL)
    peers: variant -> the baseline its time is compared with (default: every baseline)
    inexact: variants known to miss the error bound (reported by the benchmarks, not failures)
    quick: shape names of a quick benchmark run; selftest: tiny shapes for the CPU selftest
    backward: the operator's backward (registered as workload ``<op>_bwd``)
    bench: the benchmark script that times it ("kernels", "gemm"), None for scenarios
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
    reference: Callable[[Any, str], Any] | None = None
    numerics: str = "rel_l2"
    grad: bool = False
    baselines: tuple[str, ...] = ("eager", "compile", "liger")
    peers: dict[str, str] = field(default_factory=dict)
    inexact: tuple[str, ...] = ()
    quick: tuple[str, ...] = ()
    selftest: dict[str, dict] = field(default_factory=dict)
    backward: Backward | None = None
    bench: str | None = None

    def available(self, variant: str) -> str | None:
        """None if `variant` can run here, else why not (unregistered, or a module missing)."""
        from ._numerics import has_module

        mod = self.requires.get(variant)
        if mod and not has_module(mod):
            return f"{mod} not installed"
        if variant not in self.variants:
            return "variant not registered"
        return None

    def check(self, state, variant: str, out, dtype: str | None = None):
        """The variant's output against the reference, under this workload's policy
        (kernels/_numerics.Result); None when the workload has no reference."""
        from ._numerics import measure

        if self.reference is None:
            return None
        return measure(
            out,
            self.reference(state, variant),
            dtype or self.default_dtype,
            f"{self.op}/{variant}",
            self.numerics,
            grad=self.grad,
            baseline=variant in self.baselines,
        )


def backward_workload(w: Workload) -> Workload:
    """The ``<op>_bwd`` workload of an operator that declares a Backward."""
    b = w.backward
    if b is None:
        raise ValueError(f"{w.op} declares no backward")

    def setup(p: dict, dtype: str, device: str):
        import torch

        s = w.setup(p, dtype, device)
        ins = [s[n] for n in b.inputs]
        with torch.no_grad():
            y = b.reference(*ins)
        s["dy"] = torch.randn(y.shape, dtype=ins[0].dtype, device=ins[0].device)
        return s

    def grads(variant: str):
        fwd = b.forward[variant]

        def call(s):
            import torch

            g = s.setdefault("_graphs", {}).get(variant)
            if g is None:  # the forward, once per state and variant (warm-up, outside any range)
                leaves = [s[n].detach().clone().requires_grad_() for n in b.inputs]
                # dy copied per variant: a backward may write its result into dy (Liger's RMSNorm
                # computes dx in place by default), which must not reach the other variants
                g = s["_graphs"][variant] = (fwd(*leaves), leaves, s["dy"].clone())
            y, leaves, dy = g
            return torch.autograd.grad(y, leaves, dy, retain_graph=True)

        return call

    def reference(s, variant):
        import torch

        if "_ref" not in s:
            x64 = [s[n].detach().double().requires_grad_() for n in b.inputs]
            s["_ref"] = torch.autograd.grad(b.reference(*x64), x64, s["dy"].double())
        return s["_ref"]

    return Workload(
        op=f"{w.op}_bwd",
        setup=setup,
        variants={
            **{v: grads(v) for v in b.forward if v not in w.requires or v in w.variants},
            **{f"{v}_direct": fn for v, fn in b.direct.items()},
        },
        shapes={name: w.shapes[name] for name in b.shapes},
        model=b.model,
        dtypes=w.dtypes,
        default_dtype=w.default_dtype,
        description=f"backward of {w.op}: d{'/d'.join(b.inputs)}",
        requires={v: m for v, m in w.requires.items() if v in b.forward},
        gpu_only=tuple(v for v in w.gpu_only if v in b.forward),
        reference=reference,
        numerics=w.numerics,
        grad=True,
        baselines=w.baselines + tuple(f"{v}_direct" for v in b.direct if v in w.baselines),
        quick=b.quick or b.shapes[:1],
        selftest=w.selftest,
        bench=w.bench,
    )


_REGISTRY: dict[str, Workload] = {}


def register(w: Workload) -> Workload:
    _REGISTRY[w.op] = w
    if w.backward is not None:
        _REGISTRY[f"{w.op}_bwd"] = backward_workload(w)
    return w


def _modules() -> list[str]:
    return [
        f"{__name__}.{info.name}"
        for info in pkgutil.iter_modules(__path__)
        if not info.name.startswith("_") and info.name not in ("run", "timing")
    ]


def preload() -> None:
    """Import the workload modules ahead of workloads() (the main job does it while its first
    reports are read): nothing is registered here, and a module that fails to import is left
    out of sys.modules, so it fails again, the same way, where workloads() imports it."""
    for name in _modules():
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - reported by workloads(), not here
            pass


def _discover() -> None:
    for name in _modules():
        mod = importlib.import_module(name)
        w = getattr(mod, "WORKLOAD", None)
        if isinstance(w, Workload):
            register(w)
        for w in getattr(mod, "WORKLOADS", ()):  # a module holding several scenarios (e2e)
            register(w)


def workloads() -> dict[str, Workload]:
    if not _REGISTRY:
        _discover()
    return dict(sorted(_REGISTRY.items()))


def benched(kind: str) -> dict[str, Workload]:
    """The workloads a benchmark script times ("kernels": memory-bound operators and their
    backwards, "gemm": the GEMM family), by name."""
    return {op: w for op, w in workloads().items() if w.bench == kind}


def get(op: str) -> Workload:
    """A registered workload by name, or a user's own as ``MODULE:NAME`` (a module or a .py
    file holding a Workload), so `profkit bench` and `profkit capture` run it like the lab's."""
    if ":" in op:
        return _user_workload(op)
    ws = workloads()
    if op not in ws:
        raise KeyError(f"no workload named {op!r}; known: {', '.join(ws)}")
    return ws[op]


def _user_workload(spec: str) -> Workload:
    from profkit.core.errors import BadArgument
    from profkit.core.usercode import load_module

    mod_name, _, name = spec.rpartition(":")
    try:
        mod = load_module(mod_name)
    except BadArgument as e:
        raise KeyError(str(e)) from None
    w = getattr(mod, name, None)
    if not isinstance(w, Workload):
        raise KeyError(f"{spec}: {name} is not a profkit.kernels.Workload")
    return w


def range_name(op: str, variant: str, shape: str) -> str:
    return f"{op}/{variant}/{shape}"


TORCH_DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64", "fp8": "float8_e4m3fn"}


def torch_dtype(name: str):
    import torch

    return getattr(torch, TORCH_DTYPES.get(name, name))
