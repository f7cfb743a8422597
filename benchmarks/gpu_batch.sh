#!/usr/bin/env bash
# Soundness work for the GPU machine (one H100) in one device call, the GPU busy with several
# jobs at once (timings are not taken here, so sharing the machine costs nothing but wall time):
#   soundness  benchmarks/gpu_soundness.py (DeBERTa-v2, Mistral, BART in bf16 under dynamo.jit,
#              bounds mode / default / compute-sanitizer: STAGES, MODELS, MODES as there)
#   graphs     the graph fuzzer on CUDA tensors (GRAPHS graphs from GRAPH_SEED, GRAPH_JOBS jobs)
#   tests      the test files that run CUDA cases (TESTS), GPU-marked and all
#   zoo        the zoo's GPU rows of ZOO_MODELS with torch.compile in the same run
#              (benchmarks/zoo/gpu.sh; ZOO_COMMIT names the commit carried)
#   fuzz       the program fuzzer on the machine's CPU cores (FUZZ_BACKEND, FUZZ_COUNT
#              programs from FUZZ_SEED, FUZZ_JOBS jobs), resumable: FUZZ_LOG_IN is an
#              earlier call's fuzz-<backend>.jsonl whose seeds are skipped
#   cpugraphs  the graph fuzzer on CPU tensors, C++ (CPU_GRAPHS from CPU_GRAPH_SEED,
#              CPU_GRAPH_JOBS jobs), resumable the same way with CPU_GRAPHS_LOG_IN
# Usage, through the device tool, with the wheels in .whl/ (benchmarks/zoo/gpu.sh says which):
#   run(command="PARTS=soundness,graphs,tests bash benchmarks/gpu_batch.sh", carry=[".whl"])
# Every part stops by WALL seconds (default 540); results land in $OUT: soundness/ (its logs
# and gpu-soundness.jsonl), graphs-cuda.jsonl and graphs.out, tests.log, zoo/gpu.jsonl.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-batch}
WALL=${WALL:-540}
PARTS=${PARTS:-soundness,graphs,tests}
mkdir -p "$OUT"
started=$(date +%s)
if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/install.log" 2>&1 \
  || { tail -20 "$OUT/install.log"; exit 1; }
export PYTHONUNBUFFERED=1 GPU_BATCH_INSTALLED=1
python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', \
torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
left=$(( WALL - ($(date +%s) - started) ))

# The CPU fuzzers compare with eager's CPU kernels. On AVX-512 CPUs (the GPU hosts' Xeons)
# eager's float32 oneDNN `gelu` gives NaN for +inf (its AVX2 kernel and float64 give inf, as
# ours; benchmarks/results/wave2-gpu/eager-gelu-inf-avx512-host.txt): the fuzzers' workers
# pin oneDNN's eager kernels to AVX2 so that this bug of eager's is no failure of ours.
export ONEDNN_MAX_CPU_ISA=${ONEDNN_MAX_CPU_ISA:-AVX2}
has() { [[ ",$PARTS," == *",$1,"* ]]; }
if has soundness; then
  (OUT=$OUT/soundness BUDGET=$(( left - 60 )) JIT_CACHE_DIR=/tmp/jit-soundness \
     timeout "$left" bash benchmarks/gpu_soundness.sh > "$OUT/soundness.out" 2>&1) &
fi
if has graphs; then
  (JIT_CACHE_DIR=/tmp/jit-graphs timeout "$(( left - 10 ))" python3 -m tests.fuzz.graphs \
     --device cuda --count "${GRAPHS:-2000}" --seed "${GRAPH_SEED:-0}" \
     --jobs "${GRAPH_JOBS:-6}" --log "$OUT/graphs-cuda.jsonl" --repro-dir "$OUT/graph-repros" \
     > "$OUT/graphs.out" 2>&1) &
fi
if has tests; then
  (JIT_CACHE_DIR=/tmp/jit-tests timeout "$(( left - 10 ))" python3 -m pytest -q -p no:cacheprovider \
     -p no:warnings -n "${TEST_JOBS:-4}" ${TESTS:-tests/triton tests/inductor/test_mutation_cuda.py \
     tests/inductor/test_random.py tests/inductor/test_aligned_matmul.py \
     tests/inductor/test_native_allocation.py tests/inductor/test_bounds.py \
     tests/repros/test_torch_global_flags_guarded.py} > "$OUT/tests.log" 2>&1) &
fi
if has fuzz; then
  backend=${FUZZ_BACKEND:-eager}
  [ -n "${FUZZ_LOG_IN:-}" ] && cp "$FUZZ_LOG_IN" "$OUT/fuzz-$backend.jsonl"
  (JIT_CACHE_DIR=/tmp/jit-fuzz timeout "$(( left - 15 ))" python3 -m tests.fuzz \
     --backend "$backend" --count "${FUZZ_COUNT:-20000}" --seed "${FUZZ_SEED:-0}" \
     --jobs "${FUZZ_JOBS:-8}" --log "$OUT/fuzz-$backend.jsonl" --resume \
     > "$OUT/fuzz.out" 2>&1) &
fi
if has cpugraphs; then
  [ -n "${CPU_GRAPHS_LOG_IN:-}" ] && cp "$CPU_GRAPHS_LOG_IN" "$OUT/graphs-cpu.jsonl"
  (JIT_CACHE_DIR=/tmp/jit-cpugraphs timeout "$(( left - 15 ))" python3 -m tests.fuzz.graphs \
     --device cpu --cpu-backend cpp --count "${CPU_GRAPHS:-20000}" \
     --seed "${CPU_GRAPH_SEED:-0}" --jobs "${CPU_GRAPH_JOBS:-6}" \
     --log "$OUT/graphs-cpu.jsonl" --resume > "$OUT/cpugraphs.out" 2>&1) &
fi
if has zoo; then
  (OUT=$OUT/zoo ZOO_BUDGET=$(( left - 90 )) ZOO_ARGS="--models ${ZOO_MODELS:-deberta-v2,mistral,bart}" \
     timeout "$left" bash benchmarks/zoo/gpu.sh > "$OUT/zoo.out" 2>&1) &
fi
wait
echo "== soundness";  grep -E "PASS|FAIL|not run|SKIP" "$OUT/soundness.out" 2> /dev/null | tail -40
echo "== graphs";     tail -8 "$OUT/graphs.out" 2> /dev/null
if [ -f "$OUT/graphs-cuda.jsonl" ]; then
  python3 - "$OUT/graphs-cuda.jsonl" <<'EOF'
import collections, json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
print(len(rows), "graphs logged;", dict(collections.Counter(r.get("status") for r in rows)))
EOF
fi
echo "== tests";      tail -25 "$OUT/tests.log" 2> /dev/null
echo "== fuzz";       tail -12 "$OUT/fuzz.out" 2> /dev/null
echo "== cpugraphs";  tail -8 "$OUT/cpugraphs.out" 2> /dev/null
echo "== zoo";        grep -v '^W[0-9]' "$OUT/zoo.out" 2> /dev/null | tail -25
echo "== took $(( $(date +%s) - started )) s"
