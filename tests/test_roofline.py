"""The roofline on the real H200 captures shipped in profiles/ (ncu roofline metric set)."""
import importlib
import lzma
import re
import shutil
import sqlite3

import pytest
from click.testing import CliRunner
from profdata import DATA, PROFILES

from profkit.analyses import roofline as rl
from profkit.cli import cli
from profkit.core.metrics import lookup
from profkit.model import peaks
from profkit.model import perf as model
from profkit.outputs import roofline_plot as rp
from profkit.store.ingest import ingest
from profkit.store.profiles import load_profiles
from profkit.store.store import Store

RMSNORM = "rmsnorm-eager-vs-triton-h200"


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("roof") / "p.db")
    load_profiles(PROFILES, path)
    return path


@pytest.fixture(scope="module")
def store(db):
    s = Store(db)
    yield s
    s.close()


def _model(op, shape):
    w = importlib.import_module(f"profkit.kernels.{op}").WORKLOAD
    return w.model(w.shapes[shape], "bf16")


def _point(points, path, kind="kernel"):
    return next(p for p in points if p.path == path and p.kind == kind)


def test_dram_bytes_of_triton_rmsnorm_are_the_model_minimum(store):
    # minimum HBM traffic: read x, read w, write y = 58.7 MB. ncu flushes the caches before each
    # pass, so reads are cold (29.4 MB); the 29.4 MB y fits the 60 MB L2 and mostly sits there
    # dirty when the kernel ends, so the counter reads the reads and a few MB of writes, never
    # more than the model
    model = _model("rmsnorm", "qwen7b-t4096")
    p = _point(rl.collect(store, RMSNORM).points, "rmsnorm/triton/qwen7b-t4096")
    ratio = p.bytes["dram"] / model["bytes"]
    assert 0.5 <= ratio <= 1.02, ratio
    assert p.label == "dram"


def test_ceilings_come_from_the_reports_peaks(store):
    r = rl.collect(store, RMSNORM)  # no measured ceilings given
    c = {x.key: x.value for x in r.ceilings}
    counters = store.counters(RMSNORM)
    sm = sorted(lookup(v, "sm_clock") for v in counters.values())
    dram_hz = sorted(lookup(v, "dram_clock") for v in counters.values())
    med = lambda xs: (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2 if len(xs) % 2 == 0 else xs[len(xs) // 2]  # noqa: E731
    # H200 report: per-cycle peaks x the clock the kernels ran at (median over the run's 30 launches)
    assert c["dram"] == pytest.approx(1504 * med(dram_hz))                 # dram__bytes.sum.peak_sustained
    assert c["dram"] == pytest.approx(4.81e12, rel=0.01)                   # the datasheet's 4.8 TB/s
    assert c["bf16_tensor"] == pytest.approx(1081344 / 2 * med(sm))        # ops_path peak is the sparse rate
    assert c["fp8_tensor"] == pytest.approx(2162688 / 2 * med(sm))
    assert c["fp32"] == pytest.approx(528 * 32 * 2 * med(sm))              # FMA pipe warp inst/cycle
    assert c["l1"] == pytest.approx(67584 * med(sm))                       # L1 in the SM: SM clock
    assert "l2" in c and not any("no L2 ceiling" in n for n in r.notes)  # the roofline set counts L2 cycles
    assert not any(x.measured for x in r.ceilings)


def test_dense_tensor_peak_is_half_the_ncu_peak_metric(store):
    # achieved tensor FLOP/s over (peak_sustained x clock), times two, is ncu's tensor-pipe
    # utilisation on every GEMM launch shipped: the dense pipe does half the metric's rate
    checked = 0
    for run in ("known",):
        counters = store.counters(run)
        rows = store.query("SELECT kernel_id, value FROM counters WHERE run = ? AND metric = "
                           "'sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active.avg."
                           "pct_of_peak_sustained_elapsed' AND value > 50", (run,))
        for row in rows:
            c = counters[row["kernel_id"]]
            achieved = model.work(c)["bf16_tensor"] / (lookup(c, "duration") * 1e-9)
            dense = model.rates(c)["bf16_tensor"][0]
            assert 100 * achieved / dense == pytest.approx(row["value"], abs=0.01)
            checked += 1
    assert checked == 3  # the 3 cuBLAS launches of profiles/known


def test_measured_peaks_only_for_the_same_gpu(store, tmp_path):
    shipped = peaks.read(PROFILES / "peaks.json")
    r = rl.collect(store, RMSNORM, peaks=shipped)
    measured = {c.key: c.value for c in r.ceilings if c.measured}
    # profiles/peaks.json (benchmarks/results, H200): copy 4276 GB/s, cuBLAS bf16 758 TFLOP/s, _scaled_mm fp8 1318
    assert measured["dram"] == pytest.approx(4276e9, rel=0.001)
    assert measured["bf16_tensor"] == pytest.approx(757.8e12, rel=0.001)
    assert measured["fp8_tensor"] == pytest.approx(1317.5e12, rel=0.001)
    # the H100's own peaks are in the file too, and never drawn on an H200 run
    h100 = rl.measured_ceilings(shipped, "NVIDIA H100 80GB HBM3")
    assert {c.key for c in h100} == {"dram", "bf16_tensor", "fp8_tensor"} and all("h100" in c.source for c in h100)
    assert not any("h100" in c.source for c in r.ceilings)


def test_html_is_self_contained(store, tmp_path):
    path = rp.write_html(rp.build(store, RMSNORM), tmp_path / "r.html")
    text = path.read_text()
    assert len(text) > 3_000_000  # plotly.js (several MB) is inline
    assert re.search(r"\* plotly\.js v\d", text) and "Plotly.newPlot" in text  # the bundle's own header
    assert not re.search(r"<script[^>]*\ssrc=", text)  # nothing loaded from a CDN or a file beside it
    assert not list(tmp_path.glob("*.tmp"))


def test_compare_draws_one_arrow_per_paired_range(store):
    for by in ("kernel", "range"):
        r = rl.collect(store, f"{RMSNORM}:eager", f"{RMSNORM}:triton", by=by)
        assert [a.key for a, _ in r.arrows] == ["rmsnorm/qwen7b-t4096"]
        before, after = r.arrows[0]
        assert (before.side, after.side) == ("before", "after")
        # eager: 8 kernels a call; Triton: one kernel (under ncu, caches flushed before each)
        assert before.time_ns / after.time_ns == pytest.approx(13.2, rel=0.05)
        assert after.intensity("dram") > before.intensity("dram")
        fig = rp.figure(r)
        arrows = [a for a in fig.layout.annotations if a.showarrow]
        assert len(arrows) == 1
        # annotations on log axes take log10 coordinates
        assert arrows[0].x == pytest.approx(__import__("math").log10(after.intensity("dram")))
        assert arrows[0].axref == "x" and arrows[0].ayref == "y"


def _second_copy(tmp_path, folder):
    """The same capture under different bytes (recompressed, another header): a second run."""
    out = tmp_path / "copy"
    out.mkdir()
    for f in folder.iterdir():
        if f.name.endswith(".ncu-rep.xz"):
            (out / f.name).write_bytes(lzma.compress(lzma.decompress(f.read_bytes()), preset=1))
        elif f.name.endswith(".nsys.sqlite"):
            shutil.copy(f, out / f.name)
            conn = sqlite3.connect(out / f.name)
            conn.execute("PRAGMA user_version = 7")
            conn.close()
    return sorted(out.iterdir())


def test_compare_two_runs(tmp_path):
    path = str(tmp_path / "two.db")
    ingest(path, sorted(p for p in (PROFILES / RMSNORM).iterdir() if "nsys" in p.name or "ncu" in p.name), run="a")
    ingest(path, _second_copy(tmp_path, PROFILES / RMSNORM), run="b")
    s = Store(path)
    try:
        assert len(rl.collect(s, "a", "b", by="range").arrows) == 3  # eager, triton, liger
        assert len(rl.collect(s, "a:eager", "b:triton").arrows) == 1
    finally:
        s.close()


def test_chain_joins_steps_in_order(store):
    r = rl.collect(store, RMSNORM, chain="auto")
    order = [p.path.split("/")[1] for p in r.points]
    assert order == ["eager", "triton", "liger"]  # capture order
    assert len(r.arrows) == 2 and all(a.kind == "range" for a, _ in r.arrows)
    r = rl.collect(store, RMSNORM, chain=["eager", "rmsnorm/triton/qwen7b-t4096"])
    assert [p.path.split("/")[1] for p in r.points] == ["eager", "triton"]
    fig = rp.build(store.path, RMSNORM, chain=["eager", "triton"])
    assert len([a for a in fig.layout.annotations if a.showarrow]) == 1
    # a plain sqlite3 connection works too (notebooks, other tools)
    conn = sqlite3.connect(store.path)
    try:
        assert rp.build(conn, RMSNORM, chain="auto").layout.meta["arrows"] == 2
    finally:
        conn.close()


def test_by_range_aggregates_time_weighted(store):
    kernels = rl.collect(store, f"{RMSNORM}:eager").points
    (rng,) = rl.collect(store, f"{RMSNORM}:eager", by="range").points
    assert rng.time_ns == pytest.approx(sum(p.time_ns for p in kernels))
    assert rng.bytes["dram"] == pytest.approx(sum(p.bytes["dram"] for p in kernels))
    assert rng.flop_rate == pytest.approx(sum(p.total_flops for p in kernels) / (rng.time_ns * 1e-9))
    assert len(kernels) == 8 and rng.calls == 3


def test_cli_roofline_writes_html(db, tmp_path):
    out = tmp_path / "x.html"
    r = CliRunner().invoke(cli, ["roofline", "--db", db, "--run", f"{RMSNORM}:eager",
                                 "--compare", f"{RMSNORM}:triton", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "1 arrows" in r.output and out.stat().st_size > 3_000_000
    r = CliRunner().invoke(cli, ["roofline", "--db", db, "--run", RMSNORM, "--chain", "auto", "-o", str(out)])
    assert r.exit_code == 0 and "2 arrows" in r.output, r.output


@pytest.mark.parametrize("args, code, text", [
    (["--run", "nope"], 5, "no run 'nope'"),
    (["--run", f"{RMSNORM}:nope"], 2, "no profiled kernels"),
    (["--run", RMSNORM, "--compare", "known"], 2, "share no NVTX range"),
    (["--run", RMSNORM, "--chain", "bogus"], 2, "chain step 'bogus'"),
    (["--run", RMSNORM, "--chain", "auto", "--compare", RMSNORM], 2, "choose one"),
])
def test_cli_errors_are_one_line(db, tmp_path, args, code, text):
    r = CliRunner().invoke(cli, ["roofline", "--db", db, *args, "-o", str(tmp_path / "e.html")])
    assert r.exit_code == code, r.output
    assert text in r.output and len(r.output.strip().splitlines()) == 1 and "Traceback" not in r.output
    assert not (tmp_path / "e.html").exists()


def test_run_without_counters_is_one_clear_line(tmp_path):
    path = str(tmp_path / "t.db")
    ingest(path, [DATA / "rmsnorm-cupti" / "rmsnorm-nsys.nsys.sqlite"], run="timeline")
    r = CliRunner().invoke(cli, ["roofline", "--db", path, "--run", "timeline", "-o", str(tmp_path / "e.html")])
    assert r.exit_code == 2
    assert r.output.strip() == ("profkit: run 'timeline' has no Nsight Compute counters (a timeline only): capture it "
                                "with `profkit capture --metrics roofline`, or ingest an .ncu-rep of the same workload "
                                "into it")
    assert not (tmp_path / "e.html").exists()


def test_write_runs_one_file_for_all_runs(store, tmp_path):
    rows = rp.write_runs(store, tmp_path / "roofline.html")
    assert {r["run"] for r in rows} == set(store.runs())
    drawn = [r for r in rows if r["points"]]
    # runs without counters get a note, not a plot (profiles/e2e-*: timeline only)
    assert {"e2e-decode", "ddp-2gpu-slow"} <= {r["run"] for r in rows if not r["points"]}
    assert all("no Nsight Compute counters" in r["why"] for r in rows if not r["points"])
    assert len(drawn) >= 5
    text = (tmp_path / "roofline.html").read_text()
    assert text.count("Plotly.newPlot") == len(drawn)
    assert not re.search(r"<script[^>]*\ssrc=", text)


def test_the_page_opens_on_the_story_with_the_rest_in_a_menu(store, tmp_path):
    """The main job's page shows one figure, the story's before -> after arrow; a menu holds every
    run with a roofline, the others laid out off screen until chosen."""
    rows = rp.write_runs(store, tmp_path / "roofline.html", story=(RMSNORM, "eager", "triton"))
    assert rows[0]["run"] == RMSNORM
    text = (tmp_path / "roofline.html").read_text()
    sections = re.findall(r'<section class="run( off)?" id="([^"]+)"><h2>([^<]+)</h2>', text)
    assert sections[0] == ("", RMSNORM, f"{RMSNORM}: eager -&gt; triton")
    assert all(off for off, _, _ in sections[1:]) and len(sections) == len([r for r in rows if r["points"]])
    options = re.findall(r'<option value="([^"]+)">', text)
    assert options == [run for _, run, _ in sections]
    first = text[text.index('<section class="run"'):text.index('<section class="run off"')]
    assert '"showarrow":true' in first.replace(" ", "")  # the story's arrow


def test_the_page_draws_each_figure_as_the_validated_figure(store):
    """write_runs serialises figure_dict without plotly's validation: every run's figure JSON
    on the page is that of the validated Figure (template expanded as a Figure does)."""
    import json

    from profkit.outputs.html import figure_html

    def plotted(fragment):
        m = re.search(r'Plotly\.newPlot\(\s*"[^"]+",\s*(\[.*?\]),\s*(\{.*?\}),\s*\{', fragment, re.S)
        return json.loads(m.group(1)), json.loads(m.group(2))

    drawn = 0
    for run in store.runs():
        try:
            r = rl.collect(store, run)
        except Exception:  # noqa: BLE001 - a run without counters has no roofline
            continue
        fast, checked = plotted(figure_html(rp.figure_dict(r), False)), plotted(figure_html(rp.figure(r), False))
        assert fast == checked and checked[1]["template"]["layout"]  # (the template as a Figure expands it)
        drawn += 1
    assert drawn >= 10
