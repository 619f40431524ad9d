"""profkit advise on the shipped H200 profiles: the fixes the lab applied come first, each
figure says how it was computed, and the predictions meet the gains compare measured."""
import json

import pytest
from click.testing import CliRunner
from profdata import DATA, PROFILES

from profkit.analyses.advise import advise
from profkit.analyses.calibration import calibrate
from profkit.analyses.classify import classify
from profkit.cli import cli
from profkit.model import peaks
from profkit.store.ingest import ingest
from profkit.store.store import Store

RMS = "rmsnorm-eager-vs-triton-h200"


@pytest.fixture(scope="module")
def db(profiles_db):
    path = profiles_db
    with Store(path) as s:
        for run in s.runs():
            classify(s, run)
    return path


@pytest.fixture(scope="module")
def measured():
    return peaks.read(PROFILES / "peaks.json")


def test_eager_rmsnorm_first_fuse_it(db, measured):
    with Store(db) as s:
        a = advise(s, RMS, peaks=measured)
    top = a.items[0]
    assert (top.kind, top.nvtx_path, top.label) == ("range", "rmsnorm/eager/qwen7b-t4096", "dram")
    assert top.action.startswith("fuse the 8 kernels of each call into one: they move 429.9 MB per call, the "
                                 "operator needs 58.7 MB")
    # floor: the operator's minimum bytes (read x, write y, read w: 58.7 MB) at the measured copy bandwidth
    copy = next(p["value"] for p in measured if (p["gpu"], p["ceiling"]) == ("NVIDIA H200", "dram"))
    assert f"58.7 MB at the measured copy bandwidth {copy / 1e12:.2f} TB/s" in top.how
    assert top.floor_ns == pytest.approx(4096 * 3584 * 2 * 2 / copy * 1e9, rel=1e-3)
    assert top.recoverable_ns == pytest.approx(3 * (top.per_call_ns - top.floor_ns))
    assert top.predicted_speedup == pytest.approx(14.9, abs=0.2)
    assert [i.rank for i in a.items] == list(range(1, len(a.items) + 1))
    # ranked by the attainable gain, within each class: predicted >= 1.05x, under it, no figure
    cls = [2 if i.predicted_speedup is None else int(i.predicted_speedup < 1.05) for i in a.items]
    assert cls == sorted(cls)
    for c in set(cls):
        rec = [i.recoverable_ns for i, k in zip(a.items, cls) if k == c]
        assert rec == sorted(rec, reverse=True)
    assert any("outside any NVTX range left out" in n for n in a.notes)  # warm-up launches


def test_a_core_install_gives_the_same_floor(db, measured, monkeypatch):
    # the operator formulas live in the model layer: with the lab, torch and triton unimportable
    # advise still floors the lab range at the operator's minimum bytes
    import sys

    for mod in ("profkit.kernels", "torch", "triton"):
        monkeypatch.setitem(sys.modules, mod, None)
    with Store(db) as s:
        a = advise(s, RMS, peaks=measured)
    top = a.items[0]
    assert top.nvtx_path == "rmsnorm/eager/qwen7b-t4096"
    assert "58.7 MB at the measured copy bandwidth" in top.how


def test_eager_decode_first_graph_the_step(db, measured):
    with Store(db) as s:
        a = advise(s, "e2e-decode", peaks=measured)
    top = a.items[0]
    assert (top.kind, top.nvtx_path) == ("graph", "e2e/decode/eager/llama3-8b-l4-ctx448/step")
    assert top.action.startswith("CUDA-graph each call (173 launch calls per call today)")
    assert top.calls == 12 and top.launches == 12 * 173
    # the device's own gap between queued back-to-back kernels, measured in this run
    assert 200 < a.device_gap_ns < 2_000 and "queued back-to-back" in a.device_gap_how
    assert any("no Nsight Compute counters" in n for n in a.notes)
    # already-graphed steps are not advised to be graphed again
    assert not any(i.kind == "graph" and "/graph" in i.nvtx_path for i in a.items)


def test_a_range_scope(db, measured):
    with Store(db) as s:
        a = advise(s, RMS, scope="rmsnorm/triton", peaks=measured)
    assert [i.nvtx_path for i in a.items] == ["rmsnorm/triton/qwen7b-t4096"]
    assert a.items[0].action.startswith("reach the memory roofline")


@pytest.mark.parametrize("before,after,measure,lo,hi", [
    ("e2e-decode:eager", "e2e-decode:graph", "span", 0.85, 1.1),
])
def test_calibration_within_25_percent(db, measured, before, after, measure, lo, hi):
    with Store(db) as s:
        (c,) = calibrate(s, before, after, measure, measured)
    assert lo <= c.ratio <= hi, c.row()
    assert c.within


def test_a_miss_says_why_from_the_evidence(db, measured):
    with Store(db) as s:
        (c,) = calibrate(s, f"{RMS}:eager", f"{RMS}:triton", "gpu", measured)
    # the Triton call at 4096 x 3584 reaches 80 % of the predicted floor: DRAM at 46 % of its peak
    assert not c.within and c.ratio == pytest.approx(1.255, abs=0.005)
    assert "dram-bound" in c.why and "DRAM runs at only 46 %" in c.why


def test_counters_only_report_without_ranges(tmp_path):
    """A user's .ncu-rep captured without --nvtx and no timeline: one item per kernel, floors
    from each kernel's own roofline (the report's peaks), no idle time."""
    path = str(tmp_path / "n.db")
    ingest(path, [DATA / "field-h100" / "ws_nonvtx.ncu-rep.xz"], run="nonvtx")
    with Store(path) as s:
        a = advise(s, "nonvtx")
        assert not s.query("SELECT 1 FROM advice WHERE run = 'nonvtx'")  # the library writes nothing
    assert a.wall_ns is None and any("no timeline" in n for n in a.notes)
    assert all(i.nvtx_path is None and i.kind == "range" for i in a.items)
    assert a.items[0].recoverable_ns > 0 and "6 of 6 launches at their own roofline" in a.items[0].how
    assert a.items[0].kernel_name == "elementwise_kernel" and a.items[0].calls == 6


def test_cli_stores_the_advice_view(db, tmp_path):
    r = CliRunner().invoke(cli, ["advise", "--db", db, "--run", RMS, "--peaks", str(PROFILES / "peaks.json"),
                                 "--top", "3"])
    assert r.exit_code == 0, r.output
    assert "fuse the 8 kernels" in r.output and "1. how: measured" in r.output
    r = CliRunner().invoke(cli, ["sql", "--db", db, "--json",
                                 f"SELECT rank, scope, nvtx_path, kernel_name, label, share, recoverable_ns, action, "
                                 f"evidence FROM advice WHERE run = '{RMS}' ORDER BY rank"])
    rows = json.loads(r.output)
    assert rows[0]["rank"] == 1 and rows[0]["nvtx_path"] == "rmsnorm/eager/qwen7b-t4096" and rows[0]["scope"] == ""
    assert json.loads(rows[0]["evidence"])["predicted_speedup"] == pytest.approx(14.9, abs=0.2)
    r = CliRunner().invoke(cli, ["advise", "--db", db, "--run", RMS, "--json"])
    assert json.loads(r.output)["items"][0]["nvtx_path"] == "rmsnorm/eager/qwen7b-t4096"


@pytest.mark.parametrize("args,code,text", [
    (["--run", "nope"], 5, "no run named 'nope'"),
    (["--run", RMS, "--range", "no/such/path"], 2, "has no kernels under the NVTX path 'no/such/path'"),
])
def test_cli_bad_input_is_one_line(db, args, code, text):
    r = CliRunner().invoke(cli, ["advise", "--db", db, *args])
    assert r.exit_code == code and text in r.output and len(r.output.strip().splitlines()) == 1, r.output
