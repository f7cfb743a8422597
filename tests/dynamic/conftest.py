"""Setup of the dynamic-shape tests: their helpers import by module name (`dynamic_programs`).
Hypothesis profiles are tests/conftest.py's (one definition for every property test)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pytest  # noqa: E402

import dynamo  # noqa: E402


def _config_setting(name: str):
    """A fixture setting `dynamo.config.<name>` to the test's indirect parameter, restoring
    it afterwards."""
    @pytest.fixture
    def setting(request):
        saved = getattr(dynamo.config, name)
        setattr(dynamo.config, name, request.param)
        yield request.param
        setattr(dynamo.config, name, saved)
    return setting


mode = _config_setting("dynamic_by_default")            # dynamic=True for every jit or not
limit = _config_setting("symbolic_trace_seconds")       # the symbolic trace's time limit
