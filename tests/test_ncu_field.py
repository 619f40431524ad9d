"""Nsight Compute reports of every kind users have: .ncu-rep with and without NVTX from ncu
2022.3 on, every CSV page (raw, details, details with rule columns, `--metrics` output with the
program's stdout in front), ncu's rule results, labels on GPUs other than the one profkit was
built on. Real files only: our own H100 captures exported to every page (tests/data/field-h100,
tests/data/known) and public reports in ../shared/field-reports (skipped where absent)."""
import json

import pytest
from profdata import DATA, FIELD_EXTRA, FIELD_H100, FIELD_REPORTS, KNOWN_CSV_LEAN
from profkit.parsers import _ncu_csv, ncu_csv, ncu_csv_details, ncu_rep

from profkit import parsers
from profkit.analyses.classify import label_rows
from profkit.core.rows import KERNEL_FIELDS, ncu_kernel_row
from profkit.core.units import normalise
from profkit.model import gpus
from profkit.model import perf as model
from profkit.store.ingest import ingest
from profkit.store.store import Store

F = {f: i for i, f in enumerate(KERNEL_FIELDS)}
RMSNORM_REP = DATA / "known" / "rmsnorm-llama8b-t32768.ncu-rep.xz"  # the report details_page.csv was exported from
RMSNORM_DETAILS = KNOWN_CSV_LEAN.parent / "details_page.csv"  # ncu --import of RMSNORM_REP --csv --page details


def field(rel, where=FIELD_REPORTS):
    p = where / rel
    if not p.exists():
        pytest.skip(f"{p} not here (public field reports live beside the project)")
    return p


def extra(rel):
    return field(rel, FIELD_EXTRA)


@pytest.fixture(scope="module")
def rules_rep():
    return ncu_rep.parse(FIELD_H100 / "ws_rules.ncu-rep.xz")


@pytest.fixture(scope="module")
def nonvtx_rep():
    return ncu_rep.parse(FIELD_H100 / "ws_nonvtx.ncu-rep.xz")


def counters(rep):
    return {(s, m): (u, v) for s, m, u, v in rep.counters}


# --- .ncu-rep ---------------------------------------------------------------------------------

@pytest.mark.parametrize("rel,version_gpu,kernels,rules", [
    ("nvidia_training/CuVectorAddDrv.ncu-rep", "NVIDIA GeForce RTX 3070", 1, 2),       # ncu 2022.3
    ("lakshya/vec_add.ncu-rep", "NVIDIA GeForce GTX 1660 SUPER", 1, 9),                 # ncu 2024.1.1
])
def test_public_reports_without_nvtx_load(rel, version_gpu, kernels, rules):
    rep = ncu_rep.parse(field(rel))
    assert len(rep.kernels) == kernels and len(rep.rules) == rules
    assert rep.facts["gpu_name"] == version_gpu
    k = rep.kernels[0]
    assert k[F["nvtx_range"]] is None and k[F["nvtx_path"]] is None  # captured without --nvtx: no range, no crash
    assert k[F["grid_x"]] and k[F["block_x"]] == 256 and k[F["duration_ns"]] > 0
    assert len(rep.counters) > 250


def test_our_report_without_nvtx(nonvtx_rep):
    assert len(nonvtx_rep.kernels) == 40
    assert {k[F["nvtx_path"]] for k in nonvtx_rep.kernels} == {None}
    assert nonvtx_rep.facts["compute_capability"] == "9.0"


def test_launch_dims_from_the_totals_where_per_axis_metrics_are_missing():
    """A report without launch__grid_dim_* (older ncu on a V100): the totals in grid_x/block_x,
    y and z unknown. The values are a real report's with the per-axis metrics taken out."""
    rep = ncu_rep.parse(field("lakshya/vec_add.ncu-rep"))
    values = {m: (v, u) for s, m, u, v in rep.counters if s == 0 and "_dim_" not in m}
    row = ncu_kernel_row(0, "vec_add", "vec_add", None, None, values)
    assert (row[F["grid_x"]], row[F["grid_y"]], row[F["grid_z"]]) == (4096, None, None)
    assert (row[F["block_x"]], row[F["block_y"]], row[F["block_z"]]) == (256, None, None)
    # with the CSV's own Grid Size / Block Size columns the shape is known
    row = ncu_kernel_row(0, "vec_add", "vec_add", None, None, values, {"grid": (64, 64, 1), "block": (256, 1, 1)})
    assert (row[F["grid_x"]], row[F["grid_y"]], row[F["grid_z"]]) == (64, 64, 1)


# --- rule results ------------------------------------------------------------------------------

def test_rules_from_report_and_details_page_are_the_same(rules_rep):
    page = ncu_csv_details.parse(FIELD_H100 / "ws_rules.details.csv")
    assert len(rules_rep.rules) == len(page.rules) == 35
    a = sorted(r[:5] for r in rules_rep.rules)
    b = sorted(r[:5] for r in page.rules)
    assert a == b  # section, rule, severity and message (links resolved as ncu's CSV prints them)
    sa = sorted((r[0], r[2], r[5], r[6]) for r in rules_rep.rules)
    sb = sorted((r[0], r[2], r[5], r[6]) for r in page.rules)
    for x, y in zip(sa, sb):
        assert x[:3] == y[:3]
        assert (x[3] is None) == (y[3] is None) and (x[3] is None or abs(x[3] - y[3]) <= 0.005), (x, y)
    launch = [r for r in page.rules if r[0] == 1 and r[2] == "LaunchConfiguration"][0]
    assert launch[3] == "OPT" and launch[5] == "global" and launch[6] == pytest.approx(87.88)
    assert "Launch Statistics" in next(r[4] for r in rules_rep.rules if r[0] == 1 and r[2] == "SOLBottleneck")


def test_rule_links_resolved():
    assert ncu_rep.rule_text("Look at @section:LaunchStats:Launch Statistics@ for more.") == \
        "Look at Launch Statistics for more."
    assert ncu_rep.rule_text("See the @url:CUDA Best Practices Guide:https://docs.nvidia.com/x#occ@ for") == \
        "See the CUDA Best Practices Guide (https://docs.nvidia.com/x#occ) for"


def test_rules_view(tmp_path):
    db = str(tmp_path / "t.db")
    ingest(db, [FIELD_H100 / "ws_rules.details.csv"], run="rules")
    with Store(db) as s:
        rows = s.query("SELECT * FROM rules WHERE run = 'rules' ORDER BY kernel_id, rule")
        kids = {r["kernel_id"] for r in s.query("SELECT kernel_id FROM kernels WHERE run = 'rules'")}
    assert len(rows) == 35 and {r["kernel_id"] for r in rows} <= kids
    assert {r["severity"] for r in rows} == {"OPT", "INF"}
    assert max(r["estimated_speedup_pct"] or 0 for r in rows) <= 100


# --- CSV pages of the same report ---------------------------------------------------------------

def _kernels_match(a, b, durations_to_ns=50):
    assert len(a.kernels) == len(b.kernels)
    for x, y in zip(a.kernels, b.kernels):
        for col in ("short_name", "nvtx_range", "nvtx_path", "grid_x", "grid_y", "grid_z", "block_x", "block_y",
                    "block_z", "registers_per_thread", "stream", "device"):
            assert x[F[col]] == y[F[col]], (col, x[F[col]], y[F[col]])
        assert abs(x[F["duration_ns"]] - y[F["duration_ns"]]) <= durations_to_ns


def _values_match(rep, page, path):
    """Each counter a page holds equals the report's, to half a unit of the last digit the page
    printed (ncu prints display values: '23.65' us, '0.02' waves per SM)."""
    header, rows, _ = _ncu_csv.read(path)
    idx = {h: i for i, h in enumerate(header)}
    printed = {}
    if "Metric Name" in idx:
        ids = list(dict.fromkeys(r[0] for r in rows))
        for r in rows:
            if len(r) > idx["Metric Value"] and r[idx["Metric Name"]]:
                printed.setdefault((ids.index(r[0]), r[idx["Metric Name"]]), (r[idx["Metric Value"]], r[idx["Metric Unit"]]))
    else:
        units, data = rows[0], rows[1:]
        for seq, r in enumerate(data):
            for h, i in idx.items():
                printed[(seq, h)] = (r[i], units[i])
    cr, cp = counters(rep), counters(page)
    shared = [k for k in cp if k in cr]
    for key in shared:
        (u1, v1), (u2, v2) = cr[key], cp[key]
        assert u1 == u2, key
        cell, unit = printed.get(key, ("", ""))
        cell = cell.replace(",", "")
        if not cell:
            continue  # a display name mapped to this metric: checked through its own row below
        decimals = len(cell.split(".")[1]) if "." in cell else 0
        tol = normalise(0.5 * 10 ** -decimals, unit)[0]
        assert abs(v1 - v2) <= tol * 1.000001 + 1e-12 * abs(v1), (key, v1, v2, cell, unit)
    return shared


def test_details_page_with_nvtx_matches_its_report():
    """The H200 RMSNorm report and its details page, exported by ncu on the GPU host: the same
    27 launches, NVTX paths, launch facts, and every counter the page holds."""
    rep, page = ncu_rep.parse(RMSNORM_REP), ncu_csv_details.parse(RMSNORM_DETAILS)
    _kernels_match(rep, page)
    assert page.kernels[0][F["nvtx_path"]] == "rmsnorm/eager/llama8b-t32768"
    assert len(_values_match(rep, page, RMSNORM_DETAILS)) == len(page.counters) == 27 * 44


def test_raw_and_details_pages_match_their_report(nonvtx_rep):
    raw = ncu_csv.parse(FIELD_H100 / "ws_nonvtx.raw.csv")
    details = ncu_csv_details.parse(FIELD_H100 / "ws_nonvtx.details.csv")
    for page, path in ((raw, FIELD_H100 / "ws_nonvtx.raw.csv"), (details, FIELD_H100 / "ws_nonvtx.details.csv")):
        _kernels_match(nonvtx_rep, page)
        shared = _values_match(nonvtx_rep, page, path)
        assert len(shared) >= 34 * 40


def test_details_page_of_sections_maps_display_names(rules_rep):
    """Sections print display names; those meaning one metric profkit reads are stored under
    that metric too, with the same value the report holds for it."""
    path = FIELD_H100 / "ws_rules.details.csv"
    page = ncu_csv_details.parse(path)
    _kernels_match(rules_rep, page)
    c = counters(page)
    for name in ("gpu__time_duration.sum", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                 "sm__throughput.avg.pct_of_peak_sustained_elapsed", "sm__maximum_warps_per_active_cycle_pct",
                 "launch__occupancy_limit_registers", "launch__waves_per_multiprocessor"):
        assert (0, name) in c, name
    assert c[(0, "GPU Speed Of Light Throughput: Duration")] == c[(0, "gpu__time_duration.sum")]
    assert c[(0, "Memory Workload Analysis: Memory Throughput")][0] == "byte/s"  # a rate, not the SOL %
    assert len(_values_match(rules_rep, page, path)) > 8 * 20
    assert page.facts["from_display_names"]


def test_every_page_gives_the_same_labels(tmp_path, nonvtx_rep):
    """Labels from the report, its raw page and its details page are the same."""
    db = str(tmp_path / "t.db")
    got = {}
    for run, f in (("rep", FIELD_H100 / "ws_nonvtx.ncu-rep.xz"), ("raw", FIELD_H100 / "ws_nonvtx.raw.csv"),
                   ("details", FIELD_H100 / "ws_nonvtx.details.csv")):
        ingest(db, [f], run=run)
        with Store(db) as s:
            got[run] = [r["label"] for r in label_rows(s, run)]
    assert got["rep"] == got["raw"] == got["details"]
    assert len(set(got["rep"])) >= 3


def test_sections_page_labels_as_its_report(tmp_path):
    db = str(tmp_path / "t.db")
    got = {}
    for run, f in (("rep", FIELD_H100 / "ws_rules.ncu-rep.xz"), ("details", FIELD_H100 / "ws_rules.details.csv")):
        ingest(db, [f], run=run)
        with Store(db) as s:
            got[run] = [(r["label"], json.loads(r["evidence"]).get("ncu_agrees")) for r in label_rows(s, run)]
    assert got["rep"] == got["details"]


# --- --metrics output with the program's stdout in front ------------------------------------------

def test_metrics_output_behind_program_output():
    details = ncu_csv_details.parse(FIELD_H100 / "ws_metrics_stdout.csv")
    raw = ncu_csv.parse(FIELD_H100 / "ws_raw_stdout.csv")
    assert details.facts["preamble_lines"] == raw.facts["preamble_lines"] == 4
    assert len(details.kernels) == len(raw.kernels) == 6
    # two runs of one program: the same launches in the same order
    assert [k[F["short_name"]] for k in details.kernels] == [k[F["short_name"]] for k in raw.kernels]
    assert [k[F["grid_x"]] for k in details.kernels] == [k[F["grid_x"]] for k in raw.kernels]
    assert {m for _, m, _, _ in details.counters} >= {"gpu__time_duration.sum", "dram__bytes_read.sum",
                                                      "dram__bytes_write.sum", "launch__grid_size"}


def test_detection_looks_past_program_output():
    for f in ("ws_metrics_stdout.csv", "ws_nonvtx.details.csv", "ws_rules.details.csv"):
        assert parsers.detect(FIELD_H100 / f).FORMAT == "ncu-csv-details"
    for f in ("ws_raw_stdout.csv", "ws_nonvtx.raw.csv"):
        assert parsers.detect(FIELD_H100 / f).FORMAT == "ncu-csv"


# --- public CSVs -------------------------------------------------------------------------------------

def test_public_metrics_csv_with_prof_lines_in_front():
    rep = ncu_csv_details.parse(field("lashi/ncu_readWriteOffset_ca.csv"))
    assert len(rep.kernels) == 3 and rep.facts["preamble_lines"] == 2 and rep.facts["compute_capability"] == "8.9"
    c = counters(rep)
    assert c[(0, "dram__bytes_read.sum")] == ("byte", 134221952.0)
    assert c[(0, "gpu__time_duration.sum")] == ("ns", 203264.0)
    k = rep.kernels[0]
    assert (k[F["grid_x"]], k[F["block_x"]], k[F["stream"]]) == (32768, 512, 7)


def test_public_details_page_with_rule_columns():
    rep = ncu_csv_details.parse(field("codegandee/kernel_0005_ncu.details.csv"))
    assert len(rep.kernels) == 1 and len(rep.rules) == 4
    c = counters(rep)
    assert c[(0, "dram__bytes_read.sum")] == ("byte", 17.50e6)     # "Mbyte" on this row,
    assert c[(0, "dram__bytes_write.sum")] == ("byte", 0.0)        # "byte" on the next
    assert c[(0, "gpu__time_duration.sum")] == ("ns", pytest.approx(111810.0))  # "us"
    assert c[(0, "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed")] == ("%", 8.87)  # from "DRAM Throughput"
    assert c[(0, "sm__ops_path_tensor_src_bf16_dst_fp32.sum")] == ("", 12532580352.0)  # thousands separators
    assert (0, "flop_count_sp.sum") not in c  # n/a
    occ = next(r for r in rep.rules if r[2] == "TheoreticalOccupancy")
    assert occ[3] == "OPT" and occ[5] == "global" and occ[6] == 67.9


def test_public_command_line_metrics_page():
    rep = ncu_csv_details.parse(field("esmm/metrics.csv"))
    assert len(rep.kernels) == 9 and rep.facts["compute_capability"] == "8.6"
    k = rep.kernels[7]
    assert k[F["short_name"]] == "ampere_sgemm_128x64_nn"
    assert (k[F["grid_x"]], k[F["grid_y"]], k[F["grid_z"]]) == (8, 16, 5)
    c = {m: v for s, m, _, v in rep.counters if s == 7}
    assert model.work(c) == {"fp32": 2 * 1094713344 + 5242880}  # sm__sass_* spellings count


# --- labels on any GPU ------------------------------------------------------------------------------

def _labels(tmp_path, files, run, gpu=None):
    db = str(tmp_path / f"{run}.db")
    ingest(db, files, run=run)
    with Store(db) as s:
        if gpu:
            s.set_run_meta(run, {"gpu_name": gpu})
        return [(r["label"], r["reason"], json.loads(r["evidence"])) for r in label_rows(s, run)]


def test_details_csv_of_sections_labels_and_shows_ncus_rules(tmp_path):
    (label, reason, ev), = _labels(tmp_path, [field("codegandee/kernel_0005_ncu.details.csv")], "cg")
    assert label == "occupancy" and "registers" in reason
    assert {r["rule"] for r in ev["ncu_rules"]} == {"SOLBottleneck", "SOLFPRoofline", "IssueSlotUtilization",
                                                    "TheoreticalOccupancy"}
    assert ev["ncu_says"] == ["latency", "occupancy"] and ev["ncu_agrees"] is True
    assert "tensor_pct" in ev["missing"]


def test_three_metric_csv_labels_from_a_named_gpus_datasheet(tmp_path):
    rows = _labels(tmp_path, [field("esmm/metrics.csv")], "esmm", gpu="NVIDIA A10G")
    assert [lab for lab, _, _ in rows] == ["latency"] * 9
    ev = rows[-1][2]
    assert ev["values"]["dram_pct_from"] == "dram_bytes / duration / DRAM peak"
    assert ev["peaks"]["dram"].startswith("known GPU table: NVIDIA A10G") and "baseten" in ev["peaks"]["dram"]
    assert "lower bound" in ev["values"]["sm_pct_from"]
    assert set(ev["missing"]) == {"tensor_pct", "theoretical_occupancy"}
    assert ev["values"]["dram_pct"] == pytest.approx(100 * 35125888 / (600e9 * 148896e-9))


def test_csv_naming_only_a_compute_capability_weighs_every_known_gpu_of_it(tmp_path):
    rows = _labels(tmp_path, [field("lashi/ncu_readWriteOffset_ca.csv")], "lashi")
    label, reason, ev = rows[0]
    assert label == "dram" and "NVIDIA GeForce RTX 4090" in reason and "NVIDIA L40S" in reason
    assert ev["gpu"]["ruled_out"] == ["NVIDIA L4 (DRAM at 220 % of its peak)"]  # 660 GB/s read: not a 300 GB/s L4
    assert "lower bound" in ev["values"]["dram_pct_from"]  # only read bytes collected
    label, reason, ev = rows[2]
    assert label == "unknown" and "depends on which GPU" in reason and "--gpu" in reason


def test_report_peaks_on_another_gpu(tmp_path):
    """The GTX 1660 SUPER report's own peaks: nothing of the H100/H200 is assumed."""
    rep = ncu_rep.parse(field("lakshya/vec_add.ncu-rep"))
    c = {m: v for s, m, _, v in rep.counters if s == 0}
    r = model.rates(c)
    assert r["dram"][0] == pytest.approx(48 * c["dram__cycles_elapsed.avg.per_second"])  # 324 GB/s at its clock
    assert r["fp32"][0] == pytest.approx(1408 * 2 * c["sm__cycles_elapsed.avg.per_second"])  # 22 SMs x 64 lanes
    (label, reason, ev), = _labels(tmp_path, [field("lakshya/vec_add.ncu-rep")], "lak")
    assert label == "dram" and ev["ncu_agrees"] is True


def test_device_attributes_give_peaks_where_the_report_has_no_peak_metric():
    rep = ncu_rep.parse(field("nvidia_training/CuVectorAddDrv.ncu-rep"))
    c = {m: v for s, m, _, v in rep.counters if s == 0}
    r = model.rates(c)
    assert r["dram"][0] == pytest.approx(448.064e9) and r["dram"][1].startswith("device attributes")  # RTX 3070
    assert r["fp32"][0] == pytest.approx(46 * 128 * 2 * c["gpc__cycles_elapsed.avg.per_second"])


def test_public_report_where_ncu_and_profkit_disagree(tmp_path):
    (label, reason, ev), = _labels(tmp_path, [field("nvidia_training/CuVectorAddDrv.ncu-rep")], "nt")
    assert label == "latency" and ev["ncu_says"] == ["launch_overhead"] and ev["ncu_agrees"] is False


def test_known_gpu_table():
    assert gpus.by_name("NVIDIA GeForce RTX 3070").ceilings["dram"] == 448e9
    assert gpus.by_name("rtx 4090").name == "NVIDIA GeForce RTX 4090"
    assert all(g.source for g in gpus.KNOWN)
    rows, how = gpus.candidates(None, "8.6")
    assert {g.name for g in rows} >= {"NVIDIA A10G", "NVIDIA GeForce RTX 3070"} and "8.6" in how
    # the table is only for reports without peaks: a report with its own keeps them
    c = {m: v for s, m, _, v in ncu_rep.parse(field("lakshya/vec_add.ncu-rep")).counters if s == 0}
    assert not any(h.startswith(model.FROM_TABLE) for _, h in model.rates(c, gpus.by_name("NVIDIA H100 80GB HBM3")).values())


# --- one report, every page (tests/data/ncu-pages: H200, NVTX, sections with rules, lean metrics) ---

PAGES = FIELD_H100.parent / "ncu-pages"


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    import lzma
    d = tmp_path_factory.mktemp("pages")
    out = {"rep": PAGES / "pages.ncu-rep.xz", "raw": PAGES / "pages.raw.csv"}
    for name in ("details", "details_base", "details_all"):
        out[name] = d / f"pages.{name}.csv"
        out[name].write_bytes(lzma.decompress((PAGES / f"pages.{name}.csv.xz").read_bytes()))
    return out


def test_every_page_of_one_report_loads_the_same_launches_and_values(pages):
    rep = ncu_rep.parse(pages["rep"])
    assert len(rep.kernels) == 14 and len(rep.rules) == 58
    assert rep.kernels[0][F["nvtx_path"]] == "session/init/x"  # start/end range first, then push/pop
    assert rep.kernels[4][F["nvtx_path"]] == "session/step 0/stream"
    for name in ("raw", "details", "details_base", "details_all"):
        page = parsers.detect(pages[name]).parse(pages[name])
        _kernels_match(rep, page)
        shared = _values_match(rep, page, pages[name])
        assert len(shared) >= (11172 if name == "raw" else 14 * 45), name
        if name != "raw":
            assert sorted(r[:5] for r in page.rules) == sorted(r[:5] for r in rep.rules), name


def test_base_units_page_holds_the_report_values_exactly(pages):
    rep, base = ncu_rep.parse(pages["rep"]), ncu_csv_details.parse(pages["details_base"])
    cr, cb = counters(rep), counters(base)
    assert cb[(4, "gpu__time_duration.sum")] == cr[(4, "gpu__time_duration.sum")]  # nsecond, no rounding
    assert cb[(4, "dram__bytes_read.sum")] == cr[(4, "dram__bytes_read.sum")]      # byte


def test_details_all_keeps_body_items_apart(pages):
    page = ncu_csv_details.parse(pages["details_all"])
    names = {m for _, m, _, _ in page.counters}
    assert any(m.startswith("GPU Speed Of Light Throughput: GPU Throughput: ") for m in names)
    assert "GPU Speed Of Light Throughput: Duration" in names


def test_every_page_of_one_report_gets_the_same_labels(tmp_path, pages):
    db = str(tmp_path / "t.db")
    got = {}
    for run, f in pages.items():
        ingest(db, [f], run=run)
        with Store(db) as s:
            got[run] = [(r["nvtx_range"], r["label"]) for r in label_rows(s, run)]
    assert all(v == got["rep"] for v in got.values()), got
    by = dict(got["rep"])
    assert (by["stream"], by["compute"], by["tiny"], by["gemm"]) == ("dram", "compute", "launch_overhead", "tensor_core")


def test_program_output_in_front_of_a_sections_page():
    page = ncu_csv_details.parse(PAGES / "pages_stdout.details.csv")
    rep = ncu_rep.parse(PAGES / "pages.ncu-rep.xz")  # another run of the same program
    assert page.facts["preamble_lines"] == 5 and len(page.rules) == 14
    assert [k[F["nvtx_path"]] for k in page.kernels] == [k[F["nvtx_path"]] for k in rep.kernels]


def test_a_page_without_flop_counters_has_no_intensity(tmp_path):
    """No FLOP counter collected is not zero FLOPs: the compute-bound FMA loop stays compute,
    the one-block kernel is launch overhead by the SM count of every known GPU of its CC."""
    rows = _labels(tmp_path, [PAGES / "pages_stdout.details.csv"], "stdout")
    by = {}
    for label, _, ev in rows:
        by.setdefault(label, []).append(ev)
    labels = [lab for lab, _, _ in rows]
    assert labels[5] == "compute" and labels[6] == "launch_overhead"
    ev = rows[5][2]
    assert "arithmetic_intensity" not in ev["values"] and "arithmetic_intensity" in ev["missing"]
    assert rows[6][2]["values"]["sm_count_from"] == "known GPU table"


# --- more public reports: ncu 2020.3 to 2025.2 ------------------------------------------------------

@pytest.mark.parametrize("rel,gpu,kernels,rules", [
    ("speedy-scan/profile.ncu-rep", "NVIDIA GeForce RTX 3070", 1, 5),       # ncu 2020.3.1, the oldest seen
    ("indexspaces/profile.ncu-rep", "NVIDIA A40", 2, 18),                   # 2022.1.1
    ("josiahls-mojo/profile.ncu-rep", "NVIDIA GeForce GTX 1660 Ti", 4, 12),  # 2022.4.0
    ("armleth-mlp/report.ncu-rep", "Tesla T4", 1, 9),                       # 2024.2.1
])
def test_public_reports_of_many_versions(rel, gpu, kernels, rules):
    rep = ncu_rep.parse(extra(rel))
    assert (rep.facts["gpu_name"], len(rep.kernels), len(rep.rules)) == (gpu, kernels, rules)
    assert all(k[F["duration_ns"]] and k[F["grid_x"]] for k in rep.kernels)


def test_public_report_with_nvtx():
    rep = ncu_rep.parse(extra("nvidia-training/manual_nvtx.ncu-rep"))
    assert [k[F["nvtx_path"]] for k in rep.kernels] == ["run_test/init_data", "run_test/daxpy", "run_test/check_results"]


def test_flop_counts_from_the_roofline_charts_rates(data_set):
    """ncu's default and full sets keep SASS counts as rates per elapsed cycle; x elapsed cycles
    they equal the counts the lean set collects, launch for launch (H200, same kernels)."""
    full = ncu_rep.parse(data_set("lean-parity") / "swiglu-full.ncu-rep.xz")
    lean = ncu_rep.parse(data_set("lean-parity") / "swiglu-lean.ncu-rep.xz")
    cf, cl = {}, {}
    for rep, out in ((full, cf), (lean, cl)):
        for s_, m, _, v in rep.counters:
            out.setdefault(s_, {})[m] = v
    assert "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum" not in cf[0]
    for seq in cf:
        assert model.work(cf[seq]) == pytest.approx(model.work(cl[seq]), rel=1e-9)
    assert model.work(cf[0])["fp32"] > 1e9


def test_full_set_report_of_another_gpu_labels_against_its_own_fp32_ridge(tmp_path):
    rows = _labels(tmp_path, [extra("cs599k/2025-04-21_v1.ncu-rep")], "cs")  # H100 PCIe, ncu 2025.1
    label, reason, ev = rows[0]
    assert label == "dram" and ev["ridge_of"] == "fp32" and 10 < ev["ridge_flop_per_byte"] < 25
    assert ev["values"]["arithmetic_intensity"] == pytest.approx(1.21, abs=0.01)
    assert ev["ncu_says"] == ["dram"] and ev["ncu_agrees"] is True


def test_public_report_where_ncu_says_small_grid_and_profkit_occupancy(tmp_path):
    rows = _labels(tmp_path, [extra("pj-cutlass/report.ncu-rep")], "pj")
    assert [(lab, ev["ncu_says"], ev["ncu_agrees"]) for lab, _, ev in rows] == \
        [("occupancy", ["launch_overhead"], False)] * 3
    assert [k[F["nvtx_range"]] for k in ncu_rep.parse(extra("pj-cutlass/report.ncu-rep")).kernels] == \
        ["Non-fused-GEMM", "Non-fused-GEMM", "Fused-GEMM"]


def test_a_report_lacking_what_labels_need_says_what(tmp_path):
    rows = _labels(tmp_path, [extra("gpu-demo-5060ti/ncu_report.ncu-rep")], "b")  # RTX 5060 Ti, few sections
    for label, reason, ev in rows:
        assert label == "unknown" and "missing" in reason
        assert {"dram_pct", "sm_pct"} <= set(ev["missing"])


def test_ncu_error_output_saved_as_csv_is_one_line(tmp_path):
    from profkit.core.errors import BadInput
    with pytest.raises(BadInput, match="ncu's own output, no CSV in it.*did not match any section"):
        parsers.detect(extra("codegandee/raw.csv")).parse(extra("codegandee/raw.csv"))


# --- through the command line ---------------------------------------------------------------------

def _cli(*args):
    from click.testing import CliRunner

    from profkit.cli import cli
    return CliRunner().invoke(cli, [str(a) for a in args], env={"COLUMNS": "300"})


def test_cli_names_the_gpu_of_a_csv_that_does_not(tmp_path):
    db, f = tmp_path / "t.db", field("esmm/metrics.csv")
    r = _cli("ingest", "--db", db, "--run", "esmm", f)
    assert r.exit_code == 0 and "ncu-csv-details -> run esmm: 9 kernels" in r.output, r.output
    r = _cli("classify", "--db", db, "--json")
    labels = [x["label"] for x in json.loads(r.output)]
    assert labels.count("unknown") == 2  # a CC 8.6 GPU: the label depends on which one
    r = _cli("ingest", "--db", db, "--run", "esmm", "--gpu", "NVIDIA A10G", f)  # already loaded: names the GPU
    assert r.exit_code == 0 and "already loaded" in r.output, r.output
    r = _cli("classify", "--db", db, "--json")
    assert [x["label"] for x in json.loads(r.output)] == ["latency"] * 9
    r = _cli("ingest", "--db", db, "--run", "other", "--gpu", "Voodoo 5", FIELD_H100 / "ws_rules.details.csv")
    assert "not in profkit's known-GPU table" in r.output


def test_cli_classify_shows_ncus_rules(tmp_path):
    db = tmp_path / "t.db"
    r = _cli("ingest", "--db", db, FIELD_H100 / "ws_rules.details.csv")
    assert r.exit_code == 0 and "35 ncu rule results" in r.output, r.output
    r = _cli("classify", "--db", db)
    assert r.exit_code == 0 and "ncu's rules" in r.output and "agree 2/2: launch_overhead" in r.output, r.output
    r = _cli("sql", "--db", db, "--json", "SELECT rule, count(*) AS n FROM rules GROUP BY rule ORDER BY rule")
    assert {x["rule"]: x["n"] for x in json.loads(r.output)}["SOLBottleneck"] == 8
