#!/usr/bin/env bash
# The GPU zoo on a multi-GPU device machine: one stream of jobs per GPU, each stream a call of
# benchmarks/zoo/gpu.sh pinned to its GPU (CUDA_VISIBLE_DEVICES), all streams side by side
# inside one device call. Stage "runner" for several GPUs: input the working tree (a clean
# archive of the commit to measure in .gpu_tree/src.tar, the wheels the device lacks in
# .gpu_tree/.whl/: see gpu.sh); output $OUT/rows.jsonl (every row the streams wrote) and
# $OUT/logs.txt (their progress lines): two files, because a device call returns at most eight.
#
# Each argument is one stream, "INFERENCE_MODELS:TRAINING_MODELS" (comma-separated; either side
# may be empty): the stream runs its inference jobs, then its training jobs with the time left.
# Environment: ZC (the commit of src.tar, required), END (seconds from the start by which every
# stream stops starting jobs, default 555: inside the device tool's 600 s per call),
# IBUDGET (seconds for a stream's inference jobs, default 260), CMODE (torch compile mode for
# both compilers: default, reduce-overhead, max-autotune), COMPILERS (default
# framejit,torch.compile), JOBT (seconds per job, default 200).
#
# Here, once (not on the device):
#   mkdir -p .gpu_tree && git archive HEAD -o .gpu_tree/src.tar && cp -r <wheels> .gpu_tree/.whl
#   echo /.gpu_tree/ >> .git/info/exclude
# .gitignore's `.whl/` also matches .gpu_tree/.whl, so the call must carry it:
#   run(command="ZC=<commit> bash benchmarks/zoo/gpu_streams.sh resnet50,bert:gpt2 vit:",
#       kind="nvidia-h200-x4", carry=[".gpu_tree/.whl"], timeout_s=600)
# Rows of earlier calls are not carried: gpu.sh would skip jobs that benchmarks/results/gpu.jsonl
# (the first GPU table, another machine) already holds, so the archive's copy is removed. Append
# the returned rows to benchmarks/results/gpu-zoo-h200.jsonl (newest row per job wins in the
# report), then `python -m benchmarks.zoo report ...`.
set -uo pipefail
export PYTHONUNBUFFERED=1
T0=$(date +%s)
: "${ZC:?set ZC=<commit of .gpu_tree/src.tar>}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .gpu_tree/.whl/*.whl > /tmp/wheels.log 2>&1 || tail -5 /tmp/wheels.log
SRC=$(mktemp -d /tmp/zoo-src.XXXX)
tar -xf .gpu_tree/src.tar -C "$SRC" && cd "$SRC" && rm -f benchmarks/results/gpu.jsonl
export PYTHONPATH=/tmp/site:$SRC GPU_BATCH_INSTALLED=1 JIT_CACHE_DIR=/tmp/framejit-cache
python3 -m dynamo build 2>&1 | tail -1
EXTRA=""
if [ "${CMODE:-default}" != default ]; then EXTRA="--compile-mode $CMODE"; fi
COMMON="--suite gpu-zoo --compilers ${COMPILERS:-framejit,torch.compile} --timeout ${JOBT:-200} $EXTRA"
END=${END:-555}
ROWS=$(mktemp -d /tmp/zoo-rows.XXXX)

stream() {
  local gpu=$1 inference=${2%%:*} training=${2#*:} left
  if [ -n "$inference" ]; then
    CUDA_VISIBLE_DEVICES=$gpu OUT=$ROWS/i$gpu ZOO_COMMIT=$ZC ZOO_BUDGET=${IBUDGET:-260} \
      ZOO_ARGS="$COMMON --modes inference --models $inference" \
      bash benchmarks/zoo/gpu.sh > "$ROWS/i$gpu.out" 2>&1
  fi
  left=$(( END - ($(date +%s) - T0) ))
  if [ -n "$training" ] && [ "$left" -gt 60 ]; then
    CUDA_VISIBLE_DEVICES=$gpu OUT=$ROWS/t$gpu ZOO_COMMIT=$ZC ZOO_BUDGET=$left \
      ZOO_ARGS="$COMMON --modes training --models $training" \
      bash benchmarks/zoo/gpu.sh > "$ROWS/t$gpu.out" 2>&1
  fi
}

gpu=0
for spec in "$@"; do stream "$gpu" "$spec" & gpu=$((gpu + 1)); done
wait
cat "$ROWS"/*/gpu.jsonl > "$OUT/rows.jsonl" 2>/dev/null
cat "$ROWS"/*.out | grep -v "^W[0-9]" > "$OUT/logs.txt"
grep -E "\[#|zoo:" "$OUT/logs.txt" | cut -c1-170
echo "gpu_streams: $(wc -l < "$OUT/rows.jsonl") rows in $(( $(date +%s) - T0 )) s"
