"""How few ncu replay passes can keep profkit's labels? Run on a GPU host with ncu and nvcc.

    python benchmarks/ncu_passes.py --ncu $NCU --out DIR [--full-too]

1. Passes of every candidate metric on its own, on one small CUDA kernel (a C program: no
   Python start-up under ncu, so ~50 sessions stay cheap). ncu prints "- N passes".
2. Passes of candidate sets, most complete first.
3. The lab workloads captured with the first two candidate sets within --max-passes (and,
   with --full-too, with `--set full`); the reports are classified afterwards, off the GPU,
   by tests/test_lean_parity.py, against full-set reports of the same workloads.
Writes DIR/passes.json and DIR/captures.json; reports under DIR/reports/.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

FREE = ["launch__grid_size", "launch__block_size", "launch__registers_per_thread", "launch__shared_mem_per_block",
        "launch__waves_per_multiprocessor", "launch__occupancy_limit_registers", "launch__occupancy_limit_shared_mem",
        "launch__occupancy_limit_warps", "launch__occupancy_limit_blocks", "sm__maximum_warps_per_active_cycle_pct",
        "device__attribute_multiprocessor_count"]
PIECES = {  # piece: metrics it needs
    "time": ["gpu__time_duration.sum"],
    "clocks": ["sm__cycles_elapsed.avg.per_second", "dram__cycles_elapsed.avg.per_second"],
    "dram_raw": ["dram__bytes_read.sum", "dram__bytes_write.sum", "dram__bytes.sum.peak_sustained"],
    "dram_sum": ["dram__bytes.sum"],
    "dram_sol": ["gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"],
    "sm_sol": ["sm__throughput.avg.pct_of_peak_sustained_elapsed"],
    "mem_sol": ["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"],
    "issue": ["sm__inst_issued.avg.pct_of_peak_sustained_active"],
    "tensor_pipe": ["sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active.avg.pct_of_peak_sustained_elapsed"],
    "gmma_inst": ["sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active"],
    "warps": ["sm__warps_active.avg.pct_of_peak_sustained_active"],
    "l2_bytes": ["lts__t_bytes.sum", "lts__t_bytes.sum.peak_sustained", "lts__cycles_elapsed.avg.per_second"],
    "l1_bytes": ["l1tex__t_bytes.sum", "l1tex__t_bytes.sum.peak_sustained", "l1tex__cycles_elapsed.avg.per_second"],
    "l2_sol": ["lts__throughput.avg.pct_of_peak_sustained_elapsed"],
    "l1_sol": ["l1tex__throughput.avg.pct_of_peak_sustained_active"],
    "fp32_sass": ["smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
                  "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum"],
    "ffma": ["smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"],
    "ops_bf16": ["sm__ops_path_tensor_src_bf16_dst_fp32.sum", "sm__ops_path_tensor_src_bf16_dst_fp32.sum.peak_sustained"],
    "ops_fp8": ["sm__ops_path_tensor_src_fp8.sum", "sm__ops_path_tensor_src_fp8.sum.peak_sustained"],
    "ops_fp16": ["sm__ops_path_tensor_src_fp16.sum"],
    "ops_tf32": ["sm__ops_path_tensor_src_tf32_dst_fp32.sum"],
    "fma_alu": ["sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
                "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active"],
}
BASE = ["time", "clocks", "dram_raw", "issue", "tensor_pipe", "warps"]
CANDIDATES = {  # most complete first
    "S1": BASE + ["l2_bytes", "l1_bytes", "fp32_sass", "ops_bf16", "ops_fp8", "ops_fp16", "ops_tf32"],
    "S2": BASE + ["l2_bytes", "l1_bytes", "fp32_sass", "ops_bf16", "ops_fp8"],
    "S3": BASE + ["l2_bytes", "fp32_sass", "ops_bf16", "ops_fp8"],
    "S4": BASE + ["fp32_sass", "ops_bf16", "ops_fp8"],
    "S5": BASE + ["ffma", "ops_bf16", "ops_fp8"],
    "S6": BASE + ["ops_bf16", "ops_fp8"],
    "S7": BASE + ["fp32_sass"],
    "S8": BASE,
    "S9": ["time", "dram_raw", "tensor_pipe"],
}
KERNEL = r"""
#include <cstdio>
__global__ void k(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { float v = x[i]; for (int j = 0; j < 64; ++j) v = v * 1.0001f + 0.5f; x[i] = v; }
}
int main() {
  int n = 1 << 22; float *x; cudaMalloc(&x, n * sizeof(float)); cudaMemset(x, 0, n * sizeof(float));
  k<<<(n + 255) / 256, 256>>>(x, n); cudaDeviceSynchronize(); printf("ok\n"); return 0;
}
"""
WORKLOADS = {  # name: (python args, nvtx filter)
    "rmsnorm": (["-m", "profkit.kernels.run", "rmsnorm", "--variant", "eager", "--variant", "triton",
                 "--shape", "llama8b-t4096"], "rmsnorm/"),
    "softmax": (["-m", "profkit.kernels.run", "softmax", "--variant", "eager", "--variant", "triton",
                 "--shape", "scores-r32768-n4096"], "softmax/"),
    "swiglu": (["-m", "profkit.kernels.run", "swiglu", "--variant", "eager", "--variant", "triton",
                "--shape", "llama8b-t4096"], "swiglu/"),
    "matmul": (["-m", "profkit.kernels.run", "matmul", "--variant", "cublas", "--variant", "tiled",
                "--shape", "llama8b-qkv-m4096"], "matmul/"),
    "occupancy": (["-m", "profkit.kernels.run", "known"], "known/occupancy_limited/"),
    "tiny": (["-m", "profkit.kernels.run", "known"], "known/tiny_launches/"),
}
PASSES = re.compile(r"- (\d+) pass(?:es)?")


def metrics_of(pieces: list[str]) -> list[str]:
    return list(dict.fromkeys(FREE + [m for p in pieces for m in PIECES[p]]))


def ncu(ncu_path: str, out: Path, cmd: list[str], metrics: list[str] | None, include: str | None = None) -> dict:
    args = [ncu_path, "--clock-control", "none", "--target-processes", "all", "-f", "-o", str(out)]
    if include:
        args += ["--nvtx", "--nvtx-include", include]
    else:
        args += ["--launch-count", "1"]
    args += ["--set", "full"] if metrics is None else ["--metrics", ",".join(metrics)]
    t = time.time()
    p = subprocess.run(args + cmd, capture_output=True, text=True)
    text = p.stdout + p.stderr
    passes = [int(x) for x in PASSES.findall(text)]
    return {"rc": p.returncode, "wall_s": round(time.time() - t, 2), "kernels": len(passes), "passes": passes,
            "tail": text[-500:] if p.returncode or not passes else ""}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ncu", required=True)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--max-passes", type=int, default=5)
    ap.add_argument("--full-too", action="store_true")
    a = ap.parse_args()
    out: Path = a.out
    (out / "reports").mkdir(parents=True, exist_ok=True)
    src = out / "k.cu"
    src.write_text(KERNEL)
    subprocess.run(["nvcc", "-O2", "-arch=sm_90", "-o", str(out / "k"), str(src)], check=True)
    exe = [str(out / "k")]
    res: dict = {"pieces": PIECES, "free": FREE, "candidates": CANDIDATES}
    res["free_only"] = ncu(a.ncu, out / "g", exe, FREE)["passes"]
    res["piece_passes"] = {}
    for p in PIECES:
        res["piece_passes"][p] = ncu(a.ncu, out / "g", exe, metrics_of([p]))["passes"]
        (out / "passes.json").write_text(json.dumps(res, indent=1))
    print("pieces", res["piece_passes"], flush=True)
    res["candidate_passes"] = {c: ncu(a.ncu, out / "g", exe, metrics_of(ps))["passes"] for c, ps in CANDIDATES.items()}
    print("candidates", res["candidate_passes"], flush=True)
    fits = [c for c, n in res["candidate_passes"].items() if n and max(n) <= a.max_passes]
    res["fits"] = fits
    (out / "passes.json").write_text(json.dumps(res, indent=1))

    caps: dict = {}
    sides = [(c, metrics_of(CANDIDATES[c])) for c in fits[:2]] + ([("full", None)] if a.full_too else [])
    for w, (cmd, inc) in WORKLOADS.items():
        for side, metrics in sides:
            r = ncu(a.ncu, out / "reports" / f"{w}-{side}", [sys.executable, *cmd], metrics, inc)
            caps[f"{w}-{side}"] = r
            print(w, side, r["kernels"], r["passes"][:1], r["wall_s"], r["tail"][-200:], flush=True)
            (out / "captures.json").write_text(json.dumps(caps, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
