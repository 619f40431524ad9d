import pytest
import torch
from _kernel_helpers import check, grads64, nan_like, plan_spy, randn, spy
from profkit.kernels import rmsnorm as K
from profkit.kernels.timing import rotated


@pytest.mark.parametrize("n", [128, 200, 3584])
@pytest.mark.parametrize("gemma", [False, True])
def test_forward(dtype, n, gemma):
    # rows not a multiple of BLOCK_M; |x| up to ~1000 (fp16 x^2 would overflow)
    x = randn(19, n, dtype=dtype, scale=400.0)
    w = randn(n, dtype=dtype, scale=0.1) + (0 if gemma else 1)
    out = nan_like(x)
    y = K.rmsnorm(x, w, 1e-6, gemma, out=out)
    assert y is out
    ref = K.rmsnorm_reference(x, w, 1e-6, gemma)
    check(y, ref, dtype, "triton")
    check(K.rmsnorm_eager(x, w, 1e-6, gemma), ref, dtype, "eager")


def test_forward_3d_strided_rows():
    base = randn(3, 4, 96, dtype="bf16")
    x = base[:, :, :80]  # row stride 96, unit column stride
    w = randn(80, dtype="bf16")
    check(K.rmsnorm(x, w), K.rmsnorm_reference(x, w), "bf16")


@pytest.mark.parametrize("n,rows", [(200, 23), (3584, 9)])
@pytest.mark.parametrize("gemma", [False, True])
def test_backward(dtype, n, rows, gemma):
    x = randn(rows, n, dtype=dtype, scale=300.0)
    w = randn(n, dtype=dtype, scale=0.1) + (0 if gemma else 1)
    dy = randn(rows, n, dtype=dtype)
    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
    K.rmsnorm(xr, wr, 1e-6, gemma, bwd=K.rmsnorm_bwd).backward(dy)
    gx, gw = grads64(lambda a, b: K.rmsnorm_reference(a, b, 1e-6, gemma), [x, w], dy)
    check(xr.grad, gx, dtype, "dx", grad=True)
    check(wr.grad, gw, dtype, "dw", grad=True)
    assert wr.grad.dtype == w.dtype


def test_backward_poisoned_dx():
    x, w, dy = randn(10, 64), randn(64), randn(10, 64)
    rstd = torch.full((10,), float("nan"))
    y = K.rmsnorm_fwd(x, w, rstd=rstd)
    assert torch.isfinite(rstd).all() and torch.isfinite(y).all()
    dx, dw = K.rmsnorm_bwd(dy, x, w, rstd, dx=nan_like(x))
    gx, gw = grads64(K.rmsnorm_reference, [x, w], dy)
    check(dx, gx, "fp32", "dx", grad=True)
    check(dw, gw, "fp32", "dw", grad=True)


@pytest.mark.parametrize("config", [(1, 1, 2, 1, 0, 0), (1, 2, 4, 3, 0, 0), (1, 4, 4, 1, 1, 1), (2, 1, 1, 4, 0, 2),
                                    (1, 8, 4, 1, 1, 0), (8, 1, 1, 2, 0, 0)],
                         ids=lambda c: "per_sm%d-bm%d-w%d-st%d-pf%d-hint%d" % c)
def test_backward_configs(config):
    """Every launch shape of the backward: programs striding over the rows one or several at a
    time (pipelined or prefetched by hand, each dx store hint), a last step partly past the final
    row (its rows must be masked out of dx and dw: a kernel reading rows 37-39 as real rows fails
    the bm4 / bm8 cases, tried), and more programs than row steps (8 x 4 programs on the interpreter's 4 'SMs' for 37 rows:
    programs with nothing to do still write a zero partial row)."""
    _check_backward_of_37_rows(K.rmsnorm_bwd, config)


def test_backward_candidates_start_with_one_program_per_sm():
    for n in (128, 200, 3584, 4096, 8192):
        cands = K.bwd_candidates(n)
        assert cands[0][0] == 1 and len(set(cands)) == len(cands)
        assert all(len(c) == 6 and c[1] * triton_np2(n) <= 16384 for c in cands)


def triton_np2(n):
    return 1 << (n - 1).bit_length()


def test_pdl_is_off_on_the_interpreter():
    from profkit.kernels._numerics import pdl_supported

    assert pdl_supported() is False


def _check_backward_of_37_rows(bwd, config):
    """dx and dw of 37 rows of 200 (a partial last step for most launch shapes) against float64."""
    x, w, dy = randn(37, 200, scale=3.0), randn(200, scale=0.1) + 1, randn(37, 200)
    rstd = torch.empty(37)
    K.rmsnorm_fwd(x, w, rstd=rstd)
    dx, dw = bwd(dy, x, w, rstd, dx=nan_like(x), config=config)
    gx, gw = grads64(K.rmsnorm_reference, [x, w], dy)
    check(dx, gx, "fp32", "dx", grad=True)
    check(dw, gw, "fp32", "dw", grad=True)


def test_dw_missing_a_partial_is_caught():
    """A known-wrong stage 2 (one program's partial dw dropped) fails the dw check."""
    x, w, dy = randn(40, 64), randn(64), randn(40, 64)
    rstd = torch.empty(40)
    K.rmsnorm_fwd(x, w, rstd=rstd)
    _, gw = grads64(K.rmsnorm_reference, [x, w], dy)
    xhat = x * rstd[:, None]
    wrong = (dy[:30] * xhat[:30]).sum(0)  # the rows of the last program never added
    with pytest.raises(AssertionError):
        check(wrong, gw, "fp32", "dw", grad=True)
    check((dy * xhat).sum(0), gw, "fp32", "dw", grad=True)


def test_tuner_rotates_input_copies_past_the_l2():
    """timing.rotated (rmsnorm_bwd's and RoPE's tuners) times candidates over copies of the inputs
    (~160 MB together), one set after another, so 4096 x 4096 inputs (64 MB of x and dy) cannot
    sit in the L2 for every timed call."""
    x, dy = randn(10, 8), randn(10, 8)
    seen = []
    run = rotated(lambda cfg, xx, dd: seen.append((cfg, xx.data_ptr(), dd.data_ptr())), (x, dy),
                  rotate_bytes=3 * 2 * 4 * 10 * 8)  # 3 sets of a 10 x 8 fp32 pair
    for _ in range(7):
        run("c")
    ptrs = [p[1:] for p in seen]
    assert len(set(ptrs)) == 3 and ptrs[:3] == ptrs[3:6] and ptrs[6] == ptrs[0]
    assert ptrs[0] == (x.data_ptr(), dy.data_ptr())
    few = []
    run = rotated(lambda cfg, xx: few.append(xx.data_ptr()), (x,), rotate_bytes=10**12)
    for _ in range(10):
        run("c")
    assert len(set(few)) == 4  # at most 4 sets, however small the inputs


@pytest.mark.parametrize("evict", [True, False], ids=["hints", "no_hints"])
def test_forward_with_and_without_l2_hints(evict):
    """EVICT only changes the loads' L2 policy: each path checked against float64 on its own
    (2 rows per program: the row mask and the row-wise reduction in both branches)."""
    x = randn(19, 200, dtype="bf16", scale=40.0)
    w = randn(200, dtype="bf16", scale=0.1) + 1
    y = K.rmsnorm_fwd(x, w, out=nan_like(x), block_m=2, num_warps=4, evict=evict)
    check(y, K.rmsnorm_reference(x, w), "bf16", f"evict={evict}")


def test_row_config_tunes_the_hints_as_a_third_field(monkeypatch):
    """With evict choices the candidates are (BLOCK_M, num_warps, EVICT), each BLOCK_M/num_warps
    pair with every choice, the default (the first choice) first; the tuner key keeps them apart."""
    seen = {}

    def fake_tuned(key, cands, run, device, **kw):
        seen[key] = cands
        return cands[-1]

    monkeypatch.setattr(K, "tuned", fake_tuned)
    base = K.row_candidates(4096)
    got = K.row_config("rmsnorm_fwd", 32768, 4096, torch.bfloat16, "cuda", None, evict=(True, False))
    (key, cands), = seen.items()
    assert key[-1] == (True, False) and cands[0] == (*base[0], True)
    assert set(cands) == {(*c, e) for c in base for e in (True, False)} and got == (*base[-1], False)
    assert K.row_config("rmsnorm_fwd", 32768, 4096, torch.bfloat16, "cuda", None) in base  # 2-tuples


# --- decode (a few rows): num_warps of the one-row launch timed by graph replay -----------

@pytest.mark.parametrize("n", [200, 4096])
def test_decode_candidates_each(dtype, n, monkeypatch):
    """Every decode candidate, with and without the L2 hints, at 1 and 3 rows (the default of
    n = 200 takes 8 rows a program: its one program partly past the last row), launched as asked."""
    launches = spy(monkeypatch, K, "_rmsnorm_fwd")["_rmsnorm_fwd"]
    cands = K.decode_candidates(n)
    assert cands[0] == K.row_candidates(n)[0] and all(bm == 1 for bm, _ in cands[1:])
    w = randn(n, dtype=dtype, scale=0.1) + 1
    for rows in (1, 3):
        x = randn(rows, n, dtype=dtype, scale=400.0)
        ref = K.rmsnorm_reference(x, w)
        for bm, nw in cands:
            for ev in (True, False):
                y = K.rmsnorm_fwd(x, w, out=nan_like(x), config=(bm, nw, ev))
                check(y, ref, dtype, f"rows={rows} config={(bm, nw, ev)}")
                kw = launches.kwargs[-1]
                assert (kw["BLOCK_M"], kw["num_warps"], kw["EVICT"]) == (bm, nw, ev)


def test_row_config_times_decode_launches_by_graph_replay(monkeypatch):
    """Up to DECODE_ROWS rows: decode_candidates (x each eviction choice), timed by graph replay
    under a key of their own; more rows of a small problem: the default, untimed."""
    seen = []

    def fake_tuned(key, cands, run, device, **kw):
        seen.append((key, cands, kw))
        return cands[-1]

    monkeypatch.setattr(K, "tuned", fake_tuned)
    dec = K.decode_candidates(4096)
    assert dec[0] == (1, 8) and {nw for _, nw in dec} == {2, 4, 8, 16, 32} and {bm for bm, _ in dec} == {1}
    got = K.row_config("rmsnorm_fwd", 1, 4096, torch.bfloat16, "cuda", None, evict=(True, False))
    (key, cands, kw), = seen
    assert key[:2] == ("rmsnorm_fwd", "decode") and kw == {"graph": True}
    assert cands == tuple((bm, nw, e) for e in (True, False) for bm, nw in dec) and got == cands[-1]
    seen.clear()
    assert K.row_config("softmax", K.DECODE_ROWS, 4096, torch.bfloat16, "cuda", None) == dec[-1]  # 2-tuples
    assert seen[0][0][:3] == ("softmax", "decode", K.DECODE_ROWS)
    seen.clear()
    assert K.row_config("rmsnorm_fwd", K.DECODE_ROWS + 1, 4096, torch.bfloat16, "cuda", None,
                        evict=(True, False)) == (*K.row_candidates(4096)[0], True)
    assert seen == []


def test_untuned_config_is_the_default_launch():
    assert K.untuned_config(4096) == (1, 8, True) == (*K.row_candidates(4096)[0], True)


@pytest.fixture
def plan_launches(monkeypatch):
    """Fresh launch plans for the forward and backward, and the plans launched (in order)."""
    return plan_spy(monkeypatch, K, "_FWD_PLANS", "_BWD_PLANS")


def test_forward_launch_plans(plan_launches, monkeypatch):
    """Round 24: a forward call like an earlier one takes its launch plan, bit-equal to the full
    path; an input the key does not hold (out or a launch given, x copied to rows) takes the full
    path, and so does a changed tuned pick."""
    from profkit.kernels import timing

    used = plan_launches
    w = randn(200, scale=0.1) + 1
    x = randn(3, 5, 200, scale=40.0)
    first = K.rmsnorm_fwd(x, w)
    assert used == [] and len(K._FWD_PLANS.d) == 1
    second = K.rmsnorm_fwd(x, w)
    assert used == [K._rmsnorm_fwd] and torch.equal(first, second)
    x2 = randn(3, 5, 200, scale=40.0)
    check(K.rmsnorm_fwd(x2, w), K.rmsnorm_reference(x2, w), "fp32", "planned forward")
    rstd = torch.full((15,), float("nan"))
    K.rmsnorm_fwd(x, w, rstd=rstd)  # keeping rstd: a kernel of its own, a plan of its own
    rstd2 = torch.full((15,), float("nan"))
    K.rmsnorm_fwd(x, w, rstd=rstd2)
    assert len(used) == 3 and len(K._FWD_PLANS.d) == 2 and torch.equal(rstd, rstd2)
    K.rmsnorm_fwd(x, w, out=nan_like(x))
    K.rmsnorm_fwd(x, w, config=(1, 1, False))
    xt = randn(200, 15, scale=40.0).t()  # rows not unit-stride: copied, no plan
    check(K.rmsnorm_fwd(xt, w), K.rmsnorm_reference(xt, w), "fp32", "strided forward")
    assert len(used) == 3 and len(K._FWD_PLANS.d) == 2
    key = K.row_key("rmsnorm_fwd", 15, 200, x.dtype, x.device, (True, False))
    monkeypatch.setitem(timing._TUNED, key, {"config": (1, 2, False), "ms": {}})
    third = K.rmsnorm_fwd(x, w)
    assert len(used) == 3 and torch.equal(first, third)
    K.rmsnorm_fwd(x, w)
    assert len(used) == 4 and K._FWD_PLANS.get((x.shape, x.stride(), x.dtype, x.device, 1e-6, False, True,
                                                None)).rest[6:] == (1, 256, False, False)


def test_backward_launch_plans(plan_launches):
    """The backward's two launches planned together; the autograd path (the forward keeping rstd,
    then the backward) takes the plans made by the direct calls, with the same gradients twice."""
    used = plan_launches
    w = randn(96, scale=0.1) + 1
    x, dy = randn(7, 96, scale=30.0), randn(7, 96)
    rstd = torch.empty(7)
    K.rmsnorm_fwd(x, w, rstd=rstd)
    del used[:]
    first = K.rmsnorm_bwd(dy, x, w, rstd)
    assert used == [] and len(K._BWD_PLANS.d) == 1
    second = K.rmsnorm_bwd(dy, x, w, rstd)
    assert used == [K._rmsnorm_bwd, K._dw_reduce]
    assert all(torch.equal(a, b) for a, b in zip(first, second))
    gx, gw = grads64(K.rmsnorm_reference, [x, w], dy)
    check(second[0], gx, "fp32", "planned dx")
    check(second[1], gw, "fp32", "planned dw")
    K.rmsnorm_bwd(dy, x, w, rstd, dx=nan_like(x))
    K.rmsnorm_bwd(dy, x, w, rstd, programs=2)
    K.rmsnorm_bwd(randn(96, 7).t(), x, w, rstd)  # dy copied to rows: no plan
    assert len(used) == 2 and len(K._BWD_PLANS.d) == 1
    grads = []
    for _ in range(2):
        xa, wa = x.clone().requires_grad_(), w.clone().requires_grad_()
        K.rmsnorm(xa, wa).backward(dy)
        grads.append((xa.grad, wa.grad))
    assert used[2:] == [K._rmsnorm_fwd, K._rmsnorm_bwd, K._dw_reduce] * 2
    assert all(torch.equal(a, b) for a, b in zip(*grads))
