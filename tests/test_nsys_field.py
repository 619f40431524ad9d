"""Nsight Systems exports of every age, and `.qdrep` (issue 15 item 4).

Real files: our own H100 exports (tests/data/field-h100: a normal capture, and three captures
without kernels: `-t nvtx`, a program that never used the GPU, one that only copied), and
public exports other people captured (../shared/field-reports, beside the clone; skipped
where absent): a `.qdrep`-era export whose TARGET_INFO_GPU has no `id` (RTX 3080), one with
only TARGET_INFO_CUDA_GPU (V100), an nsys 2023.1 export with EXPORT_META_DATA and TensorRT
range names holding '/' (4x RTX 3090), and the `.qdrep` of the first.
"""
import os
import shutil
import sqlite3
import sys
from collections import Counter

import pytest
from profdata import FIELD_EXTRA, FIELD_H100, FIELD_REPORTS, KNOWN_NSYS, KNOWN_NSYS_REP, ROOT
from profkit.parsers import nsys_qdrep, nsys_rep, nsys_sqlite

from profkit import parsers
from profkit.core.errors import BadInput, ToolMissing
from profkit.core.rows import KERNEL_FIELDS

F = {f: i for i, f in enumerate(KERNEL_FIELDS)}
WS = FIELD_H100 / "ws.nsys.sqlite"
# the public .qdrep exported by nsys 2025.3.1 on our H100 host (not committed: not our data)
KMEANS_FROM_QDREP = ROOT.parent / "field-capture" / "kmeans_from_qdrep.sqlite"


def field(*parts):
    path = FIELD_REPORTS.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} absent (public reports live in ../shared/field-reports beside the clone)")
    return path


# --- exports without kernels: one line that says why ---------------------------------------

@pytest.mark.parametrize("name,why", [
    # nsys profile -t nvtx: META_DATA_CAPTURE lists NvtxEvents only
    ("nvtx_only.nsys.sqlite", "no kernels (no CUPTI_ACTIVITY_KIND_KERNEL table): captured without the CUDA trace "
                              "(nsys traced NVTX); capture with `nsys profile -t cuda,nvtx`"),
    # -t cuda,nvtx of a program that never touched the GPU: no CUPTI table at all
    ("no_gpu.nsys.sqlite", "no kernels (no CUPTI_ACTIVITY_KIND_KERNEL table): the CUDA trace was on but the program "
                           "made no CUDA call: no kernel ran"),
    # -t cuda,nvtx of a program that copied to the GPU and launched nothing
    ("memcpy_only.nsys.sqlite", "no kernels (no CUPTI_ACTIVITY_KIND_KERNEL table): the CUDA trace was on and holds "
                                "8 CUDA API calls and 1 memory copy or set but no kernel launch: no kernel ran while "
                                "nsys traced"),
])
def test_export_without_kernels_says_why(name, why):
    with pytest.raises(BadInput) as e:
        nsys_sqlite.parse(FIELD_H100 / name)
    assert e.value.problem == why


@pytest.mark.parametrize("how", ["DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL", "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL"])
def test_launch_calls_without_kernel_records(copy, how):
    """The CUDA trace holds the launch calls but no kernel record: the GPU side was not collected."""
    f = copy(KNOWN_NSYS, "nokern.sqlite")
    with sqlite3.connect(f) as c:
        c.execute(how)
    with pytest.raises(BadInput) as e:
        nsys_sqlite.parse(f)
    assert "although the CUDA trace holds 166 kernel launch calls (154 cudaLaunchKernel_v7000, 8 cuLaunchKernelEx, " \
           "4 cuLaunchKernel): the GPU side of the trace (kernel records) was not collected" in e.value.problem
    assert ("is empty" in e.value.problem) == how.startswith("DELETE")


def test_old_export_without_cupti_tables(copy):
    """An export with no capture metadata (as before ~2021) and no CUPTI table: no CUDA trace."""
    f = copy(FIELD_H100 / "nvtx_only.nsys.sqlite", "old.sqlite")
    with sqlite3.connect(f) as c:
        c.execute("DROP TABLE META_DATA_CAPTURE")
    with pytest.raises(BadInput, match=r"no CUDA trace in this export \(no CUPTI tables\)"):
        nsys_sqlite.parse(f)


# --- exports of every age load, with their GPU and version ---------------------------------

def test_h100_export_facts():
    r = nsys_sqlite.parse(WS)
    assert (len(r.kernels), len(r.ranges)) == (52, 15)
    f = r.facts
    assert (f["gpu_name"], f["sm_count"], f["compute_capability"], f["chip"]) == ("NVIDIA H100 80GB HBM3", 132, "9.0", "GH100")
    assert f["nsys_export_version"] == "2025.3.2.0" and f["l2_bytes"] == 52428800


def test_metadata_and_gpu_tables_of_older_exports(copy):
    """The same export with the older names: EXPORT_META_DATA (nsys 2023.1), TARGET_INFO_GPU
    without `id` (the .qdrep era), versioned table names: the same rows and facts."""
    f = copy(WS, "old.sqlite")
    with sqlite3.connect(f) as c:
        c.execute("ALTER TABLE META_DATA_EXPORT RENAME TO EXPORT_META_DATA")
        c.execute("ALTER TABLE TARGET_INFO_GPU DROP COLUMN id")
        c.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_RUNTIME RENAME TO CUPTI_ACTIVITY_KIND_RUNTIME_V2")
    new, old = nsys_sqlite.parse(WS), nsys_sqlite.parse(f)
    assert old.kernels == new.kernels and old.ranges == new.ranges
    assert old.facts["nsys_export_version"] == "2025.3.2.0" and old.facts["gpu_name"] == "NVIDIA H100 80GB HBM3"


def test_versioned_gpu_table(copy):
    """Found by the fuzzer: TARGET_INFO_GPU under a versioned name (as nsys names other tables,
    _V2...) ended in KeyError where the GPU row is chosen."""
    f = copy(WS, "v2.sqlite")
    with sqlite3.connect(f) as c:
        c.execute("ALTER TABLE TARGET_INFO_GPU RENAME TO TARGET_INFO_GPU_V2")
    assert nsys_sqlite.parse(f).facts["gpu_name"] == nsys_sqlite.parse(WS).facts["gpu_name"] == "NVIDIA H100 80GB HBM3"


def test_qdrep_era_export_without_gpu_id():
    r = nsys_sqlite.parse(field("kmeans", "report2.sqlite"))
    assert len(r.kernels) == 51 and r.ranges == []
    f = r.facts
    # TARGET_INFO_GPU (vmId, deviceId, name, busLocation, isDiscrete) gives the name; the rest
    # comes from TARGET_INFO_CUDA_GPU in CUPTI's units (kHz, kB/s)
    assert (f["gpu_name"], f["sm_count"], f["compute_capability"]) == ("NVIDIA GeForce RTX 3080", 68, "8.6")
    assert f["sm_clock_max_hz"] == 1_740_000_000 and f["memory_bandwidth_bytes_per_s"] == 760_080_000_000
    assert f["memory_bytes"] == 10_495_524_864 and f["l2_bytes"] == 5 << 20
    assert "nsys_export_version" not in f  # this export has no metadata table
    assert all(k[F["api_name"]] == "cuLaunchKernel" for k in r.kernels)  # each kernel tied to its launch call


def test_same_capture_exported_then_and_now_agree():
    """The public export of 2021 and nsys 2025.3.1's export of the same .qdrep: same launches."""
    if not KMEANS_FROM_QDREP.exists():
        pytest.skip(f"{KMEANS_FROM_QDREP} absent")
    then, now = nsys_sqlite.parse(field("kmeans", "report2.sqlite")), nsys_sqlite.parse(KMEANS_FROM_QDREP)
    cols = [F[c] for c in ("kernel_name", "start_ns", "end_ns", "grid_x", "block_x", "api_name", "api_start_ns")]
    assert [[k[i] for i in cols] for k in then.kernels] == [[k[i] for i in cols] for k in now.kernels]
    assert now.facts["gpu_name"] == then.facts["gpu_name"] and now.facts["nsys_export_version"] == "2025.3.2.0"


def test_export_with_only_target_info_cuda_gpu():
    r = nsys_sqlite.parse(field("beast", "report2.sqlite"))
    assert len(r.kernels) == 2419
    f = r.facts
    assert (f["gpu_name"], f["sm_count"], f["compute_capability"]) == ("Tesla V100-PCIE-32GB", 80, "7.0")
    assert f["sm_clock_max_hz"] == 1_380_000_000
    # this export holds 32510 (MiB) as the memory size and 0 as the bandwidth: neither is taken
    assert "memory_bytes" not in f and "memory_bandwidth_bytes_per_s" not in f


def test_nsys_2023_export_tensorrt_names_and_the_gpu_that_ran():
    r = nsys_sqlite.parse(field("memfusion", "report1.sqlite"))
    assert (len(r.kernels), len(r.ranges)) == (36, 59)
    f = r.facts
    assert f["nsys_export_version"] == "2023.1.2.43"  # from EXPORT_META_DATA
    # four RTX 3090 listed 3, 2, 1, 0; every kernel ran on device 0
    assert f["gpu_name"] == "NVIDIA GeForce RTX 3090" and f["gpu_uuid"].startswith("de1f22e9")
    names = Counter(k[F["nvtx_range"]] for k in r.kernels)
    assert names["/conv1/Conv + /relu/Relu"] == 1 and sum(names.values()) == 36
    assert {r_[0] for r_ in r.ranges} == {"TensorRT"}


def test_gpu_of_the_kernels_not_the_first_listed():
    """wenscarl/cutlass_benchmark (public, nsys 2023.2.3, EXPORT_META_DATA): 2x A40 and 2x A100
    whose `id` (PCI order) differs from `cuDevice` (CUDA's order, the kernels' deviceId)."""
    f = FIELD_EXTRA / "wenscarl-cutlassbench" / "report1.sqlite"
    if not f.exists():
        pytest.skip(f"{f} absent")
    r = nsys_sqlite.parse(f)
    assert len(r.kernels) == 6 and {k[F["device"]] for k in r.kernels} == {0}
    # cuDevice 0 is id 1 (bus 81:00.0); id 0 is cuDevice 1, another A100
    assert (r.facts["gpu_name"], r.facts["gpu_uuid"]) == ("NVIDIA A100-PCIE-40GB", "b0fbccec-7593-9c0c-35de-cbfc04b9d09a")
    assert r.facts["nsys_export_version"] == "2023.2.3.0"


# --- .qdrep: an Nsight Systems report, exported through nsys like .nsys-rep ---------------

def test_qdrep_is_recognised(copy):
    q = copy(KNOWN_NSYS_REP, "old.qdrep")  # the same container as .nsys-rep
    assert parsers.detect(q) is nsys_qdrep
    assert parsers.detect(field("kmeans", "report2.qdrep")) is nsys_qdrep


def test_qdrep_without_nsys_gets_the_nsys_rep_line(monkeypatch, copy):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("NSYS", raising=False)
    q = copy(KNOWN_NSYS_REP, "report2.qdrep")
    r = copy(KNOWN_NSYS_REP, "report2.nsys-rep")
    with pytest.raises(ToolMissing) as eq:
        nsys_qdrep.parse(q)
    with pytest.raises(ToolMissing) as er:
        nsys_rep.parse(r)
    assert str(eq.value) == str(er.value).replace("nsys-rep", "qdrep")
    assert str(eq.value).startswith(f"{q}: an Nsight Systems report; reading it needs nsys, which is not installed")
    assert "nsys export --type sqlite report2.qdrep" in str(eq.value)
    assert "(written by nsys 2025.3.1.0)" in str(eq.value)  # the version to export it with elsewhere


def test_a_report_of_a_newer_nsys_names_both_versions_first(tmp_path, copy):
    """A report written by an nsys newer than the one installed: nsys's export fails inside its
    protobuf reader, naming no version. The refusal stays, its first words name the nsys that
    wrote the report (read from the report's closing record) and the one installed. Real
    reports: ours of nsys 2025.3.1 and a public .qdrep of nsys 2020.5.1; the installed nsys is
    a stand-in (none on this machine) that says it is 2024.6.2 and fails as nsys does."""
    exe = tmp_path / "bin" / "nsys"
    exe.parent.mkdir()
    exe.write_text(f"#!{sys.executable}\nimport sys\n"
                   "if sys.argv[1:] == ['--version']:\n"
                   "    print('NVIDIA Nsight Systems version 2024.6.2.225-246235244400v0')\n    sys.exit(0)\n"
                   "sys.stderr.write('[libprotobuf ERROR] Error parsing message of type ProfileSession\\n"
                   "Exportation error:\\n')\nsys.exit(1)\n")
    exe.chmod(0o755)
    rep = copy(KNOWN_NSYS_REP, "newer.nsys-rep")
    with pytest.raises(BadInput) as e:
        nsys_rep.export(rep, tmp_path / "out.sqlite", str(exe))
    assert e.value.problem.startswith("written by nsys 2025.3.1.0, installed nsys 2024.6.2.225-246235244400v0: "
                                      "nsys export failed: [libprotobuf ERROR]"), e.value.problem
    assert "\n" not in str(e.value)
    assert nsys_rep.writer_version(KNOWN_NSYS_REP) == "2025.3.1.0"
    if FIELD_REPORTS.is_dir():
        assert nsys_rep.writer_version(field("kmeans", "report2.qdrep")) == "2020.5.1.85-5ee086b"
    # a file without the closing record (a report cut short, another file under the name)
    cut = tmp_path / "cut.nsys-rep"
    cut.write_bytes(KNOWN_NSYS_REP.read_bytes()[: 60_000])
    assert nsys_rep.writer_version(cut) is None
    with pytest.raises(BadInput) as e:
        nsys_rep.export(cut, tmp_path / "out.sqlite", str(exe))
    assert e.value.problem.startswith("written by an nsys whose version it does not record, installed nsys 2024.6.2")


def _stand_in_nsys(tmp_path, body: str):
    """An executable standing in for nsys (none on this machine): the export step's contract
    is its command line, its exit status and the file it leaves at -o."""
    exe = tmp_path / "nsys"
    exe.write_text(f"#!{sys.executable}\nimport shutil, sys\nargs = sys.argv[1:]\nout = args[args.index('-o') + 1]\n"
                   + body)
    exe.chmod(0o755)
    return exe


def test_qdrep_through_the_shared_export_step(monkeypatch, copy, tmp_path):
    seen = tmp_path / "args.txt"
    exe = _stand_in_nsys(tmp_path, f"open({str(seen)!r}, 'w').write(' '.join(args))\nshutil.copy({str(WS)!r}, out)\n")
    monkeypatch.setenv("NSYS", str(exe))
    q = copy(KNOWN_NSYS_REP, "report2.qdrep")
    r = nsys_qdrep.parse(q)
    assert (r.format, r.path, r.source, len(r.kernels)) == ("nsys-qdrep", str(q), "nsys", 52)
    assert seen.read_text().startswith("export --type sqlite --force-overwrite true -o ")
    assert seen.read_text().endswith(str(q))


def test_qdrep_errors_name_the_report_not_the_temporary_export(monkeypatch, copy, tmp_path):
    exe = _stand_in_nsys(tmp_path, f"shutil.copy({str(FIELD_H100 / 'nvtx_only.nsys.sqlite')!r}, out)\n")
    monkeypatch.setenv("NSYS", str(exe))
    q = copy(KNOWN_NSYS_REP, "report2.qdrep")
    with pytest.raises(BadInput) as e:
        nsys_qdrep.parse(q)
    assert e.value.path == str(q) and "captured without the CUDA trace" in e.value.problem
    # nsys says why over several lines, the last often a bare "Exportation error:" (seen on the
    # H100 with reports of nsys 2025.5 and 2026.1): all of it, on one line, with this nsys's version
    exe = _stand_in_nsys(tmp_path, "sys.stderr.write('Error: the file is corrupt\\n\\nExportation error:\\n')\nsys.exit(1)\n")
    with pytest.raises(BadInput) as e:
        nsys_qdrep.parse(q)
    assert e.value.path == str(q) and e.value.problem.startswith("written by nsys 2025.3.1.0, installed nsys")
    assert "Error: the file is corrupt Exportation error:" in e.value.problem and "\n" not in e.value.problem
    assert not list(tmp_path.glob("**/report2.sqlite"))


@pytest.mark.skipif(not (os.environ.get("NSYS") or shutil.which("nsys")),
                    reason="nsys not installed here (the .qdrep then gets the one line tested above)")
def test_public_qdrep_through_real_nsys():
    r = nsys_qdrep.parse(field("kmeans", "report2.qdrep"))
    assert len(r.kernels) == 51 and r.facts["gpu_name"] == "NVIDIA GeForce RTX 3080"
