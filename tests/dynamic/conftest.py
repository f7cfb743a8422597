"""Setup of the dynamic-shape tests: their helpers import by module name (`dynamic_programs`),
and hypothesis runs the project's profiles (`ci` by default, `HYPOTHESIS_PROFILE=thorough`
for ten times the examples), registered here as tests/guards registers them."""
import os
import sys

from hypothesis import HealthCheck, settings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

_SUPPRESSED = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
               HealthCheck.data_too_large]
for _name, _examples in (("ci", 200), ("thorough", 2000)):
    settings.register_profile(_name, max_examples=_examples, deadline=None, print_blob=True,
                              suppress_health_check=_SUPPRESSED)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
