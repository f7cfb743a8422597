"""No scalar libm call in a vectorised C++ loop (issue 25's "never a scalar libm call in a hot
loop"), checked on the built library: its undefined symbols (`nm -D --undefined-only`).

A float function of the primitives table that glibc's libmvec has in vector form
(`cpp_vector`) must appear as a vector variant (`_ZGV<isa><mask><lanes>v_<name>`) wherever
its scalar symbol appears: the scalar one then serves only the loop's last few elements. A
scalar call with no vector variant beside it is a loop that runs scalar. `sincosf`/`sincos`
must never appear: g++ merges `sin(x)` and `cos(x)` of one value into that call, which libmvec
has no variant of, and the whole loop ran scalar (`torch.sin(t) + torch.cos(t)`: 10 ms against
1.4 ms on 1024x1024, one thread). `inductor/runtime/build.py` builds with `-fno-builtin-sin`
and friends, which keeps the calls apart. Run with libmvec as the vector library
(`config.eager_transcendentals = False`; with it on, eager's VML functions are called through
pointers, which leave no symbol) and with it on.
"""
import os
import re
import shutil
import subprocess

import pytest
import torch

import inductor
from inductor.ir.primitives import FLOAT, PRIMITIVES
from inductor.runtime.build import has_vector_math
from tests.inductor.conftest import check_same

pytestmark = pytest.mark.skipif(shutil.which("nm") is None or not has_vector_math(),
                                reason="needs binutils' nm and glibc's libmvec")

VECTOR_UNARY = [row for row in PRIMITIVES if row.arity == 1 and row.dtypes == FLOAT and
                row.cpp and not row.cpp.startswith(("__builtin", "jit_")) and row.cpp_vector]
SCALAR_ONLY = {"sincos", "sincosf", "__sincos", "__sincosf"}


def _built_libraries(action) -> set:
    root = os.path.join(inductor.config.cache_dir, "cpp")
    before = _libraries(root)
    action()
    return _libraries(root) - before


def _libraries(root: str) -> set:
    found = set()
    for folder, _, names in os.walk(root):
        found.update(os.path.join(folder, name) for name in names if name.endswith(".so"))
    return found


def _undefined(library: str) -> set:
    listing = subprocess.run(["nm", "-D", "--undefined-only", library], capture_output=True,
                             text=True, check=True).stdout
    return {line.split()[-1].split("@")[0] for line in listing.splitlines() if line.strip()}


def _scalar_loops(symbols: set) -> list:
    """Scalar libm functions of the table with no vector variant in the same library."""
    vector = {re.sub(r"^_ZGV\w\w\d+v+_", "", symbol) for symbol in symbols
              if symbol.startswith("_ZGV")}
    names = {row.cpp for row in VECTOR_UNARY} | {row.cpp + "f" for row in VECTOR_UNARY}
    return sorted(symbol for symbol in symbols
                  if (symbol in names and symbol not in vector) or symbol in SCALAR_ONLY)


@pytest.fixture(params=[False, True], ids=["libmvec", "eager-transcendentals"])
def transcendentals(request, monkeypatch):
    monkeypatch.setattr(inductor.config, "cpu_backend", "cpp")
    monkeypatch.setattr(inductor.config, "eager_transcendentals", request.param)
    return request.param


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sin_and_cos_of_one_value_stay_vector_calls(transcendentals, dtype):
    def function(x):
        return torch.sin(x) + torch.cos(x) * 2

    x = torch.randn(67, 129, dtype=dtype)   # odd sizes: vector loop and remainder
    libraries = _built_libraries(lambda: check_same(function, x))
    assert libraries, "no C++ library was built (a cached one would hide the check)"
    for library in libraries:
        assert _scalar_loops(_undefined(library)) == [], library


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_every_vector_function_of_the_table_runs_in_vector_form(transcendentals, dtype):
    def function(x):
        total = x * 0
        for row in VECTOR_UNARY:
            total = total + row.reference(x * 0.5 + 1.25)   # inside every function's domain
        return total

    x = torch.rand(61, 133, dtype=dtype)
    libraries = _built_libraries(lambda: check_same(function, x, atol=1e-5, rtol=1e-5))
    assert libraries, "no C++ library was built"
    for library in libraries:
        assert _scalar_loops(_undefined(library)) == [], library
