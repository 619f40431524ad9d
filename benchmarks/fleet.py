"""A 256-rank run, synthesised from real rank traces: ingest in parallel, export to Parquet,
analyse through DuckDB (and the same SQL through Spark in local mode), find the straggler.

    python benchmarks/fleet.py [--ranks 256] [--straggler 173] [--spark] [--sequential]
                               [--work DIR] [--out benchmarks/results/fleet.md]

Source: profiles/ddp-2gpu-slow, two ranks of a real DDP run on one H200 (nsys exports), where
rank 1 runs extra compute and rank 0 waits for it at every all-reduce. Every synthetic rank is
a copy of rank 0 (a rank that waits) but the planted straggler, a copy of rank 1. Each copy
gets its own clock offset (0-50 ms, as separate nsys sessions have), every kernel's duration
scaled by 1 +- 1 % (NCCL kernels by 1 +- 3 %), seeded. The straggler must come out as the
slowest rank from the Parquet path.

Each phase runs in a child process; its wall time and the peak summed RSS of its process tree
(the ingest's parser pool included), polled every 20 ms, are reported.
"""
from __future__ import annotations

import argparse
import json
import lzma
import os
import platform
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "profiles" / "ddp-2gpu-slow"
WAITER = SOURCE / "ddp-2gpu-slow.rank0.nsys.sqlite.xz"
SLOW = SOURCE / "ddp-2gpu-slow.rank1.nsys.sqlite.xz"


def _timed_tables(conn) -> list[str]:
    out = []
    for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
        cols = {r[1] for r in conn.execute(f"PRAGMA table_info({t})")}
        if {"start", "end"} <= cols:
            out.append(t)
    return out


def synthesise(out: Path, ranks: int, straggler: int, seed: int = 53) -> list[Path]:
    """`ranks` nsys exports named fleet.rank<i>.nsys.sqlite under `out` (see the module doc)."""
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    files = []
    for i in range(ranks):
        dst = out / f"fleet.rank{i}.nsys.sqlite"
        dst.write_bytes(lzma.decompress((SLOW if i == straggler else WAITER).read_bytes()))
        conn = sqlite3.connect(dst)
        # the rank and world size the launcher set, as nsys recorded them (profkit reads the rank there)
        for var, val in (("RANK", i), ("LOCAL_RANK", i), ("WORLD_SIZE", ranks), ("LOCAL_WORLD_SIZE", ranks)):
            conn.execute("UPDATE META_DATA_CAPTURE SET value = ? WHERE name LIKE '%:ENVIRONMENT_VARIABLE' "
                         "AND value LIKE ?", (f'{var}="{val}"', f"{var}=%"))
        offset = rng.randrange(0, 50_000_000)
        for t in _timed_tables(conn):
            conn.execute(f'UPDATE {t} SET start = start + ?, "end" = "end" + ? ', (offset, offset))
        # duration jitter, one factor per kernel
        names = dict(conn.execute("SELECT id, value FROM StringIds"))
        rows = conn.execute("SELECT rowid, start, \"end\", shortName FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall()
        upd = []
        for rowid, s, e, short in rows:
            comm = str(names.get(short, "")).lower().startswith("nccl")
            f = 1 + rng.uniform(-0.03, 0.03) if comm else 1 + rng.uniform(-0.01, 0.01)
            upd.append((s + max(1, round((e - s) * f)), rowid))
        conn.executemany('UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = ? WHERE rowid = ?', upd)
        conn.commit()
        conn.close()
        files.append(dst)
    return files


def measured(cmd: list[str], env: dict | None = None) -> dict:
    """Run cmd; wall seconds and peak RSS (MB) summed over its process tree."""
    import psutil

    t0 = time.perf_counter()
    # output to files, not pipes: a full pipe nobody reads while polling would block the child
    so_f, se_f = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
    p = subprocess.Popen(cmd, stdout=so_f, stderr=se_f, text=True, env={**os.environ, **(env or {})})
    proc, peak = psutil.Process(p.pid), 0
    while p.poll() is None:
        total = 0
        try:
            for q in [proc, *proc.children(recursive=True)]:
                try:
                    total += q.memory_info().rss
                except psutil.Error:
                    pass
        except psutil.Error:
            pass
        peak = max(peak, total)
        time.sleep(0.02)
    wall = time.perf_counter() - t0
    so_f.seek(0)
    se_f.seek(0)
    so, se = so_f.read(), se_f.read()
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{se[-3000:]}")
    return {"wall_s": round(wall, 2), "peak_rss_mb": round(peak / 2**20), "stdout": so}


def spark_run(dataset: Path) -> dict:
    """The fleet SQL on Spark in local mode: session start, views, ranks; in this process."""
    t0 = time.perf_counter()
    from profkit.analyses import fleet as fl

    e = fl.Spark(cores=os.cpu_count() or 2)
    started = time.perf_counter() - t0
    e.views(dataset)
    e.sql(fl.RANK_STEP_SQL)
    f = fl.ranks(e)
    k = fl.kernels(e, top=3)
    e.close()
    return {"slowest_rank": f.slowest_rank, "session_s": round(started, 2),
            "total_s": round(time.perf_counter() - t0, 2), "top_kernel": k[0]["short_name"] if k else None,
            "per_rank": f.per_rank}


def versions() -> dict:
    import duckdb
    import pyarrow

    v = {"python": platform.python_version(), "duckdb": duckdb.__version__, "pyarrow": pyarrow.__version__}
    try:
        import pyspark

        v["pyspark"] = pyspark.__version__
        v["java"] = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    except Exception:
        pass
    return v


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=256)
    ap.add_argument("--straggler", type=int, default=173)
    ap.add_argument("--spark", action="store_true", help="Also run the same SQL on pyspark, local mode.")
    ap.add_argument("--sequential", action="store_true", help="Also time the ingest with one parser (workers=1).")
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "fleet.md")
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="profkit-fleet-"))
    py = sys.executable
    res: dict = {"ranks": a.ranks, "straggler": a.straggler, "date": datetime.now(timezone.utc).isoformat()[:16],
                 "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
                            f"{round(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30)} GiB",
                 "versions": versions(), "load_start": [round(x, 1) for x in os.getloadavg()]}
    t0 = time.perf_counter()
    files = synthesise(work / "fleet", a.ranks, a.straggler)
    res["synthesise_s"] = round(time.perf_counter() - t0, 2)
    res["input_mb"] = round(sum(f.stat().st_size for f in files) / 2**20)
    db = work / "fleet.db"
    if a.sequential:
        seq = work / "fleet-seq.db"
        code = ("import sys; from pathlib import Path; from profkit.store.ingest import ingest; "
                f"ingest({str(seq)!r}, [Path({str(work / 'fleet')!r})], workers=1)")
        res["ingest_sequential"] = measured([py, "-c", code])
        res["ingest_sequential"].pop("stdout")
    res["ingest"] = measured([py, "-m", "profkit", "ingest", str(work / "fleet"), "--db", str(db)])
    res["ingest"].pop("stdout")
    pq = work / "parquet"
    res["export"] = measured([py, "-m", "profkit", "export", "--parquet", str(pq), "--db", str(db)])
    res["export"].pop("stdout")
    res["parquet_mb"] = round(sum(f.stat().st_size for f in pq.rglob("*.parquet")) / 2**20, 1)
    for what in ("ranks", "kernels", "classify", "advise"):
        r = measured([py, "-m", "profkit", "fleet", what, str(pq), "--json"])
        rows = json.loads(r.pop("stdout"))
        if what == "ranks":
            res["found"] = rows["slowest_rank"]
        res[f"duckdb_{what}"] = r
    if a.spark:
        code = (f"import json, sys; sys.path.insert(0, {str(ROOT / 'benchmarks')!r}); import fleet; "
                f"r = fleet.spark_run(__import__('pathlib').Path({str(pq)!r})); r.pop('per_rank'); "
                "print(json.dumps(r))")
        r = measured([py, "-c", code])
        res["spark"] = {**r, **json.loads(r.pop("stdout").strip().splitlines()[-1])}
    res["load_end"] = [round(x, 1) for x in os.getloadavg()]
    print(json.dumps(res, indent=2))
    write_md(a.out, res)
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)


def write_md(path: Path, r: dict) -> None:
    ok = all(v == r["straggler"] for v in r["found"].values())
    lines = [f"# Fleet: {r['ranks']} ranks through Parquet and DuckDB", "",
             f"{r['date']} UTC; {r['machine']}; " + ", ".join(f"{k} {v}" for k, v in r["versions"].items()) + ".", "",
             f"Input: {r['ranks']} nsys exports ({r['input_mb']} MB) synthesised from profiles/ddp-2gpu-slow "
             f"(H200, 2 ranks) by benchmarks/fleet.py in {r['synthesise_s']} s: rank {r['straggler']} is a copy of the "
             "slow rank, every other of the waiting rank, each with its own clock offset and jittered durations.", "",
             f"Load average (1, 5, 15 min) at the start {r['load_start']}, at the end {r['load_end']}: the "
             "machine's two cores are shared with other sessions, and times scale with the load.", "",
             "| phase | wall s | peak RSS MB (process tree) |", "|---|---:|---:|"]
    for k in ("ingest_sequential", "ingest", "export", "duckdb_ranks", "duckdb_kernels", "duckdb_classify",
              "duckdb_advise", "spark"):
        if k in r:
            lines.append(f"| {k.replace('_', ' ')} | {r[k]['wall_s']} | {r[k]['peak_rss_mb']} |")
    lines += ["", f"Parquet dataset: {r['parquet_mb']} MB. Straggler planted at rank {r['straggler']}; "
              f"found by `profkit fleet ranks` (DuckDB): {r['found']} ({'right' if ok else 'WRONG'})."]
    if "spark" in r:
        s = r["spark"]
        lines.append(f"Spark (pyspark local mode, same SQL text): slowest rank {s['slowest_rank']}, session start "
                     f"{s['session_s']} s, total {s['total_s']} s in process (child wall {s['wall_s']} s).")
    lines += ["", "ingest: `profkit ingest DIR` (parsers in a process pool, one per core, one writer); ingest "
              "sequential: the same with workers=1; export: `profkit export --parquet`; duckdb *: `profkit fleet * "
              "DIR --json`, DuckDB memory_limit 1 GB; spark: the same SQL text through pyspark, local[cores], one "
              "session, rank_step cached, in one child process. The machine is shared with other sessions and has "
              "two cores: the pool can at most halve the parsing, and the writes (one writer) stay serial. Spark "
              "runs here only, not in CI: pyspark is a 456 MB install and needs Java.", ""]
    path.write_text("\n".join(lines))


if __name__ == "__main__":
    main()
