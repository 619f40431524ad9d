"""Ingest at scale: grow the real H200 nsys export by replication and time `profkit ingest`.

    python benchmarks/ingest.py [--kernels 1000000] [--ranges N] [--peer-python PY] [--repeat 3]
                                [--source GROWN.sqlite] [--out benchmarks/results/ingest.json]

Reports wall and CPU seconds, kernels/s, NVTX rows/s and peak RSS of the ingest (a child
process), and with --peer-python (a Python with nsys-ai 0.3 installed, kept out of profkit's
environment) nsys-ai's own NVTX attribution on the same file, alternating run by run, with the
ratio. `check` verifies every grown kernel's structured path against the base export's.

With --analyses, each analysis then runs as its own CLI process on the first ingest's database
(classify first: advise and compare read its stored labels), its wall time, CPU time and peak
RSS reported as a ratio to that ingest, so that a loaded machine moves both alike. `--md PATH`
appends the table as markdown.

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


def grow(dst: Path, replicas: int, depth: int = 1, extra: int = 0) -> dict:
    """`depth` nested push/pop ranges around every launch call of each replica (the innermost
    named 'launch'), one more around the first `extra` launch calls of each replica."""
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
    for level in range(depth + (1 if extra else 0)):
        pad = depth + 1 - level  # outer levels wider: a proper nesting
        wrap = ", ".join({"start": f"r0.start - {pad} + s.i * {span}", "end": f"r0.end + {pad} + s.i * {span}",
                          "eventType": "59", "text": "'launch'" if level == depth - 1 else f"'op{level}'",
                          "globalTid": "r0.globalTid", "domainId": "0"}.get(col, "NULL") for col in ncols)
        only = f"WHERE r0.rowid IN (SELECT rowid FROM r0 ORDER BY start LIMIT {extra})" if level == depth else ""
        c.execute(f"{series} INSERT INTO NVTX_EVENTS SELECT {wrap} FROM r0, s {only}")
    c.commit()
    counts = {t: c.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
              for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS")}
    c.execute("VACUUM")
    c.close()
    return counts


PEER = """
import resource, sqlite3, sys, time
from nsys_ai.nvtx_attribution import attribute_kernels_to_nvtx
conn = sqlite3.connect(sys.argv[1])
t = time.time()
rows = attribute_kernels_to_nvtx(conn, sqlite_path=sys.argv[1])
print(len(rows), time.time() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def _timed(cmd: list[str]) -> dict:
    """Wall time, CPU time and peak RSS of one child process (GNU time's numbers, by wait4)."""
    with tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:  # files: a full pipe would block it
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=fo, stderr=fe, text=True)
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        fo.seek(0)
        fe.seek(0)
        out, err = fo.read(), fe.read()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"wall_s": round(wall, 2), "cpu_s": round(ru.ru_utime + ru.ru_stime, 2), "peak_rss_mb": round(ru.ru_maxrss / 1024, 1),
            "rc": proc.returncode, "stdout": out.strip(), "stderr": err.strip()[-500:]}


# Each analysis as the user runs it, in the order the later ones expect (classify stores labels),
# on the database the ingest made. compare's second run is the same export with every kernel 10 %
# shorter (ingest keeps one copy of a file by hash, so the export itself cannot be a second run),
# ingested and classified (untimed) just before compare: the analyses before it see one run, as
# after the ingest (a classify of the first run after the second's labels writes its rows below
# them in the label table, SQLite's slower insert in the middle of a b-tree).
AFTER = "big-after"
ANALYSES = {
    "classify": ["classify"],
    "advise": ["advise"],
    "timeline": ["timeline"],
    "kernels": ["kernels"],
    "ranks": ["ranks"],
    "compare": ["compare", "big", AFTER],
    "phases": None,  # no command of its own (advise runs it): profkit.analyses.phases.detect
}


def after_run(src: Path, db: Path, work: Path) -> dict:
    """compare's second run in `db`: `src` with every kernel 10 % shorter, ingested and
    classified (untimed set-up; its ingest's numbers are returned for the record)."""
    dst = work / "after.nsys.sqlite"
    shutil.copy(src, dst)
    c = sqlite3.connect(dst)
    c.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start + (end - start) * 9 / 10")
    c.commit()
    c.close()
    r = _timed([sys.executable, "-m", "profkit.cli", "ingest", "--db", str(db), str(dst), "--run", AFTER])
    if r["rc"] == 0:
        r = _timed([sys.executable, "-m", "profkit.cli", "classify", "--db", str(db), "--run", AFTER]) | {
            "ingest": {k: r[k] for k in ("wall_s", "cpu_s", "peak_rss_mb")}
        }
    dst.unlink()
    if r["rc"] != 0:
        raise SystemExit(f"the after run failed: {r['stderr']}")
    return r["ingest"]
PHASES = """
import sys
from profkit.analyses import phases
from profkit.store.store import Store
with Store(sys.argv[1], create=False) as s:
    print(len(phases.detect(s, "big").phases))
"""


def analyses(db: Path, ingest: dict, only: list[str] | None = None, setup: dict | None = None) -> dict:
    """Wall, CPU and peak RSS of each analysis (a child process each) on `db`, and each as a
    ratio to `ingest` (wall and memory). `setup`: {analysis: untimed step run just before it}."""
    out = {}
    for name, args in ANALYSES.items():
        if only and name not in only:
            continue
        if setup and name in setup:
            setup[name]()
        cmd = [sys.executable, "-c", PHASES, str(db)] if args is None else \
            [sys.executable, "-m", "profkit.cli", args[0], "--db", str(db), *args[1:]]
        if args and args[0] in ("classify", "advise", "timeline", "kernels", "ranks"):
            cmd += ["--run", "big"]  # the after run is the newest
        r = _timed(cmd)
        out[name] = {"wall_s": r["wall_s"], "cpu_s": r["cpu_s"], "peak_rss_mb": r["peak_rss_mb"], "rc": r["rc"],
                     "wall_ratio": round(r["wall_s"] / ingest["wall_s"], 2),
                     "cpu_ratio": round(r["cpu_s"] / ingest["cpu_s"], 2),
                     "rss_ratio": round(r["peak_rss_mb"] / ingest["peak_rss_mb"], 2)}
        if r["rc"] != 0:
            out[name]["stderr"] = r["stderr"]
        print(f"{name:9s} {r['wall_s']:7.2f} s  {r['cpu_s']:7.2f} s CPU  {r['peak_rss_mb']:7.0f} MB  "
              f"{out[name]['wall_ratio']:5.2f}x ingest time ({out[name]['cpu_ratio']:5.2f}x CPU)  "
              f"{out[name]['rss_ratio']:5.2f}x its memory"
              + ("" if r["rc"] == 0 else f"  FAILED: {r['stderr'][-200:]}"), file=sys.stderr, flush=True)
    return out


def markdown(result: dict) -> str:
    """The analyses section's table, with the machine, versions and date it was measured on."""
    ing = result["analyses_ingest"]
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "not a git checkout (name it by hand)"
    head = (f"\n### {result['date']} {time.strftime('%H:%M', time.gmtime())} UTC, {result['host']}, "
            f"{result['cpus']} cores, load {result['load_avg_1m']}, Python {result['python']}, "
            f"SQLite {result['sqlite']}, numpy {__import__('numpy').__version__}, commit {commit}\n\n"
            f"{result['source_rows']['CUPTI_ACTIVITY_KIND_KERNEL']:,} kernels, "
            f"{result['source_rows']['NVTX_EVENTS']:,} NVTX rows; ingest {ing['wall_s']} s wall, "
            f"{ing['cpu_s']} s CPU, {ing['peak_rss_mb']:.0f} MB peak.\n\n"
            "| analysis | wall | CPU | peak RSS | wall / ingest | CPU / ingest | RSS / ingest |\n"
            "|---|---|---|---|---|---|---|\n")
    return head + "".join(f"| {n} | {a['wall_s']} s | {a['cpu_s']} s | {a['peak_rss_mb']:.0f} MB | "
                          f"**{a['wall_ratio']}** | {a['cpu_ratio']} | {a['rss_ratio']} |"
                          f"{'' if a['rc'] == 0 else ' failed'}\n"
                          for n, a in result["analyses"].items())


def check(src: Path, db: Path, replicas: int, depth: int) -> dict:
    """Correctness of the projection at scale: every replica's kernels sit under the paths the
    base export's kernels have (profkit's own row path on the base file), plus the wrap ranges."""
    from profkit.parsers import nsys_sqlite

    base = nsys_sqlite.parse(BASE)
    at = {f: i for i, f in enumerate(__import__("profkit.core.rows", fromlist=["x"]).KERNEL_FIELDS)}
    wraps = [f"op{i}" for i in range(depth - 1)] + ["launch"]
    want: dict = {}
    for k in base.kernels:
        names = list(k[at["nvtx_path"]].names) if k[at["nvtx_path"]] is not None else []
        if k[at["api_start_ns"]] is not None:  # a launch call: the grower wrapped it
            names = names + wraps
        key = json.dumps(names) if names else None
        want[key] = want.get(key, 0) + replicas
    c = sqlite3.connect(db)
    got = {r[0]: r[1] for r in c.execute("SELECT nvtx_names, count(*) FROM kernels GROUP BY 1")}
    # an extra innermost range around the first launches (--ranges beyond depth): count under its parent
    merged: dict = {}
    for names, n in got.items():
        if names and json.loads(names)[-1] == f"op{depth}":
            names = json.dumps(json.loads(names)[:-1])
        merged[names] = merged.get(names, 0) + n
    ok = merged == want
    return {"paths_ok": ok, "distinct_paths": len(got), **({} if ok else {"want": want, "got": merged})}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--ranges", type=int, default=0,
                    help="NVTX ranges to reach by nesting push/pop ranges around each launch (default: one each)")
    ap.add_argument("--source", help="an export already grown (e.g. by shared/bench/grow_export.py): time it, grow nothing")
    ap.add_argument("--peer-python", default=os.environ.get("NSYS_AI_PYTHON"),
                    help="a Python with nsys-ai installed: time its NVTX attribution on the same file, alternating")
    ap.add_argument("--repeat", type=int, default=1, help="alternating runs of each")
    ap.add_argument("--analyses", nargs="?", const="all", default=None,
                    help="then time each analysis on the database (all, or a comma list: classify,advise,...)")
    ap.add_argument("--md", help="append the analyses table to this markdown file")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "ingest.json"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        base_kernels = sqlite3.connect(BASE).execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
        replicas, depth, extra = -(-a.kernels // base_kernels), 1, 0
        grow_s = None
        if a.source:
            src = Path(a.source)
        else:
            src = Path(d) / "grown.nsys.sqlite"
            if a.ranges:
                launches = sqlite3.connect(BASE).execute(
                    "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId IN "
                    "(SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL)").fetchone()[0]
                per = a.ranges / replicas / launches
                depth, extra = int(per), round((per - int(per)) * launches)
            t0 = time.perf_counter()
            grow(src, replicas, depth, extra)
            grow_s = round(time.perf_counter() - t0, 2)
        counts = {t: sqlite3.connect(src).execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                  for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS")}
        runs, peer = [], []
        for i in range(a.repeat):
            db = Path(d) / f"bench{i}.db"
            r = _timed([sys.executable, "-m", "profkit.cli", "ingest", "--db", str(db), str(src), "--run", "big"])
            if r["rc"] != 0:
                print(r["stderr"], file=sys.stderr)
                return 1
            runs.append(r)
            if a.peer_python:
                p = _timed([a.peer_python, "-c", PEER, str(src)])
                if p["rc"] == 0:
                    n, secs, rss = p["stdout"].split()[-3:]
                    p.update(attributed=int(n), attribution_s=round(float(secs), 2))
                peer.append(p)
        kernels, ranges = counts["CUPTI_ACTIVITY_KIND_KERNEL"], counts["NVTX_EVENTS"]
        best = min(runs, key=lambda r: r["wall_s"])
        result = {
            "date": date.today().isoformat(), "host": platform.node(), "cpus": os.cpu_count(),
            "load_avg_1m": round(os.getloadavg()[0], 1), "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version, "source": "grown" if not a.source else str(a.source),
            "replicas": replicas if not a.source else None, "ranges_per_launch": depth, "source_rows": counts,
            "grow_s": grow_s, "ingest_wall_s": [r["wall_s"] for r in runs], "ingest_cpu_s": [r["cpu_s"] for r in runs],
            "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
            "kernels_per_s": round(kernels / best["wall_s"]), "nvtx_rows_per_s": round(ranges / best["wall_s"]),
            "stdout": best["stdout"],
        }
        if peer:
            ok = [p for p in peer if p["rc"] == 0]
            result["peer"] = {"tool": "nsys-ai NVTX attribution (innermost range, writes nothing)",
                              "wall_s": [p["wall_s"] for p in peer], "cpu_s": [p["cpu_s"] for p in peer],
                              "peak_rss_mb": max((p["peak_rss_mb"] for p in peer), default=None),
                              "failed": [p["stderr"] for p in peer if p["rc"] != 0]}
            if ok:
                result["ratio_wall"] = [round(r["wall_s"] / p["wall_s"], 2) for r, p in zip(runs, peer) if p["rc"] == 0]
                result["ratio_cpu"] = [round(r["cpu_s"] / p["cpu_s"], 2) for r, p in zip(runs, peer) if p["rc"] == 0]
        if a.analyses:
            only = None if a.analyses == "all" else a.analyses.split(",")
            result["analyses_ingest"] = {k: runs[0][k] for k in ("wall_s", "cpu_s", "peak_rss_mb")}
            def after() -> None:
                result["after_ingest"] = after_run(src, Path(d) / "bench0.db", Path(d))

            result["analyses"] = analyses(Path(d) / "bench0.db", runs[0], only, {"compare": after})
            if a.md:
                with open(a.md, "a") as f:
                    f.write(markdown(result))
        if not a.source:
            result["check"] = check(src, Path(d) / "bench0.db", replicas, depth)
    Path(a.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if result.get("check", {}).get("paths_ok", True) else 2


if __name__ == "__main__":
    sys.exit(main())
