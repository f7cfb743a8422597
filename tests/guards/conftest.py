"""Hypothesis profiles for the guard properties.

`ci` (the default) keeps the whole tests/guards run well under two minutes on 2 cores;
`thorough` is the large local run documented in docs/guards.md:

    HYPOTHESIS_PROFILE=thorough python -m pytest tests/guards -q
"""
import os

from hypothesis import HealthCheck, settings

_PROFILES = {
    "ci": dict(max_examples=200, deadline=None, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow]),
    "thorough": dict(max_examples=2000, deadline=None, print_blob=True,
                     suppress_health_check=[HealthCheck.too_slow]),
}

# Hypothesis ships a built-in "ci" profile; these definitions replace it on purpose.
for _name, _options in _PROFILES.items():
    settings.register_profile(_name, **_options)

settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
