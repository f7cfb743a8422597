"""A dict read from a library module (not guarded, its keys kept as they are) stored class,
function and typing keys raw, while a lookup turns a class key into an identity key: the
lookup missed, so `_BASIC_TYPE_VALIDATORS.get(types.UnionType)` in huggingface_hub's strict
dataclasses returned None in the trace and the validator raised where eager's passes
(`BartModel` failed in its config's `get_text_config`). Also: the truth value of a
function (`if validator := table.get(key):`) broke the graph."""
import collections.abc
import types
import typing

import torch

from tests.capture.differential import check

# stands for a library module's table (the test module is not a library, so the same dict is
# also read from a lambda's default, which is a value without a source)
TABLE = {typing.Union: "union", typing.Literal: "literal", list: "list",
         collections.abc.Sequence: "sequence", types.UnionType: "pipe", len: "len"}


def test_class_keys_of_a_library_dict(backend):
    import huggingface_hub.dataclasses as strict  # noqa: F401  (a library module)
    table = strict._BASIC_TYPE_VALIDATORS

    def f(x):
        origin = typing.get_origin(int | None)
        found = table.get(origin)
        return x + 1, found is not None, origin in table, list in table
    # `table` is a closure variable here: dicts read from the frame with such keys break the
    # graph (their keys are not guarded yet); the library's own frames read it as a global
    check(f, torch.ones(3), graphs=None, breaks=None, backend=backend)


def test_keys_of_a_dict_without_a_source(backend):
    def f(x, table=TABLE):
        return x * len(table), table.get(types.UnionType), table[len], typing.Union in table
    check(f, torch.ones(3), graphs=None, breaks=None, backend=backend)


def test_truth_of_functions_classes_and_modules(backend):
    def f(x):
        picked = len if typing.get_origin else None
        if picked:
            x = x + 1
        if torch.nn.Linear and types and f:
            x = x * 2
        return x, bool(picked)
    check(f, torch.ones(3), backend=backend)


def test_strict_dataclass_validator(backend):
    from huggingface_hub.dataclasses import type_validator

    def f(x):
        type_validator("layers", 3, int | None)
        type_validator("names", ["a"], list[str])
        return x + 1
    check(f, torch.ones(3), backend=backend)
