#!/usr/bin/env bash
# The capture-side test suites on the GPU machine (Python 3.12.3, torch 2.11, triton 3.6), run
# through the device tool with the `bytecode` wheel carried in .whl/ (see docs/testing.md):
#   run(command="bash benchmarks/gpu_tests.sh", carry=[".whl"])
# That Python ships a partial `test` package; for tests/hook/test_cpython_suite.py carry a copy
# of CPython 3.12's Lib/test in .venvcpy/test (docs/testing.md says how it is made):
#   run(command="SUITES=tests/hook/test_cpython_suite.py bash benchmarks/gpu_tests.sh",
#       carry=[".whl", ".venvcpy"])
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/bytecode-*.whl && export PYTHONPATH=/tmp/site
[ -d .venvcpy/test ] && export PYTHONPATH=$PWD/.venvcpy:$PYTHONPATH
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/install.log 2>&1 \
  || { tail -20 /tmp/install.log; exit 1; }
python3 -c "import sys, torch, triton, transformers, torchvision; print(sys.version.split()[0], torch.__version__, triton.__version__, transformers.__version__, torchvision.__version__, torch.cuda.get_device_name())"
export PYTHONUNBUFFERED=1
python3 -m pytest -q -rs -n 8 -p no:cacheprovider ${SUITES:-tests/hook tests/api tests/guards tests/capture tests/breaks} 2>&1 | tee "${OUT:-/tmp}/gpu-tests.log" | tail -40
