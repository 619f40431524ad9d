import fcntl
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from profdata import PROFILES, unpack


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """pytest-xdist: a worker starts with COLUMNS=80 LINES=24 of its own, and profkit's tables
    take their width from $COLUMNS; the worker gets the controller's instead (unset: unset)."""
    node.workerinput["terminal_env"] = {k: os.environ.get(k) for k in ("COLUMNS", "LINES")}


def pytest_configure(config):
    for k, v in getattr(config, "workerinput", {}).get("terminal_env", {}).items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "t.db")


@pytest.fixture
def copy(tmp_path):
    def _copy(src: Path, name: str | None = None) -> Path:
        dst = tmp_path / (name or src.name)
        shutil.copy(src, dst)
        return dst
    return _copy


@pytest.fixture(autouse=True)
def _gpu_for_capture(monkeypatch):
    """profkit capture refuses to start without a GPU; the CPU tests give it fake profilers
    instead (tests/test_capture.py checks the refusal itself)."""
    import profkit.capture.session

    monkeypatch.setattr(profkit.capture.session, "gpu_problem", lambda: None)


@pytest.fixture(scope="session")
def data_set(tmp_path_factory):
    """data_set("program-pairs"): a set of captures kept packed in tests/data (NAME/NAME.tar.xz),
    unpacked once a session into this process's temp folder (each xdist worker its own copy)."""
    root = tmp_path_factory.mktemp("data-sets")
    return lambda name: unpack(name, root)


@pytest.fixture(scope="session")
def profiles_db_built(tmp_path_factory) -> Path:
    """Every run of profiles/ loaded into one database, once a session (a full load costs tens
    of CPU seconds, and many modules read the same runs). Never written: take a copy
    (profiles_db, or shutil.copy into tmp_path)."""
    from profkit.store.profiles import load_profiles

    # pytest-xdist's workers share the base temp folder's parent: the first builds, the rest wait
    # on the lock and reuse it
    shared = tmp_path_factory.getbasetemp().parent
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        shared = tmp_path_factory.mktemp("profiles-db")
    path = shared / "profiles.db"
    with open(shared / "profiles.db.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            building = shared / "profiles.db.part"
            building.unlink(missing_ok=True)
            load_profiles(PROFILES, str(building))
            # a whole database in one file: a copy of it is the loaded database
            assert not building.with_name(building.name + "-wal").exists()
            building.rename(path)
    return path


@pytest.fixture(scope="module")
def profiles_db(profiles_db_built, tmp_path_factory) -> str:
    """The module's own copy of profiles_db_built, free to write (labels, runs of its own)."""
    dst = tmp_path_factory.mktemp("profiles") / "profiles.db"
    shutil.copyfile(profiles_db_built, dst)
    return str(dst)


@pytest.fixture(autouse=True)
def _no_leftover_heap_limit():
    """SQLite's hard heap limit is process-wide: a test that stops a `profkit sql` run mid-way
    (a limit it provokes) must not leave it on the in-process commands of later tests (an
    xdist worker runs many files in one process)."""
    yield
    c = sqlite3.connect(":memory:")
    try:
        c.execute("PRAGMA hard_heap_limit = 0")
    finally:
        c.close()
