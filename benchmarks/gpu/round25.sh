#!/usr/bin/env bash
# Device call, kernel lab round 25 (issue 21 item 1): RoPE with the cos/sin tables gathered per
# token (HF's cos_full / sin_full, the inputs compile and Liger are given), so that no program
# waits on its position before its cos/sin load (variant triton_gathered). Round 22 left RoPE at
# 32768 tokens on the H200 at 0.984x of compile; compile's kernels index the gathered tables by
# token, the lab's launch loaded the position first.
#   bash benchmarks/gpu/round25.sh MODE[,MODE] TAG   (carry .gpu-libs .carry-r5-whl)
# (the probes as they ran: commit 0b9d670; since then only their shared code moved into helpers)
# MODE pairs:
# 1. round-robin GPU time by graph replay (variants_rr.py, 5 rounds) at every RoPE shape;
# 2. profkit capture, ncu lean, CALLS (12) calls a side, at SHAPES (llama8b-t32768): runs
#    rope-SHAPE-r25-TAG, pairs triton -> triton_gathered, compile -> triton_gathered,
#    liger -> triton_gathered, compile -> triton (RR_VARIANTS, PAIR_VARIANTS, PAIR_CMP override).
# MODE sweep: every launch of the gathered tables round-robin beside compile and Liger
#    (benchmarks/gpu/rope25.py) at SWEEP_SHAPES.
# MODE persist: persistent programs sweeping the tokens, the next ones in flight (pipeliner or
#    register prefetch; benchmarks/gpu/rope25_persist.py) at PERSIST_SHAPES, round-robin beside
#    the per-token launch, compile and Liger.
# MODE rmsnorm: RMSNorm's kernel body against Liger's (benchmarks/gpu/rmsnorm25.py) at RMS_SHAPES.
# MODE fused: the fused q/k RMSNorm + RoPE fed the gathered tables too (triton_gathered): round-robin
#    at every shape, then profkit capture (ncu lean, CALLS a side) at FUSED_SHAPES (qwen3-8b-t32768);
#    FUSED_RR, FUSED_VARIANTS, FUSED_CMP override (the register caps: triton_nocap -> triton).
# MODE fusedcap: the fused kernel's launches with the registers capped (benchmarks/gpu/rmsnorm_rope25.py).
# MODE table: a fresh run of every registered shape (benchmarks/kernels.py --graph), the lab's
#    launches as shipped (triton, triton_gathered, triton_h2, triton_direct) and the peers, into
#    r25/TAG/table/kernels.json (kernels.md's summary table).
set -u
MODE=$1 TAG=$2
source benchmarks/gpu/device_env.sh
export CAP_ARGS="--calls ${CALLS:-12}"
mkdir -p $O/r25/$TAG
for M in ${MODE//,/ }; do
case $M in
sweep)
  timeout ${SWEEP_TIMEOUT:-400} python3 $R/benchmarks/gpu/rope25.py --shapes ${SWEEP_SHAPES:-llama8b-t32768,llama8b-t4096} \
    --rounds ${ROUNDS:-5} --out $O/r25/$TAG/sweep 2>&1 | grep -v -i "warn\|Backend impl" | tee $O/r25/$TAG/rope25.log | grep -v "^tuned" ;;
persist)
  timeout ${PERSIST_TIMEOUT:-300} python3 $R/benchmarks/gpu/rope25_persist.py --shapes ${PERSIST_SHAPES:-qwen7b-t4096,llama8b-t4096} \
    --rounds ${ROUNDS:-5} --out $O/r25/$TAG/persist 2>&1 | grep -v -i "warn\|Backend impl" | tee $O/r25/$TAG/persist.log | grep -v "^tuned" ;;
rmsnorm)
  timeout ${RMS_TIMEOUT:-300} python3 $R/benchmarks/gpu/rmsnorm25.py --shapes ${RMS_SHAPES:-llama8b-t32768,qwen7b-t32768} \
    --rounds ${ROUNDS:-5} --out $O/r25/$TAG/rmsnorm 2>&1 | grep -v -i "warn\|Backend impl" | tee $O/r25/$TAG/rmsnorm25.log | grep -v "^tuned" ;;
fused)
  timeout ${RR_TIMEOUT:-240} python3 $R/benchmarks/gpu/variants_rr.py --op rmsnorm_rope \
    --variants ${FUSED_RR:-triton_gathered,triton,compile} --shapes qwen3-8b-t32768,qwen3-8b-t4096,qwen7b-t4096,qwen3-8b-t1 \
    --rounds ${ROUNDS:-5} --out $O/r25/$TAG/fused 2>&1 | grep -v -i "warn\|Backend impl" | tee $O/r25/$TAG/fused_rr.log | grep -v "^tuned"
  SHAPES=${FUSED_SHAPES:-qwen3-8b-t32768} pairs r25 rmsnorm_rope "${FUSED_VARIANTS:-triton triton_gathered compile}" \
    "${FUSED_CMP:-triton:triton_gathered compile:triton_gathered compile:triton}" ;;
fusedcap)
  timeout ${RR_TIMEOUT:-300} python3 $R/benchmarks/gpu/rmsnorm_rope25.py --shapes ${FUSED_SHAPES:-qwen3-8b-t32768} \
    --rounds ${ROUNDS:-5} --out $O/r25/$TAG/fusedcap 2>&1 | grep -v -i "warn\|Backend impl" | tee $O/r25/$TAG/fusedcap.log | grep -v "^tuned" ;;
table)
  timeout ${TABLE_TIMEOUT:-570} python3 $R/benchmarks/kernels.py --graph --budget-s ${TABLE_BUDGET:-480} \
    --variants ${TABLE_VARIANTS:-triton,triton_gathered,triton_h2,triton_direct,compile,compile_direct,liger} \
    --out $O/r25/$TAG/table > $O/r25/$TAG/kernels_table.log 2>&1; echo "kernels rc=$?"
  tail -3 $O/r25/$TAG/kernels_table.log | cut -c1-200 ;;
pairs)
timeout ${RR_TIMEOUT:-240} python3 $R/benchmarks/gpu/variants_rr.py --op rope \
  --variants ${RR_VARIANTS:-triton_gathered,triton,compile,liger} \
  --shapes ${RR_SHAPES:-llama8b-t32768,llama8b-t4096,qwen7b-t4096,phi2partial-t4096,llama8b-t1} \
  --rounds ${ROUNDS:-5} --out $O/r25/$TAG 2>&1 | grep -v -i "warn\|Backend impl" | tee $O/r25/$TAG/rope_rr.log | grep -v "^tuned"
SHAPES=${SHAPES:-llama8b-t32768} pairs r25 rope "${PAIR_VARIANTS:-triton triton_gathered compile liger}" \
  "${PAIR_CMP:-triton:triton_gathered compile:triton_gathered liger:triton_gathered compile:triton}" ;;
*) echo "round25.sh: unknown mode $M"; exit 2 ;;
esac
done
finish r25 $TAG
