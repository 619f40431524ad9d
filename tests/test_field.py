"""The field conformance survey (benchmarks/field.py, issue 15 item 9) on real reports: our
committed H100 captures always, the public reports in ../shared/field-reports where present.

Every file either loads (kernels, counters, a label with its evidence for every kernel) or
gets one line; the rows of the Nsight Systems files are checked value by value."""
import importlib.util
import json

import pytest
from profdata import FIELD_H100, FIELD_REPORTS, ROOT

OUTCOMES = {"loaded", "no kernels", "needs tool", "refused", "not a report", "crash"}


@pytest.fixture(scope="module")
def field():
    spec = importlib.util.spec_from_file_location("bench_field", ROOT / "benchmarks" / "field.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _check_every_row(rows):
    for r in rows:
        assert r["outcome"] in OUTCOMES, r
        if r["outcome"] == "loaded":
            assert r["kernels"] > 0 and r["GPU"] and r["tool version"], r
            # a label for every kernel, each with the rule that fired and what it saw
            assert sum(int(x.rsplit(" ", 1)[1]) for x in r["labels"].split(", ")) == r["kernels"], r
            assert len(r["evidence"]) == r["kernels"] and all("rule" in e and "values" in e for e in r["evidence"])
        else:
            assert r["reason"] and "\n" not in r["reason"] and not r["kernels"], r


def test_committed_h100_captures(field, tmp_path):
    rows, folders = field.survey([FIELD_H100])
    _check_every_row(rows)
    by = {r["file"]: r for r in rows}
    assert set(by) == {f"tests/data/field-h100/{p.name}" for p in FIELD_H100.iterdir()}
    ws = by["tests/data/field-h100/ws.nsys.sqlite"]
    assert {k: ws[k] for k in ("outcome", "format", "tool version", "GPU", "kernels", "ranges", "counters")} == {
        "outcome": "loaded", "format": "nsys-sqlite", "tool version": "nsys export 2025.3.2.0",
        "GPU": "NVIDIA H100 80GB HBM3", "kernels": 52, "ranges": 15, "counters": 0}
    # timeline only: short kernels behind longer launch calls are launch overhead; the ATen
    # elementwise and copy kernels dram from their family (as ws_nonvtx.ncu-rep's counters say);
    # the one left is a user kernel the family says nothing of
    assert ws["labels"] == "launch_overhead 27, dram 24, unknown 1"
    lo = [e for e in ws["evidence"] if e["rule"] == "launch_overhead"]
    assert all(e["timeline"]["duration_ns"] < 10_000 for e in lo)
    for name, words in (("nvtx_only", "captured without the CUDA trace"), ("no_gpu", "made no CUDA call"),
                        ("memcpy_only", "but no kernel launch")):
        r = by[f"tests/data/field-h100/{name}.nsys.sqlite"]
        assert r["outcome"] == "no kernels" and words in r["reason"], r
    assert by["tests/data/field-h100/README.md"]["outcome"] == "not a report"
    # the folder as `profkit ingest` takes it: refused whole, naming the file (several captures in one folder)
    assert folders == [{"folder": "tests/data/field-h100", "runs": None, "taken": None, "skipped": None,
                        "reason": by["tests/data/field-h100/memcpy_only.nsys.sqlite"]["file"] + ": "
                        + by["tests/data/field-h100/memcpy_only.nsys.sqlite"]["reason"]}]
    md = field.markdown(rows, folders, [FIELD_H100], {"date": "D", "profkit_revision": "R", "python": "P", "host": "H",
                                                      "nsys": "not installed"})
    table = [x for x in md.splitlines() if x.startswith("| tests/data/field-h100/")]
    assert len(table) == len(rows)
    assert "| tests/data/field-h100/ws.nsys.sqlite | loaded | nsys-sqlite | nsys export 2025.3.2.0 | NVIDIA H100 80GB HBM3 | 52 " \
           "| 15 | 0 | launch_overhead 27, dram 24, unknown 1 |  |" in table


def test_public_field_reports(field):
    if not FIELD_REPORTS.is_dir():
        pytest.skip(f"{FIELD_REPORTS} absent (public reports other people captured, beside the clone)")
    rows, folders = field.survey([FIELD_REPORTS])
    _check_every_row(rows)
    by = {r["file"]: r for r in rows}
    want = {  # file: (tool version, GPU, kernels, ranges)
        "field-reports/kmeans/report2.sqlite": ("nsys (not recorded)", "NVIDIA GeForce RTX 3080", 51, 0),
        "field-reports/beast/report2.sqlite": ("nsys (not recorded)", "Tesla V100-PCIE-32GB", 2419, 0),
        "field-reports/memfusion/report1.sqlite": ("nsys export 2023.1.2.43", "NVIDIA GeForce RTX 3090", 36, 59),
    }
    for name, (version, gpu, kernels, ranges) in want.items():
        r = by[name]
        assert (r["outcome"], r["tool version"], r["GPU"], r["kernels"], r["ranges"]) == (
            "loaded", version, gpu, kernels, ranges), r
    # every kernel of kmeans is long (>= 166 us) and a user kernel: no launch overhead, no family
    assert by["field-reports/kmeans/report2.sqlite"]["labels"] == "unknown 51"
    # memfusion's cuDNN sm80 convolutions on the RTX 3090: tensor_core from the family where long
    # (one of 43 us latency); cuTENSOR permutations and TensorRT pooling stay unknown
    assert by["field-reports/memfusion/report1.sqlite"]["labels"] == "tensor_core 19, launch_overhead 13, unknown 3, latency 1"
    q = by["field-reports/kmeans/report2.qdrep"]
    if q["outcome"] == "needs tool":  # no nsys here: the .nsys-rep line
        assert "an Nsight Systems report; reading it needs nsys, which is not installed" in q["reason"]
    else:
        assert (q["outcome"], q["kernels"], q["GPU"]) == ("loaded", 51, "NVIDIA GeForce RTX 3080"), q
    # the whole folder (issue 15's "done when"): every report loads with its kernels and counters,
    # or (the .qdrep without nsys) gets its one line; nothing crashes
    loaded = {n: (r["kernels"], r["counters"] > 0) for n, r in by.items() if r["outcome"] == "loaded"}
    assert {n: k for n, k in loaded.items() if not n.endswith(".qdrep")} == {
        "field-reports/beast/report2.sqlite": (2419, False), "field-reports/kmeans/report2.sqlite": (51, False),
        "field-reports/memfusion/report1.sqlite": (36, False),
        "field-reports/codegandee/kernel_0005_ncu.details.csv": (1, True), "field-reports/esmm/metrics.csv": (9, True),
        "field-reports/lakshya/vec_add.ncu-rep": (1, True), "field-reports/lashi/ncu_readWriteOffset_ca.csv": (3, True),
        "field-reports/nvidia_training/CuVectorAddDrv.ncu-rep": (1, True)}
    assert {n for n, r in by.items() if r["outcome"] not in ("loaded", "needs tool")} == {"field-reports/SOURCES.md"}
    by_folder = {f["folder"]: f for f in folders}
    # `profkit ingest ../shared/field-reports`: one run per capture folder
    assert by_folder["field-reports"]["runs"] == "beast, codegandee, esmm, kmeans, lakshya, lashi, memfusion, nvidia_training"
    assert by_folder["field-reports/kmeans"]["taken"] == "report2.sqlite (51 kernels)"
    assert by_folder["field-reports/kmeans"]["skipped"] == \
        "report2.qdrep: one timeline report per process: report2.sqlite is taken"
    assert json.dumps(rows, default=str)  # the table's rows are plain data


def test_extra_public_nsys_files(field, tmp_path):
    """Every Nsight Systems file in ../field-extra (public, 2020.3 to 2026.1): loads with its GPU
    and version, or says in one line why not (no kernel in the file; nsys needed)."""
    from profdata import FIELD_EXTRA

    if not FIELD_EXTRA.is_dir():
        pytest.skip(f"{FIELD_EXTRA} absent")
    files = sorted(p for p in FIELD_EXTRA.rglob("*") if p.suffix in (".sqlite", ".qdrep", ".nsys-rep"))
    rows = [field.check_file(p, p.relative_to(FIELD_EXTRA).as_posix(), tmp_path) for p in files]
    _check_every_row(rows)
    by = {r["file"]: r for r in rows}
    assert {r["outcome"] for r in rows} <= {"loaded", "no kernels", "needs tool"}
    for r in rows:
        if r["file"].endswith((".qdrep", ".nsys-rep")) and r["outcome"] == "needs tool":
            assert "an Nsight Systems report; reading it needs nsys" in r["reason"]
    got = {n: (by[n]["kernels"], by[n]["GPU"], by[n]["tool version"]) for n in (
        "hw5-helper/report1.sqlite", "sc23-openmp/report3.sqlite", "p4arth/report1.sqlite",
        "fuser/f6ab0c34_report2.sqlite") if n in by}
    assert got == {"hw5-helper/report1.sqlite": (505, "NVIDIA A100-SXM4-40GB", "nsys export 2022.1.3.3"),
                   "sc23-openmp/report3.sqlite": (50, "Tesla T4", "nsys export 2023.3.1.92"),
                   "p4arth/report1.sqlite": (1, "NVIDIA GeForce RTX 3060", "nsys export 2025.5.2.266"),
                   "fuser/f6ab0c34_report2.sqlite": (19, "NVIDIA H200", "nsys export 2024.6.2.25")}
    # exports without a kernel table (CUDA-Q on 4x H100; a Rust program on an RTX 5080, nsys 2026.1)
    assert by["tutorial-vqe/report1.sqlite"]["reason"].endswith("holds 11 CUDA API calls but no kernel launch: "
                                                                 "no kernel ran while nsys traced")
    assert "holds 2789 CUDA API calls and 540 memory copies or sets" in by["unschlagbar-nn/prof.sqlite"]["reason"]
