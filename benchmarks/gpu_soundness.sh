#!/usr/bin/env bash
# Soundness II class 7 on the GPU machine (one H100): DeBERTa-v2, Mistral and BART (small
# configs, random weights, bf16, batch 16) under dynamo.jit in bounds mode (JIT_BOUNDS_CHECK=1),
# without it, and under compute-sanitizer (memcheck), each compared with eager.
# `benchmarks/gpu_soundness.py` says what each stage does. One command, through the device
# tool, with the `bytecode` and `transformers` wheels carried in .whl/ (benchmarks/zoo/gpu.sh
# says how to fetch them):
#   run(command="bash benchmarks/gpu_soundness.sh", carry=[".whl"], timeout_s=600)
# Every stage of all models does not fit one 10-minute call (timings on the H100 not known yet:
# each job prints its seconds); narrow it through the environment and call again, e.g. in
# this order (the summary lists what ran out of budget as "not run"):
#   STAGES=bounds MODES=inference bash benchmarks/gpu_soundness.sh
#   STAGES=bounds MODES=training bash benchmarks/gpu_soundness.sh
#   STAGES=default bash benchmarks/gpu_soundness.sh
#   STAGES=sanitizer MODELS=deberta-v2-model,mistral-cache bash benchmarks/gpu_soundness.sh
#   STAGES=sanitizer MODELS=deberta-v2,mistral,bart bash benchmarks/gpu_soundness.sh
# Options: STAGES (bounds,default,sanitizer), MODELS (deberta-v2,deberta-v2-model,mistral,
# mistral-cache,bart), MODES (inference,training), SANITIZER_MODES (inference), BUDGET
# (seconds of jobs, default 540). Output: one PASS/FAIL line per job on stdout; the logs of
# every job and gpu-soundness.jsonl in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -z "${GPU_BATCH_INSTALLED:-}" ]; then  # benchmarks/gpu_batch.sh installed already
  if ls .whl/*.whl > /dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
  fi
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
  python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/install.log 2>&1 \
    || { tail -20 /tmp/install.log; exit 1; }
fi
export PYTHONUNBUFFERED=1 JIT_CACHE_DIR=${JIT_CACHE_DIR:-/tmp/framejit-cache}
OUT=${OUT:-/tmp/gpu-soundness}
mkdir -p "$OUT"
python3 -c "import sys, torch, triton, transformers; print('python', sys.version.split()[0], \
'torch', torch.__version__, 'triton', triton.__version__, 'transformers', \
transformers.__version__, torch.cuda.get_device_name())"
command -v compute-sanitizer > /dev/null \
  || export PATH=$PATH:$(ls -d /usr/local/cuda*/bin | head -1)
git rev-parse --short HEAD 2> /dev/null | sed 's/^/commit (the carried .git may be stale) /'
python3 -m benchmarks.gpu_soundness --stages "${STAGES:-bounds,default,sanitizer}" \
  --models "${MODELS:-deberta-v2,deberta-v2-model,mistral,mistral-cache,bart}" \
  --modes "${MODES:-inference,training}" --sanitizer-modes "${SANITIZER_MODES:-inference}" \
  --budget "${BUDGET:-540}" --logs "$OUT"
