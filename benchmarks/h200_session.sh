#!/usr/bin/env bash
# What one device-tool call runs on the lent H200 to record traces/ and tests/data, then
# kernels/bench.py. Usage there: bash benchmarks/h200_session.sh [--quick]
# Writes $OUT/{gen.log,traces.tgz,bench.json,bench.log}.
set -o pipefail
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
# The image has no network and no msgspec/textual: lay the package out as installed (kernels/ ->
# tracetui/kernels) and run from outside the checkout so the source tree does not shadow it.
rm -rf /tmp/site && mkdir -p /tmp/site && cp -r tracetui /tmp/site/ && cp -r kernels /tmp/site/tracetui/kernels
export PYTHONPATH=/tmp/site; cd /tmp
mkdir -p /tmp/tr/traces /tmp/tr/tests
( timeout 300 python3 -m tracetui gen --all -o /tmp/tr/traces
  python3 -m tracetui gen linear --active 1 --no-stack -o /tmp/tr/tests/h200_linear_eager.json.gz
  python3 -m tracetui gen mlp --active 1 --no-stack -o /tmp/tr/tests/h200_mlp_eager.json.gz
  python3 -m tracetui gen mlp --impl compile --active 1 --no-stack -o /tmp/tr/tests/h200_mlp_compile.json.gz
) 2>&1 | grep -v "step [0-9]\|warm-up\|USDT\|_warn_once\|UserWarning" | tee $OUT/gen.log
tar czf $OUT/traces.tgz -C /tmp/tr traces tests
timeout 400 python3 -m tracetui.kernels.bench --json $OUT/bench.json "$@" 2>&1 | grep -v Warning | tee $OUT/bench.log
