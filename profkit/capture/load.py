"""A capture's reports into the store: a run that already holds a report of the kind a capture
would make is refused before anything runs; each report of a finished capture loads on its own."""

from __future__ import annotations

from profkit.capture.options import CaptureOptions
from profkit.core.errors import BadArgument, ProfkitError


def refuse_a_second_capture(db, opts: CaptureOptions) -> None:
    """Before anything runs: a run holds one timeline and one counter report (per rank), so a
    capture into a run that already has the report it would make is refused now, not after the
    program ran (a before/after pair is two runs: --run NAME-after)."""
    from profkit.store.ingest import roles_held

    run = opts.run
    made = ({"timeline"} if opts.use_nsys else set()) | ({"counters"} if opts.use_ncu else set())
    clash = sorted(roles_held(db, run) & made)
    if clash:
        raise BadArgument(
            f"run {run!r} in {db} already holds a {' and a '.join(clash)} report: give this capture a "
            f"run of its own (--run {run}-2, e.g. the after of a before/after pair) or another --db"
        )


def load_capture(db, got, failures: list[str], on_file=None) -> int:
    """Load each report of a capture on its own: one that fails is named with its cause in
    `failures` and stays on disk, the others load; `on_file(result)` hears of each file loaded.
    Returns how many loaded."""
    from profkit.store.ingest import ingest as do_ingest

    n = 0
    for f in got.files:
        try:
            for r in do_ingest(db, [f], run=got.run, parsed_reports=got.reports, facts=getattr(got, "facts", None)):
                if on_file:
                    on_file(r)
                n += not r.skipped
        except ProfkitError as e:
            failures.append(f"{f}: not loaded: {e}")
    return n
