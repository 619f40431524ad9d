"""Predictions that hold on ordinary programs (issue 50 item 3): the realised changes captured on
an H100 (tests/data/program-pairs, the CUDA-graph pair in profiles/), recomputed from the stored
pairs: advise's prediction on each BEFORE's steady state against the realised gain, within
±35 % or said plainly why not, and the table in docs/advise.md is the one these pairs give."""
import importlib.util
import re

import pytest
from profdata import PROFILES, ROOT


def _bench():
    spec = importlib.util.spec_from_file_location("advise_calibration", ROOT / "benchmarks" / "advise_calibration.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def table(data_set):
    bench = _bench()
    return bench, bench.run_programs(PROFILES, data_set("program-pairs"))


def test_six_changes_each_holds(table):
    _, res = table
    rows = res["pairs"]
    assert len(rows) >= 7
    fixes = {r["pair"]: r for r in rows}
    assert len(fixes) == len(rows)
    for r in rows:
        assert r["realised"] > 0
        # within the band, or a plain statement of why the prediction cannot hold
        assert r["within_35pct"] or r["statement"], r
        if r["predicted"] is not None:
            assert r["within_35pct"] == (abs(r["predicted"] / r["realised"] - 1) <= 0.35)
    # the statement is kept for what has no figure, not spent on a miss that has one
    assert all(r["within_35pct"] for r in rows if r["predicted"] is not None)


def test_realised_gains_are_the_captures(table):
    """The realised figures are the captures' own steady states (numbers measured on the H100,
    2026-12-05): a change to phase detection or to the pairs shows here first."""
    _, res = table
    got = {r["pair"].split(" -> ")[0]: r["realised"] for r in res["pairs"]}
    assert got["llama-decode-eager"] == pytest.approx(10.6, abs=0.05)  # 8.77 -> 0.83 ms a step
    assert got["pair-sdpa-before-math"] == pytest.approx(15.92, abs=0.05)  # GPU time a step
    assert got["pair-sdpa2-before-math"] == pytest.approx(18.74, abs=0.05)  # GPU time a step
    assert got["pair-compile-before-eager"] == pytest.approx(1.46, abs=0.02)  # GPU time a step
    assert got["pair-channels-last-before"] == pytest.approx(2.01, abs=0.02)  # GPU time a step
    assert got["pair-batch-before-16"] == pytest.approx(5.78, abs=0.05)  # per sample
    assert got["pair-sync-before-item"] == pytest.approx(1.125, abs=0.01)


def test_docs_hold_the_table(table):
    bench, res = table
    text = (ROOT / "docs" / "advise.md").read_text()
    block = bench.program_markdown(res)
    for line in block.splitlines():
        if line.startswith("| ") and "`" in line:
            assert line in text, f"docs/advise.md lacks: {line[:120]}"
    assert re.search(rf"\*\*{res['within']} of {res['total']}\*\* within ±35 %", text)
    results = (ROOT / "benchmarks" / "results" / "advise_programs.md").read_text()
    assert block.strip() in results
