from __future__ import annotations

import torch
from profkit.kernels._numerics import check, poison  # noqa: F401

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def randn(*shape, dtype="fp32", scale=1.0):
    return (torch.randn(*shape, dtype=torch.float64) * scale).to(DTYPES[dtype])


def nan_like(t):
    return poison(torch.empty_like(t))


def grads64(ref_fn, inputs, dy):
    """float64 autograd of the reference: inputs are the (rounded) test inputs."""
    xs = [x.detach().double().requires_grad_() for x in inputs]
    out = ref_fn(*xs)
    out.backward(dy.double())
    return [x.grad for x in xs]


class LaunchSpy:
    """Stands in for a @triton.jit kernel in its module (monkeypatch.setattr): records the grid,
    the positional arguments and, by name, every parameter and option (constexprs and num_warps,
    whether given by keyword or by position) of each launch, then launches the real kernel."""

    def __init__(self, kernel):
        import inspect

        self.kernel = kernel
        self.names = list(inspect.signature(getattr(kernel, "fn", kernel)).parameters)
        self.grids = []
        self.args = []
        self.kwargs = []

    def __getitem__(self, grid):
        self.grids.append(grid)
        launch = self.kernel[grid]

        def call(*args, **kwargs):
            self.args.append(args)
            self.kwargs.append({**dict(zip(self.names, args)), **kwargs})
            return launch(*args, **kwargs)

        return call


def spy(monkeypatch, module, *names):
    """LaunchSpy each named kernel of `module`; returns {name: spy}."""
    out = {}
    for n in names:
        out[n] = LaunchSpy(getattr(module, n))
        monkeypatch.setattr(module, n, out[n])
    return out


def plan_spy(monkeypatch, module, *names):
    """Fresh launch plans for `module`'s Plans attributes `names`; returns the list of the kernels
    (JIT functions) of the plans launched from then on, in order (round 24's plans)."""
    from profkit.kernels import _launch as L

    for n in names:
        monkeypatch.setattr(module, n, L.Plans())
    used = []
    real = L.Plan.launch
    monkeypatch.setattr(L.Plan, "launch", lambda self, ts: used.append(self.kernel.fn) or real(self, ts))
    return used
