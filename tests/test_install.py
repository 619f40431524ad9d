"""kernels/ and parsers/ ship inside profkit (profkit.kernels, profkit.parsers) for a normal
and an editable install; no top-level `kernels` or `parsers` package is installed (Hugging
Face's `kernels` exists and transformers imports it)."""
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from profdata import ROOT

CHECK = ("import importlib.util, profkit.kernels, profkit.parsers, profkit.parsers.nsys_sqlite;"
         "print(profkit.kernels.__name__, profkit.parsers.__name__, importlib.util.find_spec('profkit.outputs').name);"
         "print(importlib.util.find_spec('kernels') is None or 'site-packages/kernels' not in "
         "str(importlib.util.find_spec('kernels').origin), importlib.util.find_spec('parsers') is None)")


def _pip(python, *args):
    # build isolation fetches a current setuptools: a new venv's bundled one is too old
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", *args], check=True, cwd=ROOT)


def _check_subpackages(py, tmp_path):
    out = subprocess.run([str(py), "-c", CHECK], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    # every subpackage ships (profkit.outputs was once left out: each CLI command failed)
    assert out.stdout.split() == ["profkit.kernels", "profkit.parsers", "profkit.outputs", "True", "True"]
    # the CUDA C++ sources travel with the package (built with nvcc at first use)
    cu = subprocess.run([str(py), "-c", "from profkit.kernels import _cuda_build as b; "
                         "print(all(b.source(n).exists() for n in b.NAMES), (b.SOURCES / 'common.cuh').exists())"],
                        cwd=tmp_path, capture_output=True, text=True)
    assert cu.stdout.split() == ["True", "True"], cu.stderr


def test_editable_install_imports_subpackages(tmp_path):
    """The README's install is editable, and so is the interpreter running these tests: checked
    in it rather than in a venv of its own (each venv builds the package, tens of seconds)."""
    import profkit

    if Path(profkit.__file__).resolve().parents[1] != ROOT:
        pytest.skip("the profkit under test is not this checkout's editable install")
    _check_subpackages(sys.executable, tmp_path)


@pytest.mark.slow
def test_install_imports_subpackages(tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    _pip(py, str(ROOT))
    _check_subpackages(py, tmp_path)
    site = next((env_dir / "lib").glob("python*/site-packages"))
    # The README's main job runs `profkit` from the checkout, whose profkit/ holds no
    # parsers/: the .ncu-rep reader's child process must still import the installed package.
    # (Dependencies come from this interpreter's site-packages, after the venv's own.)
    import sysconfig

    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    ing = subprocess.run([str(env_dir / "bin" / "profkit"), "ingest", "--db", str(tmp_path / "x.db"),
                          "tests/data/known/known_lean.ncu-rep.xz"], cwd=ROOT, capture_output=True, text=True)
    assert ing.returncode == 0 and "133 kernels" in ing.stdout, ing.stdout + ing.stderr
    assert (site / "profkit" / "kernels" / "rmsnorm.py").exists()
    assert (site / "profkit" / "kernels" / "cuda" / "sgemm.cu").exists()
    assert not (site / "kernels").exists() and not (site / "parsers").exists()
