"""The notebooks run top to bottom against the shipped profiles and show their key results.

The kernel is this interpreter (a kernel spec written to a temp JUPYTER_PATH, which comes
before user and system kernel specs), so a fresh CI venv runs them with its own packages.
"""
import json
import sys

import nbformat
import pytest
from nbclient import NotebookClient

from profdata import PROFILES, ROOT

NOTEBOOKS = ROOT / "notebooks"


@pytest.fixture
def kernel(tmp_path, monkeypatch):
    spec = tmp_path / "jupyter" / "kernels" / "profkit-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "profkit test", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("PROFKIT_PROFILES", str(PROFILES))
    monkeypatch.setenv("PROFKIT_DB", str(tmp_path / "nb.db"))
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # the notebooks launch no kernel
    return "profkit-test"


def _run(name: str, kernel: str) -> tuple[nbformat.NotebookNode, str]:
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), f"{name} is committed with outputs"
    NotebookClient(nb, kernel_name=kernel, timeout=300, resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    text = []
    for c in nb.cells:
        for o in c.get("outputs", []):
            assert o.output_type != "error", f"{name}: {o.get('ename')}: {o.get('evalue')}"
            text.append(o.get("text", "") or o.get("data", {}).get("text/plain", ""))
    return nb, "\n".join(text)


def test_before_after(kernel):
    nb, text = _run("before_after.ipynb", kernel)
    assert "caveated: 12.28x faster, but no correctness record for rmsnorm/triton/llama8b-t32768" in text
    assert "min..max over all pairings of 3 x 3 calls" in text
    assert "unrolled_elementwise_kernel" in text and "_rmsnorm_fwd" in text and "launch_overhead" in text
    assert "points:" in text and "arrows: 1" in text
    assert "DRAM bytes / model" in text
    figures = [o for c in nb.cells for o in c.get("outputs", []) if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert len(figures) == 1


def test_sql_queries(kernel):
    _, text = _run("sql_queries.ipynb", kernel)
    for expected in ("NVIDIA H200", "rmsnorm/eager/llama8b-t32768", "gpu_busy_pct", "achieved_occ", "tensor_core",
                     "HighPipeUtilization", "dram_gb_per_s", "_rmsnorm_fwd"):
        assert expected in text, expected
