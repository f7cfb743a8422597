#!/usr/bin/env bash
# The zoo's GPU suite on the device machine (one H100), in chunks that each end inside the
# device tool's 10-minute limit per command. Stage "runner" for the GPU: input the working tree
# (with carried wheels in .whl/ and earlier rows in benchmarks/results/gpu.jsonl); output
# $OUT/gpu.jsonl (all rows so far, earlier ones included) and $OUT/gpu.log.
#
# Suite (benchmarks/zoo/catalog.py, suite "gpu"): bf16 inference of ResNet-50, MobileNetV3-L,
# ViT-B/16, BERT-base, GPT-2 (124M) and T5-small; training with bf16 autocast (AMP) of
# ResNet-50, MobileNetV3-L, BERT-base and GPT-2; batch 16, 128 tokens; compilers framejit,
# framejit-eager and torch.compile (each row also times eager, interleaved). 30 jobs, about
# 15-20 minutes of device time in all; each call runs jobs for at most ZOO_BUDGET seconds and
# the run is resumable, so call it again until it prints "suite complete".
#
# Once, here (not on the device), in the repository root: fetch the wheels the device lacks
# (its Python is 3.12.3 with torch 2.11 and triton 3.6; `bytecode` and `transformers` are
# missing; regex is carried in case its copy is older than transformers needs):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
#     --platform manylinux2014_x86_64 -d .whl bytecode==0.19.1 transformers==5.23.0 \
#     regex==2026.11.15
# (.whl/ is git-ignored; about 14 MiB.) Then, through the device tool, once per chunk:
#   run(command="ZOO_COMMIT=<short commit> bash benchmarks/zoo/gpu.sh", carry=[".whl"],
#       timeout_s=600)
# After each call copy the returned gpu.jsonl over benchmarks/results/gpu.jsonl (so the next
# chunk resumes from it), and at the end render the report here:
#   PYTHONPATH=. .venv/bin/python -m benchmarks.zoo report
# Options through the environment: ZOO_BUDGET (seconds of jobs per call, default 480),
# ZOO_ARGS (extra `run` flags, e.g. "--models resnet50 --compile-mode reduce-overhead"),
# PYTHON (default python3).
# The complete zoo (issue 25): ZOO_ARGS="--suite gpu-zoo --models A,B,... --modes inference
# --compilers framejit,torch.compile" with OUT=<its own folder>; on a 2-GPU host two such
# calls side by side (CUDA_VISIBLE_DEVICES=0 / 1, other models) halve the device time
# (benchmarks/zoo/gpu_streams.sh runs one stream per GPU of a 2- or 4-GPU machine). Keep
# its rows in their own file (benchmarks/results/gpu-zoo-h200.jsonl: another machine than
# gpu.jsonl's H100) and render with `report cpu.jsonl gpu.jsonl gpu-zoo-h200.jsonl`.
set -uo pipefail
cd "$(dirname "$0")/../.."
if [ -z "${ZOO_COMMIT:-}" ]; then
  # the device's copy of the tree may carry a stale .git (it once named a commit 12 behind)
  echo "gpu.sh: set ZOO_COMMIT=<commit of the tree you carried>"; exit 2
fi
PYTHON=${PYTHON:-python3}
OUT=${OUT:-benchmarks/results/tmp}
mkdir -p "$OUT"
LOG="$OUT/gpu.log"
export PYTHONUNBUFFERED=1

if [ -z "${GPU_BATCH_INSTALLED:-}" ] && ls .whl/*.whl >/dev/null 2>&1; then  # gpu_batch.sh did
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}

# dynamo's C extensions (the frame hook, frame state across graph breaks): build them for this
# Python (its internal headers ship with it).
SUFFIX=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
INCLUDE=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
for pair in _C:dynamo/hook/eval_frame.c _frame_state:dynamo/resume/frame_state.c; do
  if [ ! -f "dynamo/${pair%%:*}$SUFFIX" ]; then
    gcc -O2 -shared -fPIC -I"$INCLUDE" "${pair#*:}" -o "dynamo/${pair%%:*}$SUFFIX" \
      || echo "building dynamo.${pair%%:*} failed: framejit rows will record the error"
  fi
done

"$PYTHON" - <<'EOF' 2>&1 | tee -a "$LOG"
import torch, triton, bytecode, transformers
print("gpu:", torch.cuda.get_device_name(), "| torch", torch.__version__, "| triton",
      triton.__version__, "| transformers", transformers.__version__)
EOF

if [ -f benchmarks/results/gpu.jsonl ] && [ "$OUT" != benchmarks/results ]; then
  cp benchmarks/results/gpu.jsonl "$OUT/gpu.jsonl"  # resume from the rows carried here
fi
"$PYTHON" -m benchmarks.zoo run --suite gpu --budget "${ZOO_BUDGET:-480}" \
  --output "$OUT/gpu.jsonl" ${ZOO_ARGS:-} 2>&1 | grep --line-buffered -v '^W[0-9]' | tee -a "$LOG"
status=${PIPESTATUS[0]}
if [ "$status" = 3 ]; then
  echo "gpu.sh: jobs left; copy $OUT/gpu.jsonl to benchmarks/results/ and call again"
fi
exit 0
