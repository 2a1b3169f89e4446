#!/usr/bin/env bash
# The GPU checks, run on a GPU machine from the repository root (bench/gpu/README.md), in stages:
#   tests: the open-model adapters on CUDA (tests/hf/test_cuda.py)
#   speed: their speed (infill/bench/hf_speed.py), 0.5B and 7B shapes, random weights
#   probe: where a step's time goes (bench/gpu/forward_probe.py)
#   graphs: CUDA graphs on against off (infill/model/hf/graphs.py), 0.5B grid and 7B single stream
#   train: the gpu recipe on the packed corpus in $PACKED (default packed/, infill corpus pack), for
#          $MINUTES (default 7), resuming from $RUN (default bench/gpu/run, committed between leases);
#          its checkpoint (bf16 weights in 16 MiB files) and export go to $OUT/run
# Usage: bench/gpu/run.sh [STAGE...] (default: tests speed). Wheels for what the machine lacks travel
# in .whl (bench/gpu/README.md); results go to $OUT.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/bench/results/gpu}; mkdir -p "$OUT"
REPO=$PWD
if [ -d .whl ]; then  # a bare machine with no network: the wheels that travelled, then this checkout
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --upgrade --target /tmp/site . || exit 1
  export PYTHONPATH=/tmp/site
fi
cd /tmp
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv | tee $OUT/gpu.txt
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" | tee -a $OUT/gpu.txt
STAGES=" ${*:-tests speed} "
[[ $STAGES == *" tests "* ]] && timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu "$REPO/tests/hf/test_cuda.py" 2>&1 | tail -25 | tee $OUT/test_cuda.txt
[[ $STAGES == *" probe "* ]] && timeout 200 python3 "$REPO/bench/gpu/forward_probe.py" --profile --out $OUT/probe.json 2>&1 | tee $OUT/probe.txt
[[ $STAGES == *" graphs "* ]] && {
  timeout 130 python3 -m infill.bench.hf_speed --shape 0.5b --device cuda --precision bf16 --context 1024 \
    --window 32 64 --batch 1 8 --steps 4 8 --modes exact approximate --graphs on off --repeats 5 \
    --out $OUT/hf_speed_cuda_0.5b_graphs.json 2>&1 | grep -v '^{' | tee -a $OUT/log.txt
  timeout 100 python3 -m infill.bench.hf_speed --shape 7b --device cuda --precision bf16 --context 1024 \
    --window 64 --batch 1 --steps 4 8 --modes exact approximate --graphs on off --repeats 5 \
    --out $OUT/hf_speed_cuda_7b_graphs.json 2>&1 | grep -v '^{' | tee -a $OUT/log.txt
}
[[ $STAGES == *" speed "* ]] && for shape in 0.5b 7b; do
  timeout 150 python3 -m infill.bench.hf_speed --shape $shape --device cuda --precision bf16 --context 1024 \
    --window 32 64 --batch 1 8 --steps 4 8 --modes exact approximate --repeats 5 \
    --out $OUT/hf_speed_cuda_$shape.json 2>&1 | grep -v '^{' | tee -a $OUT/log.txt
  timeout 90 python3 -m infill.bench.hf_speed --shape $shape --device cuda --precision bf16 --context 1024 \
    --window 32 --steps 4 --modes exact approximate approximate-steps --keystrokes 10 --repeats 2 \
    --out $OUT/hf_speed_cuda_${shape}_keystrokes.json 2>&1 | grep -v '^{' | tee -a $OUT/log.txt
done
[[ $STAGES == *" train "* ]] && {
  RUN=${RUN:-$REPO/bench/gpu/run}; mkdir -p "$OUT/run"; [ -d "$RUN/checkpoint" ] && cp -r "$RUN/checkpoint" "$RUN/tokenizer.json" "$OUT/run/"
  timeout $(( ${MINUTES:-7} * 60 + 120 )) python3 -m infill.cli train --preset gpu --corpus "${PACKED:-$REPO/packed}" \
    --max-minutes ${MINUTES:-7} --run-dir "$OUT/run" 2>&1 | tail -40 | tee $OUT/train.txt
  rm -rf "$OUT/run/model"  # over the way back's 64 MiB beside the checkpoint; `infill train` with the same
}                          # arguments exports it again from the checkpoint here
ls -la $OUT
