"""Property-based tests (hypothesis) of guards end to end: generated programs and call sequences run
through `dynamo.jit` (a counting backend) and eagerly, in the same global state.

Soundness: every jitted call returns what the eager call returns (values, dtype, shape,
requires_grad, raised exception type). Stability: replaying a sequence compiles nothing new, and a
sequence never compiles more entries than it has calls that differ in some guardable fact.
"""
import gc
import warnings
import weakref

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dynamo
from dynamo import hook
from guard_oracle import same_guarded
from guard_strategies import SCALARS, build
from jit_programs import (Call, assert_same_outcome, call_sequences, distinct_classes, outcome,
                          plain_tensor_specs, programs)

pytestmark = pytest.mark.skipif(not hook.SUPPORTED, reason=str(hook.unsupported_reason()))

# Each example compiles a few frames (tens of milliseconds each): fewer examples than the
# guard-only properties, same profile switch (HYPOTHESIS_PROFILE=thorough multiplies by 10).
END_TO_END = settings(max_examples=max(20, settings.default.max_examples // 4))


def jit_counting(function, dynamic=None):
    """(jitted function, counting backend), after dropping every compiled entry."""
    dynamo.reset()
    counting = dynamo.CountingBackend()
    return dynamo.jit(function, backend=counting, dynamic=dynamic), counting


def compiled_entries(jitted, code) -> int:
    """How many compiled entries the driver made for `code` (recompiles included)."""
    return sum(1 for record in jitted._framejit_driver.records
               if record.code is code and record.replacement is not None)


def run_sequence(function, jitted, sequence: list[Call]) -> None:
    for index, call in enumerate(sequence):
        with call.state(function):
            expected = outcome(function, call.arguments())
            actual = outcome(jitted, call.arguments())
        assert_same_outcome(expected, actual, f"call {index}: {call}")


@END_TO_END
@given(programs, call_sequences())
def test_soundness_generated_programs_match_eager_on_every_call(program, sequence):
    function = program.build()
    jitted, _ = jit_counting(function)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the recompile limit may be reached
        run_sequence(function, jitted, sequence)


@END_TO_END
@given(programs, call_sequences())
def test_stability_replaying_a_sequence_compiles_nothing_new(program, sequence):
    function = program.build()
    jitted, counting = jit_counting(function)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        run_sequence(function, jitted, sequence)
        graphs = counting.frame_count
        run_sequence(function, jitted, sequence)
    assert counting.frame_count == graphs


@END_TO_END
@given(programs, call_sequences(pool_size=4, max_length=8))
def test_stability_no_more_entries_than_distinguishable_calls(program, sequence):
    function = program.build()
    jitted, _ = jit_counting(function)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        run_sequence(function, jitted, sequence)
    assert compiled_entries(jitted, function.__code__) <= distinct_classes(sequence)


def tensor_program(x, y):
    z = x * 2 + y
    if z.dim() > 1 and z.shape[-1] > 1:
        z = z.transpose(0, -1)
    return z.sum(0) if z.dim() > 0 else z


@END_TO_END
@given(st.lists(st.tuples(plain_tensor_specs, st.booleans()), min_size=1, max_size=6))
def test_soundness_over_shapes_dtypes_strides_and_requires_grad(specs):
    # y is a scalar tensor or x itself rebuilt: shapes always broadcast
    jitted, _ = jit_counting(tensor_program)
    for index, (spec, same_shape) in enumerate(specs):
        def arguments(spec=spec, same_shape=same_shape):
            x = spec.build()
            return x, (spec.build() if same_shape else torch.tensor(3, dtype=x.dtype))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            assert_same_outcome(outcome(tensor_program, arguments()),
                                outcome(jitted, arguments()), f"call {index}: {spec}")


def scalar_program(x, s):
    if s is None:
        return x - 1
    if isinstance(s, str):
        return x * len(s) + (1 if s else 0)
    if isinstance(s, bool):
        return x + 1 if s else x - 1
    if isinstance(s, (int, float)) and s == s and abs(s) < 1e6:
        return x * s
    return x


@END_TO_END
@given(st.lists(SCALARS, min_size=1, max_size=8))
def test_soundness_and_stability_over_python_scalars(values):
    jitted, _ = jit_counting(scalar_program)
    x = torch.arange(3.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for index, value in enumerate(values + values):
            assert_same_outcome(outcome(scalar_program, (x, value)), outcome(jitted, (x, value)),
                                f"call {index}: s={value!r}")
    classes = []
    for value in values:
        if not any(same_guarded(value, known) for known in classes):
            classes.append(value)
    assert compiled_entries(jitted, scalar_program.__code__) <= len(classes)


def container_program(xs, d):
    total = xs[0] * 0 if len(xs) else torch.zeros(())
    for item in xs:
        total = total + item.sum()
    for key, value in d.items():
        total = total + value.sum() * len(key)
    return total, len(xs), tuple(d)


@END_TO_END
@given(st.lists(st.tuples(st.lists(plain_tensor_specs, max_size=3), st.sampled_from([list, tuple]),
                          st.dictionaries(st.text("ab", max_size=2), plain_tensor_specs,
                                          max_size=2)), min_size=1, max_size=4))
def test_soundness_over_containers_of_tensors(cases):
    jitted, _ = jit_counting(container_program)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for index, (items, kind, mapping) in enumerate(cases + cases):
            def arguments():
                return kind(build(items)), build(mapping)
            assert_same_outcome(outcome(container_program, arguments()),
                                outcome(jitted, arguments()), f"call {index}")


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)
        self.scale = 2.0
        self.register_buffer("offset", torch.zeros(3))

    def forward(self, x):
        y = self.linear(x) * self.scale + self.offset
        if self.training:
            y = y + 1
        return y


MODULE_ACTIONS = ["call", "call", "train", "eval", "scale", "scale_int", "new_weight",
                  "resize_weight", "freeze", "offset", "child_eval"]


def apply_action(modules, action: str, step: int) -> None:
    for module in modules:
        if action == "train":
            module.train()
        elif action == "eval":
            module.eval()
        elif action == "scale":
            module.scale = float(step % 3)
        elif action == "scale_int":
            module.scale = step % 3
        elif action == "new_weight":
            module.linear.weight = torch.nn.Parameter(torch.full((3, 3), float(step)))
        elif action == "resize_weight":
            module.linear = torch.nn.Linear(3, 3 + step % 2)
            torch.nn.init.constant_(module.linear.weight, 0.5)
            torch.nn.init.constant_(module.linear.bias, 0.25)
            module.offset = torch.zeros(3 + step % 2)
        elif action == "freeze":
            module.linear.weight.requires_grad_(step % 2 == 0)
        elif action == "offset":
            module.offset = torch.full_like(module.offset, float(step))
        elif action == "child_eval":
            module.linear.train(step % 2 == 0)


@END_TO_END
@given(st.lists(st.sampled_from(MODULE_ACTIONS), min_size=1, max_size=8))
def test_soundness_over_module_attribute_and_training_changes(actions):
    dynamo.reset()
    torch.manual_seed(0)
    eager, jitted_original = Scaled(), Scaled()
    jitted_original.load_state_dict(eager.state_dict())
    counting = dynamo.CountingBackend()
    jitted = dynamo.jit(jitted_original, backend=counting)
    x = torch.ones(2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for step, action in enumerate(actions):
            apply_action([eager, jitted_original], action, step)
            assert_same_outcome(outcome(eager, (x,)), outcome(jitted, (x,)),
                                f"after {actions[:step + 1]}")
        graphs = counting.frame_count
        for _ in range(2):  # nothing changed since: no recompile
            assert_same_outcome(outcome(eager, (x,)), outcome(jitted, (x,)), "repeat")
    assert counting.frame_count == graphs


def state_program(x):
    y = x @ x.t() + GLOBAL_OFFSET
    if GLOBAL_FLAG:
        y = y * 2
    return y


GLOBAL_FLAG = False
GLOBAL_OFFSET = 1.0


@END_TO_END
@given(st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans(),
                          st.sampled_from([1.0, 2.0, 3])), min_size=1, max_size=6))
def test_soundness_and_stability_over_globals_grad_mode_and_autocast(states):
    global GLOBAL_FLAG, GLOBAL_OFFSET
    jitted, counting = jit_counting(state_program)
    x = torch.randn(3, 3, requires_grad=True)
    try:
        for replay in range(2):
            for index, (flag, grad, autocast, offset) in enumerate(states):
                GLOBAL_FLAG, GLOBAL_OFFSET = flag, offset
                call = Call(x=None, grad=grad, autocast=autocast)
                with warnings.catch_warnings(), call.state(state_program):
                    warnings.simplefilter("ignore", RuntimeWarning)
                    assert_same_outcome(outcome(state_program, (x,)), outcome(jitted, (x,)),
                                        f"call {index}: {(flag, grad, autocast, offset)}")
            if replay == 0:
                graphs = counting.frame_count
    finally:
        GLOBAL_FLAG, GLOBAL_OFFSET = False, 1.0
    assert counting.frame_count == graphs
    assert counting.frame_count <= len(set(states))


@END_TO_END
@given(st.lists(st.integers(0, 12), min_size=1, max_size=30), st.integers(1, 4))
def test_recompile_limit_bounds_entries_and_calls_stay_correct(sizes, limit):
    jitted, counting = jit_counting(tensor_program, dynamic=False)  # one entry per size
    dynamo.config.recompile_limit = limit
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for size in sizes:
                x = torch.ones(size, 2)
                assert_same_outcome(outcome(tensor_program, (x, x)), outcome(jitted, (x, x)),
                                    f"size {size}")
    finally:
        dynamo.config.recompile_limit = 8
    entries = compiled_entries(jitted, tensor_program.__code__)
    assert entries <= limit
    limit_warnings = [warning for warning in caught if "recompile_limit" in str(warning.message)]
    assert len(limit_warnings) == (1 if len(set(sizes)) > limit else 0)
    assert len(hook.entries(tensor_program.__code__)) == entries


def call_through(x, function):
    return function(x) + 1


@END_TO_END
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.data())
def test_entries_die_with_the_objects_they_identity_guard(factors, data):
    jitted, _ = jit_counting(call_through)
    functions = [(lambda factor: lambda x: x * factor)(factor) for factor in factors]
    x = torch.ones(2)
    for function in functions:
        torch.testing.assert_close(jitted(x, function), call_through(x, function))
    del function
    alive = len(hook.entries(call_through.__code__))
    assert alive <= len(functions)
    keep = data.draw(st.sets(st.integers(0, len(functions) - 1)))
    watchers = [weakref.ref(function) for function in functions]
    functions = [function for index, function in enumerate(functions) if index in keep]
    gc.collect()
    dead = sum(watcher() is None for watcher in watchers)
    assert dead == len(watchers) - len(keep)
    assert len(hook.entries(call_through.__code__)) <= len(keep)
    for function in functions:  # the survivors still hit their entries
        torch.testing.assert_close(jitted(x, function), call_through(x, function))


def test_inference_tensor_inputs_are_captured():
    def add_one(x):
        return (x + 1).sum()

    with torch.inference_mode():
        x = torch.ones(2, 2)
    jitted, counting = jit_counting(add_one)
    assert_same_outcome(outcome(add_one, (x,)), outcome(jitted, (x,)), "inference tensor")
    assert counting.frame_count == 1
