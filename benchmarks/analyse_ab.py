"""The main job, `profkit analyse PROFILES`, on a fresh database: two profkit installs
alternating in one run (issue 19 item 5), wall and CPU (user + sys, the ncu reader processes
included), peak RSS of the largest process, the load average before each run; and whether
their printed output is the same.

    python benchmarks/analyse_ab.py --pairs 5 --profiles profiles \\
        before=/path/to/old/venv/bin/profkit after=.venv/bin/profkit

Prints one JSON line per run and a summary (medians, the ratio of medians) at the end.
The printed output of each side is compared line by line, the run's own seconds and the
temporary paths masked.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile
import time


def one(exe: str, profiles: str) -> tuple[dict, str]:
    with tempfile.TemporaryDirectory() as d:
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        with open(f"{d}/out", "w+") as out, open(f"{d}/err", "w+") as err:
            p = subprocess.Popen(["/usr/bin/time", "-f", "%M", exe, "analyse", profiles, "--db", f"{d}/a.db",
                                  "--html", f"{d}/r.html"], stdout=out, stderr=err, text=True, cwd=d)
            _, status, ru = os.wait4(p.pid, 0)
            wall = time.perf_counter() - t0
            out.seek(0)
            err.seek(0)
            text, tail = out.read(), err.read().strip().splitlines()
        printed = re.sub(r" in \d+ s;", " in N s;", text.replace(d, "D"))
        return ({"wall_s": round(wall, 2), "cpu_s": round(ru.ru_utime + ru.ru_stime, 2),
                 "user_s": round(ru.ru_utime, 2), "sys_s": round(ru.ru_stime, 2),
                 "peak_rss_mb": int(tail[-1]) // 1024 if tail and tail[-1].isdigit() else None,
                 "rc": os.waitstatus_to_exitcode(status), "load_before": round(load, 2)}, printed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sides", nargs=2, help="NAME=PROFKIT_EXECUTABLE, the first is the baseline")
    ap.add_argument("--profiles", default="profiles")
    ap.add_argument("--pairs", type=int, default=3)
    a = ap.parse_args()
    sides = {k: os.path.abspath(v) if os.sep in v else v for k, v in (s.split("=", 1) for s in a.sides)}
    runs: dict[str, list[dict]] = {k: [] for k in sides}
    printed: dict[str, str] = {}
    for _ in range(a.pairs):
        for name, exe in sides.items():
            row, printed[name] = one(exe, os.path.abspath(a.profiles))
            runs[name].append(row)
            print(json.dumps({"side": name, **row}), flush=True)
            if row["rc"] != 0:
                raise SystemExit(f"{name}: {exe} analyse exited with {row['rc']}; nothing to compare")
    base, new = list(sides)
    med = {k: {m: statistics.median(r[m] for r in v) for m in ("wall_s", "cpu_s")} for k, v in runs.items()}
    print(json.dumps({"median": med, "ratio_wall": round(med[base]["wall_s"] / med[new]["wall_s"], 2),
                      "ratio_cpu": round(med[base]["cpu_s"] / med[new]["cpu_s"], 2),
                      "same_output": printed[base] == printed[new]}))


if __name__ == "__main__":
    main()
