"""One voice (issue 50 items 2 and 5), on real reports: a warp-specialised kernel is not
occupancy-bound from its theoretical occupancy; a library kernel's next step names levers its
user holds; a label's reason and its next step read the same rule; `advise` never says "no
counters" of a run that has them, whether or not `classify` ran; predictions are bounded and
ranked by what is attainable; mostly idle timeline-only ranges give their idle time back."""
import json

import pytest
from profdata import DATA, FIELD_H100, FIELD_REPORTS, PROFILES

from profkit.analyses.advise import MIN_SPEEDUP, advise
from profkit.analyses.classify import _values, classify, classify_one, label_rows
from profkit.store.ingest import ingest
from profkit.store.store import Store


@pytest.fixture(scope="module")
def nonvtx(tmp_path_factory):
    """Our H100 capture without --nvtx (tests/data/field-h100): ATen kernels and one nvjet GEMM."""
    path = str(tmp_path_factory.mktemp("ov") / "n.db")
    ingest(path, [FIELD_H100 / "ws_nonvtx.ncu-rep.xz"], run="nonvtx")
    return path


@pytest.fixture(scope="module")
def decode(tmp_path_factory):
    """profiles/hf-llama-decode: an HF-style decode on an H100, nsys + sampled ncu."""
    path = str(tmp_path_factory.mktemp("ov") / "d.db")
    ingest(path, sorted((PROFILES / "hf-llama-decode").glob("*.*")), run="decode")
    return path


def test_a_warp_specialised_gemm_is_not_occupancy_bound(nonvtx):
    # nvjet at 19 % theoretical occupancy (one CTA per SM by design), issue slots 18 %, tensor pipe 30 %
    with Store(nonvtx) as s:
        rows = [r for r in label_rows(s, "nonvtx") if r["kernel_name"].startswith("nvjet_sm90")]
    assert rows
    for r in rows:
        ev = json.loads(r["evidence"])
        assert (r["label"], ev["rule"]) == ("latency", "warp_specialised"), r["reason"]
        assert "theoretical occupancy 19 % is not its limit" in r["reason"] and "issue slots 18 %" in r["reason"]


def test_cudnn_sm90_attention_and_nvjet_counters_of_a_decode(decode):
    """The counters ncu measured for cuDNN's sm90 flash SDPA and two nvjet GEMMs of the decode,
    read alone (no timeline): warp-specialised, so latency from the issue slots, not occupancy;
    cuDNN's sm80 SDPA kernel (wmma, not warp-specialised) keeps the occupancy rule."""
    with Store(decode) as s:
        counters = s.counters("decode", sampled=False)
        names = {r["kernel_id"]: r["kernel_name"] for r in s.query(
            "SELECT kernel_id, kernel_name FROM kernels WHERE run = 'decode'")}
    seen = {}
    for kid, c in counters.items():
        name = names.get(kid, "")
        if name.startswith(("cudnn_generated_fort_native_sdpa", "nvjet_sm90_tst_64x8")):
            v = _values(c)[0]
            seen[name[:45]] = (classify_one(v, None, 295.0, name), classify_one(v, None, 295.0, "x"))
    ws = {k: v for k, v in seen.items() if "sm80" not in k}
    assert ws and any("sdpa_sm90" in k for k in ws) and any("sm80" in k for k in seen)
    for (label, reason, rule), (old, _, _) in ws.values():
        assert old == "occupancy"  # what theoretical occupancy alone says
        assert (label, rule) == ("latency", "warp_specialised") and "issue slots" in reason
    sm80 = next(v for k, v in seen.items() if "sm80" in k)
    assert sm80[0][0] == "occupancy"


def test_a_library_kernel_s_next_step_names_levers_not_its_code(nonvtx):
    with Store(nonvtx) as s:
        a = advise(s, "nonvtx")
    gemm = next(i for i in a.items if i.kernel_name.startswith("nvjet"))
    assert gemm.family == "cublas" and gemm.label == "latency"
    assert "raise occupancy" not in gemm.action and "the levers you hold" in gemm.action
    assert "problem shape" in gemm.action
    for i in a.items:
        if i.family and i.family.startswith("aten"):
            assert "raise occupancy" not in i.action and "kernel's code" not in i.action


def test_the_reason_and_the_next_step_read_one_rule(tmp_path):
    """The naive SGEMM is busy in L1 (memory 90+ %) while DRAM is not: labelled latency by the
    rule l1l2, its next step must not say 'both under 60 %'."""
    path = str(tmp_path / "l.db")
    ingest(path, [DATA / "sgemm-ladder" / "sgemm-ladder-4096.ncu-rep.xz"], run="ladder")
    with Store(path) as s:
        rows = {r["kernel_name"]: r for r in label_rows(s, "ladder")}
        a = advise(s, "ladder")
    naive = next(r for n, r in rows.items() if "sgemm_naive" in n)
    assert json.loads(naive["evidence"])["rule"] == "l1l2" and "bound in L1/L2" in naive["reason"]
    item = next(i for i in a.items if "sgemm_naive" in i.kernel_name)
    assert "both under 60" not in item.action and "L1/L2" in item.action
    for i in a.items:  # wherever the step says 'both under 60 %', the reason's rule is latency's
        if "both under 60" in i.action:
            assert i.label == "latency"


@pytest.mark.skipif(not (FIELD_REPORTS / "nvidia_training").exists(), reason="public field reports not here")
@pytest.mark.parametrize("report", ["nvidia_training/CuVectorAddDrv.ncu-rep", "esmm/metrics.csv",
                                    "codegandee/kernel_0005_ncu.details.csv"])
def test_no_counters_is_never_said_of_a_run_with_counters(tmp_path, report):
    """Public ncu reports (read in place, ../shared/field-reports): their counters name a label
    but give no roofline floor (no peak for their work); advise, with classify run or not, keeps
    the label's next step and says why there is no floor."""
    path = str(tmp_path / "f.db")
    ingest(path, [FIELD_REPORTS / report], run="f")
    for ran in (False, True):
        with Store(path) as s:
            if ran:
                classify(s, "f")
            a = advise(s, "f")
        assert a.items and not any("no counters" in i.action for i in a.items), [i.action for i in a.items]


def test_stale_labels_are_not_read(tmp_path):
    """Labels stored before the counters came (classify on the timeline, then ncu ingested):
    advise labels from the counters, not from the stale 'no counters' labels."""
    path = str(tmp_path / "s.db")
    ingest(path, [FIELD_H100 / "ws.nsys.sqlite"], run="ws")
    with Store(path) as s:
        classify(s, "ws")
    ingest(path, [FIELD_H100 / "ws_perconfig.ncu-rep.xz"], run="ws")
    with Store(path) as s:
        stored = {r["label"] for r in s.query("SELECT label FROM classifications WHERE run = 'ws'")}
        a = advise(s, "ws", include_unranged=True)
        measured = set(s.counters("ws"))
    assert "unknown" in stored
    assert measured
    for i in a.items:
        assert not i.action.startswith("no counters"), (i.kernel_name, i.action)


def test_predictions_are_attainable_and_ranked_by_them(nonvtx, decode):
    for db, run in ((nonvtx, "nonvtx"), (decode, "decode")):
        with Store(db) as s:
            a = advise(s, run)
        sp = [i.predicted_speedup for i in a.items]
        for k, x in enumerate(sp):  # an item under 1.05x never ranks above one predicted higher
            if x is not None and x < MIN_SPEEDUP:
                assert all(y is None or y < MIN_SPEEDUP for y in sp[k + 1:]), sp
        for i in a.items:
            if i.roof_speedup is not None and i.kind == "range":
                assert i.predicted_speedup is not None and 1.0 <= i.predicted_speedup <= i.roof_speedup + 1e-9
                assert i.predicted_how
    # the nvjet GEMM of one partial wave (128 CTAs on 132 SMs): 3.3x to the roof, the share of it the
    # best small GEMM measured on the H100 reaches (profkit/model/attainable_measured.json: 70 %)
    from profkit.model import attainable

    small = attainable.of("gemm", small=True)
    assert small.provenance == "measured" and 0.5 < small.efficiency < 0.8
    with Store(nonvtx) as s:
        gemm = next(i for i in advise(s, "nonvtx").items if i.kernel_name.startswith("nvjet"))
    assert gemm.roof_speedup > 3 and gemm.predicted_speedup == pytest.approx(gemm.roof_speedup * small.efficiency)
    assert "measured on NVIDIA H100 80GB HBM3" in gemm.predicted_how


def test_a_kernel_at_its_dram_roof_is_offered_fewer_bytes_not_the_roofline(tmp_path):
    """tests/data/ncu-pages: `stream` copies at 88 % of the DRAM peak. 'Reach the memory
    roofline' (1.14x to the roof) is no step there, and what is attainable is under 1.05x: it
    ranks below every item predicted higher."""
    path = str(tmp_path / "p.db")
    ingest(path, [DATA / "ncu-pages" / "pages.ncu-rep.xz"], run="pages")
    with Store(path) as s:
        a = advise(s, "pages")
    streams = [i for i in a.items if i.kernel_name == "stream"]
    assert streams
    for i in streams:
        assert i.label == "dram" and "reach the memory roofline" not in i.action
        assert i.action.startswith("at the memory roof (DRAM throughput 88 % of peak): move fewer bytes")
        assert i.roof_speedup > 1.1 and i.predicted_speedup < MIN_SPEEDUP
        after = a.items[a.items.index(i) + 1:]
        assert all(j.predicted_speedup is None or j.predicted_speedup < MIN_SPEEDUP for j in after)


def test_mostly_idle_timeline_ranges_give_their_idle_time_back(tmp_path):
    """A torch.profiler trace of a training step (tests/data/kineto-h100, H100): no counters;
    its ranges where the GPU idles get that time as recoverable, not 0 us and 'no counters'."""
    path = str(tmp_path / "k.db")
    ingest(path, [DATA / "kineto-h100" / "tf.kineto.json.gz"], run="tf")
    with Store(path) as s:
        a = advise(s, "tf")
    idle = [i for i in a.items if i.kind == "graph" and i.nvtx_path]
    assert idle and a.items[0] in idle
    top = a.items[0]
    assert top.recoverable_ns > 1e6 and "the GPU idles" in top.action and top.predicted_speedup > 1.05
    # the windows of the ranges inside a range are theirs, not its own idle time
    assert all(i.recoverable_ns <= i.window_ns for i in idle)
