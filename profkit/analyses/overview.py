"""The main job's view of a database: per run what was loaded, the labels found and what to fix
first, and the before/after claims the runs support. Labelling and advice are stored here as
the main job's explicit steps (`profkit analyse` = ingest + classify + advise + roofline)."""

from __future__ import annotations

from collections import Counter

from profkit.analyses import selection
from profkit.analyses.advise import advise
from profkit.analyses.advise import rows as advice_rows
from profkit.analyses.classify import classify
from profkit.analyses.compare import compare
from profkit.core.errors import ProfkitError
from profkit.store.store import Store

BASELINES = ("eager",)  # the variant a lab run's claims start from


def run_summary(store: Store, run: str, peaks: list[dict] | None = None) -> dict:
    """Label and advise one run (both stored) and sum it up in one row."""
    classify(store, run)
    # labels by their share of GPU time, of the launches inside NVTX ranges when the run has any
    # (as advise: a lab run's warm-up and autotuning launches sit outside them, without counters)
    ranged = store.query("SELECT 1 FROM kernels WHERE run = ? AND nvtx_path IS NOT NULL LIMIT 1", (run,))
    labels = Counter(
        {
            r["label"]: r["ns"] or 0
            for r in store.query(
                "SELECT c.label, sum(k.duration_ns) AS ns FROM classifications c JOIN kernels k USING (kernel_id) "
                f"WHERE c.run = ? {'AND k.nvtx_path IS NOT NULL' if ranged else ''} GROUP BY c.label",
                (run,),
            )
        }
    )
    total = sum(labels.values()) or 1
    try:
        a = advise(store, run, peaks=peaks)
        store.replace_advice(run, None, advice_rows(a))
        items = a.items
    except ProfkitError:
        items = []
    row = store.query(
        """SELECT r.gpu_name,
                                (SELECT count(*) FROM report_file f WHERE f.run = r.run) AS files,
                                (SELECT count(*) FROM kernels k WHERE k.run = r.run) AS launches,
                                (SELECT count(*) FROM counters c WHERE c.run = r.run) AS counters
                         FROM run r WHERE r.run = ?""",
        (run,),
    )[0]
    return {
        "run": run,
        "gpu": row["gpu_name"],
        "files": row["files"],
        "launches": row["launches"],
        "counters": row["counters"],
        "labels": {k: 100.0 * v / total for k, v in labels.most_common()},
        "advice": items,
    }


def claims(store: Store) -> list[dict]:
    """compare's rows for every run whose NVTX paths hold a baseline variant (eager) and others:
    baseline -> each other variant, range by range."""
    out = []
    for run in store.runs():
        with store.snapshot():  # every pair of the run reads its kernels, labels and counters: once
            paths = [
                r["nvtx_path"]
                for r in store.query(
                    "SELECT DISTINCT nvtx_path FROM kernels WHERE run = ? AND nvtx_path IS NOT NULL", (run,)
                )
            ]
            found = selection.variants(paths)
            for base in (b for b in BASELINES if b in found):
                for v in (x for x in found if x != base):
                    try:
                        got = compare(store, f"{run}:{base}", f"{run}:{v}")
                    except ProfkitError:
                        continue  # no range in common
                    out += [{**c.row(), "run": run, "from": base, "to": v} for c in got]
    return sorted(out, key=lambda r: (r["verdict"] != "supported", -r["speedup"]))
