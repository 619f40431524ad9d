"""kernels/_launch.py: the short launch path's key is never coarser than Triton's own
specialization (else a launch would run a kernel compiled for other arguments), and its cache
hands a later launch the kernel Triton's launch returned, with every parameter in Triton's order.
The launches themselves need a GPU (benchmarks/gpu round 23 runs the lab through it); here
Triton's run and driver are replaced by recorders."""
import itertools

import pytest
import torch
import triton
import triton.language as tl
from profkit.kernels import _launch as L
from triton._C.libtriton import native_specialize_impl
from triton.backends.compiler import BaseBackend
from triton.runtime.jit import JITFunction


def _spec(a):
    """Triton's specialization of one argument: (type, divisibility / constexpr value)."""
    return native_specialize_impl(BaseBackend, a, False, True, True)


INTS = [0, 1, 2, 15, 16, 17, 48, -1, -16, -17, 2**31 - 16, 2**31 - 1, 2**31, 2**31 + 16, 2**31 + 17, -(2**31) - 16,
        2**62, 2**63 - 1, 2**63, 2**63 + 16, 2**64 - 1]


def _key(a, const=False):
    return L.arg_key([a], (const,))


def test_scalar_key_no_coarser_than_triton():
    vals = INTS + [0.0, 1.0, 1.5, -2.0, True, False, None]
    for a, b in itertools.combinations(vals, 2):
        if _key(a) == _key(b):
            assert _spec(a) == _spec(b), (a, b)
    # Python's 1 == True == 1.0 (and hash): the type keeps apart what Triton compiles apart
    assert len({tuple(_key(v)) for v in (1, True, 1.0)}) == 3
    assert _spec(1) != _spec(True) and _spec(1) != _spec(1.0)
    assert _key(4096) == _key(4096) and _key(17, const=True) != _key(17.0, const=True)


def test_tensor_key_no_coarser_than_triton():
    base = {dt: torch.zeros(64, dtype=dt) for dt in (torch.float32, torch.bfloat16, torch.float16, torch.int64)}
    ts = [t[i:] for t in base.values() for i in (0, 1, 2, 4, 8)]
    for a, b in itertools.combinations(ts, 2):
        if _key(a) == _key(b):
            assert _spec(a) == _spec(b)
    assert _key(ts[0]) != _key(ts[1])  # fp32 at +4 bytes: not 16-byte aligned
    assert _key(ts[0]) == _key(ts[4])  # fp32 at +32 bytes: aligned, the same kernel
    assert _key(torch.nn.Parameter(base[torch.float32])) == _key(ts[0])  # a weight is a tensor too
    with pytest.raises((TypeError, AttributeError)):
        _key(object())


def _kern(X, Y, n, scale, BLOCK: tl.constexpr, FLAG: tl.constexpr = 3):
    pass


class _Compiled:
    def __init__(self):
        self.function, self.packed_metadata, self.calls = "fn", "meta", []

    def run(self, *a):
        self.calls.append(a)


class _Driver:
    def get_current_device(self):
        return 0

    def get_current_stream(self, device):
        return 77


@pytest.fixture
def jit(monkeypatch):
    """A real JITFunction whose compile-and-launch is a recorder (each distinct key compiles once)."""
    fn = JITFunction(_kern)
    slow = []

    def run(*args, grid, warmup, **kw):
        k = _Compiled()
        slow.append((grid, args, kw, k))
        return k

    monkeypatch.setattr(fn, "run", run)
    monkeypatch.setattr(L, "_driver", lambda: _Driver())
    monkeypatch.setattr(L, "ENABLED", True)
    return fn, slow


def test_cached_launch_order_and_misses(jit):
    fn, slow = jit
    fk = L.FastKernel(fn)
    x, y = torch.zeros(64), torch.zeros(64)
    k0 = fk[(4,)](x, y, 32, 0.5, BLOCK=16, num_warps=4)
    assert len(slow) == 1 and fk.hits == 0  # first: Triton's launch
    x2 = torch.zeros(64)
    k1 = fk[(5, 2)](x2, y, 32, 0.5, BLOCK=16, num_warps=4)  # another aligned fp32 tensor: the kept kernel
    assert k1 is k0 and len(slow) == 1 and fk.hits == 1
    # grid padded to 3, the stream, no launch hooks, then all parameters in order (FLAG's default)
    assert k0.calls == [(5, 2, 1, 77, "fn", "meta", None, None, None, x2, y, 32, 0.5, 16, 3)]
    misses = [
        lambda: fk[(1,)](x, y, 48, 0.5, BLOCK=16, num_warps=4),  # another n (Triton: the same class)
        lambda: fk[(1,)](x, y, 33, 0.5, BLOCK=16, num_warps=4),  # n not a multiple of 16
        lambda: fk[(1,)](x, y, 1, 0.5, BLOCK=16, num_warps=4),  # n == 1 (a constexpr to Triton)
        lambda: fk[(1,)](x[1:], y, 32, 0.5, BLOCK=16, num_warps=4),  # X not 16-byte aligned
        lambda: fk[(1,)](x.half(), y, 32, 0.5, BLOCK=16, num_warps=4),  # another dtype
        lambda: fk[(1,)](x, y, 32, 0.5, BLOCK=32, num_warps=4),  # another constexpr
        lambda: fk[(1,)](x, y, 32, 0.5, BLOCK=16, FLAG=4, num_warps=4),  # a default overridden
        lambda: fk[(1,)](x, y, 32, 0.5, BLOCK=16, num_warps=8),  # another launch option
        lambda: fk[(1,)](x, y, 2**31, 0.5, BLOCK=16, num_warps=4),  # i64
        lambda: fk[(1,)](x, y, True, 0.5, BLOCK=16, num_warps=4),  # a bool where an int was
    ]
    for i, miss in enumerate(misses):
        miss()
        assert len(slow) == 2 + i, i
    assert fk.hits == 1
    fk[(1,)](x, y, 32, 0.5, 16, num_warps=4)  # BLOCK given by position: the first key again
    assert fk.hits == 2 and len(slow) == 1 + len(misses)


def test_cache_bounded(jit, monkeypatch):
    fn, slow = jit
    monkeypatch.setattr(L, "MAX_KEYS", 4)
    fk = L.FastKernel(fn)
    x = torch.zeros(64)
    for n in range(10):  # a size that changes every call: never more than MAX_KEYS kept
        fk[(1,)](x, x, n, 0.5, BLOCK=16)
        assert len(fk.cache) <= 4
    fk[(1,)](x, x, 9, 0.5, BLOCK=16)
    assert fk.hits == 1 and len(slow) == 10


def test_normal_path_where_the_short_one_cannot_go(jit, monkeypatch):
    fn, slow = jit
    fk = L.FastKernel(fn)
    x = torch.zeros(64)
    for _ in range(2):
        fk[lambda meta: (1,)](x, x, 32, 0.5, BLOCK=16)  # a grid function: Triton evaluates it
    assert len(slow) == 2 and fk.hits == 0
    for _ in range(2):
        fk[(1,)](x, x, 32, 0.5, BLOCK=16, FLAG=[1])  # an unhashable constexpr
    assert len(slow) == 4 and fk.hits == 0
    monkeypatch.setattr(L, "ENABLED", False)
    for _ in range(2):
        fk[(1,)](x, x, 32, 0.5, BLOCK=16)
    assert len(slow) == 6 and fk.hits == 0
    monkeypatch.setattr(L, "ENABLED", True)
    assert not L._hooked()  # Triton's own empty hook chain is no hook
    rt = triton.knobs.runtime
    hook = lambda *a: None  # noqa: E731 - a profiler's launch hook (Proton sets one)
    if hasattr(rt.launch_enter_hook, "add"):
        rt.launch_enter_hook.add(hook)
        undo = lambda: rt.launch_enter_hook.remove(hook)  # noqa: E731
    else:
        monkeypatch.setattr(rt, "launch_enter_hook", hook)
        undo = lambda: None  # noqa: E731
    try:
        assert L._hooked()
        for _ in range(2):
            fk[(1,)](x, x, 32, 0.5, BLOCK=16)
    finally:
        undo()
    assert len(slow) == 8 and fk.hits == 0
    fk[(1,)](x, x, 32, 0.5, BLOCK=16)
    fk[(1,)](x, x, 32, 0.5, BLOCK=16)
    assert len(slow) == 9 and fk.hits == 1
    fn.pre_run_hooks.append(lambda *a, **kw: None)  # Triton runs these before each of its launches
    fk[(1,)](x, x, 32, 0.5, BLOCK=16)
    assert len(slow) == 10 and fk.hits == 1


def test_not_a_jit_function_is_called_as_given():
    seen = []

    class Spy:
        def __getitem__(self, grid):
            return lambda *a, **kw: seen.append((grid, a, kw))

    s = Spy()
    assert L.fast(s) is L.fast(s) and not L.fast(s).ok
    L.fast(s)[(3,)](1, 2, BLOCK=4)
    assert seen == [((3,), (1, 2), {"BLOCK": 4})]


def test_host_helpers_match_triton():
    for n in list(range(0, 70)) + [3584, 4095, 4096, 4097, 128256, 2**40 + 1]:
        assert L.next_pow2(n) == triton.next_power_of_2(n)
        for b in (1, 3, 16, 64):
            assert L.cdiv(n, b) == triton.cdiv(n, b)


def test_planned_launch_order_key_and_misses(jit):
    """A Plan's launch: its parameters after the tensors keyed once; each call keys the tensors'
    dtype and alignment and hands Triton's kernel every parameter in order."""
    fn, slow = jit
    fk = L.FastKernel(fn)
    x, y, x2 = torch.zeros(64), torch.zeros(64), torch.zeros(64)
    plan = fk.plan((4,), (32, 0.5, 16, 3), (("num_warps", 4),))
    k0 = plan.launch((x, y))
    assert len(slow) == 1 and slow[0][1] == (x, y, 32, 0.5, 16, 3) and slow[0][2]["num_warps"] == 4
    assert plan.launch((x2, y)) is k0 and fk.hits == 1
    assert k0.calls == [(4, 1, 1, 77, "fn", "meta", None, None, None, x2, y, 32, 0.5, 16, 3)]
    misses = [
        lambda: plan.launch((x[1:], y)),  # X not 16-byte aligned
        lambda: plan.launch((x, y.half())),  # another dtype
        lambda: fk.plan((4,), (48, 0.5, 16, 3), (("num_warps", 4),)).launch((x, y)),  # another n
        lambda: fk.plan((4,), (1, 0.5, 16, 3), (("num_warps", 4),)).launch((x, y)),  # n == 1
        lambda: fk.plan((4,), (True, 0.5, 16, 3), (("num_warps", 4),)).launch((x, y)),  # a bool for an int
        lambda: fk.plan((4,), (32, 0.5, 32, 3), (("num_warps", 4),)).launch((x, y)),  # another constexpr
        lambda: fk.plan((4,), (32, 0.5, 16, 3), (("num_warps", 8),)).launch((x, y)),  # another option
    ]
    for i, miss in enumerate(misses):
        miss()
        assert len(slow) == 2 + i, i
    # a plan made again with the same values finds the kernel its twin compiled
    assert fk.plan((9,), (32, 0.5, 16, 3), (("num_warps", 4),)).launch((x, y)) is k0
    assert fk.hits == 2 and k0.calls[-1][:3] == (9, 1, 1)


def test_planned_launch_falls_back_and_is_bounded(jit, monkeypatch):
    fn, slow = jit
    fk = L.FastKernel(fn)
    x = torch.zeros(64)
    plan = fk.plan((1,), (32, 0.5, 16, 3))
    plan.launch((x, x))
    assert len(slow) == 1
    plan.launch((x, None))  # not a tensor: Triton's launch
    unkeyable = fk.plan((1,), (32, 0.5, 16, [1]))  # an unhashable constexpr: no key, Triton's launch
    assert unkeyable.rkey is None
    unkeyable.launch((x, x))
    monkeypatch.setattr(L, "ENABLED", False)
    plan.launch((x, x))
    monkeypatch.setattr(L, "ENABLED", True)
    assert len(slow) == 4 and fk.hits == 0
    plan.launch((x, x))
    assert fk.hits == 1
    monkeypatch.setattr(L, "MAX_KEYS", 3)
    for n in range(8):
        fk.plan((1,), (n, 0.5, 16, 3)).launch((x, x))
        assert len(fk.planned) <= 3


def test_plans_bounded_and_switchable(monkeypatch):
    monkeypatch.setattr(L, "MAX_KEYS", 3)
    ps = L.Plans()
    for n in range(7):
        ps.put((n,), n)
        assert len(ps.d) <= 3 and ps.get((n,)) == n
    assert ps.get(([1],)) is None  # an unhashable key: no plan
    ps.put(([1],), 1)
    monkeypatch.setattr(L, "PLANS", False)
    assert ps.get((6,)) is None
    monkeypatch.setattr(L, "PLANS", True)
    monkeypatch.setattr(L, "ENABLED", False)
    assert ps.get((6,)) is None


def test_without_plans_turns_them_off_while_it_runs(monkeypatch):
    monkeypatch.setattr(L, "PLANS", True)
    seen = []
    assert L.without_plans(lambda x: seen.append(L.PLANS) or x)(3) == 3 and seen == [False] and L.PLANS

    def boom():
        raise ValueError

    with pytest.raises(ValueError):
        L.without_plans(boom)()
    assert L.PLANS


def test_a_variant_without_plans_takes_no_plan(monkeypatch):
    """A variant run under without_plans launches through Triton's own path every time, while the
    plain variant takes its plan from the second call."""
    from profkit.kernels import get, rmsnorm_rope

    monkeypatch.setattr(rmsnorm_rope, "_PLANS", L.Plans())  # none left by an earlier test
    used = []
    real = L.Plan.launch
    monkeypatch.setattr(L.Plan, "launch", lambda self, ts: used.append(1) or real(self, ts))
    w = get("rmsnorm_rope")
    s = w.setup(w.selftest["t-3-gqa"], "fp32", "cpu")
    for _ in range(3):
        L.without_plans(w.variants["triton"])(s)
    assert used == []
    for _ in range(3):
        w.variants["triton"](s)
    assert len(used) == 2
