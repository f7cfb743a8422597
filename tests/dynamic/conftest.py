"""Setup of the dynamic-shape tests: their helpers import by module name (`dynamic_programs`).
Hypothesis profiles are tests/conftest.py's (one definition for every property test)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
