"""The correctness record: capture writes it, analyse loads it, compare's verdict reads it.

The timing and counter data are the shipped H200 capture of RMSNorm; the tests replace its
capture.json's record with the one each case needs.
"""
import json
import shutil
import stat

import pytest
from profdata import PROFILES

from profkit.analyses import compare
from profkit.capture import session as cap
from profkit.capture.options import CaptureOptions
from profkit.core.errors import BadInput
from profkit.store.profiles import load_profiles
from profkit.store.store import Store

RUN = "rmsnorm-eager-vs-triton-h200"
TRITON = "rmsnorm/triton/qwen7b-t4096"


def test_capture_records_the_workloads_reference_checks(tmp_path):
    # a stand-in ncu: writes its report and, as the lab runner does, the --check-out file
    ncu = tmp_path / "ncu"
    ncu.write_text("""#!/bin/sh
while [ $# -gt 0 ]; do
  case "$1" in
    -o) touch "$2.ncu-rep"; shift ;;
    --check-out) echo '{"rmsnorm/triton/llama8b-t1": {"ok": true, "rel_err": 0.0017, "tol": 0.01}}' > "$2"; shift ;;
  esac
  shift
done
""")
    ncu.chmod(ncu.stat().st_mode | stat.S_IEXEC)
    got = cap.capture(CaptureOptions(run="r", out=tmp_path / "out", workload="rmsnorm", variants=("triton",),
                                     shapes=("llama8b-t1",), use_nsys=False, ncu=str(ncu)))
    check_out = got.meta["command"][got.meta["command"].index("--check-out") + 1]
    assert check_out == str((tmp_path / "out" / "r" / "correctness.json").resolve())
    assert got.meta["correctness"] == {"rmsnorm/triton/llama8b-t1": {"ok": True, "rel_err": 0.0017, "tol": 0.01}}
    saved = json.loads((tmp_path / "out" / "r" / "capture.json").read_text())
    assert saved["correctness"] == got.meta["correctness"]
    assert not (tmp_path / "out" / "r" / "correctness.json").exists()  # kept in capture.json only


def test_a_command_capture_has_no_check():
    assert "--check-out" not in cap.workload_command("rmsnorm", ["triton"])


def _profiles(tmp_path, record):
    folder = tmp_path / "profiles" / RUN
    shutil.copytree(PROFILES / RUN, folder)
    meta = json.loads((folder / "capture.json").read_text())
    if record is not None:
        meta["correctness"] = record
    (folder / "capture.json").write_text(json.dumps(meta))
    return folder.parent


def _verdict(tmp_path, record):
    db = str(tmp_path / "p.db")
    load_profiles(_profiles(tmp_path, record), db)
    s = Store(db)
    try:
        (c,) = compare.compare(s, f"{RUN}:eager", f"{RUN}:triton")
        meta = json.loads(s.query("SELECT meta FROM runs WHERE run = ?", (RUN,))[0]["meta"])
    finally:
        s.close()
    assert meta["torch_version"] == "2.11.0+cu130"  # capture.json reached the run meta
    return c


def test_passed_check_makes_the_rmsnorm_win_supported(tmp_path):
    c = _verdict(tmp_path, {TRITON: {"ok": True, "rel_err": 1.7e-3, "tol": 1e-2}})
    assert c.verdict == "supported" and c.caveats == []
    assert c.why.startswith("12.12x faster beyond noise (band 12.09-14.13)") and "rel_err 1.70e-03" in c.why


def test_failed_check_rejects_it(tmp_path):
    c = _verdict(tmp_path, {TRITON: {"ok": False, "rel_err": 0.4, "tol": 1e-2}})
    assert c.verdict == "rejected" and "failed its reference check" in c.why


def test_no_record_is_caveated(tmp_path):
    c = _verdict(tmp_path, {})
    assert c.verdict == "caveated" and c.caveats == [f"no correctness record for {TRITON}"]


def test_the_shipped_record_supports_it(tmp_path):
    c = _verdict(tmp_path, None)
    assert c.verdict == "supported" and "rel_err 1.66e-03" in c.why


def test_bad_capture_json_loads_nothing(tmp_path):
    root = _profiles(tmp_path, None)
    (root / RUN / "capture.json").write_text("{not json")
    db = str(tmp_path / "p.db")
    with pytest.raises(BadInput, match="capture.json: not JSON"):
        load_profiles(root, db)
    s = Store(db)
    try:
        assert s.runs() == []
    finally:
        s.close()
