#!/usr/bin/env bash
# Device calls for issues 50, 52, 54, 55: ordinary programs (benchmarks/programs/) captured with
# `profkit capture -- python3 PROGRAM` (nsys timeline + profkit's ncu sample), calibration pairs
# (before -> after, timeline each, ncu on the before), the fusion floor's eager/compiled blocks,
# torch.profiler shape traces with ncu's counted FLOPs and bytes of the same step, the regression
# gate's A/A and planted repeats (nsys SQLite), and Source Counters of lab kernels.
#
#   bash .carry-dev/benchmarks/gpu/programs.sh MODE [BUDGET_S]      (from the repo root)
#
# carried: .carry-dev (this checkout's profkit/, kernels/, parsers/, benchmarks/), .gpu-libs
# (shared/gpu/prepare.sh); .carry-whl (wheels) only where a dependency is missing there.
# MODE (any comma-separated list of the step groups, run in that order; a group that would not
# fit what is left of BUDGET_S is skipped and named):
#   stories   gpt2-train-compile, resnet18-train-eager, llama-decode-eager, then graphs
#   graphs    llama-decode-cudagraphs (and its graph-node trace)
#   pair1     CUDA graphs on the Llama decode step (NVTX steps; before with ncu)
#   shapes    Kineto traces (record_shapes, with_flops) + ncu FLOP/byte counters of one GPT (eager)
#             and one ResNet training step
#   fusion    rmsnorm, gelu_epilogue, add_layernorm eager vs compiled (+ a --torch-ranges timeline)
#   pairs     SDPA math -> cuDNN, torch.compile of an MLP block, channels-last, batch 16 -> 128,
#             loss.item() every step -> at the end
#   gate      the lab RMSNorm forward: 10 A/A repeats and planted +3 % / +10 % (nsys SQLite)
#   source    ncu Source Counters of the lab softmax forward, RMSNorm backward, RMSNorm CUDA C++
#   pairs2    SDPA math -> default backend at B4 H16 S1024 D128 (a second length and head size)
#   stepcap   profkit capture --step 3 of the ResNet-18 loop (ncu by launch index, every thread)
#   attain    attainable_sweep.py: cuBLAS GEMM by shape class, SDPA backends by S and D, copy,
#             elementwise, reductions (the measured rows of profkit/model/attainable.py)
#   agshapes  nsys --pytorch=autograd-shapes-nvtx of the fusion blocks, ingested and advised as a
#             user's own export
#   backward  ncu FLOP/byte counters of one whole GPT (eager) and ResNet training step, every
#             thread's launches (cudaProfilerStart/Stop around the step; the backward included)
# Writes $OUT/<group>.tar per group (reports: ncu xz'd, nsys SQLite xz'd) and $OUT/logs.tar.xz.
set -u
MODE=${1:?MODE}
BUDGET=${2:-520}
T0=$(date +%s)
R=$PWD
C=$R/.carry-dev
source $R/.gpu-libs/env.sh > /dev/null; unset NVTX_INJECTION64_PATH   # nsys and ncu inject their own
# profkit's other dependencies are there or imported only by outputs this script does not make
if ls $R/.carry-whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $R/.carry-whl/*.whl || exit 1
fi
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target /tmp/site $C || exit 1
NCUPY=$(dirname "$(find /opt/nvidia /usr/local/cuda* -name ncu_report.py -path '*extras/python*' 2>/dev/null | head -1)")
export PYTHONPATH=/tmp/site:$NCUPY PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=16
O=/tmp/o; L=$O/logs; mkdir -p $L; cd $O      # never import the checkout's profkit/ (it is not installed there)
P=$C/benchmarks/programs
python3 -m profkit.cli --version && python3 -c "import profkit.cli, profkit.capture.session, profkit.store.ingest, ncu_report" || exit 1
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
  $NCU --version | tail -1; $NSYS --version; nvcc --version | tail -1
  python3 -c "import sys, torch, triton, torchvision, transformers; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'triton', triton.__version__, 'torchvision', torchvision.__version__, 'transformers', transformers.__version__)"
} > $L/versions.txt 2>&1; cat $L/versions.txt

left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
# t NAME CMD...: run with what is left of the budget as its limit; log; record wall seconds and exit code
t() {
  local name=$1; shift
  local lim=$(( $(left) - 25 )); [ $lim -lt 15 ] && { echo "== $name: skipped (budget)"; echo "$name 0 skipped" >> $L/timings.txt; return 1; }
  local s=$(date +%s.%N)
  # -k: a profiler that ignores TERM is killed too
  timeout -k 10 $lim "$@" > $L/$name.log 2>&1; local rc=$?
  local e=$(python3 -c "print(f'{$(date +%s.%N) - $s:.1f}')")
  echo "$name $e $rc" >> $L/timings.txt
  echo "== $name: ${e} s, exit $rc"; grep -v -E "^==PROF==|^Collecting|^Processing|Generating|\[[0-9 ]+%\]|^\s*$|USDT" $L/$name.log | tail -3
  return $rc
}
# need GROUP SECONDS: run the group only if its estimate fits what is left
need() { if [ $(left) -lt $2 ]; then echo "== group $1 skipped: needs ~$2 s, $(left) s left"; echo "$1 0 group-skipped" >> $L/timings.txt; return 1; fi; echo "== group $1 ($(left) s left)"; }
# cap DIR RUN [capture options] -- CMD: profkit capture into DIR/RUN (database DIR/cap.db)
cap() { local d=$1 run=$2; shift 2; mkdir -p $d; t cap-$run python3 -m profkit.cli capture --db $d/cap.db --out $d --run $run "$@"; }
# ncu_src DIR NAME FILTER CMD...: Source Counters and the pages beside them, one or two launches
# (SRC_KERNEL: a regex on the kernel's function name, where the range opens with a torch kernel)
ncu_src() { local d=$1 n=$2 f=$3; shift 3; mkdir -p $d
  t src-$n $NCU --clock-control none --import-source yes --section SourceCounters --section SpeedOfLight \
    --section WarpStateStats --section LaunchStats --section Occupancy --nvtx --nvtx-include "$f" \
    ${SRC_KERNEL:+--kernel-name-base function -k regex:$SRC_KERNEL} \
    --launch-count ${SRC_COUNT:-1} -f -o $d/$n "$@"
  [ -f $d/$n.ncu-rep ] && $NCU -i $d/$n.ncu-rep --page source --csv --print-source cuda,sass 2>&1 | head -3000 > $d/$n.source.csv; }
PY="python3"
G=$O/groups; mkdir -p $G

for group in ${MODE//,/ }; do case $group in
stories)
  need stories 300 || continue
  D=$G/stories
  # ncu time kept near 2 min for the GPT program: its largest kernels and configurations first
  cap $D gpt2-train-compile --max-kernels 80 -- $PY $P/gpt_train_compile.py
  cap $D resnet18-train-eager --max-kernels 50 -- $PY $P/resnet_train.py --steps 8
  cap $D llama-decode-eager --max-kernels 40 -- $PY $P/llama_decode_static.py --mode eager
  ;&
graphs)
  D=$G/stories
  cap $D llama-decode-cudagraphs --max-kernels 40 -- $PY $P/llama_decode_static.py --mode reduce-overhead
  # nsys traces a CUDA graph launch as one item by default: once more with every node as its kernel
  mkdir -p $D/llama-decode-cudagraphs-nodes
  t nsys-graph-nodes $NSYS profile -t cuda,nvtx --cuda-graph-trace=node --sample=none --cpuctxsw=none -f true \
    -o $D/llama-decode-cudagraphs-nodes/llama-decode-cudagraphs-nodes $PY $P/llama_decode_static.py --mode reduce-overhead \
    && $NSYS export --type sqlite --force-overwrite true -o $D/llama-decode-cudagraphs-nodes/llama-decode-cudagraphs-nodes.nsys.sqlite \
       $D/llama-decode-cudagraphs-nodes/llama-decode-cudagraphs-nodes.nsys-rep > $L/export-graph-nodes.log 2>&1
  ;;
pair1)
  need pair1 70 || continue
  D=$G/pair1
  cap $D pair-cudagraphs-before --max-kernels 30 -- $PY $P/llama_decode_static.py --mode eager --nvtx-steps
  cap $D pair-cudagraphs-after --no-ncu -- $PY $P/llama_decode_static.py --mode reduce-overhead --nvtx-steps
  ;;
shapes)
  need shapes 150 || continue
  D=$G/shapes; mkdir -p $D
  $NCU --query-metrics --chip gh100 > $L/ncu-query-metrics.txt 2>&1
  MET=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
  for b in $(grep -oE '^sm__ops_path_tensor_src_(bf16|fp16|tf32)[a-z0-9_]*' $L/ncu-query-metrics.txt | sort -u); do MET=$MET,$b.sum; done
  for b in smsp__sass_thread_inst_executed_op_fadd_pred_on smsp__sass_thread_inst_executed_op_fmul_pred_on \
           smsp__sass_thread_inst_executed_op_ffma_pred_on sm__inst_executed_pipe_tensor_op_gmma sm__inst_executed_pipe_tensor_op_hmma; do
    grep -qE "^$b\b" $L/ncu-query-metrics.txt && MET=$MET,$b.sum; done
  echo "$MET" | tee $D/ncu-metrics.txt
  t kineto-gpt $PY $P/gpt_train_compile.py --eager --steps 3 --decode 0 --kineto $D/gpt2-eager-step2.kineto.json.gz --kineto-step 2
  t kineto-resnet $PY $P/resnet_train.py --steps 4 --kineto $D/resnet18-step3.kineto.json.gz --kineto-step 3
  t ncu-gpt $NCU --clock-control none --nvtx --nvtx-include "step 2/" --metrics $MET -f -o $D/gpt2-eager-step2 \
    $PY $P/gpt_train_compile.py --eager --nvtx-steps --steps 3 --decode 0
  t ncu-resnet $NCU --clock-control none --nvtx --nvtx-include "step 3/" --metrics $MET -f -o $D/resnet18-step3 \
    $PY $P/resnet_train.py --nvtx-steps --steps 4
  ;;
fusion)
  need fusion 120 || continue
  D=$G/fusion
  cap $D fusion-eager-vs-compiled --max-kernels 40 -- $PY $P/fusion_ops.py
  cap $D fusion-torch-ranges --no-ncu --torch-ranges -- $PY $P/fusion_ops.py --calls 5
  ;;
pairs)
  need pairs 60 || continue
  D=$G/pairs
  cap $D pair-sdpa-before-math --max-kernels 20 -- $PY $P/calib_sdpa.py --backend math --nvtx-steps
  cap $D pair-sdpa-after-cudnn --no-ncu -- $PY $P/calib_sdpa.py --backend cudnn --nvtx-steps
  cap $D pair-sdpa-default --no-ncu -- $PY $P/calib_sdpa.py --backend default --nvtx-steps
  cap $D pair-compile-before-eager --max-kernels 20 -- $PY $P/fusion_ops.py --ops mlp_block --variants eager --step-ranges
  cap $D pair-compile-after-compiled --no-ncu -- $PY $P/fusion_ops.py --ops mlp_block --variants compiled --step-ranges
  cap $D pair-channels-last-before --max-kernels 40 -- $PY $P/resnet_train.py --steps 12 --nvtx-steps
  cap $D pair-channels-last-after --no-ncu -- $PY $P/resnet_train.py --steps 12 --nvtx-steps --channels-last
  cap $D pair-batch-before-16 --max-kernels 40 -- $PY $P/resnet_train.py --steps 16 --batch 16 --nvtx-steps
  cap $D pair-batch-after-128 --no-ncu -- $PY $P/resnet_train.py --steps 12 --batch 128 --nvtx-steps
  cap $D pair-sync-before-item --max-kernels 40 -- $PY $P/resnet_train.py --steps 16 --batch 32 --nvtx-steps --item-every-step
  cap $D pair-sync-after-end --no-ncu -- $PY $P/resnet_train.py --steps 16 --batch 32 --nvtx-steps
  ;;
gate)
  need gate 120 || continue
  D=$G/gate; mkdir -p $D
  # A/A and planted runs interleaved (drift spreads over both); exports run beside the next capture
  a=0; n3=0; n10=0
  for plant in none none 3 none none 10 none none 3 none none 10 none none; do
    case $plant in none) a=$((a + 1)); name=gate-aa-$(printf %02d $a);; 3) n3=$((n3 + 1)); name=gate-plant3-$n3;;
      10) n10=$((n10 + 1)); name=gate-plant10-$n10;; esac
    t $name $NSYS profile -t cuda,nvtx --sample=none --cpuctxsw=none -f true -o $D/$name \
      $PY $P/gate_rmsnorm.py --plant $plant --calls 30 || continue
    ( $NSYS export --type sqlite --force-overwrite true -o $D/$name.nsys.sqlite $D/$name.nsys-rep > $L/export-$name.log 2>&1 \
      && rm -f $D/$name.nsys-rep ) &
  done
  wait
  ;;
source)
  need source 90 || continue
  D=$G/source
  ncu_src $D softmax-triton-scores-r32768-n4096 "softmax/triton/scores-r32768-n4096/" \
    $PY -m profkit.kernels.run softmax --variant triton --shape scores-r32768-n4096
  # the variant `triton` runs the backward through autograd, whose CUDA work runs on autograd's
  # own device thread, outside the NVTX range the runner pushes: its range holds no kernel.
  # triton_direct calls the same launcher (_rmsnorm_bwd, then _dw_reduce) on the range's thread.
  SRC_COUNT=2 SRC_KERNEL='_rmsnorm_bwd|_dw_reduce' ncu_src $D rmsnorm_bwd-triton-llama8b-t4096 \
    "rmsnorm_bwd/triton_direct/llama8b-t4096/" \
    $PY -m profkit.kernels.run rmsnorm_bwd --variant triton_direct --shape llama8b-t4096
  ncu_src $D rmsnorm-cuda-llama8b-t4096 "rmsnorm/cuda/llama8b-t4096/" \
    $PY -m profkit.kernels.run rmsnorm --variant cuda --shape llama8b-t4096
  # rows this long take the row-group kernel, whose launch is preceded by a torch.full of its
  # partials' slots (a FillFunctor kernel): the filter names the Triton kernel
  SRC_KERNEL='^_softmax' ncu_src $D softmax-triton-llama3vocab-t2048 "softmax/triton/llama3vocab-t2048/" \
    $PY -m profkit.kernels.run softmax --variant triton --shape llama3vocab-t2048
  ;;
pairs2)
  # the SDPA switch again at another length and head size: the measured math/fused ratio carried
  # to a program it was not measured on
  need pairs2 60 || continue
  D=$G/pairs2
  cap $D pair-sdpa2-before-math --no-ncu -- $PY $P/calib_sdpa.py --backend math --batch 4 --heads 16 --seq 1024 --head-dim 128 --nvtx-steps
  cap $D pair-sdpa2-after-default --no-ncu -- $PY $P/calib_sdpa.py --backend default --batch 4 --heads 16 --seq 1024 --head-dim 128 --nvtx-steps
  ;;
stepcap)
  # capture --step N on a training loop whose backward runs on autograd's thread: ncu is planned
  # by launch index from the timeline, so the step's backward kernels are measured too
  need stepcap 120 || continue
  D=$G/stepcap
  cap $D resnet18-step3-index --step 3 -- $PY $P/resnet_train.py --steps 5 --batch 32 --nvtx-steps
  ;;
attain)
  need attain 150 || continue
  D=$G/attain; mkdir -p $D
  t attain $PY $P/attainable_sweep.py --out $D/attainable-h100.json; cp $L/attain.log $D/
  ;;
backward)
  need backward 200 || continue
  D=$G/backward; mkdir -p $D
  MET=$(cat $G/shapes/ncu-metrics.txt 2>/dev/null)
  [ -n "$MET" ] || MET=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__ops_path_tensor_src_bf16_dst_fp32.sum,sm__ops_path_tensor_src_fp16.sum,sm__ops_path_tensor_src_tf32_dst_fp32.sum,smsp__sass_thread_inst_executed_op_fadd_pred_on.sum,smsp__sass_thread_inst_executed_op_fmul_pred_on.sum,smsp__sass_thread_inst_executed_op_ffma_pred_on.sum,sm__inst_executed_pipe_tensor_op_gmma.sum,sm__inst_executed_pipe_tensor_op_hmma.sum
  echo "$MET" > $D/ncu-metrics.txt
  # the Kineto traces of these steps (tests/data/opmodel-h100) hold every thread already
  t ncu-gpt-full $NCU --clock-control none --profile-from-start off --metrics $MET -f -o $D/gpt2-eager-step2-full \
    $PY $P/gpt_train_compile.py --eager --steps 3 --decode 0 --profile-step 2
  t ncu-resnet-full $NCU --clock-control none --profile-from-start off --metrics $MET -f -o $D/resnet18-step3-full \
    $PY $P/resnet_train.py --steps 4 --profiler-api-step 3
  for f in $D/*.ncu-rep; do $NCU --import $f --csv --page raw > ${f%.ncu-rep}.raw.csv 2>/dev/null; done
  ;;
agshapes)
  need agshapes 90 || continue
  D=$G/agshapes; mkdir -p $D
  # nsys's own PyTorch operator ranges (no profkit capture): what a user's export holds
  t nsys-agshapes $NSYS profile -t cuda,nvtx --pytorch=autograd-shapes-nvtx --sample=none --cpuctxsw=none -f true \
    -o $D/fusion-autograd-shapes $PY $P/fusion_ops.py --calls 5 \
    && $NSYS export --type sqlite --force-overwrite true -o $D/fusion-autograd-shapes.nsys.sqlite \
       $D/fusion-autograd-shapes.nsys-rep > $L/export-agshapes.log 2>&1
  t ingest-agshapes python3 -m profkit.cli ingest --db $D/p.db $D/fusion-autograd-shapes.nsys.sqlite
  COLUMNS=200 t advise-agshapes python3 -m profkit.cli advise --db $D/p.db --phase all
  cp $L/advise-agshapes.log $D/advise.txt; rm -f $D/p.db
  ;;
*) echo "== unknown group $group: skipped";;
esac; done

# pack: ncu reports and nsys SQLite xz'd, nsys-rep files dropped, one tar per group
wait
find $G -name '*.nsys-rep' -delete; find $G -name '*.db-wal' -delete; find $G -name '*.db-shm' -delete
find $G \( -name '*.ncu-rep' -o -name '*.nsys.sqlite' -o -name '*.sqlite' \) -print0 | xargs -0 -r -n 4 -P 16 xz -6 -T1
# the databases stay behind (the reports load again anywhere); a tar a group
# a file comes back only under 16 MiB: larger tars travel in parts (cat part-* | tar -x)
for d in $G/*/; do [ -d "$d" ] || continue; b=$(basename $d)
  tar -cf $OUT/$b.tar --exclude 'cap.db*' -C $G $b
  [ $(stat -c %s $OUT/$b.tar) -gt 15000000 ] && split -b 15000000 -d $OUT/$b.tar $OUT/$b.tar.part- && rm $OUT/$b.tar; done
tar -cJf $OUT/logs.tar.xz -C $O logs
ls -la $OUT; du -sh $G/* 2>/dev/null
echo "== $(( $(date +%s) - T0 )) s"
cat $L/timings.txt
