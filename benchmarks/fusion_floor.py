"""The fusion floor against a realised fusion: predicted vs realised gain per call.

    python benchmarks/fusion_floor.py REPORT [REPORT ...] [--json OUT]

Each report (a torch.profiler trace with record_shapes, or a capture folder) holds ranges
OP.eager and OP.compiled (benchmarks/programs/fusion_floor.py writes one): `advise` floors the
eager range (its fusion floor from the operators' shapes, else the counters' chain), so it
predicts a gain of eager per call - floor; torch.compile's fused version realises eager per call -
compiled per call. The issue's bar: predicted within +-35 % of realised.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path


def measure(path: Path) -> list[dict]:
    from profkit.analyses.advise import advise
    from profkit.store.ingest import ingest
    from profkit.store.store import Store

    out = []
    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "t.db"
        ingest(db, [path], run="t")
        with Store(db) as s:
            a = advise(s, "t")
            rows = s.query("SELECT nvtx_path, sum(duration_ns) AS ns FROM kernels WHERE run = 't' AND nvtx_path IS NOT"
                           " NULL GROUP BY nvtx_path")
    per_path = {r["nvtx_path"]: r["ns"] for r in rows}
    for it in a.items:
        if not it.nvtx_path or not it.nvtx_path.endswith(".eager") or it.floor_ns is None:
            continue
        op = it.nvtx_path.rsplit("/", 1)[-1][:-len(".eager")]
        compiled = next((ns for p, ns in per_path.items() if p.endswith(f"{op}.compiled")), None)
        if compiled is None:
            continue
        eager = it.per_call_ns
        done = compiled / it.calls
        predicted, realised = eager - it.floor_ns, eager - done
        out.append({"report": str(path), "op": op, "eager_us": eager / 1e3, "floor_us": it.floor_ns / 1e3,
                    "compiled_us": done / 1e3, "predicted_us": predicted / 1e3, "realised_us": realised / 1e3,
                    "ratio": predicted / realised if realised else None, "how": it.how})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", nargs="+", type=Path)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    rows = [r for p in a.reports for r in measure(p)]
    print(f"{'op':<16} {'eager us':>9} {'floor us':>9} {'compiled us':>11} {'predicted':>10} {'realised':>9} "
          f"{'ratio':>6}")
    for r in rows:
        ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "-"
        print(f"{r['op']:<16} {r['eager_us']:>9.1f} {r['floor_us']:>9.1f} {r['compiled_us']:>11.1f} "
              f"{r['predicted_us']:>10.1f} {r['realised_us']:>9.1f} {ratio:>6}")
        print(f"    {r['how'][:200]}")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
