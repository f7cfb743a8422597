"""Hypothesis profiles for the guard properties.

`ci` (the default) keeps the whole tests/guards run well under two minutes on 2 cores;
`thorough` is the large local run documented in docs/guards.md:

    HYPOTHESIS_PROFILE=thorough python -m pytest tests/guards -q
"""
import os
import sys

import pytest
from hypothesis import HealthCheck, settings

# the property tests import their helpers by module name (guard_strategies, guard_oracle...)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# function_scoped_fixture: `check_mode` below is meant to hold for every example of a test.
_SUPPRESSED = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
_PROFILES = {
    "ci": dict(max_examples=200, deadline=None, print_blob=True,
               suppress_health_check=_SUPPRESSED),
    "thorough": dict(max_examples=2000, deadline=None, print_blob=True,
                     suppress_health_check=_SUPPRESSED),
}

# Hypothesis ships a built-in "ci" profile; these definitions replace it on purpose.
for _name, _options in _PROFILES.items():
    settings.register_profile(_name, **_options)

settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


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
