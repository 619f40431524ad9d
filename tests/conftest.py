import shutil
from pathlib import Path

import pytest


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
