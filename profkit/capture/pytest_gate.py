"""A pytest plugin: gate a benchmark inside a test suite (docs/ci.md).

Enable it with ``pytest -p profkit.capture.pytest_gate`` (or ``pytest_plugins =
["profkit.capture.pytest_gate"]`` in a conftest.py), then::

    def test_rmsnorm_holds_its_speed(profkit_gate):
        profkit_gate(["python3", "bench/rmsnorm.py"], baseline="bench/baselines/rmsnorm.json")

The fixture captures the benchmark (timeline only), gates it against the committed baseline
file, and fails the test on a regression (and, unless ``undecided_ok=True``, when undecided),
with the gate's lines as the message. ``pytest --profkit-update-baselines`` writes each
baseline file from the capture instead (run it on main, commit the files).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from profkit.analyses import gate as g
from profkit.capture.rerun import recapturer
from profkit.store import baselines
from profkit.store.store import Store


def pytest_addoption(parser):
    group = parser.getgroup("profkit")
    group.addoption(
        "--profkit-update-baselines",
        action="store_true",
        default=False,
        help="profkit_gate: write each baseline file from this capture instead of gating",
    )


def gate_benchmark(
    target: list[str] | str,
    baseline: str | Path,
    workdir: str | Path,
    *,
    max_regression: float = g.DEFAULT_THRESHOLD,
    by: str = "gpu",
    pattern: str | None = None,
    allow=(),
    budget_runs: int = 0,
    budget_s: float | None = None,
    update: bool = False,
    nsys: str | None = None,
    tracer: str = "auto",
) -> g.GateResult | Path:
    """Capture TARGET (a command, or a lab workload name) into a database under WORKDIR and gate
    it against the baseline file; with `update`, write the baseline file from the capture and
    return its path. `budget_runs` re-captures while a range is undecided (docs/gate.md)."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    db = str(workdir / "gate.db")
    target = [target] if isinstance(target, str) else list(target)
    baseline = Path(baseline)
    once = recapturer(target, db, "bench", workdir / "profiles", tracer=tracer, nsys=nsys)
    first = once(0)
    if update:
        with Store(db) as s:
            b = g.snapshot(s, first, baseline.stem)
            baselines.save(s, b, replace=True)
            baseline.parent.mkdir(parents=True, exist_ok=True)
            return baselines.export(s, b.name, baseline)
    base = baselines.read(baseline)
    return g.rerun_loop(
        lambda: Store(db, readonly=True),
        base,
        first,
        once,
        budget_runs=budget_runs,
        budget_s=budget_s,
        threshold=max_regression,
        by=by,
        pattern=pattern,
        allow=set(allow),
    )


@pytest.fixture
def profkit_gate(request, tmp_path):
    """profkit_gate(target, baseline=FILE, max_regression=0.03, by="gpu", pattern=None, allow=(),
    budget_runs=0, budget_s=None, undecided_ok=False, nsys=None) -> GateResult (or the baseline
    file's path under --profkit-update-baselines)."""
    update = request.config.getoption("--profkit-update-baselines")

    def run(target, baseline, *, undecided_ok: bool = False, **kw):
        from profkit.outputs.gate_md import text_lines

        got = gate_benchmark(target, baseline, tmp_path / "profkit-gate", update=update, **kw)
        if not isinstance(got, g.GateResult):  # --profkit-update-baselines: the file written
            return got
        lines = "\n".join(text_lines(got))
        if got.verdict == "regression" or (got.verdict == "undecided" and not undecided_ok):
            pytest.fail(f"profkit gate against {baseline}: {got.verdict}\n{lines}", pytrace=False)
        return got

    return run
