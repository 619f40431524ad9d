"""profkit.store.profiles: the main job's loader parses the nsys exports ahead in a process of
its own; what it loads must be what it loads without that process, and a file the process
cannot read is refused as ingest refuses it."""
import shutil
import sqlite3

import pytest
from profdata import PROFILES
from profkit.parsers import nsys_sqlite

from profkit.core.errors import BadInput
from profkit.store import profiles
from profkit.store.ingest import ingest
from profkit.store.profiles import load_profiles

FOLDERS = ("cuda-vector-ops", "ddp-2gpu-slow")  # a plain export and two .xz ranks


def _rows(db):
    with sqlite3.connect(db) as c:
        return {
            t: c.execute(f"SELECT * FROM {t} ORDER BY 1, 2, 3").fetchall()
            for t in ("launch_row", "nvtx_event", "host_call", "gpu_copy", "launch_name", "nvtx_path")
        }


def test_a_report_parsed_ahead_is_the_report_parsed_here():
    f = PROFILES / "ddp-2gpu-slow" / "ddp-2gpu-slow.rank1.nsys.sqlite.xz"
    pool, ahead = profiles._parse_ahead([f])
    assert pool is not None and list(ahead) == [f]  # (2 cores or more: the process is used)
    try:
        ahead[f].result()  # done: taken, not parsed again here
        got = profiles._taken(ahead, [f])[f]
    finally:
        pool.shutdown()
    here = nsys_sqlite.parse(f)
    for field in ("kernels", "ranges", "counters", "facts", "host_calls", "gpu_copies", "ops"):
        assert getattr(got, field) == getattr(here, field), field


def test_folders_load_as_they_load_without_the_process(tmp_path, monkeypatch):
    root = tmp_path / "profiles"
    for name in FOLDERS:
        shutil.copytree(PROFILES / name, root / name)
    load_profiles(root, str(tmp_path / "ahead.db"))
    monkeypatch.setattr(profiles, "_parse_ahead", lambda files: (None, {}))
    load_profiles(root, str(tmp_path / "here.db"))
    assert _rows(tmp_path / "ahead.db") == _rows(tmp_path / "here.db")


def test_a_cut_export_is_refused_as_ingest_refuses_it(tmp_path):
    root = tmp_path / "profiles"
    (root / "cut").mkdir(parents=True)
    data = (PROFILES / "cuda-vector-ops" / "cuda-vector-ops.nsys.sqlite").read_bytes()
    (root / "cut" / "cut.nsys.sqlite").write_bytes(data[: len(data) // 2])
    with pytest.raises(BadInput) as here:
        ingest(str(tmp_path / "here.db"), [root / "cut" / "cut.nsys.sqlite"], run="cut")
    with pytest.raises(BadInput) as ahead:
        load_profiles(root, str(tmp_path / "ahead.db"))
    assert str(ahead.value) == str(here.value)
    assert not (tmp_path / "ahead.db").exists() or not _rows(tmp_path / "ahead.db")["launch_row"]
