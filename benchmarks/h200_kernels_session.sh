#!/usr/bin/env bash
# Issue 26 on a lent H200 in ONE device-tool call (each step under its own timeout, ~570 s in
# all): kernels/bench.py at the done-when shapes (8192, 512, 2048; every compile mode, launch
# cost, dispatch check; training fwd+bwd at the default shape), the mlp --train traces (fused,
# compile, then eager if time is left), then with what is left the rest of issue 26's table
# (16384x768x8192, m=64 for the cuBLAS rule, training at 2048) and kernels/tune.py (host vs
# device TMA descriptors first). Max-autotune compiles take most of the time: if the first call
# ends before bench_more/tune ran, further calls with the phases `bench2`, `bench3` (the rest of
# SWEEP and TRAIN_SWEEP) and `tune` complete it.
#
#   run(command="bash benchmarks/h200_kernels_session.sh")          # the done-when run, one call
#   run(command="bash benchmarks/h200_kernels_session.sh bench2")   # one more phase: bench2 | bench3 | gen | tune
#
# Writes under $OUT: bench.json + bench.log and bench_more/bench2/bench3.{json,log} (JSON rewritten after every
# shape, so a timeout keeps what ran; its tables are printed from the JSON then),
# traces.tgz (mlp_train_{fused,compile,eager}.json.gz + key_averages sidecars) + gen.log,
# tune.json + tune.log, and env.txt. Afterwards, on this machine:
#   tar xzf traces.tgz && tracetui diff mlp_train_compile.json.gz mlp_train_fused.json.gz --text
set -o pipefail
export PYTHONUNBUFFERED=1
PHASE=${1:-all}
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
    timeout ${REC_TIMEOUT:-55} python3 -m tracetui gen mlp --train --active 3 "$@" -o $T/$name.json.gz 2>&1 | filter
    echo "[session] $name: rc=$? $((SECONDS - t0)) s $(stat -c %s $T/$name.json.gz 2>/dev/null) bytes"
  }
  { rec mlp_train_fused --impl fused
    rec mlp_train_compile --impl compile
    [ $(left) -gt 100 ] && rec mlp_train_eager --impl eager
  } 2>&1 | tee $OUT/gen.log
  tar czf $OUT/traces.tgz -C $T . 2>&1 | tee -a $OUT/gen.log
}
tune() {  # the shipped config on host- vs device-built descriptors comes first in the sweep
  timeout $1 python3 -m tracetui.kernels.tune --json $OUT/tune.json --budget ${TUNE_BUDGET:-40} --no-pointwise \
    2>&1 | filter | tee $OUT/tune.log
  echo "[session] tune rc=$?" | tee -a $OUT/tune.log
}
# the done-when crux first (default shape, m=512, m=2048, train at the default shape), then the
# traces, then the rest of issue 26's table and the cuBLAS rule's m=64, then tune with what is left
case "$PHASE" in
  all)
    bench bench 350 --shapes 8192x768x3072,512x768x2048,2048x768x3072 --train-shapes 8192x768x3072
    gen
    [ $(left) -gt 60 ] && bench bench_more $(( $(left) - 40 )) --shapes 16384x768x8192,64x768x3072 \
      --train-shapes 2048x768x3072
    [ $(left) -gt 30 ] && tune $(left)
    ;;
  # the rest of SWEEP / TRAIN_SWEEP, one device call each (every shape compiles 3 modes, ~1-2 min)
  bench2) bench bench2 560 --shapes 16384x768x8192,4096x1024x4096,8192x768x8192,64x768x3072 \
            --train-shapes 2048x768x3072 ;;
  bench3) bench bench3 560 --shapes 16384x768x3072,16384x1024x2048,1000x768x3000 --train-shapes 512x768x2048 ;;
  gen) gen ;;
  tune) tune 560 ;;
  *) echo "usage: $0 [all|bench2|bench3|gen|tune]"; exit 2 ;;
esac
echo "[session] done in $SECONDS s"
