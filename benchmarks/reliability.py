#!/usr/bin/env python3
"""Measure what issue 17's promises cost and how fast they act (the tests check that they hold;
timings live here, never in tests):

- profkit sql: time from SIGINT / SIGTERM to exit of a query that never ends; --timeout's
  overshoot; peak RSS of a 5 M-row CSV and JSON (streamed) against holding the rows whole;
  a count(DISTINCT) over 30 M values under --memory (in memory, no temp file);
- decompression: time and bytes written before a 7000x .xz bomb is refused;
- whole-or-refused checks: the .ncu-rep framing walk and the SQLite page count against the
  ingest they guard; the nsys export work budget (progress handler) against none.

    python benchmarks/reliability.py [--out benchmarks/results/reliability.json] [--repeat 5]
"""
from __future__ import annotations

import argparse
import json
import lzma
import os
import platform
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOREVER = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c"


def rows_cte(n, extra=""):
    return f"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < {n}) SELECT x{extra} FROM c"


def profkit(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "profkit.cli", *map(str, args)], **kw)


def stop_latency(db: Path, sig: int, repeat: int) -> dict:
    """Seconds from the signal to the process's exit, the query having run 3 s."""
    out = []
    for _ in range(repeat):
        p = profkit("sql", "--db", db, "--timeout", "0", FOREVER, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(3)
        t0 = time.perf_counter()
        p.send_signal(sig)
        p.wait()
        out.append(time.perf_counter() - t0)
        assert p.returncode == 128 + sig, p.returncode
    return {"runs": [round(x, 3) for x in out], "median_s": round(statistics.median(out), 3), "max_s": round(max(out), 3)}


def timeout_overshoot(db: Path, repeat: int) -> dict:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        p = profkit("sql", "--db", db, "--timeout", "2", FOREVER, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        p.wait()
        out.append(time.perf_counter() - t0)
    return {"limit_s": 2, "wall_s": [round(x, 2) for x in out], "note": "wall includes interpreter start (~1 s)"}


def peak_rss(args: list, stdout=subprocess.DEVNULL) -> tuple[int, float, int]:
    """(peak RSS bytes, seconds, exit code) of a profkit command, sampled every 20 ms."""
    import psutil

    t0 = time.perf_counter()
    p = profkit(*args, stdout=stdout, stderr=subprocess.DEVNULL)
    ps = psutil.Process(p.pid)
    peak = 0
    while p.poll() is None:
        try:
            peak = max(peak, ps.memory_info().rss)
        except psutil.Error:
            break
        time.sleep(0.02)
    return peak, time.perf_counter() - t0, p.returncode


def whole_in_memory(n: int) -> int:
    """Peak RSS of the previous `profkit sql`: every row fetched into dicts first."""
    query = rows_cte(n, ", printf('%040d', x) AS s")
    code = ("import sqlite3,resource;c=sqlite3.connect(':memory:');cur=c.execute(" + repr(query) + ");"
            "cols=[d[0] for d in cur.description];rows=[dict(zip(cols,r)) for r in cur.fetchall()];"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    return int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout) * 1024


def bomb(tmp: Path) -> dict:
    path = tmp / "bomb.ncu-rep.xz"
    c = lzma.LZMACompressor(preset=0)
    with open(path, "wb") as f:
        for _ in range(1024):  # 1 GiB of zeros
            f.write(c.compress(bytes(1 << 20)))
        f.write(c.flush())
    scratch = tmp / "scratch"
    scratch.mkdir()
    env = dict(os.environ, TMPDIR=str(scratch))
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "profkit.cli", "ingest", "--db", str(tmp / "b.db"), str(path)],
                       capture_output=True, text=True, env=env)
    secs = time.perf_counter() - t0
    written = sum(p.stat().st_size for p in scratch.rglob("*") if p.is_file())
    return {"compressed_bytes": path.stat().st_size, "declared_bytes": 1 << 30, "exit": r.returncode,
            "message": r.stderr.strip(), "seconds": round(secs, 2), "bytes_written": written}


def checks(tmp: Path) -> dict:
    from profkit.parsers import _ncu_framing, nsys_sqlite

    from profkit.core.dbfile import check_whole

    raw = tmp / "ws.ncu-rep"
    raw.write_bytes(lzma.decompress((ROOT / "tests/data/field-h100/ws_nonvtx.ncu-rep.xz").read_bytes()))
    t0 = time.perf_counter()
    for _ in range(20):
        assert _ncu_framing.check(raw) is None
    framing = (time.perf_counter() - t0) / 20
    t0 = time.perf_counter()
    p = profkit("ingest", "--db", tmp / "w.db", raw, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    p.wait()
    ingest = time.perf_counter() - t0
    biggest = max(ROOT.glob("profiles/*/*.nsys.sqlite"), key=lambda p: p.stat().st_size)
    t0 = time.perf_counter()
    for _ in range(200):
        check_whole(biggest)
    header = (time.perf_counter() - t0) / 200

    def parse_time(budget: bool) -> float:
        saved = nsys_sqlite.work_budget
        if not budget:
            nsys_sqlite.work_budget = lambda conn, steps: None
        try:
            best = float("inf")
            for _ in range(5):
                t0 = time.perf_counter()
                nsys_sqlite.parse(biggest)
                best = min(best, time.perf_counter() - t0)
            return best
        finally:
            nsys_sqlite.work_budget = saved

    return {"ncu_framing_walk_s": round(framing, 4), "ncu_rep_bytes": raw.stat().st_size,
            "ncu_rep_ingest_s": round(ingest, 2), "sqlite_header_check_s": round(header, 6),
            "nsys_export": biggest.name, "nsys_export_bytes": biggest.stat().st_size,
            "nsys_parse_with_budget_s": round(parse_time(True), 3), "nsys_parse_without_budget_s": round(parse_time(False), 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/reliability.json"))
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    res: dict = {"date": date.today().isoformat(), "machine": f"{platform.machine()} VM, {os.cpu_count()} cores",
                 "python": platform.python_version(), "sqlite": sqlite3.sqlite_version,
                 "load_average_at_start": os.getloadavg()}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        db = tmp / "p.db"
        subprocess.run([sys.executable, "-m", "profkit.cli", "ingest", "--db", str(db),
                        str(ROOT / "tests/data/known/known.cupti.jsonl")], check=True, capture_output=True)
        res["sigint_to_exit"] = stop_latency(db, signal.SIGINT, a.repeat)
        res["sigterm_to_exit"] = stop_latency(db, signal.SIGTERM, a.repeat)
        res["timeout"] = timeout_overshoot(db, a.repeat)
        n = 5_000_000
        for fmt in ("--csv", "--json"):
            peak, secs, code = peak_rss(["sql", "--db", db, fmt, "--timeout", "0", rows_cte(n, ", printf('%040d', x) AS s")])
            res[f"stream_{fmt[2:]}_5M_rows"] = {"peak_rss_mb": round(peak / 2**20), "seconds": round(secs, 1), "exit": code}
        res["whole_in_memory_5M_rows_peak_rss_mb"] = round(whole_in_memory(n) / 2**20)
        distinct = rows_cte(30_000_000).replace("SELECT x FROM c", "SELECT count(DISTINCT x || 'abcdefghijabcdefghijabcdefghij') FROM c")
        peak, secs, code = peak_rss(["sql", "--db", db, "--timeout", "0", distinct])
        res["count_distinct_30M"] = {"peak_rss_mb": round(peak / 2**20), "seconds": round(secs, 1), "exit": code,
                                     "memory_limit_mb": 2048}
        peak, secs, code = peak_rss(["sql", "--db", db, "--timeout", "0", "--memory", "256", distinct])
        res["count_distinct_30M_under_256MB"] = {"peak_rss_mb": round(peak / 2**20), "seconds": round(secs, 1),
                                                 "exit": code}
        res["xz_bomb_1GiB"] = bomb(tmp)
        res["checks"] = checks(tmp)
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
