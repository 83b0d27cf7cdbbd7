#!/usr/bin/env bash
# What the device-tool calls run on the lent H200 to record the training traces in traces/
# (transformer rung, and the MLP with max-autotune). Usage there, from a folder holding tracetui/
# and kernels/:  bash h200_training.sh GROUP   (GROUP: main | autotune)
# Writes $OUT/<name>.tgz per recording (trace + key_averages sidecar) and $OUT/gen_GROUP.log.
set -o pipefail
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda)"
# lay the package out as installed (kernels/ -> tracetui/kernels); run outside the source tree
rm -rf /tmp/site && mkdir -p /tmp/site && cp -r tracetui /tmp/site/ && cp -r kernels /tmp/site/tracetui/kernels
export PYTHONPATH=/tmp/site; cd /tmp
T=/tmp/tr; mkdir -p $T
rec() {  # rec NAME ARGS...: one recording, packed on its own so a later timeout loses nothing
  local name=$1; shift
  local t0=$SECONDS
  timeout ${REC_TIMEOUT:-420} python3 -m tracetui gen "$@" -o $T/$name.json.gz 2>&1 \
    | grep -v "step [0-9]\|warm-up\|USDT\|_warn_once\|UserWarning\|warnings.warn"
  echo "[h200_training] $name: rc=$? $((SECONDS - t0)) s $(ls -la $T/$name.json.gz 2>/dev/null | awk '{print $5}') bytes"
  [ -f $T/$name.json.gz ] && tar czf $OUT/$name.tgz -C $T $name.json.gz $name.key_averages.json
}
{
case "$1" in
  main)
    rec transformer_eager transformer
    rec transformer_eager_rf transformer --step-marker record_function
    rec transformer_eager_memory transformer --memory
    rec transformer_compile transformer --impl compile
    rec mlp_max_autotune mlp --impl compile --mode max-autotune-no-cudagraphs
    ;;
  autotune)
    rec transformer_max_autotune transformer --impl compile --mode max-autotune-no-cudagraphs
    ;;
esac
} 2>&1 | tee $OUT/gen_$1.log
