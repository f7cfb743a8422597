"""Corpus: side effects recorded while tracing and replayed after the graph runs — mutation of
pre-existing lists, dicts, sets, objects, module attributes, globals and nonlocal cells;
in-place tensor ops on inputs and buffers; aliasing (an input returned is the same object,
two references to one new object stay one object); frames without tensor work."""
import pytest
import torch
from torch import nn

import dynamo
from tests.capture.differential import check

x4 = torch.randn(4)
m34 = torch.randn(3, 4)

REGISTRY = {"seen": 0}
EVENTS = []
TOTAL = 0.0
GLOBAL_TENSOR = torch.ones(4)


class Box:
    def __init__(self):
        self.value = 1.0
        self.items = []


def test_list_argument_appended_and_extended():
    def f(x, log):
        log.append(x.shape[0])
        log.extend(["a", "b"])
        log.insert(0, "first")
        return x * len(log)
    check(f, x4, [0])


def test_list_argument_items_replaced_and_removed():
    def f(x, values):
        values[0] = values[0] * 10
        values[-1] = x * 2
        del values[1]
        values.reverse()
        return x + len(values)
    check(f, x4, [1, 2, 3, x4])


def test_list_argument_cleared_and_sorted():
    def f(x, values, other):
        values.sort()
        other.clear()
        return x * values[0]
    check(f, x4, [3, 1, 2], [5, 6])


def test_dict_argument_updated_popped_and_cleared():
    def f(x, state, scratch):
        state["steps"] = state.get("steps", 0) + 1
        state["last"] = x * 2
        state.pop("drop")
        scratch.clear()
        return x + state["steps"]
    check(f, x4, {"drop": 1, "steps": 4}, {"a": 1})


def test_nested_containers_mutated_through_references():
    def f(x, config):
        config["layers"].append(x.sum())
        config["meta"]["count"] += 1
        return x * config["meta"]["count"]
    check(f, x4, {"layers": [], "meta": {"count": 0}})


def test_object_attributes_set_and_deleted():
    def f(x, box):
        box.value = box.value + 1
        box.items.append(x * 2)
        box.fresh = "new"
        return x * box.value
    check(f, x4, Box())


def test_object_attribute_rebound_to_new_object():
    def f(x, box):
        box.child = Box()
        box.child.value = 5.0
        return x * box.child.value
    check(f, x4, Box())


def test_global_scalar_and_containers():
    def f(x):
        global TOTAL
        TOTAL = TOTAL + 1.5
        REGISTRY["seen"] += 1
        EVENTS.append("called")
        return x * TOTAL
    check(f, x4)


def test_global_tensor_read_and_updated_in_place():
    def f(x):
        GLOBAL_TENSOR.add_(1)
        return x * GLOBAL_TENSOR
    check(f, x4)


def test_nonlocal_cell_of_enclosing_function():
    def make_counter():
        count = 0

        def step(x):
            nonlocal count
            count += 1
            return x * count
        return step, lambda: count
    step, read = make_counter()
    jitted = dynamo.jit(step, backend="eager")
    first = jitted(x4)
    second = jitted(x4)
    torch.testing.assert_close(first, x4 * 1)
    torch.testing.assert_close(second, x4 * 2)
    assert read() == 2


def test_closure_over_list_mutated():
    history = []

    def f(x):
        history.append(x.shape[0])
        return x * len(history)
    jitted = dynamo.jit(f, backend="eager")
    torch.testing.assert_close(jitted(x4), x4 * 1)
    torch.testing.assert_close(jitted(x4), x4 * 2)
    assert history == [4, 4]


def test_module_attribute_and_buffer_mutation():
    class Tracker(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", torch.zeros(()))
            self.steps = 0
            self.seen = []

        def forward(self, x):
            self.count += 1
            self.steps = self.steps + 1
            self.seen.append("step")
            return x * self.count
    check(Tracker(), x4, graphs=2)  # `steps` is specialised on: the second call recompiles


def test_inplace_op_on_input_and_view_of_input():
    def f(x):
        x[0].fill_(5.0)
        x.mul_(2)
        return x.sum()
    check(f, m34.clone())


def test_input_returned_is_the_same_object():
    def f(x, y):
        z = x
        return z, y, y + 1
    jitted = dynamo.jit(f, backend="eager")
    a, b = torch.randn(2), torch.randn(2)
    first, second, _ = jitted(a, b)
    assert first is a and second is b


def test_inplace_method_returns_the_input_object():
    def f(x):
        return x.add_(1)
    jitted = dynamo.jit(f, backend="eager")
    a = torch.zeros(3)
    assert jitted(a) is a and torch.equal(a, torch.ones(3))


def test_argument_container_returned_is_the_same_object():
    def f(x, values):
        values.append(x + 1)
        return values
    jitted = dynamo.jit(f, backend="eager")
    values = []
    assert jitted(x4, values) is values and len(values) == 1


def test_new_object_referenced_twice_stays_one_object():
    def f(x):
        box = Box()
        box.value = x * 2
        return {"a": box, "b": [box]}
    jitted = dynamo.jit(f, backend="eager")
    out = jitted(x4)
    assert out["a"] is out["b"][0]
    torch.testing.assert_close(out["a"].value, x4 * 2)


def test_aliasing_between_arguments():
    def f(x, first, second):
        first.append(1)
        return x * len(second)
    shared = []
    jitted = dynamo.jit(f, backend="eager")
    torch.testing.assert_close(jitted(x4, shared, shared), x4 * 1)
    assert shared == [1]


def test_mutation_order_is_preserved_across_objects():
    def f(x, log, table):
        log.append("a")
        table["k"] = len(log)
        log.append("b")
        return x * table["k"]
    check(f, x4, [], {})


def test_printed_output_matches_eager():
    def f(x):
        print("before", x.shape)
        y = x * 2
        print("after")
        return y
    check(f, x4, graphs=None, breaks=None)


def test_no_tensor_work_is_not_compiled_and_keeps_side_effects():
    def f(values):
        values.append(len(values))
        return values
    check(f, [1, 2], graphs=0)


def test_exception_after_mutation_matches_eager():
    def f(x, log):
        log.append("started")
        if len(log) > 0:
            raise RuntimeError("stop")
        return x
    check(f, x4, [], graphs=0, breaks=None)


def test_default_factory_dict_mutation_replayed():
    import collections

    def f(x, groups):
        groups["a"].append(1)
        groups["b"].append(2)
        return x * len(groups)
    check(f, x4, collections.defaultdict(list))


def test_set_attribute_on_function_object():
    def helper():
        return 1

    def f(x):
        helper.calls = getattr(helper, "calls", 0) + 1
        return x * helper.calls
    jitted = dynamo.jit(f, backend="eager")
    torch.testing.assert_close(jitted(x4), x4)
    assert helper.calls == 1


def _once_logger(name):
    """A transformers logger whose records land in a list (transformers' `warning_once` is an
    lru_cache-wrapped method set on `logging.Logger`)."""
    import logging

    hf_logging = pytest.importorskip("transformers.utils.logging")
    logger = hf_logging.get_logger(name)
    records = []

    class Collect(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())
    logger.addHandler(Collect())
    logger.propagate = False
    return logger, records


def test_warning_once_is_made_after_the_graph_without_a_break():
    """HF models call `logger.warning_once(constant message)` on every step (GPT-2's loss
    property): the call is made after the graph instead of breaking it, so the message
    appears once, as in eager, and the function stays one graph."""
    logger, records = _once_logger("framejit.tests.once")

    def step(x):
        y = x.sin() * 2
        logger.warning_once("framejit test: the loss type is not set")
        return y + 1

    logger.warning_once.cache_clear()
    jitted = dynamo.jit(step)
    for _ in range(3):
        torch.testing.assert_close(jitted(torch.ones(3)), torch.ones(3).sin() * 2 + 1)
    assert records == ["framejit test: the loss type is not set"]
    explanation = dynamo.explain(step)(torch.ones(3))
    assert explanation.graph_count == 1 and explanation.graph_break_count == 0, explanation


def test_warning_once_with_tensor_arguments_still_breaks():
    logger, records = _once_logger("framejit.tests.once_tensor")

    def step(x):
        logger.warning_once("value %s", x.sum())
        return x + 1
    explanation = dynamo.explain(step)(torch.ones(3))
    assert explanation.graph_break_count >= 1
    assert len(records) == 1
