#!/usr/bin/env bash
# Second device-tool call: re-record the fused trace with the packed dual-GEMM kernel and run
# kernels/bench.py. Usage there: bash benchmarks/h200_bench.sh  (writes $OUT/{bench.*,fused.tgz})
set -o pipefail
export PYTHONUNBUFFERED=1
mkdir -p /tmp/site && cp -r tracetui /tmp/site/ && cp -r kernels /tmp/site/tracetui/kernels
export PYTHONPATH=/tmp/site; cd /tmp
mkdir -p /tmp/tr/traces
python3 -m tracetui gen mlp --impl fused -o /tmp/tr/traces/mlp_fused.json.gz 2>&1 | grep -v "step\|warm-up\|USDT\|_warn_once\|UserWarning" | tee $OUT/gen.log
tar czf $OUT/fused.tgz -C /tmp/tr traces
timeout 480 python3 -m tracetui.kernels.bench --json $OUT/bench.json 2>&1 | grep -v Warning | tee $OUT/bench.log
