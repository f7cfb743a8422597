"""`python -m guards.native`: build the native guard matcher now and print where it lives.

Input: nothing. Output: the path of the built library (exit status 1 when it cannot be built).
"""
import sys

from guards import native

module = native.load()
if module is None:
    sys.exit(f"native guard checks unavailable: {native.unavailable_reason()}")
print(module.__file__)
