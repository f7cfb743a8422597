"""Setup of the guard properties: helpers import by module name, `check_mode` runs a test with
the native matcher and with Python conditions. Hypothesis profiles (`ci`, `thorough`, see
docs/guards.md) are tests/conftest.py's:

    HYPOTHESIS_PROFILE=thorough python -m pytest tests/guards -q
"""
import os
import sys

import pytest

# the property tests import their helpers by module name (guard_strategies, guard_oracle...)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _use_native(flag: bool):
    from guards import native

    saved = native.enabled()
    native.set_enabled(flag)
    return lambda: native.set_enabled(saved)


@pytest.fixture(params=["native", "python"])
def check_mode(request):
    """Run the test twice: tensors checked by the native matcher, then by Python conditions."""
    restore = _use_native(request.param == "native")
    yield request.param
    restore()


@pytest.fixture
def python_checks():
    """Tensors checked by the generated Python conditions (for tests that read them)."""
    restore = _use_native(False)
    yield
    restore()
