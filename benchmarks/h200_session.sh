#!/usr/bin/env bash
# What one device-tool call ran on the lent H200 to record traces/ and run kernels/bench.py.
# Usage there: bash benchmarks/h200_session.sh  (writes $OUT/{gen.log,traces.tgz,bench.json,bench.log})
set -o pipefail
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.version.cuda)"
# The image has no network and no msgspec/textual: lay the package out as installed (kernels/ ->
# tracetui/kernels) and run from outside the checkout so the source tree does not shadow it.
mkdir -p /tmp/site && cp -r tracetui /tmp/site/ && cp -r kernels /tmp/site/tracetui/kernels
export PYTHONPATH=/tmp/site; cd /tmp
mkdir -p /tmp/tr/traces /tmp/tr/tests
( timeout 300 python3 -m tracetui gen --all -o /tmp/tr/traces 2>&1 | grep -v "^\[tracetui gen\] step\|warm-up" ;
  python3 -m tracetui gen linear --active 1 -o /tmp/tr/tests/h200_linear_eager.json.gz;
  python3 -m tracetui gen mlp --active 1 -o /tmp/tr/tests/h200_mlp_eager.json.gz;
  python3 -m tracetui gen mlp --impl compile --active 1 -o /tmp/tr/tests/h200_mlp_compile.json.gz ) 2>&1 | grep -v "step\|warm-up\|USDT" | tee $OUT/gen.log
tar czf $OUT/traces.tgz -C /tmp/tr traces tests; ls -la /tmp/tr/traces /tmp/tr/tests
timeout 420 python3 -m tracetui.kernels.bench --json $OUT/bench.json 2>&1 | grep -v Warning | tee $OUT/bench.log
