"""Figures of `profkit capture` on ordinary programs (issue 16), from what
benchmarks/gpu/capture_programs.sh left: its timings file and the capture database.

    python benchmarks/capture_programs.py --db cap.db --timings timings.txt [--json out.json]

Per run: timeline launches, launches ncu profiled (and the plan's prediction), launches labelled
from a measured sibling (sampled_from), labels; per program: wall time alone, under nsys, under
the CUPTI tracer, under ncu, and of the whole `profkit capture` (timeline + ncu + load).
"""
from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from profkit.analyses.classify import classify
from profkit.store.store import Store


def timings(path: Path) -> dict[str, dict]:
    """{step name: {"s": wall seconds, "rc": exit code}} from lines 'NAME SECONDS RC'."""
    out = {}
    for line in Path(path).read_text().splitlines():
        parts = line.split()
        if len(parts) == 3:
            out[parts[0]] = {"s": float(parts[1]), "rc": int(parts[2])}
    return out


def runs(db: str) -> dict[str, dict]:
    out = {}
    with Store(db) as s:
        for run in s.runs():
            meta = json.loads(s.query("SELECT meta FROM run WHERE run = ?", (run,))[0]["meta"] or "{}")
            k = s.query("""SELECT count(*) AS launches, count(DISTINCT short_name) AS kernels,
                                  sum(EXISTS (SELECT 1 FROM launch n WHERE n.timeline_id = k.kernel_id)) AS measured,
                                  count(sampled_from) AS sampled, sum(duration_ns) AS gpu_ns
                           FROM kernels k WHERE run = ? AND source != 'ncu'""", (run,))[0]
            ncu = s.query("SELECT count(*) n, count(timeline_id) linked FROM launch WHERE run = ? AND source = 'ncu'",
                          (run,))[0]
            labels = Counter(r["label"] for r in classify(s, run))
            from_counters = s.query("""SELECT count(*) n FROM classifications c WHERE run = ?
                                       AND json_extract(c.evidence, '$.rule') NOT IN ('none', 'launch_overhead')""",
                                    (run,))[0]["n"]
            plan = (meta.get("sampling") or {}).get("plan") or {}
            out[run] = {"launches": k["launches"], "kernels": k["kernels"], "gpu_ms": (k["gpu_ns"] or 0) / 1e6,
                        "configs": plan.get("configs"), "predicted": plan.get("profiled"),
                        "ncu_launches": ncu["n"], "linked": ncu["linked"], "measured": k["measured"] or 0,
                        "sampled_from": k["sampled"], "labels": dict(labels.most_common()),
                        "labelled_from_counters": from_counters,
                        "timeline_s": meta.get("timeline_seconds"), "ncu_s": meta.get("ncu_seconds"),
                        "failures": meta.get("failures"), "gpu": meta.get("gpu_name"),
                        "versions": {k2: meta.get(k2) for k2 in ("ncu_version", "nsys_version", "torch_version",
                                                                "driver", "cuda")}}
    return out


def table(t: dict, r: dict) -> str:
    rows = ["| run | launches | kernels | configs | ncu profiled (plan) | linked | sampled_from | labels |",
            "|---|---:|---:|---:|---:|---:|---:|---|"]
    for run, x in r.items():
        labels = ", ".join(f"{k} {v}" for k, v in x["labels"].items())
        rows.append(f"| {run} | {x['launches']:,} | {x['kernels']} | {x['configs']} | {x['ncu_launches']} "
                    f"({x['predicted']}) | {x['linked']} | {x['sampled_from']:,} | {labels} |")
    rows += ["", "| step | wall s | exit |", "|---|---:|---:|"]
    rows += [f"| {name} | {v['s']:.1f} | {v['rc']} |" for name, v in t.items()]
    return "\n".join(rows)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--db", required=True)
    p.add_argument("--timings", required=True)
    p.add_argument("--json", default=None)
    a = p.parse_args()
    t, r = timings(Path(a.timings)), runs(a.db)
    if a.json:
        Path(a.json).write_text(json.dumps({"timings": t, "runs": r}, indent=2) + "\n")
    print(table(t, r))


if __name__ == "__main__":
    main()
