"""Re-captures for `profkit gate --rerun`: the same benchmark again, timeline only (no counters:
the gate reads times per call, and ncu's replay would only cost time), loaded as a run of its
own so the gate can pool its calls with the first run's."""

from __future__ import annotations

from pathlib import Path

from profkit.capture import session as cap
from profkit.capture.options import CaptureOptions, Hooks
from profkit.core.errors import ToolFailed
from profkit.store.ingest import ingest
from profkit.store.store import Store


def recapturer(
    target: list[str],
    db: str,
    run: str,
    out_dir: str | Path,
    *,
    tracer: str = "auto",
    nsys: str | None = None,
    calls: int | None = None,
    note=None,
):
    """`once(i) -> run name`: capture TARGET (a lab workload name or a command) into run
    RUN-rerunI (the first free I), timeline only, and load it into DB."""
    workload, command = cap.resolve_target(list(target))

    def once(i: int) -> str:
        with Store(db) as s:
            taken = set(s.runs())
        while f"{run}-rerun{i}" in taken:
            i += 1
        name = cap.check_run_name(f"{run}-rerun{i}")
        opts = CaptureOptions(
            run=name,
            out=Path(out_dir),
            workload=workload,
            command=tuple(command) if command is not None else None,
            use_nsys=True,
            use_ncu=False,
            tracer=tracer,
            nsys=nsys,
            calls=calls,
        )
        got = cap.capture(opts, Hooks(note=note))
        if got.failures or not got.files:
            raise ToolFailed(
                f"re-capture {name} failed: {(got.failures or ['no timeline written'])[-1]}; reports in {got.folder}"
            )
        for f in got.files:
            ingest(db, [f], run=got.run, parsed_reports=got.reports, facts=getattr(got, "facts", None))
        with Store(db) as s:
            s.set_run_meta(name, got.meta)
        return name

    return once
