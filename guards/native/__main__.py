"""`python -m guards.native`: build the native helpers registered without inductor (the guard
matcher; `python -m dynamo build` builds inductor's too) and print where each lives.

Input: nothing. Output: one line per helper, its library's path or why it was not built;
exit status 1 when one was not built.
"""
import sys

import guards.native  # noqa: F401  (registers the guard matcher)
from guards.native import build

sys.exit(build.main())
