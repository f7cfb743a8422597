#!/usr/bin/env bash
# GPU diagnosis of training-gradient mismatches, through the device tool (carry .whl):
#   run(command="bash benchmarks/triton/diag_training.sh", carry=[".whl"])
# DIAG="..." runs that command line instead of the default variants, e.g.
#   DIAG="python3 -m benchmarks.triton.diag_bisect gpt2 inductor 64 amp"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD
INCLUDE=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
SUFFIX=$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
gcc -O2 -shared -fPIC -I"$INCLUDE" dynamo/hook/eval_frame.c -o dynamo/_C$SUFFIX
gcc -O2 -shared -fPIC -I"$INCLUDE" dynamo/resume/frame_state.c -o dynamo/_frame_state$SUFFIX
export JIT_CHANNELS_LAST=0
run() { echo "== $*"; timeout 120 env "$@" 2>&1 | grep -E "RESULT|^    |Error|error" | head -12; }
if [ -n "${DIAG:-}" ]; then eval "$DIAG"; exit 0; fi
run python3 -m benchmarks.triton.diag_sdpa
run python3 -m benchmarks.triton.diag_sdpa causal
run JIT_FALLBACK_ONLY=1 python3 -m benchmarks.triton.diag_sdpa causal
run JIT_FALLBACK_ONLY=1 python3 -m benchmarks.triton.diag_training bert inductor 64 amp
run DIAG_ATTENTION=eager python3 -m benchmarks.triton.diag_training bert inductor 64 amp
run DIAG_ATTENTION=eager python3 -m benchmarks.triton.diag_training gpt2 inductor 64 amp
