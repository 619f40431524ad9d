"""Ingest at scale: grow the real H200 nsys export by replication and time `profkit ingest`.

    python benchmarks/ingest.py [--kernels 1000000] [--out benchmarks/results/ingest.json]

Each replica copies the export's kernels, their launching runtime calls and its NVTX ranges,
shifted in time (and correlation id) past the previous replica. To reach as many ranges as
kernels, each replica also wraps every launch call in a push/pop range of its own, on the
launching thread (so the projection must find the innermost of nested ranges). The ingest
runs in a child process: wall time and peak RSS are the child's.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "profiles" / "known" / "known.nsys.sqlite"


def grow(dst: Path, replicas: int) -> dict:
    shutil.copy(BASE, dst)
    c = sqlite3.connect(dst)
    c.execute("CREATE TEMP TABLE k0 AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL")
    c.execute("CREATE TEMP TABLE r0 AS SELECT r.* FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
              "WHERE r.correlationId IN (SELECT correlationId FROM k0)")
    c.execute("CREATE TEMP TABLE n0 AS SELECT * FROM NVTX_EVENTS WHERE eventType IN (59, 60)")
    lo, hi = c.execute("SELECT min(start), max(end) FROM (SELECT start, end FROM k0 UNION ALL SELECT start, end FROM r0 "
                       "UNION ALL SELECT start, end FROM n0 WHERE end IS NOT NULL)").fetchone()
    span = hi - lo + 1000
    corr = c.execute("SELECT max(correlationId) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0] + 1
    c.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
    c.execute("DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME")
    c.execute("DELETE FROM NVTX_EVENTS WHERE eventType IN (59, 60)")
    series = f"WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < {replicas - 1})"
    kcols = [r[1] for r in c.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")]
    rcols = [r[1] for r in c.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_RUNTIME)")]
    ncols = [r[1] for r in c.execute("PRAGMA table_info(NVTX_EVENTS)")]

    def shifted(cols, extra=None):
        out = []
        for col in cols:
            if col in ("start", "end"):
                out.append(f"{col} + s.i * {span}")
            elif col == "correlationId":
                out.append(f"correlationId + s.i * {corr}")
            else:
                out.append(col)
        return ", ".join(out)

    c.execute(f"{series} INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT {shifted(kcols)} FROM k0, s")
    c.execute(f"{series} INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME SELECT {shifted(rcols)} FROM r0, s")
    c.execute(f"{series} INSERT INTO NVTX_EVENTS SELECT {shifted(ncols)} FROM n0, s")
    wrap = ", ".join({"start": f"r0.start - 1 + s.i * {span}", "end": f"r0.end + 1 + s.i * {span}",
                      "eventType": "59", "text": "'launch'", "globalTid": "r0.globalTid",
                      "domainId": "0"}.get(col, "NULL") for col in ncols)
    c.execute(f"{series} INSERT INTO NVTX_EVENTS SELECT {wrap} FROM r0, s")
    c.commit()
    counts = {t: c.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
              for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS")}
    c.execute("VACUUM")
    c.close()
    return counts


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "ingest.json"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "grown.nsys.sqlite"
        base_kernels = sqlite3.connect(BASE).execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
        replicas = -(-a.kernels // base_kernels)
        t0 = time.perf_counter()
        counts = grow(src, replicas)
        grow_s = time.perf_counter() - t0
        db = Path(d) / "bench.db"
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "profkit.cli", "ingest", "--db", str(db), str(src), "--run", "big"],
                              capture_output=True, text=True)
        wall = time.perf_counter() - t0
        peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
            return 1
        check = sqlite3.connect(db).execute(
            "SELECT count(*), sum(nvtx_range = 'launch'), count(DISTINCT nvtx_path) FROM kernels").fetchone()
    result = {
        "date": date.today().isoformat(), "host": platform.node(), "cpus": os.cpu_count(),
        "python": platform.python_version(), "sqlite": sqlite3.sqlite_version,
        "replicas": replicas, "source_rows": counts, "grow_s": round(grow_s, 2),
        "ingest_wall_s": round(wall, 2), "peak_rss_mb": round(peak_kb / 1024, 1),
        "kernels_per_s": round(check[0] / wall), "kernels_loaded": check[0],
        "kernels_in_wrap_range": check[1], "distinct_paths": check[2], "stdout": proc.stdout.strip(),
    }
    Path(a.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
