"""Phase detection and the idle split at scale: the real H200 export grown to ~1 M kernels
(benchmarks/ingest.py's grow), loaded, then timed beside the analysis they join.

    python benchmarks/phases.py [--kernels 1000000] [--out benchmarks/results/phases.json]

Times, in one process, on a fresh database: the load (profkit.store.ingest, without phases),
phases.detect, idle.analyse over the whole run and over the steady state, and advise over the
whole run (--phase all). The issue's bar: phases + idle
must not double the analysis (load + advise). The base export is a lab capture (phases would
leave it whole): the lab check is bypassed, so detection runs its periodic search on every launch.
The page: benchmarks/results/ingest.md, "Phase detection and the idle split at 1 M kernels".
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def main() -> int:
    from ingest import BASE, grow

    from profkit.analyses import advise, idle, phases
    from profkit.store.ingest import ingest
    from profkit.store.store import Store

    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "phases.json"))
    a = ap.parse_args()
    t: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as d:
        base = sqlite3.connect(BASE).execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
        src, db = Path(d) / "grown.nsys.sqlite", str(Path(d) / "p.db")
        grow(src, -(-a.kernels // base))

        def timed(key, fn):
            t0 = time.perf_counter()
            out = fn()
            t[key] = round(time.perf_counter() - t0, 2)
            return out

        timed("load_s", lambda: ingest(db, [src], run="big"))
        phases.lab_op = lambda meta: None
        with Store(db) as s:
            n = s.query("SELECT count(*) AS n FROM launch WHERE run = 'big'")[0]["n"]
            ph = timed("phases_detect_s", lambda: phases.detect(s, "big"))
            timed("phases_store_s", lambda: s.replace_phases("big", phases.rows(ph)))
            timed("idle_whole_s", lambda: idle.analyse(s, "big"))
            win, line = phases.selected(s, "big", None)
            timed("idle_steady_s", lambda: idle.analyse(s, "big", win))
            timed("advise_all_s", lambda: advise.advise(s, "big", phase="all"))
    analysis = t["load_s"] + t["advise_all_s"]
    added = t["phases_detect_s"] + t["phases_store_s"] + t["idle_whole_s"]
    result = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "host": platform.node(),
              "cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 1),
              "python": platform.python_version(), "sqlite": sqlite3.sqlite_version, "kernels": n,
              "phases": [(p.name, p.launches, p.steps) for p in ph.phases], "note": ph.note, "line": line,
              **t, "added_share_of_analysis": round(added / analysis, 3)}
    Path(a.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
