#!/usr/bin/env bash
# Issues 33/42 on a lent H100/H200 in ONE device-tool call (each step under its own timeout, ~570 s
# in all): kernels/bench.py at the done-when shapes (forward 8192, 512, 2048 with every compile
# mode, launch cost and the dispatch check; training fwd+bwd at 8192 and 2048), correctness in
# bf16/fp16/fp32 first, through the custom op and under torch.compile too (a failing case is a
# FAIL row: the tables always print); every impl in each host mode (plain, graphed, compiled:
# the "fused + compile" and "fused + CUDA graphs" rungs); then the `gen mlp --train` traces
# (fused, eager, compile, fused-graphs, fused-compile as time allows) and the weight-copy check
# of the fused one, read from its raw JSON. Later phases: `more` (m=64 for the cuBLAS rule, the
# rest of the sweep), `tune` (kernels/tune.py).
#
#   rsync -a --delete --exclude .git --exclude .venv /work/wt/kernels/ /work/main/.gpurun/
#   run(command="cd .gpurun && bash benchmarks/h200_kernels_session.sh", carry=[".gpurun"])
#   run(command="cd .gpurun && bash benchmarks/h200_kernels_session.sh more", carry=[".gpurun"])
#
# Writes under $OUT (8 files at most come back): bench.json + bench.log (JSON rewritten after
# every shape, so a timeout keeps what ran; its tables are printed from the JSON then),
# traces.tgz (mlp_train_{fused,eager,compile}.json.gz + key_averages sidecars) + gen.log (with
# the weight-copy check), env.txt. The bench's exit code: bit 1 correctness, 4 table errors,
# 8 targets missed. Afterwards, anywhere: python -m tracetui.kernels.bench --summary-from bench.json
set -o pipefail
export PYTHONUNBUFFERED=1
PHASE=${1:-all}
HERE=$(pwd)
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda)"
  nproc; } 2>&1 | tee $OUT/env.txt
# The image has no network and no msgspec/textual: lay the package out as installed (kernels/ ->
# tracetui/kernels) and run from outside the checkout so the source tree does not shadow it.
SITE=${SITE:-/tmp/site}
rm -rf $SITE && mkdir -p $SITE && cp -r tracetui $SITE/ && cp -r kernels $SITE/tracetui/kernels
export PYTHONPATH=$SITE; cd /tmp
filter() { grep -v "step [0-9]\|warm-up\|USDT\|_warn_once\|UserWarning\|warnings.warn"; }

left() { echo $(( ${DEADLINE:-570} - SECONDS )); }  # seconds left of this call's 600
bench() {  # bench NAME TIMEOUT ARGS...: one bench run, its tables even if the timeout cut it
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout $limit python3 -m tracetui.kernels.bench --json $OUT/$name.json --no-pointwise "$@" 2>&1 \
    | filter | tee $OUT/$name.log
  echo "[session] $name rc=$? $((SECONDS - t0)) s" | tee -a $OUT/$name.log
  grep -q "done in" $OUT/$name.log || [ ! -f $OUT/$name.json ] || \
    python3 -m tracetui.kernels.bench --summary-from $OUT/$name.json 2>&1 | tee -a $OUT/$name.log
}
gen() {
  T=${SITE}_traces; rm -rf $T; mkdir -p $T
  rec() {  # rec NAME ARGS...: one recording under its own timeout
    local name=$1; shift
    local t0=$SECONDS
    timeout ${REC_TIMEOUT:-40} python3 -m tracetui gen mlp --train --active 3 "$@" -o $T/$name.json.gz 2>&1 | filter
    echo "[session] $name: rc=$? $((SECONDS - t0)) s $(stat -c %s $T/$name.json.gz 2>/dev/null) bytes"
  }
  { rec mlp_train_fused --impl fused
    rec mlp_train_eager --impl eager
    [ $(left) -gt 45 ] && rec mlp_train_compile --impl compile
    [ $(left) -gt 40 ] && rec mlp_train_fused_graphs --impl fused-graphs
    [ $(left) -gt 45 ] && rec mlp_train_fused_compile --impl fused-compile
    echo "[session] weight copies (first trace must have none):"
    python3 $HERE/benchmarks/trace_weight_copies.py $T/mlp_train_fused.json.gz $T/mlp_train_eager.json.gz
    echo "[session] trace_weight_copies rc=$?"
  } 2>&1 | tee $OUT/gen.log
  tar czf $OUT/traces.tgz -C $T . 2>&1 | tee -a $OUT/gen.log
}
tune() {
  timeout $1 python3 -m tracetui.kernels.tune --json $OUT/tune.json --budget ${TUNE_BUDGET:-40} --no-pointwise \
    2>&1 | filter | tee $OUT/tune.log
  echo "[session] tune rc=$?" | tee -a $OUT/tune.log
}
case "$PHASE" in
  all)
    bench bench $(( $(left) - ${GEN_S:-130} )) --no-v5 --shapes 8192x768x3072,512x768x2048,2048x768x3072 \
      --train-shapes 8192x768x3072,2048x768x3072
    gen
    ;;
  more) bench bench_more $(( $(left) - 10 )) --shapes 64x768x3072,1000x768x3000,16384x768x8192 \
          --train-shapes 512x768x2048 ;;
  # the cuBLAS rule's threshold: the dispatch check at small M only (no correctness, one compile mode)
  calibrate) bench bench_calibrate 200 --no-check --no-v5 --no-train --no-graphs --modes default \
               --shapes 64x768x3072,128x768x3072,256x768x3072 ;;
  # the training path after the direct launcher (kernels/launch.py): forward at the default shape,
  # (correctness: the train table's gradients against float64, from a step launched directly), training at both done-when shapes, then the traces (DEADLINE=330 fits ~5 min)
  train) bench bench_train $(( $(left) - 60 )) --no-check --no-v5 --no-graphs --shapes 8192x768x3072 \
           --train-shapes 8192x768x3072,2048x768x3072
         gen ;;
  # issue 42 when device time is short: correctness (op and compile cases), the default forward
  # shape, training at both done-when shapes in every host mode, then the traces (DEADLINE=450)
  train42) bench bench $(( $(left) - ${GEN_S:-100} )) --no-v5 --shapes 8192x768x3072 \
             --train-shapes 8192x768x3072,2048x768x3072
           gen ;;
  # the least device time that answers issue 42's training question: both train shapes in every
  # host mode (compile modes default and max-autotune only), the default forward shape, no traces
  graphs42) bench bench $(( $(left) - 10 )) --no-check --no-v5 --modes default,max-autotune \
              --shapes ${FWD_SHAPES:-8192x768x3072} --train-shapes ${TRAIN_SHAPES:-8192x768x3072,2048x768x3072} ;;
  gen) gen ;;
  tune) tune $(( $(left) - 10 )) ;;
  *) echo "usage: $0 [all|train|train42|graphs42|more|calibrate|gen|tune]"; exit 2 ;;
esac
echo "[session] done in $SECONDS s"
