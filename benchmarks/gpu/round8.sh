#!/usr/bin/env bash
# Device calls, kernel lab round 8 (issue 21):
#   bash benchmarks/gpu/round8.sh ncu TAG    # ncu --set full of two row-group launches: stall reasons, per-SASS stalls
#                                            # (r8/h100n profiled the first build, commit 65cd070)
#   bash benchmarks/gpu/round8.sh sm TAG     # softmax over vocabulary rows: can a cooperative launch be captured in a
#                                            # CUDA graph (probe), softmax_group.py, kernels.py --graph for softmax,
#                                            # the pairs v3 -> v4 and compile -> v4 at both vocabulary shapes
#                                            # -> $OUT/r8_TAG.tar.xz
set -u
MODE=$1 TAG=$2
source benchmarks/gpu/device_env.sh
case $MODE in
ncu)  # where the row-group launch's warps wait: ncu --set full on one launch of each of two configs
  cat > $O/one.py <<'PY'
import torch
from profkit.kernels import get, softmax as K
x = get("softmax").setup({"rows": 2048, "n": 128256}, "bf16", "cuda")["x"]
y = torch.empty_like(x)
for cfg in [("group", 16384, 2, 16), ("group", 32768, 1, 32)]:
    K.softmax(x, out=y, config=cfg)
torch.cuda.synchronize()
PY
  timeout 240 ncu --set full --clock-control none --kernel-name regex:_softmax_rowgroup -f -o $O/prof/rowgroup python3 $O/one.py > $O/ncu.log 2>&1; echo "ncu rc=$?"; tail -3 $O/ncu.log
  ncu -i $O/prof/rowgroup.ncu-rep --page raw --csv > $O/raw.csv 2>&1
  python3 - $O/raw.csv <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr, units, data = rows[0], rows[1], rows[2:]
keys = [i for i, h in enumerate(hdr) if ("issue_stalled" in h and h.endswith(".ratio") and "not_issued" not in h) or h in (
    "gpu__time_duration.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed", "sm__warps_active.avg.pct_of_peak_sustained_active",
    "smsp__issue_active.avg.pct_of_peak_sustained_active", "lts__t_sector_hit_rate.pct", "launch__registers_per_thread",
    "smsp__average_warp_latency_per_inst_issued.ratio", "l1tex__throughput.avg.pct_of_peak_sustained_active",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed", "smsp__inst_executed.sum")]
for d in data:
    vals = sorted(((float(d[i].replace(",", "")) if d[i].replace(",", "").replace(".", "").isdigit() else d[i], hdr[i]) for i in keys),
                  key=lambda t: -t[0] if isinstance(t[0], float) else 0)
    print("kernel", d[hdr.index("Block Size")] if "Block Size" in hdr else "", d[hdr.index("Grid Size")] if "Grid Size" in hdr else "")
    for v, h in vals[:26]:
        print(f"   {h.replace('smsp__average_warp_latency_issue_stalled_', 'stall_')}: {v}")
PY
  ncu -i $O/prof/rowgroup.ncu-rep --page source --csv --print-source sass > $O/source.csv 2>$O/source.err; echo "source rc=$? $(wc -l < $O/source.csv) lines"; head -c 300 $O/source.err
  python3 - $O/source.csv <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr = next((r for r in rows if "Source" in r), None)
if hdr:
    i0 = rows.index(hdr)
    col = next((i for i, h in enumerate(hdr) if "Warp Stall Sampling (All" in h), None)
    src = hdr.index("Source")
    body = [r for r in rows[i0 + 1:] if len(r) == len(hdr) and r[col].replace(",", "").isdigit()]
    tot = sum(int(r[col].replace(",", "")) for r in body) or 1
    for r in sorted(body, key=lambda r: -int(r[col].replace(",", "")))[:30]:
        print(f"{100 * int(r[col].replace(',', '')) / tot:5.1f}%  {r[src][:110]}")
PY
  ;;
sm)
  timeout 60 python3 - <<'PY' 2>&1 | tail -3
import torch
from profkit.kernels import softmax as K
x = torch.randn(64, 128256, device="cuda", dtype=torch.bfloat16)
y = torch.empty_like(x)
K.softmax(x, out=y, config=("group", 16384, 1, 32)); torch.cuda.synchronize()
print("eager group launch ok, err", ((y.double() - K.softmax_reference(x)).abs().max()).item())
g = torch.cuda.CUDAGraph()
try:
    with torch.cuda.graph(g):
        K.softmax(x, out=y, config=("group", 16384, 1, 32))
    y.zero_(); g.replay(); torch.cuda.synchronize()
    print("graph capture of a cooperative launch: ok, err", ((y.double() - K.softmax_reference(x)).abs().max()).item())
except Exception as e:
    print("graph capture of a cooperative launch FAILED:", type(e).__name__, str(e)[:200])
PY
  timeout 240 python3 $R/benchmarks/gpu/softmax_group.py --rounds 5 --out $O > $O/softmax_group.log 2>&1; echo "softmax_group rc=$?"
  grep -v '^{"shape"' $O/softmax_group.log | cut -c1-300 | tail -14
  python3 - $O/softmax_group.log <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith('{"shape"') and "config" in l:
        r = json.loads(l)
        print(r["shape"][:14], r["config"], "err %.1e" % r["err"] if "err" in r else "", "%.1f us" % (r["ms"] * 1e3) if "ms" in r else r.get("error", "")[:90],
              "graph %.1f" % (r["graph_ms"] * 1e3) if "graph_ms" in r else r.get("graph_err", "")[:60])
PY
  timeout 200 python3 $R/benchmarks/kernels.py --graph --ops softmax --no-backward --variants triton,triton_twopass,compile --out $O > $O/kernels_sm.log 2>&1; echo "kernels rc=$?"
  grep -E "triton|compile|copy" $O/kernels_sm.log | cut -c1-170 | tail -16
  if [ "${CAP:-1}" = 1 ]; then
    for shape in llama3vocab-t2048 qwen7bvocab-t1024; do
      run=softmax-$shape-r8-$TAG
      cap $run softmax --variant triton_twopass --variant triton --variant compile --shape $shape
      cmp $run:triton_twopass $run:triton; cmp $run:compile $run:triton
    done
  fi
  ;;
esac
pack $OUT/r8_$TAG.tar.xz
