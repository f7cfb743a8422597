"""The zoo benchmark's tests import `benchmarks.zoo` from the repository root."""
import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
