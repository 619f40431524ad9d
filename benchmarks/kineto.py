"""Time and peak memory of reading torch.profiler (Kineto) traces, against json.load.

    python benchmarks/kineto.py TRACE [TRACE ...] [--json OUT]

Each measurement runs in a fresh process (peak RSS is per process): profkit's parser
(parsers/kineto.py, streaming) and, as the baseline, `json.load` of the same file (what a
reader that loads the whole JSON needs before it has read a single row). RSS of a process
that only imported the same modules is given too, so the parse's own share is visible.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, resource, sys, time, gzip
what, path = sys.argv[1], sys.argv[2]
from profkit.parsers import kineto
from profkit.core.errors import BadInput
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
out = {}
if what == "profkit":
    try:
        r = kineto.parse(path)
        out.update(kernels=len(r.kernels), ranges=len(r.ranges), events=r.facts["kineto"]["events"],
                   ranged=sum(1 for k in r.kernels if k[4] is not None))
    except BadInput as e:
        out["refused"] = e.problem
elif what == "json.load":
    with (gzip.open(path, "rt") if open(path, "rb").read(2) == b"\x1f\x8b" else open(path)) as f:
        d = json.load(f)
    out["events"] = len(d.get("traceEvents", []))
out.update(seconds=time.perf_counter() - t, import_rss_mb=base / 1024,
           peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
print(json.dumps(out))
"""


def measure(what: str, path: Path) -> dict:
    r = subprocess.run([sys.executable, "-c", CHILD, what, str(path)], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(r.stdout)


def text_size(path: Path) -> int:
    with open(path, "rb") as f:
        if f.read(2) != b"\x1f\x8b":
            return path.stat().st_size
    n = 0
    with gzip.open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            n += len(chunk)
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("traces", nargs="+", type=Path)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    rows = []
    for p in a.traces:
        row = {"file": p.name, "file_mb": p.stat().st_size / 1e6, "json_mb": text_size(p) / 1e6,
               "profkit": measure("profkit", p), "json.load": measure("json.load", p)}
        rows.append(row)
        pk, jl = row["profkit"], row["json.load"]
        print(f"{p.name}: {row['file_mb']:.1f} MB on disk, {row['json_mb']:.1f} MB of JSON; "
              f"profkit {pk.get('seconds', 0):.2f} s, peak {pk.get('peak_rss_mb', 0):.0f} MB "
              f"(import {pk.get('import_rss_mb', 0):.0f} MB), kernels {pk.get('kernels')}, ranges {pk.get('ranges')}"
              f"{' refused: ' + pk['refused'] if 'refused' in pk else ''}{' error: ' + pk['error'] if 'error' in pk else ''}; "
              f"json.load {jl.get('seconds', 0):.2f} s, peak {jl.get('peak_rss_mb', 0):.0f} MB", flush=True)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
