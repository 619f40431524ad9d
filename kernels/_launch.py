"""A shorter host path for launching a ``@triton.jit`` kernel: ``fast(kernel)[grid](*args, **kw)``.

Why: at 4096 tokens and at decode the lab's rows are host-bound (on the H100:
the RMSNorm backward's direct call spent 123 us on the host for 37-50 us of kernels, about half of
it in the two launches' ``JITFunction.run``). Triton binds and specializes every argument, builds
its cache key from the specialization and the options, and checks the kernel's globals, on every
call. Here the ``CompiledKernel`` Triton's own launch returned is kept under a key at least as
fine as Triton's specialization, and a later launch with the same key calls it directly:

- a tensor: its dtype and whether its address is 16-byte aligned (Triton's ``tt.divisibility``);
- an int, float, bool or None, and a constexpr: its type and value (Triton makes classes of ints:
  1, a multiple of 16, 32 or 64 bits; a value is finer, and cheaper to take than the class);
- the launch options (num_warps, num_stages, launch_pdl, ...) and the current device.

A key finer than Triton's only costs a miss (one more normal launch; at most MAX_KEYS are kept a
kernel, then the cache starts over, so a size that changes every call cannot grow it without
bound). Everything else takes the normal launch: the interpreter (``TRITON_INTERPRET=1``, where
``triton.jit`` gives no ``JITFunction``), an argument of another kind, a launch hook set
(profilers such as Proton) or a pre-run hook, a grid given as a function, a Triton whose launch
returns no ``CompiledKernel``.
Not re-checked on the short path: Triton's test that the kernel's globals have not changed since
it was compiled (the lab's kernels read no mutable globals). ``PROFKIT_FAST_LAUNCH=0``, or
``ENABLED = False``, turns it off.

Launch plans: a launcher whose Python is most of its call (the fused q/k RMSNorm + RoPE
passes 29 parameters; at 4096 tokens on the H100 its call took 74 us on the host to compile's 59)
keeps, per key of its inputs (shapes, strides, dtypes, flags), a ``Plan``: the kernel, grid, the
parameters after the tensors and their key, all worked out once. A later call with the same input
key allocates its outputs and calls ``FastKernel.launch_planned`` with only its tensors, whose
dtype and alignment are still keyed on every call. ``PROFKIT_LAUNCH_PLANS=0`` (or ``PLANS =
False``) turns plans off and leaves the rest of the short path on.
"""

from __future__ import annotations

import os

import triton

from .timing import pick_stands

ENABLED = os.environ.get("PROFKIT_FAST_LAUNCH", "1") != "0"
PLANS = os.environ.get("PROFKIT_LAUNCH_PLANS", "1") != "0"

_SCALARS = frozenset((int, float, bool, type(None)))
MAX_KEYS = 256  # compiled kernels kept per kernel: past it the cache starts over (a shape a call)


def arg_key(vals, const) -> list:
    """The key of one launch's parameter values (`const`: which are constexprs): a scalar's type
    and value (finer than Triton's classes of ints: a new value is a miss, never a wrong kernel;
    the type keeps True, 1 and 1.0 apart, which Triton compiles apart), a constexpr's type and
    value, a tensor's dtype and 16-byte alignment. Raises AttributeError or TypeError for anything
    else (the normal launch takes it)."""
    key = []
    for v, c in zip(vals, const):
        t = type(v)
        if c or t in _SCALARS:
            key.append(t)
            key.append(v)
        else:
            key.append(v.dtype)
            key.append(v.data_ptr() % 16 == 0)
    return key


class FastKernel:
    """`fn` with a cache of its compiled kernels by argument key (see the module's docstring)."""

    def __init__(self, fn):
        self.fn = fn
        self.ok = isinstance(fn, triton.runtime.jit.JITFunction)
        if self.ok:
            self.nargs = len(fn.params)
            self.const = tuple(p.is_constexpr for p in fn.params)
            self.names = {p.name: i for i, p in enumerate(fn.params)}
            self.defaults = tuple(p.default if p.has_default else None for p in fn.params)
        self.cache: dict = {}
        self.planned: dict = {}  # launch_planned's kernels: (plan key, device, tensor keys) -> kernel
        self.device_fn = self.stream_fn = None
        self.hits = 0  # short-path launches (tests and probes read it)

    def __getitem__(self, grid):
        return lambda *args, **kw: self.launch(grid, args, kw)

    def launch(self, grid, args, kw):
        fn = self.fn
        if not (ENABLED and self.ok) or callable(grid) or getattr(fn, "pre_run_hooks", None) or _hooked():
            return fn[grid](*args, **kw)
        # every parameter's value in order, constexprs and defaults included (Triton's launcher
        # takes them so); the other keywords are launch options (num_warps, launch_pdl, ...). A
        # parameter given neither way is None: the key misses and Triton's launch reports it.
        vals = list(args)
        vals.extend(self.defaults[len(vals) :])
        opts = ()
        if kw:
            names = self.names
            for k, v in kw.items():
                i = names.get(k)
                if i is None:
                    opts += (k, v)
                else:
                    vals[i] = v
        if self.device_fn is None:  # the driver's own calls, looked up once (its proxy costs a us a call)
            drv = _driver()
            self.device_fn, self.stream_fn = drv.get_current_device, drv.get_current_stream
        device = self.device_fn()
        try:
            key = arg_key(vals, self.const)
            key.append(opts)
            key.append(device)
            key = tuple(key)
            kernel = self.cache.get(key)
        except (TypeError, AttributeError):  # an argument of another kind, an unhashable constexpr
            return fn[grid](*args, **kw)
        if kernel is None:
            kernel = fn[grid](*args, **kw)
            if all(hasattr(kernel, a) for a in ("run", "function", "packed_metadata")):
                if len(self.cache) >= MAX_KEYS:
                    self.cache.clear()
                self.cache[key] = kernel
            return kernel
        n = len(grid)
        kernel.run(
            grid[0],
            grid[1] if n > 1 else 1,
            grid[2] if n > 2 else 1,
            self.stream_fn(device),
            kernel.function,
            kernel.packed_metadata,
            None,
            None,
            None,
            *vals,
        )
        self.hits += 1
        return kernel

    def plan(self, grid, rest, opts=()) -> Plan:
        """A Plan of a launch with `grid` whose parameters after the leading tensors are `rest`
        (in order, constexprs and defaults included) and whose options are `opts` ((name, value)
        pairs); their key is taken here, once."""
        n = self.nargs - len(rest) if self.ok else 0
        try:
            rkey = (tuple(arg_key(rest, self.const[n:])), tuple(opts)) if self.ok and n >= 0 else None
            hash(rkey)
        except (TypeError, AttributeError):
            rkey = None  # an unhashable or unkeyable value: the plan's launches take Triton's path
        return Plan(self, tuple(grid), tuple(rest), tuple(opts), rkey)

    def launch_planned(self, plan: Plan, tensors):
        """Launch `plan` with its leading parameters `tensors`: the per-call key is the plan's, the
        current device and each tensor's dtype and 16-byte alignment (as `launch` keys them)."""
        fn = self.fn
        if not (ENABLED and self.ok) or plan.rkey is None or getattr(fn, "pre_run_hooks", None) or _hooked():
            return fn[plan.grid](*tensors, *plan.rest, **dict(plan.opts))
        if self.device_fn is None:
            drv = _driver()
            self.device_fn, self.stream_fn = drv.get_current_device, drv.get_current_stream
        device = self.device_fn()
        parts = [plan.rkey, device]
        try:
            for t in tensors:
                parts.append(t.dtype)
                parts.append(t.data_ptr() % 16 == 0)
        except (TypeError, AttributeError):  # not a tensor (e.g. None): Triton's launch
            return fn[plan.grid](*tensors, *plan.rest, **dict(plan.opts))
        key = tuple(parts)
        kernel = self.planned.get(key)
        if kernel is None:
            kernel = fn[plan.grid](*tensors, *plan.rest, **dict(plan.opts))
            if all(hasattr(kernel, a) for a in ("run", "function", "packed_metadata")):
                if len(self.planned) >= MAX_KEYS:
                    self.planned.clear()
                self.planned[key] = kernel
            return kernel
        grid = plan.grid
        n = len(grid)
        kernel.run(
            grid[0],
            grid[1] if n > 1 else 1,
            grid[2] if n > 2 else 1,
            self.stream_fn(device),
            kernel.function,
            kernel.packed_metadata,
            None,
            None,
            None,
            *tensors,
            *plan.rest,
        )
        self.hits += 1
        return kernel


class Plan:
    """One launcher call's launch, worked out once (FastKernel.plan): kernel, grid, the parameters
    after the tensors and their key, the options."""

    __slots__ = ("kernel", "grid", "rest", "opts", "rkey")

    def __init__(self, kernel, grid, rest, opts, rkey):
        self.kernel, self.grid, self.rest, self.opts, self.rkey = kernel, grid, rest, opts, rkey

    def launch(self, tensors):
        return self.kernel.launch_planned(self, tensors)


class Plans:
    """A launcher's plans (a Plan, or several a call) by the key of its inputs, each with the
    tuned pick it was made with (`check`, from timing.pick_check), at most MAX_KEYS (then it
    starts over). `get` is None while plans or the short path are off, and where the pick no
    longer stands."""

    def __init__(self):
        self.d: dict = {}

    def get(self, key):
        if not (PLANS and ENABLED):
            return None
        try:
            hit = self.d.get(key)
        except TypeError:  # an unhashable input (e.g. a list where a number was): no plan
            return None
        if hit is None or (hit[1] is not None and not pick_stands(hit[1])):
            return None
        return hit[0]

    def put(self, key, plan, check=None) -> None:
        if not (PLANS and ENABLED):
            return
        try:
            hash(key)
        except TypeError:
            return
        if len(self.d) >= MAX_KEYS:
            self.d.clear()
        self.d[key] = (plan, check)


def without_plans(call):
    """`call` run with the launch plans off (the short path stays on), to measure what the plans
    save in the same process."""

    def run(*args, **kw):
        global PLANS
        was, PLANS = PLANS, False
        try:
            return call(*args, **kw)
        finally:
            PLANS = was

    return run


def cdiv(a: int, b: int) -> int:
    """triton.cdiv for host ints without its constexpr_function wrapper (a few us a call on the
    lab's hosts, and launchers call it several times)."""
    return -(-a // b)


def next_pow2(n: int) -> int:
    """triton.next_power_of_2 for host ints, likewise."""
    return n if n <= 1 else 1 << (n - 1).bit_length()


def _driver():
    return triton.runtime.driver.active


def _active(hook) -> bool:
    """A launch hook is set: a function (Triton <= 3.5), or a HookChain with calls (newer Tritons
    keep an empty chain there)."""
    if hook is None:
        return False
    calls = getattr(hook, "calls", None)
    return calls is None or bool(calls)


_RUNTIME = getattr(getattr(triton, "knobs", None), "runtime", None)  # Triton >= 3.4


def _hooked() -> bool:
    rt = _RUNTIME
    return rt is not None and (_active(rt.launch_enter_hook) or _active(rt.launch_exit_hook))


_FAST: dict = {}


def fast(fn) -> FastKernel:
    """The FastKernel of `fn` (one per kernel object; anything else, e.g. a test's launch spy or
    the interpreter's function, takes the normal launch through it)."""
    k = _FAST.get(id(fn))
    if k is None or k.fn is not fn:
        k = _FAST[id(fn)] = FastKernel(fn)
    return k
