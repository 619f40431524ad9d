"""The lab runner's context options (round 26): --rotate cycles a range's calls over copies of
the inputs, --l2-fill fills the L2 before each range; kernels/run.py."""
import pytest
from profkit.kernels import get
from profkit.kernels import run as R


@pytest.fixture(autouse=True)
def ranges(monkeypatch):
    """The NVTX ranges pushed and popped (CPU torch has no NVTX)."""
    import torch

    got = []
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", lambda name: got.append(("push", name)))
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", lambda: got.append(("pop",)))
    return got


def _spy(monkeypatch, op, variant):
    w = get(op)
    seen = []
    real = w.variants[variant]

    def spy(state):
        seen.append(id(state["gate"]))
        return real(state)

    monkeypatch.setitem(w.variants, variant, spy)
    return seen


def test_rotate_cycles_the_calls_over_input_copies(monkeypatch):
    seen = _spy(monkeypatch, "swiglu", "eager")
    checks = {}
    R.run("swiglu", ["eager"], ["llama8b-t1"], "fp32", iters=6, warmup=1, device="cpu", checks=checks, rotate=3)
    warm, timed = seen[:3], seen[3:9]
    assert len(set(warm)) == 3 and timed == warm + warm  # every copy warmed, then cycled in order
    assert checks["swiglu/eager/llama8b-t1"]["ok"]


def test_one_copy_and_no_fill_by_default(monkeypatch):
    seen = _spy(monkeypatch, "swiglu", "eager")
    monkeypatch.setattr(R, "fill_l2", lambda device: pytest.fail("filled"))
    R.run("swiglu", ["eager"], ["llama8b-t1"], "fp32", iters=4, warmup=2, device="cpu")
    assert len(set(seen)) == 1 and len(seen) == 6


def test_l2_fill_runs_before_each_range_opens(monkeypatch):
    events = []
    w = get("swiglu")
    real = w.variants["eager"]
    monkeypatch.setitem(w.variants, "eager", lambda s: events.append("call") or real(s))
    monkeypatch.setitem(w.variants, "triton_v1", lambda s: events.append("call") or real(s))
    monkeypatch.setattr(R, "fill_l2", lambda device: events.append("fill"))
    R.run("swiglu", ["eager", "triton_v1"], ["llama8b-t1"], "fp32", iters=3, warmup=1, device="cpu", l2_fill=True)
    assert events == ["call", "fill", "call", "call", "call"] * 2


def test_the_runner_refuses_no_copies_in_one_line(capsys):
    assert R.main(["swiglu", "--variant", "eager", "--rotate", "0"]) == 2
    assert capsys.readouterr().err.strip() == "--rotate 0: give 1 or more input copies"
    with pytest.raises(ValueError):
        R.run("swiglu", ["eager"], ["llama8b-t1"], "fp32", device="cpu", rotate=0)


def test_the_graph_tuner_times_each_candidate_in_a_filled_l2(monkeypatch):
    """timing.tuned(graph=True): each candidate warmed, then the L2 filled, then timed (round 26:
    an eviction hint costs nothing in a half-empty L2 and 21-25 % in a full one); do_bench tuning
    (large problems, inputs rotated past the L2) fills nothing."""
    import torch
    from profkit.kernels import timing as T

    events = []
    monkeypatch.setattr(T, "tuning_enabled", lambda device: True)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    monkeypatch.setattr(T, "fill_l2", lambda device: events.append("fill"))
    speed = {"a": 2.0, "b": 1.0}

    def fake_timer(*a, **k):
        def bench(fn):
            fn()
            events.append("timed")
            return speed[events[-2].split(":")[1]]
        return bench

    monkeypatch.setattr(T, "graph_timer", fake_timer)
    monkeypatch.setattr(T, "timer", fake_timer)
    run = lambda c: events.append(f"run:{c}")  # noqa: E731
    key = ("round26-test", "graph")
    try:
        assert T.tuned(key, ["a", "b"], run, "cuda", graph=True) == "b"
        assert events == ["run:a", "fill", "run:a", "timed", "run:b", "fill", "run:b", "timed"]
        events.clear()
        assert T.tuned(key + ("do_bench",), ["a", "b"], run, "cuda") == "b"
        assert "fill" not in events
    finally:
        T._TUNED.pop(key, None)
        T._TUNED.pop(key + ("do_bench",), None)


def test_fill_l2_is_a_no_op_off_the_gpu():
    from profkit.kernels import timing as T

    before = dict(T._FILL)
    T.fill_l2("cpu")
    T.fill_l2(__import__("torch").device("cpu"))
    assert T._FILL == before
