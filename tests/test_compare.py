"""profkit compare on the shipped H200 profiles: before/after variants of one run."""
import json

import pytest
from click.testing import CliRunner

from profkit.analyses import compare
from profkit.analyses.classify import classify
from profkit.analyses.compare import Side, noise_band, verdict
from profkit.cli import cli
from profkit.store.store import Store

RMS = "rmsnorm-eager-vs-triton-h200"


@pytest.fixture(scope="module")
def db(profiles_db):
    return profiles_db


def _json(db, *args):
    r = CliRunner().invoke(cli, ["compare", *args, "--db", db, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def test_rmsnorm_eager_to_triton(db):
    (row,) = _json(db, f"{RMS}:eager", f"{RMS}:triton")
    assert row["range"] == "rmsnorm/qwen7b-t4096"
    # per-call GPU time: eager 8 kernels x 3 calls, triton 1 x 3
    assert row["before_detail"]["calls"] == 3 and row["before_detail"]["kernels_per_call"] == 8
    assert row["after_detail"]["calls"] == 3 and row["after_detail"]["kernels_per_call"] == 1
    assert row["before_us"] == pytest.approx(204.83, abs=0.01)
    assert row["after_us"] == pytest.approx(16.90, abs=0.01)
    assert row["before_span_us"] == pytest.approx(213.22, abs=0.01)  # idle gaps between the 8 kernels
    assert row["speedup"] == pytest.approx(12.12, abs=0.01)
    assert (row["speedup_low"], row["speedup_high"]) == (pytest.approx(12.09, abs=0.01), pytest.approx(14.13, abs=0.01))
    assert "3 x 3 calls" in row["band_method"] and "not a confidence interval" in row["band_method"]
    assert (row["label_before"], row["label_after"]) == ("dram", "dram")
    assert row["before_detail"]["labels"]["launch_overhead"] == pytest.approx(5.98, abs=0.01)  # tiny eager kernels
    # DRAM roof binds both sides; the Triton kernel moves 33 MB a call against eager's 430 MB
    assert row["roofline_pct_before"] == pytest.approx(45.0, abs=0.1)
    assert row["roofline_pct_after"] == pytest.approx(46.3, abs=0.1)
    assert row["before_detail"]["roof"] == row["after_detail"]["roof"] == "dram"
    assert row["after_detail"]["dram_bytes_per_call"] == pytest.approx(33.46e6, rel=1e-3)
    assert row["before_detail"]["dram_bytes_per_call"] == pytest.approx(429.69e6, rel=1e-3)
    # faster beyond noise and the capture's reference check passed
    assert row["verdict"] == "supported" and row["caveats"] == []
    assert "reference check passed" in row["why"]


def test_compare_labels_a_run_without_labels_and_writes_nothing(db):
    with Store(db) as s:
        s.replace_labels(RMS, [])
        assert not s.query("SELECT 1 FROM classifications WHERE run = ?", (RMS,))
        (c,) = compare.compare(s, f"{RMS}:eager", f"{RMS}:triton")
        assert c.after.label == "dram"
        # reading never labels as a side effect: labelling is `profkit classify` (or analyse)
        assert not s.query("SELECT 1 FROM classifications WHERE run = ?", (RMS,))
        classify(s, RMS)


def test_table_output(db):
    r = CliRunner().invoke(cli, ["compare", f"{RMS}:eager", f"{RMS}:triton", "--db", db])
    assert r.exit_code == 0, r.output
    for text in ("rmsnorm/qwen7b-t4096", "12.12x [12.09-14.13]", "dram -> dram", "45 % -> 46 %", "supported",
                 "not a confidence interval"):
        assert text in r.output


@pytest.mark.parametrize("args,code,text", [
    (["nope:eager", f"{RMS}:triton"], 5, "no run 'nope'"),
    ([f"{RMS}:", f"{RMS}:triton"], 2, "bad selector"),
    ([f"{RMS}:nothing", f"{RMS}:triton"], 2, "has a part 'nothing'"),
    ([f"{RMS}:eager", f"{RMS}:eager"], 2, "compared with itself"),
    (["known", "cuda-vs-triton-h200"], 2, "share no NVTX range"),
])
def test_errors_are_one_line(db, args, code, text):
    r = CliRunner().invoke(cli, ["compare", *args, "--db", db])
    assert r.exit_code == code
    assert text in r.output and len(r.output.strip().splitlines()) == 1 and "Traceback" not in r.output


def _side(calls, correctness=None, counters=True):
    return Side("r", "op/v/s", len(calls), 1, calls, None, "dram", 1.0, counters=counters, correctness=correctness)


def test_a_sides_median_sorts_its_list_once(monkeypatch):
    """The speed-up, verdict, notes and row each ask a side's medians: its list is sorted once,
    read again where the list is replaced, and the value is statistics.median's (an int of an
    odd count of ints, the mean of the middle two of an even count)."""
    sorted_, median = [], compare._median
    monkeypatch.setattr(compare, "_median", lambda xs: sorted_.append(1) or median(xs))
    s = _side([3.0, 1.0, 4.0, 2.0])
    assert [s.median_us, s.median("gpu_us"), s.times_median("gpu"), s.median_us] == [2.5] * 4
    assert len(sorted_) == 1
    s.gpu_us = [5, 1, 3]
    assert s.median_us == 3 and type(s.median_us) is int and len(sorted_) == 2
    s.gpu_us.append(7)  # (a list grown in place is read again too)
    assert s.median_us == 4.0
    assert s.median("span_us") is None and s.times_median("host") is None  # (no list: no median)
    row = compare.Comparison("k", s, _side([1.0]), 4.0, (1.0, 9.0), "m", "supported", "w").row()
    assert row["before_gpu_us"] == 4.0 and "_medians" not in row["before_detail"]


def test_verdict_rules():
    ok = {"ok": True, "rel_err": 1.7e-3, "tol": 1e-2}
    b, a = [10.0, 10.2, 9.9], [5.0, 5.1, 4.9]
    band, _ = noise_band(b, a)
    assert band == pytest.approx((9.9 / 5.1, 10.2 / 4.9))
    assert verdict(2.0, band, _side(b), _side(a, ok))[0] == "supported"
    # overlapping calls: faster on the median but the band reaches 1
    b2, a2 = [10.0, 10.5, 9.0], [9.5, 9.8, 10.2]
    band2, _ = noise_band(b2, a2)
    v, why, cav = verdict(10.0 / 9.8, band2, _side(b2), _side(a2, ok))
    assert v == "caveated" and "reaches 1" in cav[0] and "3 calls before" in cav[0]
    assert verdict(2.0, band, _side(b, counters=False), _side(a, ok))[2][0].startswith("no counters for")
    assert verdict(2.0, band, _side(b), _side(a, {"ok": False, "rel_err": 0.5, "tol": 1e-2}))[0] == "rejected"
    assert verdict(0.9, (0.8, 0.95), _side(b), _side(a, ok))[0] == "rejected"
    assert "one call" in verdict(2.0, (2.0, 2.0), _side([10.0]), _side([5.0], ok))[2][0]


def test_bootstrap_band_from_ten_calls():
    b = [10.0 + 0.1 * i for i in range(12)]
    a = [5.0 + 0.05 * i for i in range(12)]
    (lo, hi), method = noise_band(b, a)
    assert "bootstrap" in method
    assert min(b) / max(a) < lo < 10.55 / 5.275 < hi < max(b) / min(a)
    assert noise_band(b, a) == ((lo, hi), method)  # fixed seed: the same band every time


def test_bootstrap_is_the_pure_python_resampling_bit_for_bit():
    """The numpy bootstrap draws what random.Random(0).choices drew (before, then after, per
    resample): the same sorted ratios, not merely close ones (odd and even counts, ties)."""
    import random
    import statistics

    from profkit.analyses.compare import BOOTSTRAP_SAMPLES, _bootstrap_ratios

    def loop(before, after):
        rng = random.Random(0)
        return sorted(statistics.median(rng.choices(before, k=len(before))) /
                      statistics.median(rng.choices(after, k=len(after))) for _ in range(BOOTSTRAP_SAMPLES))

    src = random.Random(7)
    cases = [([10.0 + 0.1 * i for i in range(12)], [5.0 + 0.05 * i for i in range(13)]),
             ([float(src.randint(1, 4)) for _ in range(31)], [src.uniform(0.5, 3.0) for _ in range(10)]),
             ([src.uniform(1e-3, 1e9) for _ in range(57)], [src.uniform(1e-3, 1e9) for _ in range(44)])]
    for before, after in cases:
        assert _bootstrap_ratios(before, after) == loop(before, after)


@pytest.mark.parametrize("by", ["gpu", "host"])
def test_json_is_the_rows_text(db, monkeypatch, by):
    # --json streams the rows: json.dumps(rows, indent=2)'s text, each side's per-call times
    # over several chunks here (3 calls, 2 a chunk)
    from profkit.outputs import jsonstream

    monkeypatch.setattr(jsonstream, "CHUNK", 2)
    r = CliRunner().invoke(cli, ["compare", f"{RMS}:eager", f"{RMS}:triton", "--db", db, "--by", by, "--json"])
    assert r.exit_code == 0, r.output
    with Store(db, readonly=True) as s:
        got = compare.rows(s, f"{RMS}:eager", f"{RMS}:triton", by)
    assert len(got[0]["before_detail"]["gpu_us"]) == 3
    assert r.stdout == json.dumps(got, indent=2) + "\n"


def test_timeline_of_a_side(db):
    s = Store(db)
    try:
        rows = compare.timeline(s, f"{RMS}:eager")
    finally:
        s.close()
    assert len(rows) == 24 and [r["call"] for r in rows[::8]] == [0, 1, 2]
    first = rows[:8]
    assert first[0]["kernel"] == "unrolled_elementwise_kernel" and first[0]["start_us"] == 0.0
    assert first[0]["duration_us"] == pytest.approx(44.32)
    assert first[1]["gap_us"] == pytest.approx(1.344)  # idle GPU between two eager kernels
    # two tiny kernels per call (~1 us each) are launch overhead; the rest move DRAM
    assert [r["label"] for r in first].count("launch_overhead") == 2
    assert sum(r["duration_us"] for r in first) == pytest.approx(204.2, abs=0.1)


def test_a_snapshot_answers_as_the_database_does_and_refuses_writes(db):
    # the main job's claims read each run once inside Store.snapshot(); same rows, same verdicts
    from profkit.core.errors import ProfkitError
    from profkit.store.store import read
    with Store(db) as s:
        plain = [c.row() for c in compare.compare(s, f"{RMS}:eager", f"{RMS}:triton")]
        q = "SELECT kernel_id, nvtx_path FROM kernels WHERE run = ? ORDER BY kernel_id"
        with s.snapshot():
            first = s.query(q, (RMS,))
            first.clear()  # a caller's list is its own
            assert s.query(q, (RMS,)) == read.query(s.conn, q, (RMS,)) != []
            assert s.counters(RMS) == read.counters(s.conn, RMS)
            assert [c.row() for c in compare.compare(s, f"{RMS}:eager", f"{RMS}:triton")] == plain
            with pytest.raises(ProfkitError, match="write inside"):
                s.replace_labels(RMS, [])
        assert s.query("SELECT count(*) AS n FROM classifications WHERE run = ?", (RMS,))[0]["n"] > 0


# --- by host time: the launcher's share of a call ---------------------------------------------

def _host_times(db, run, path):
    """Host time per call computed here from the launches' API starts (one kernel per call in
    the Triton range; eager's calls are its kernels in groups of the call's kernel count)."""
    with Store(db, readonly=True) as s:
        ks = s.query("SELECT api_start_ns FROM kernels WHERE run = ? AND nvtx_path = ? ORDER BY start_ns",
                     (run, path))
    return [k["api_start_ns"] for k in ks]


def test_by_host_measures_the_launcher(db):
    """The Triton call's 17 us of GPU work waits on ~68 us of launcher: by host time the win is 3.6x."""
    (row,) = _json(db, f"{RMS}:eager", f"{RMS}:triton", "--by", "host")
    starts = _host_times(db, RMS, "rmsnorm/triton/qwen7b-t4096")
    assert len(starts) == 3  # 3 calls, 1 kernel each: 2 host times
    host = [(b - a) / 1e3 for a, b in zip(starts, starts[1:])]
    assert host == pytest.approx([71.124, 64.008])
    assert row["by"] == "host" and row["after_us"] == pytest.approx(sum(host) / 2)
    assert row["after_detail"]["host_us"] == pytest.approx(host)
    n = row["before_detail"]["kernels_per_call"]
    eager = _host_times(db, RMS, "rmsnorm/eager/qwen7b-t4096")[::n]
    assert row["before_detail"]["host_us"] == pytest.approx([(b - a) / 1e3 for a, b in zip(eager, eager[1:])])
    assert row["before_us"] == pytest.approx(242.57, abs=0.01)
    assert row["speedup"] == pytest.approx(242.5665 / 67.566, rel=1e-3)
    assert row["verdict"] == "supported" and "on the host" in row["why"]
    assert "2 x 2" in row["band_method"] and row["band_method"].startswith("host time per call")
    # the GPU time stays in the row, and is what the default measures
    assert row["before_gpu_us"] == pytest.approx(204.8, abs=0.1) and row["after_gpu_us"] == pytest.approx(16.9, abs=0.1)
    assert row["notes"] == ["GPU time per call 204.8 -> 16.9 us"]  # Triton's side is host-bound: no warning
    (gpu,) = _json(db, f"{RMS}:eager", f"{RMS}:triton")
    assert gpu["by"] == "gpu" and gpu["before_us"] == row["before_gpu_us"] and gpu["speedup"] == pytest.approx(12.12, abs=0.01)
    assert len(gpu["notes"]) == 1 and "host-bound" in gpu["notes"][0] and "rmsnorm/triton/" in gpu["notes"][0]


def test_by_host_refused_without_a_timeline(db):
    run = "fp8-gemm-cublas-vs-cuda-h100"  # ncu only: no API times
    r = CliRunner().invoke(cli, ["compare", f"{run}:scaled_mm_tensor", f"{run}:cuda_ws112_tma8_tensor", "--db", db,
                                 "--by", "host"])
    assert r.exit_code != 0 and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1 and "no host time per call" in r.output
    assert "no API start times" in r.output
    r = CliRunner().invoke(cli, ["compare", f"{run}:scaled_mm_tensor", f"{run}:cuda_ws112_tma8_tensor", "--db", db,
                                 "--by", "wall"])
    assert r.exit_code == 2 and "wall" in r.output


def test_by_host_refuses_one_call_ranges_of_a_field_report(tmp_path):
    """A TensorRT engine's nsys export someone else captured (RTX 3090): its launches carry API
    times, but each layer's range holds one call, so there is no host time a call to compare."""
    from profdata import FIELD_REPORTS

    src = FIELD_REPORTS / "memfusion" / "report1.sqlite"
    if not src.exists():
        pytest.skip(f"{src} not here (public field reports live beside the project)")
    db = str(tmp_path / "f.db")
    r = CliRunner().invoke(cli, ["ingest", str(src), "--db", db, "--run", "trt"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["compare", "trt:Identity_0", "trt:Identity_1", "--db", db, "--by", "host"])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1 and "one call" in r.output and "2 calls or more" in r.output
    (row,) = _json(db, "trt:Identity_0", "trt:Identity_1")  # the GPU comparison still answers
    assert row["before_detail"]["calls"] == 1 and row["before_detail"]["host_us"] is None


def test_a_sides_median_is_statistics_median():
    """A side's medians come from numpy's partition: the same float as statistics.median (odd
    and even counts, ties, one or two calls, values whose mean of the middle two rounds)."""
    import random
    import statistics

    from profkit.analyses.compare import _median

    rng = random.Random(4)
    cases = [[5.0], [1.0, 2.0], [0.1, 0.2, 0.7], [3.0] * 6, [1e16, 1.0, 3.0, 1e16 + 2]]
    cases += [[rng.lognormvariate(0, 1) for _ in range(n)] for n in (9, 10, 1001, 1002)]
    cases += [[float(rng.randint(1, 4)) for _ in range(n)] for n in (99, 100)]
    for xs in cases:
        assert _median(xs) == statistics.median(xs), xs[:5]


def test_bootstrap_of_many_calls_is_the_same_bootstrap():
    """Above BOOTSTRAP_DRAWN calls the resamples' medians are drawn from their middle order
    statistics: the same distribution as drawing every call (percentiles within Monte Carlo
    noise, for spread values and for heavy ties), the same band every time, and the method says so."""
    import numpy as np

    from profkit.analyses.compare import BOOTSTRAP_DRAWN, _bootstrap_ratios, _bootstrap_ratios_many

    rng = np.random.default_rng(3)
    spread = ((100 * rng.lognormal(0, 0.3, 12_001)).tolist(), (90 * rng.lognormal(0, 0.3, 12_000)).tolist())
    ties = (rng.integers(1, 6, 12_000).astype(float).tolist(), rng.integers(1, 5, 12_001).astype(float).tolist())
    for before, after in (spread, ties):
        assert len(before) + len(after) > BOOTSTRAP_DRAWN
        many, drawn = _bootstrap_ratios_many(before, after), _bootstrap_ratios(before, after)
        for p in (2.5, 50, 97.5):
            i = int(p / 100 * len(many))
            assert many[i] == pytest.approx(drawn[i], rel=3e-3)
    band, method = noise_band(*spread)
    assert noise_band(*spread) == (band, method)
    assert band[0] < 100 / 90 < band[1] and "order statistics drawn directly" in method


def test_a_runs_labels_are_read_from_an_index_without_their_evidence(db):
    """compare reads a run's labels as codes: from the index that holds (run, kernel_id, label),
    not from the label rows with ~800 bytes of evidence each."""
    with Store(db) as s:
        plan = " ".join(r[3] for r in s.conn.execute(
            "EXPLAIN QUERY PLAN SELECT kernel_id, CAST(label AS BLOB) FROM label WHERE run = ?"
            " AND kernel_id BETWEEN 1 AND 1000", (RMS,)))
        assert "COVERING INDEX label_run_kernel_label" in plan
        classify(s, RMS)
        facts = compare.label_codes(s, RMS)
        stored = {r["kernel_id"]: r["label"] for r in s.query("SELECT kernel_id, label FROM classifications WHERE run = ?", (RMS,))}
        got = facts.codes(__import__("numpy").array(list(stored), dtype="int64"))
        assert [facts.labels[c] for c in got.tolist()] == list(stored.values())
