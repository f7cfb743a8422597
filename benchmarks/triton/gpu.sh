#!/usr/bin/env bash
# The Triton backend on the device machine (one H100): GPU tests (the full op sweep among
# them), streaming-kernel bandwidth, and the zoo models end to end. Stage "runner" for the
# GPU: input the working tree with wheels in .whl/ (transformers, regex: see
# benchmarks/zoo/gpu.sh for the download line); output under $OUT: tests.log, streaming.log
# and streaming.jsonl, models.log and models.jsonl. Each phase has its own time limit, so a
# call of the device tool ends inside its 10 minutes:
#   run(command="bash benchmarks/triton/gpu.sh tests streaming models", carry=[".whl"])
# Phases (arguments, in order): tests, streaming, models, models-tc (models with
# torch.compile timed too). Extra environment: STREAM_ARGS, MODEL_ARGS, TEST_ARGS and the
# phase limits TEST_TIMEOUT, STREAM_TIMEOUT, MODEL_TIMEOUT (seconds).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-benchmarks/results/tmp}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 JIT_CACHE_DIR=${JIT_CACHE_DIR:-/tmp/framejit-cache}
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
# dynamo's C extension (the frame hook) for the tests and the diagnostics that use dynamo.jit
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/install.log" 2>&1 \
  || tail -5 "$OUT/install.log"
python3 -c 'import torch, triton; print(torch.cuda.get_device_name(), "torch", torch.__version__,
  "triton", triton.__version__)' 2>&1 | tee "$OUT/versions.log"
for phase in "$@"; do
  started=$(date +%s)
  case "$phase" in
    tests)
      timeout ${TEST_TIMEOUT:-270} python3 -m pytest -q -p no:warnings -n 8 --durations=15 tests/triton \
        ${TEST_ARGS:-} > "$OUT/tests.log" 2>&1
      tail -40 "$OUT/tests.log" ;;
    streaming)
      timeout ${STREAM_TIMEOUT:-220} python3 -m benchmarks.triton.streaming --output "$OUT/streaming.jsonl" \
        ${STREAM_ARGS:-} 2>&1 | grep -v '^W[0-9]' | tee "$OUT/streaming.log" ;;
    models|models-tc)
      extra=""; [ "$phase" = models-tc ] && extra="--torch-compile"
      timeout ${MODEL_TIMEOUT:-240} python3 -m benchmarks.triton.models --output "$OUT/models.jsonl" $extra \
        ${MODEL_ARGS:-} > "$OUT/models.log" 2>&1
      grep '^{' "$OUT/models.log" | cut -c1-400; grep -E 'Error|error' "$OUT/models.log" \
        | tail -5 ;;
    *) echo "unknown phase $phase" ;;
  esac
  echo "== $phase took $(( $(date +%s) - started )) s"
done
