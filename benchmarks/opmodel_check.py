"""The operator model on the GPU machine's captures (issue 52): FLOPs and bytes against ncu,
labels from shapes against labels from counters, the attained-share threshold, the fusion floor.

    python benchmarks/opmodel_check.py [--data tests/data/opmodel-h100] [--json OUT]

Data (tests/data/opmodel-h100/README.md): per program a torch.profiler trace of one training
step with record_shapes (NAME.kineto.json.gz) and the raw page of an ncu report of the same
step of the same program run again (NAME.raw.csv.xz); the fusion captures (fusion-*.nsys.sqlite.xz).

(a) per operator whose kernels ncu measured (profkit.analyses.opcheck pairs them by order):
    FLOPs of matmul and attention within 10 % of ncu's; the model's reads within 25 % of ncu's
    DRAM reads for memory-bound families (operators reading 1 MB and more); writes compared where
    the output outgrows the 50 MB L2.
(b) the share of the measured kernels' GPU time where the label from shapes is the counted
    roofline's (the same rule on ncu's FLOPs, DRAM bytes and duration) and classify's.
(c) fusion: eager per call - the fusion floor (from the --torch-ranges capture's shapes)
    predicted vs eager - compiled realised (the plain capture's per-call times).
(d) the agreement of (b) with the shapes' attained threshold swept.
"""

from __future__ import annotations

import argparse
import json
import lzma
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "opmodel-h100"
# the forward's launches (ncu's NVTX filter: one thread), then the whole step (every thread's
# launches between cudaProfilerStart/Stop: forward, backward, optimizer) against the same trace
PROGRAMS = ("gpt2-eager-step2", "resnet18-step3", "gpt2-eager-step2-full", "resnet18-step3-full")
L2_BYTES = 50 * 2**20  # H100 SXM
MEMORY_FAMILIES = ("elementwise", "norm", "softmax", "memory", "reduction", "embedding", "optimizer")
# reads below this are DRAM pages and sectors, not tensors: a kernel reads 4-10 KB of its own
# (a 0-d add 6 KB, every fill_ 4-10 KB), so a 64 KB operand is counted at 88 KB
MIN_BYTES = 2**20
FUSED = ("rmsnorm", "gelu_epilogue", "add_layernorm")


def unpack(src: Path, d: Path) -> Path:
    if src.suffix == ".xz":
        out = d / src.name[:-3]
        with lzma.open(src) as f, open(out, "wb") as g:
            shutil.copyfileobj(f, g)
        return out
    return src


def load(db: Path, data: Path, name: str, d: Path) -> tuple[str, str]:
    from profkit.store.ingest import ingest

    base = name.removesuffix("-full")
    if base == name:
        ingest(db, [data / f"{base}.kineto.json.gz"], run=f"{base}-shapes")
    ingest(db, [unpack(data / f"{name}.raw.csv.xz", d)], run=f"{name}-ncu")
    return f"{base}-shapes", f"{name}-ncu"


def op_checks(rows: list[dict]) -> dict:
    """(a) over one program's operators."""
    from profkit.analyses.opcheck import ratio

    flops, conv, reads, writes, small = [], [], [], [], []
    for r in rows:
        if r["family"] in ("matmul", "attention") and r["model_flops"]:
            flops.append({**r, "ratio": ratio(r["model_flops"], r["ncu_flops"])})
        if r["family"] == "conv" and r["model_flops"]:
            conv.append({**r, "ratio": ratio(r["model_flops"], r["ncu_flops"])})
        if r["family"] in MEMORY_FAMILIES and r["model_write"] is not None:
            rd = r["model_read"] or 0
            if rd >= MIN_BYTES and r["ncu_read"]:
                reads.append({**r, "ratio": rd / r["ncu_read"]})
            elif r["ncu_read"]:
                small.append({**r, "ratio": rd / r["ncu_read"]})
            if r["model_write"] > L2_BYTES and r["ncu_write"]:
                writes.append({**r, "ratio": r["model_write"] / r["ncu_write"]})

    def within(xs, tol):
        ok = [x for x in xs if x["ratio"] is not None and abs(x["ratio"] - 1) <= tol]
        t = sum(x["gpu_ns"] for x in xs) or 1
        return {
            "ops": len(xs),
            "within": len(ok),
            "time_share_within": sum(x["gpu_ns"] for x in ok) / t,
            "outside": [
                (x["op"], x["dims"][:60], round(x["ratio"], 3) if x["ratio"] else None) for x in xs if x not in ok
            ],
            "by_shape": by_shape(xs),
        }

    def by_shape(xs):
        """operator and dims -> [lowest ratio, highest, calls]"""
        out: dict = {}
        for x in xs:
            out.setdefault(f"{x['op']} {x['dims']}", []).append(x["ratio"])
        return {k: [round(min(v), 3), round(max(v), 3), len(v)] for k, v in out.items() if None not in v}

    return {
        "flops": within(flops, 0.10),
        "conv_flops": within(conv, 0.10),  # not in the bar: reported
        "reads": within(reads, 0.25),
        "writes_beyond_l2": within(writes, 0.25),
        # reads under 1 MiB, not in the bar: [model's, ncu's] bytes by shape
        "reads_below_1mib": {
            f"{x['op']} {x['dims']}": [round(x["model_read"] or 0), round(x["ncu_read"])] for x in small
        },
    }


def fusion_checks(data: Path, d: Path) -> list[dict]:
    """(c): the fusion floor of each eager block from the --torch-ranges capture's shapes."""
    from profkit.analyses import fusion
    from profkit.store.ingest import ingest
    from profkit.store.store import Store

    db = d / "fusion.db"
    ingest(db, [unpack(data / "fusion-eager-vs-compiled.nsys.sqlite.xz", d)], run="plain")
    ingest(db, [unpack(data / "fusion-torch-ranges.nsys.sqlite.xz", d)], run="shapes")
    out = []
    with Store(db) as s:
        ops = fusion.ops_of(s, "shapes")
        gpu = s.query("SELECT gpu_name FROM run WHERE run = 'shapes'")[0]["gpu_name"]
        for op in FUSED:
            per = {}
            for v in ("eager", "compiled"):
                r = s.query(
                    "SELECT count(*) n, sum(duration_ns) ns FROM kernels WHERE run = 'plain' AND nvtx_path = ?",
                    (f"{op}.{v}",),
                )[0]
                per[v] = r["ns"]
            ks = s.query(
                "SELECT kernel_id, nvtx_path, duration_ns FROM kernels WHERE run = 'shapes' AND nvtx_path LIKE ?"
                " ORDER BY start_ns",
                (f"{op}.eager/%",),
            )
            calls = s.query("SELECT count(*) n FROM nvtx_range WHERE run = 'shapes' AND text = ?", (f"{op}.eager",))[0][
                "n"
            ]
            eager_calls = s.query(
                "SELECT count(*) n FROM nvtx_range WHERE run = 'plain' AND text = ?", (f"{op}.eager",)
            )[0]["n"]
            per_call = len(ks) // calls
            f = fusion.floor(ks[:per_call], ops, None, gpu)
            eager = per["eager"] / eager_calls
            compiled = per["compiled"] / eager_calls
            floor_ns = f[0] if f else None
            predicted = eager - floor_ns if floor_ns is not None else None
            realised = eager - compiled
            out.append(
                {
                    "op": op,
                    "calls": eager_calls,
                    "eager_us": eager / 1e3,
                    "compiled_us": compiled / 1e3,
                    "floor_us": floor_ns / 1e3 if floor_ns is not None else None,
                    "predicted_us": predicted / 1e3 if predicted is not None else None,
                    "realised_us": realised / 1e3,
                    "ratio": predicted / realised if predicted is not None and realised else None,
                    "how": f[1] if f else "no fusion floor",
                }
            )
    return out


def measure(data: Path = DATA, sweep=(0.3, 0.4, 0.5, 0.6, 0.7, 0.8)) -> dict:
    from profkit.analyses import opcheck
    from profkit.store.store import Store

    res: dict = {"programs": {}, "fusion": []}
    with tempfile.TemporaryDirectory() as t:
        d = Path(t)
        db = d / "ops.db"
        for name in PROGRAMS:
            shapes, ncu = load(db, data, name, d)
            with Store(db) as s:
                rows = opcheck.operators(s, shapes, ncu)
                labs = opcheck.labels(s, shapes, ncu)
                sw = {str(a): opcheck.agreement(opcheck.labels(s, shapes, ncu, attained=a)) for a in sweep}
            res["programs"][name] = {
                "kernels_paired": len(labs),
                "ops": op_checks(rows),
                "agreement_counted_roofline": opcheck.agreement(labs),
                "agreement_strict": opcheck.agreement(labs, strict=True),
                "agreement_classify": opcheck.agreement(labs, "counters"),
                "threshold_sweep": sw,
                "disagreements": _disagreements(labs),
            }
        res["fusion"] = fusion_checks(data, d)
    return res


def _disagreements(labs: list[dict]) -> list:
    from collections import Counter

    from profkit.analyses.opcheck import SAME

    c: Counter = Counter()
    total = sum(r["gpu_ns"] for r in labs) or 1
    for r in labs:
        if SAME.get(r["shapes"], r["shapes"]) != r["counted_roofline"]:
            c[(r["op"] or "(no operator)", r["shapes"], r["counted_roofline"])] += r["gpu_ns"] / total
    return [(*k, round(v, 4)) for k, v in c.most_common(8)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    res = measure(a.data)
    for name, p in res["programs"].items():
        print(f"== {name}: {p['kernels_paired']} kernels paired")
        for k, v in p["ops"].items():
            if "within" not in v:
                print(f"  {k:17s} {v}")
                continue
            print(
                f"  {k:17s} {v['within']}/{v['ops']} operators within, {100 * v['time_share_within']:.1f} % of "
                f"their time; outside: {v['outside'][:6]}"
            )
        print(
            f"  labels agree: {100 * p['agreement_counted_roofline']:.1f} % of GPU time (counted roofline; "
            f"{100 * p['agreement_strict']:.1f} % with launch_overhead apart from latency), "
            f"{100 * p['agreement_classify']:.1f} % (classify on these counters)"
        )
        print("  threshold sweep: " + ", ".join(f"{k}: {100 * v:.1f} %" for k, v in p["threshold_sweep"].items()))
        for x in p["disagreements"]:
            print(f"    {x}")
    print("== fusion")
    for r in res["fusion"]:
        ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "-"
        print(
            f"  {r['op']:14s} eager {r['eager_us']:.1f} us, compiled {r['compiled_us']:.1f}, floor "
            f"{r['floor_us'] or 0:.1f}: predicted {r['predicted_us'] or 0:.1f} vs realised {r['realised_us']:.1f}"
            f" us ({ratio})"
        )
    if a.json:
        a.json.write_text(json.dumps(res, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
