"""Every CUDA C++ source compiles with nvcc for sm_90 (compile only: no GPU needed) where nvcc
is installed; the builder's cache, flags and errors are tested without a GPU."""
import shutil
import subprocess

import pytest
from profkit.kernels import _cuda_build

from profkit.core.errors import ToolFailed, ToolMissing

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc (CUDA toolkit) not installed on this machine")


def test_every_source_is_known():
    assert sorted(p.stem for p in _cuda_build.SOURCES.glob("*.cu")) == sorted(_cuda_build.NAMES)


@needs_nvcc
@pytest.mark.parametrize("name", _cuda_build.NAMES)
def test_compiles_for_sm90(tmp_path, name):
    obj = _cuda_build.compile_only(name, tmp_path / f"{name}.o", arch="sm_90")
    assert obj.stat().st_size > 0
    # the object holds sm_90 machine code (cuobjdump ships with nvcc; skip the look if not)
    cuobjdump = shutil.which("cuobjdump")
    if cuobjdump:
        out = subprocess.run([cuobjdump, "--list-elf", str(obj)], capture_output=True, text=True).stdout
        assert "sm_90" in out


@pytest.fixture
def no_nvcc(monkeypatch):
    for var in ("PROFKIT_NVCC", "CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(_cuda_build, "FALLBACK_NVCC", ())


def test_missing_nvcc_is_one_clear_line(no_nvcc):
    with pytest.raises(ToolMissing) as e:
        _cuda_build.find_nvcc()
    msg = str(e.value)
    assert "nvcc" in msg and "\n" not in msg and "CUDA_HOME" in msg


def test_missing_nvcc_through_load(no_nvcc, monkeypatch, tmp_path):
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path))
    monkeypatch.setattr(_cuda_build, "_LIBS", {})
    with pytest.raises(ToolMissing, match="nvcc"):
        _cuda_build.load("swiglu")


def _fake_nvcc(tmp_path, version="Cuda compilation tools, release 13.0, V13.0.88"):
    exe = tmp_path / "nvcc"
    exe.write_text(f"#!/bin/sh\necho '{version}'\n")
    exe.chmod(0o755)
    return str(exe)


def test_cache_key_follows_sources_flags_and_version(tmp_path, monkeypatch):
    src = tmp_path / "cuda"
    shutil.copytree(_cuda_build.SOURCES, src)
    monkeypatch.setattr(_cuda_build, "SOURCES", src)
    flags = _cuda_build.build_flags("sm_90")
    k0 = _cuda_build.cache_key("rmsnorm", flags, "release 13.0")
    assert k0 == _cuda_build.cache_key("rmsnorm", flags, "release 13.0")  # stable
    assert k0 != _cuda_build.cache_key("rmsnorm", _cuda_build.build_flags("sm_90a"), "release 13.0")
    assert k0 != _cuda_build.cache_key("rmsnorm", flags, "release 13.1")
    assert k0 != _cuda_build.cache_key("swiglu", flags, "release 13.0")
    (src / "rmsnorm.cu").write_text((src / "rmsnorm.cu").read_text() + "\n// edited\n")
    k1 = _cuda_build.cache_key("rmsnorm", flags, "release 13.0")
    (src / "common.cuh").write_text((src / "common.cuh").read_text() + "\n// edited\n")
    assert len({k0, k1, _cuda_build.cache_key("rmsnorm", flags, "release 13.0")}) == 3  # headers count


def test_build_once_then_reuse(tmp_path, monkeypatch):
    """The second build finds the library by its key and runs no compiler; output lands under
    $PROFKIT_CACHE/cuda, written under a temporary name first."""
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PROFKIT_NVCC", _fake_nvcc(tmp_path))
    monkeypatch.setenv("PROFKIT_CUDA_ARCH", "90a")
    calls = []

    def fake(args, what):
        calls.append(args)
        out = args[args.index("-o") + 1]
        assert out.endswith(".tmp.so")
        open(out, "wb").write(b"not really a library")

    monkeypatch.setattr(_cuda_build, "_nvcc", fake)
    p1 = _cuda_build.build("swiglu")
    p2 = _cuda_build.build("swiglu")
    assert p1 == p2 and p1.parent == tmp_path / "cache" / "cuda" and p1.name.startswith("swiglu-sm_90a-")
    assert len(calls) == 1
    args = calls[0]
    assert "-gencode=arch=compute_90a,code=sm_90a" in args and "-O3" in args and "-shared" in args
    assert args[-1].endswith("kernels/cuda/swiglu.cu") or args[-1].endswith("cuda/swiglu.cu")
    assert list(p1.parent.glob("*.tmp.so")) == []


def test_arch_from_environment(monkeypatch):
    monkeypatch.setenv("PROFKIT_CUDA_ARCH", "sm_90a")
    assert _cuda_build.target_arch() == "sm_90a"
    monkeypatch.setenv("PROFKIT_CUDA_ARCH", "90")
    assert _cuda_build.target_arch() == "sm_90"
    assert _cuda_build.arch_flags("sm_90a") == ["-gencode=arch=compute_90a,code=sm_90a"]


@needs_nvcc
def test_compile_error_is_tool_failed_with_nvcc_lines(tmp_path, monkeypatch):
    src = tmp_path / "cuda"
    shutil.copytree(_cuda_build.SOURCES, src)
    (src / "swiglu.cu").write_text('#include "common.cuh"\nthis is not C++;\n')
    monkeypatch.setattr(_cuda_build, "SOURCES", src)
    with pytest.raises(ToolFailed, match="nvcc failed on swiglu.cu: .*error") as e:
        _cuda_build.compile_only("swiglu", tmp_path / "x.o")
    assert "\n" not in str(e.value)


def test_unknown_source():
    with pytest.raises(KeyError, match="no CUDA source 'gelu'"):
        _cuda_build.source("gelu")


def test_package_data_ships_the_sources():
    """pyproject ships kernels/cuda/*.cu and *.cuh with profkit.kernels (normal installs; the
    editable install reads them in place). tests/test_install.py checks a real install."""
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    from profdata import ROOT

    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    data = cfg["tool"]["setuptools"]["package-data"]["profkit.kernels"]
    assert "cuda/*.cu" in data and "cuda/*.cuh" in data
