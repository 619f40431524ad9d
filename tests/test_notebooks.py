"""The notebooks run top to bottom against the shipped profiles and show their key results.

The kernel is this interpreter (a kernel spec written to a temp JUPYTER_PATH, which comes
before user and system kernel specs), so a fresh CI venv runs them with its own packages.
"""
import json
import shutil
import sys

import nbformat
import pytest
from nbclient import NotebookClient
from profdata import PROFILES, ROOT

NOTEBOOKS = ROOT / "notebooks"


@pytest.fixture
def kernel(tmp_path, monkeypatch, profiles_db_built):
    spec = tmp_path / "jupyter" / "kernels" / "profkit-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "profkit test", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("PROFKIT_PROFILES", str(PROFILES))
    # the runs already loaded (the session's database): the notebook loads only what it lacks
    shutil.copyfile(profiles_db_built, tmp_path / "nb.db")
    monkeypatch.setenv("PROFKIT_DB", str(tmp_path / "nb.db"))
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # the notebooks launch no kernel
    return "profkit-test"


def _run(name: str, kernel: str) -> tuple[nbformat.NotebookNode, str]:
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    # committed with their outputs (a code host shows the story without running it), and
    # every cell ran, in order, in one session
    counts = [c.get("execution_count") for c in nb.cells if c.cell_type == "code"]
    assert counts == list(range(1, len(counts) + 1)), f"{name}: stored outputs are not one top-to-bottom run"
    for c in nb.cells:
        for o in c.get("outputs", []):
            assert o.output_type != "error", f"{name} is committed with an error"
    committed = nbformat.from_dict(json.loads(json.dumps(nb)))
    for c in nb.cells:
        if c.cell_type == "code":
            c.outputs = []
    NotebookClient(nb, kernel_name=kernel, timeout=300, resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    text = []
    for c in nb.cells:
        for o in c.get("outputs", []):
            assert o.output_type != "error", f"{name}: {o.get('ename')}: {o.get('evalue')}"
            text.append(o.get("text", "") or o.get("data", {}).get("text/plain", ""))
    return nb, "\n".join(text), committed


def _outputs(nb, kind):
    return [o for c in nb.cells for o in c.get("outputs", []) if kind in o.get("data", {})]


def test_before_after(kernel):
    nb, text, committed = _run("before_after.ipynb", kernel)
    # the story ends on a supported claim: beyond noise and with a passed reference check
    assert "supported: 12.12x faster beyond noise" in text and "reference check passed" in text
    assert "min..max over all pairings of 3 x 3 calls" in text
    assert "unrolled_elementwise_kernel" in text and "_rmsnorm_fwd" in text and "dram" in text
    assert "points: 20 arrows: 1" in text
    assert "DRAM bytes / model" in text
    # the roofline is a static image (a code host does not run plotly's JS), in the run and as committed
    assert len(_outputs(nb, "image/png")) == 1 and len(_outputs(committed, "image/png")) == 1
    stored = "\n".join(o.get("text", "") or o.get("data", {}).get("text/plain", "")
                        for c in committed.cells for o in c.get("outputs", []))
    assert "supported: 12.12x faster beyond noise" in stored


def test_sql_queries(kernel):
    _, text, _ = _run("sql_queries.ipynb", kernel)
    for expected in ("NVIDIA H200", "rmsnorm/eager/qwen7b-t4096", "gpu_busy_pct", "achieved_occ", "tensor_core",
                     "HighPipeUtilization", "dram_gb_per_s", "_rmsnorm_fwd"):
        assert expected in text, expected
