"""Tuned launch picks handed from a plain run to a profiled one (kernels/timing.dump_tuned /
load_tuned, `python -m profkit.kernels.run --tuned-out / --tuned-in`, profkit capture's tuning run):
under ncu, timing the candidates times the profiler (round 7: a fused RMSNorm + RoPE capture ran a
launch 1.6x slower than the plain run's pick)."""
import json

import pytest
import torch
from profkit.kernels import rmsnorm_rope as K
from profkit.kernels import timing
from profkit.kernels.rope import rope_cache


@pytest.fixture(autouse=True)
def clean():
    saved = dict(timing._TUNED), dict(timing._PRESET)
    timing._TUNED.clear()
    timing._PRESET.clear()
    yield
    timing._TUNED.clear()
    timing._TUNED.update(saved[0])
    timing._PRESET.clear()
    timing._PRESET.update(saved[1])


def test_picks_round_trip_and_win_over_timing(tmp_path):
    key = ("rmsnorm_rope", 4096, 32, 8, 128, 128, False, False, torch.bfloat16, torch.device("cpu"))
    timing._TUNED[key] = {"config": (8, 1), "ms": {}}
    timing._TUNED[("other", 1)] = {"config": (0, 4, True), "ms": {}}
    path = tmp_path / "tuned.json"
    picks = timing.dump_tuned(path)
    assert json.loads(path.read_text()) == picks and picks["tuned"][repr(key)] == "(8, 1)"
    timing._TUNED.clear()
    assert timing.load_tuned(path) == 2
    ran = []
    # the handed-over pick, not the first candidate (what an untimed CPU call would take), and no launch
    assert timing.tuned(key, ((0, 8), (8, 1), (4, 1)), ran.append, "cpu") == (8, 1)
    assert timing.tuned_cached(("other", 1)) == (0, 4, True) and ran == []
    assert timing.tuned(("unknown",), ((1,), (2,)), ran.append, "cpu") == (1,)


@pytest.mark.parametrize("text", ['{"k": 3}', '{"k": "__import__(\'os\')"}', "[1, 2]",
                                  '{"tuned": {"k": "os.system(1)"}}', '{"tuned": [], "autotune": {}}'])
def test_a_file_that_is_not_a_picks_file_is_refused(tmp_path, text):
    path = tmp_path / "tuned.json"
    path.write_text(text)
    with pytest.raises(ValueError):
        timing.load_tuned(path)
    assert timing._PRESET == {}


def test_the_fused_rmsnorm_rope_launcher_runs_the_handed_over_launch(tmp_path, monkeypatch):
    """A pick for this shape reaches the launch: the head-split kernel with BLOCK_H 2 instead of
    the per-token default the CPU would take."""
    T, hq, hk, d = 3, 4, 2, 16
    q, k = torch.randn(T, hq, d), torch.randn(T, hk, d)
    w = torch.ones(d)
    cos, sin = rope_cache(16, d)
    pos = torch.arange(T)
    key = ("rmsnorm_rope", 4, hq, hk, d, d, False, False, q.dtype, q.device)
    (tmp_path / "t.json").write_text(json.dumps({repr(key): "(2, 1)"}))
    timing.load_tuned(tmp_path / "t.json")
    grids = []
    real = K._rmsnorm_rope_heads

    class Spy:
        def __getitem__(self, grid):
            grids.append(grid)
            return real[grid]

    monkeypatch.setattr(K, "_rmsnorm_rope_heads", Spy())
    K.rmsnorm_rope(q, k, w, w, cos, sin, pos)
    assert grids == [(T * (hq // 2 + hk // 2),)]


def test_autotuned_kernels_start_from_the_handed_over_config(tmp_path):
    """A triton.autotune'd lab kernel (the fp8 v3's, with its pre-hook): its cache is dumped by
    kernel name and key, and a fresh process-state takes it back (the config object is the
    kernel's own, pre-hook and all); a pick for a kernel not loaded is skipped. (Under the
    interpreter each autotuner has one config and never fills its cache: the pick is set here as
    a GPU run would have left it, key as Triton builds it.)"""
    from profkit.kernels import fp8_gemm as F

    kernel = F._fp8_pchunk_autotuned
    key, cfg = (4096, 6144, 4096, True, 2048, True, "torch.float32", "torch.float32"), kernel.configs[-1]
    saved = dict(kernel.cache)
    kernel.cache.clear()
    kernel.cache[key] = cfg
    path = tmp_path / "tuned.json"
    picks = timing.dump_tuned(path)["autotune"]
    assert picks["profkit.kernels.fp8_gemm._fp8_pchunk_autotuned"] == {repr(key): timing._describe(cfg)}
    data = json.loads(path.read_text())
    data["autotune"]["profkit.kernels.not_loaded._k"] = {"(1,)": "x"}
    path.write_text(json.dumps(data))
    kernel.cache.clear()
    assert timing.load_tuned(path) == 1 and kernel.cache == {key: cfg} and kernel.cache[key] is cfg
    assert cfg.pre_hook is F._pchunk_blocks
    kernel.cache.clear()
    kernel.cache.update(saved)


def test_the_runner_refuses_a_bad_picks_file_in_one_line(tmp_path, capsys):
    from profkit.kernels.run import main

    bad = tmp_path / "tuned.json"
    bad.write_text("{not json")
    assert main(["rmsnorm", "--tuned-in", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err and "Traceback" not in err
    assert main(["rmsnorm", "--tuned-in", str(tmp_path / "missing.json")]) == 2
