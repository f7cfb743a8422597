"""The constructs of the program grammar, one module per family; importing this package
registers every rule with `tests.fuzz.grammar`.

Stage: generation. Input: nothing. Output: the filled `grammar.EXPRESSIONS` and
`grammar.STATEMENTS` tables.
"""
from tests.fuzz.constructs import (containers, flow, functions, modules, objects,  # noqa: F401
                                   scalars, tensors, training, views)
