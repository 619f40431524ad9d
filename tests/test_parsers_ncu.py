"""ncu reports from the same H200 capture: .ncu-rep (through ncu_report) and its raw CSV."""
import csv
import os

import pytest
from profdata import KNOWN_CSV_LEAN, KNOWN_NCU, KNOWN_NCU_LEAN
from profkit.parsers import ncu_csv, ncu_rep

from profkit.core.errors import BadInput
from profkit.core.rows import KERNEL_FIELDS
from profkit.core.units import normalise

F = {f: i for i, f in enumerate(KERNEL_FIELDS)}


@pytest.fixture(scope="module")
def lean_rep():
    return ncu_rep.parse(KNOWN_NCU_LEAN)


@pytest.fixture(scope="module")
def lean_csv():
    return ncu_csv.parse(KNOWN_CSV_LEAN)


def counters(rep):
    return {(s, m): (u, v) for s, m, u, v in rep.counters}


def test_rep_kernels_and_ranges(lean_rep):
    assert len(lean_rep.kernels) == 133
    paths = [k[F["nvtx_path"]] for k in lean_rep.kernels]
    assert paths.count("known/tiny_launches/burst") == 100
    assert paths.count("gemm_window/known/gemm_cublas/bf16_4096") == 3
    assert lean_rep.facts["gpu_name"] == "NVIDIA H200"


def test_one_counter_normalised(lean_rep):
    c = counters(lean_rep)
    tri = next(k[0] for k in lean_rep.kernels if k[F["short_name"]] == "_rmsnorm_fwd")
    assert c[(tri, "dram__bytes.sum")] == ("byte", 247369472.0)
    assert c[(tri, "gpu__time_duration.sum")] == ("ns", 71936.0)
    assert c[(tri, "launch__grid_size")] == ("", 16384.0)
    u, v = c[(tri, "sm__cycles_elapsed.avg.per_second")]
    assert u == "Hz" and v == pytest.approx(1.948040514e9, rel=1e-9)


def test_occupancy_limiter_is_shared_memory(lean_rep):
    c = counters(lean_rep)
    occ = next(k[0] for k in lean_rep.kernels if k[F["short_name"]] == "occupancy_limited_copy")
    assert c[(occ, "launch__occupancy_limit_shared_mem")][1] == 1.0
    assert c[(occ, "sm__maximum_warps_per_active_cycle_pct")] == ("%", 3.125)


def test_csv_gives_the_same_rows_as_the_report(lean_rep, lean_csv):
    """The raw CSV of known_lean.ncu-rep, exported by ncu on the GPU host, against the report."""
    assert len(lean_csv.kernels) == len(lean_rep.kernels)
    for a, b in zip(lean_rep.kernels, lean_csv.kernels):
        assert (a[F["short_name"]], a[F["nvtx_range"]], a[F["nvtx_path"]]) == \
               (b[F["short_name"]], b[F["nvtx_range"]], b[F["nvtx_path"]])
        # the CSV prints ncu's display name (templates abbreviated), the report the full demangled one
        assert a[F["duration_ns"]] == b[F["duration_ns"]] and a[F["grid_x"]] == b[F["grid_x"]]
    cr, cc = counters(lean_rep), counters(lean_csv)
    assert set(cr) == set(cc)
    # the CSV prints rounded display values (6 decimals in Ghz or Mbyte, 2 for waves per SM,
    # none for small byte counts): allow half a unit of the last printed digit
    rows = list(csv.reader(open(KNOWN_CSV_LEAN)))
    col = {h: i for i, h in enumerate(rows[0])}
    for (seq, metric), (u, v) in cr.items():
        u2, v2 = cc[(seq, metric)]
        assert u == u2, metric
        cell = rows[seq + 2][col[metric]].replace(",", "")
        decimals = len(cell.split(".")[1]) if "." in cell else 0
        tol = normalise(0.5 * 10 ** -decimals, rows[1][col[metric]])[0]
        assert abs(v - v2) <= tol * 1.000001, (metric, v, v2, cell)


def test_roofline_report_has_tensor_ops_for_the_gemm():
    rep = ncu_rep.parse(KNOWN_NCU)
    c = counters(rep)
    gemm = [k[0] for k in rep.kernels if k[F["nvtx_range"]] == "bf16_4096"]
    assert len(gemm) == 3
    # a cuBLAS bf16 GEMM executes exactly 2*M*N*K tensor FLOPs
    assert c[(gemm[0], "sm__ops_path_tensor_src_bf16_dst_fp32.sum")][1] == 2 * 4096**3


def test_reader_found_in_an_nsight_compute_install_without_the_package(tmp_path):
    # a GPU machine with Nsight Compute but without the pip package (seen on the H100): the
    # module ncu ships in extras/python is found through $NCU and reads the report
    import os
    import subprocess
    import sys
    import sysconfig
    from pathlib import Path

    real = Path(__import__("ncu_report").__file__).parent
    install = tmp_path / "nsight-compute" / "2099.1.0"
    (install / "extras" / "python").mkdir(parents=True)
    (install / "extras" / "python" / "ncu_report").symlink_to(real, target_is_directory=True)
    (install / "ncu").write_text("#!/bin/sh\nexit 0\n")
    (install / "ncu").chmod(0o755)
    site = tmp_path / "site"  # the environment's packages, less ncu_report
    site.mkdir()
    for p in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not p.name.startswith("ncu_report"):
            (site / p.name).symlink_to(p)
    code = (f"import site, sys; site.addsitedir({str(site)!r}); "
            "import importlib.util; assert importlib.util.find_spec('ncu_report') is None; "
            "from profkit.parsers import ncu_rep; r = ncu_rep.parse(__import__('pathlib').Path(sys.argv[1])); "
            "import ncu_report; print(len(r.kernels), ncu_report.__file__)")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NCU")}
    got = subprocess.run([sys.executable, "-S", "-c", code, str(KNOWN_NCU_LEAN)], capture_output=True, text=True,
                         env={**env, "NCU": str(install / "ncu"), "PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    n, where = got.stdout.split()
    assert int(n) == 133 and where.startswith(str(install / "extras" / "python"))
    # and without any install: one line naming both ways
    got = subprocess.run([sys.executable, "-S", "-c", code, str(KNOWN_NCU_LEAN)], capture_output=True, text=True,
                         env={**env, "PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    assert got.returncode != 0 and "pip install ncu-report, or put ncu on PATH" in got.stderr


def _plain_copies(tmp_path, names):
    """Uncompressed copies of the lean report under these names (the reader sees the name)."""
    import lzma

    raw = lzma.decompress(KNOWN_NCU_LEAN.read_bytes())
    out = []
    for n in names:
        (tmp_path / n).write_bytes(raw)
        out.append(tmp_path / n)
    return out


def test_prefetched_reports_read_as_parse_reads_them(tmp_path, monkeypatch):
    """prefetch reads reports in background reader processes that serve report after report:
    the same rows as a one-report child, fewer processes than reports, none left afterwards."""
    import subprocess

    one = [ncu_rep.parse(p) for p in _plain_copies(tmp_path, ["x1.ncu-rep", "x2.ncu-rep"])]
    started = []
    real = subprocess.Popen

    def popen(args, *a, **k):
        started.append(args)
        return real(args, *a, **k)

    monkeypatch.setattr(ncu_rep.subprocess, "Popen", popen)
    paths = _plain_copies(tmp_path, [f"r{i}.ncu-rep" for i in range(5)])
    ncu_rep.prefetch(paths)
    got = [ncu_rep.parse(p) for p in paths]
    for r in got:
        assert (r.kernels, r.counters, r.rules, r.facts) == (one[0].kernels, one[0].counters, one[0].rules, one[0].facts)
    readers = [a for a in started if "_serve" in " ".join(map(str, a))]
    assert 1 <= len(readers) <= ncu_rep.readers() < len(paths)
    assert ncu_rep._servers == [] and ncu_rep._pending == 0
    # a reader hands over to a fresh process after REPORTS_PER_READER reports (NVIDIA's reader
    # keeps memory of each): one report each here, same rows
    monkeypatch.setattr(ncu_rep, "REPORTS_PER_READER", 1)
    started.clear()
    again = _plain_copies(tmp_path, [f"s{i}.ncu-rep" for i in range(4)])
    ncu_rep.prefetch(again)
    assert all(ncu_rep.parse(p).counters == one[0].counters for p in again)
    assert len([a for a in started if "_serve" in " ".join(map(str, a))]) == len(again)
    assert ncu_rep._servers == []
    # the reader process unpacks and checks too: an .xz reads the same, a cut one (plain or
    # inside the .xz) is refused with the words of a one-report child
    import lzma
    import shutil

    xz = tmp_path / "z.ncu-rep.xz"
    shutil.copy(KNOWN_NCU_LEAN, xz)
    raw = lzma.decompress(KNOWN_NCU_LEAN.read_bytes())
    cut, cut_xz = tmp_path / "cut.ncu-rep", tmp_path / "cut.ncu-rep.xz"
    cut.write_bytes(raw[:len(raw) // 2])
    cut_xz.write_bytes(lzma.compress(raw[:len(raw) // 3], format=lzma.FORMAT_XZ))
    alone = {}
    for p in (cut, cut_xz):
        with pytest.raises(BadInput) as e:
            ncu_rep.parse(p)
        alone[p] = e.value.problem
    ncu_rep.prefetch([xz, cut, cut_xz])
    assert ncu_rep.parse(xz).counters == one[0].counters
    for p in (cut, cut_xz):
        with pytest.raises(BadInput) as e:
            ncu_rep.parse(p)
        assert e.value.problem == alone[p] and "truncated" in alone[p]
    assert "inside the .xz" in alone[cut_xz]


def test_a_report_that_kills_the_background_reader_is_that_reports_error(tmp_path, monkeypatch):
    """NVIDIA's reader aborts its process on some corrupt reports: with a reader process kept
    for many reports, the one it died on is refused with the reader's last words, and the
    reports after it are read by a fresh process."""
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "ncu_report.py").write_text(
        "import os, sys\n"
        "def load_report(path):\n"
        "    if 'crash' in os.path.basename(path):\n"
        "        sys.stderr.write('Check failed: fake reader abort\\n'); sys.stderr.flush(); os.abort()\n"
        "    raise RuntimeError(f'fake reader pid {os.getpid()}')\n")
    monkeypatch.syspath_prepend(str(fake))
    names = ["a.ncu-rep", "b.ncu-rep", "crash.ncu-rep", "c.ncu-rep", "d.ncu-rep", "e.ncu-rep"]
    paths = _plain_copies(tmp_path, names)
    ncu_rep.prefetch(paths)
    pids = []
    for p in paths:
        with pytest.raises(BadInput) as e:
            ncu_rep.parse(p)
        msg = e.value.problem
        if p.name.startswith("crash"):
            assert msg.startswith("Nsight Compute's reader crashed on this report (signal 6: Check failed: fake reader abort")
        else:
            assert "Nsight Compute could not read the report (fake reader pid" in msg
            pids.append(int(msg.split("pid ")[1].split(")")[0]))
    assert len(set(pids)) <= 3 < len(pids)  # two readers, one restarted after the crash
    assert ncu_rep._servers == []
    for pid in set(pids):  # ended, not left waiting
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
