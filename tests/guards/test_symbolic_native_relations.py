"""The native sizes step of a guard program (guards/native/size_relations.h) gives the verdict of
the Python condition of a `ShapeGuard` (guards/kinds/shapes.py): same answer on random sizes,
strides and offsets (0 and 1 included), on relations that hold and relations that are violated,
and on conditions the linear form cannot hold (those stay in Python)."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from guards import GuardSet, native
from guards.kinds import shapes
from guards.kinds.shapes import ShapeGuard, SizeRead, linear_relation
from guards.sources import LocalSource

X, Y = LocalSource("x"), LocalSource("y")
BINDINGS = (("s0", SizeRead(X, "size", 0)), ("s1", SizeRead(X, "size", 1)),
            ("s2", SizeRead(Y, "size", 0)), ("v3", SizeRead(Y, "stride", 0)),
            ("v4", SizeRead(Y, "storage_offset")))
NAMES = [name for name, _ in BINDINGS]


def _compiled(guard, use_native: bool):
    saved = shapes.ShapeGuard.native_form
    if not use_native:
        shapes.ShapeGuard.native_form = lambda self: None
    try:
        guards = GuardSet()
        guards.add(guard)
        return guards.compile()
    finally:
        shapes.ShapeGuard.native_form = saved


@pytest.fixture(scope="module", autouse=True)
def _native_module():
    if native.load() is None:
        pytest.skip(f"native guards unavailable: {native.unavailable_reason()}")


def _term(draw_name, coefficient):
    return f"{coefficient}*{draw_name}" if coefficient != 1 else draw_name


@st.composite
def linear_conditions(draw):
    """A condition in the printer's notation: linear sides, optionally a modulus."""
    def side():
        count = draw(st.integers(0, 3))
        parts = [_term(draw(st.sampled_from(NAMES)), draw(st.integers(-3, 3)))
                 for _ in range(count)]
        constant = draw(st.integers(-9, 9))
        if constant or not parts:
            parts.append(f"({constant})" if constant < 0 else str(constant))
        return "(" + " + ".join(parts) + ")"
    operator = draw(st.sampled_from(["==", "!=", ">=", ">", "<=", "<"]))
    if draw(st.booleans()):
        modulus = draw(st.sampled_from([2, 3, 8, -4]))
        return f"({side()} % {modulus}) {operator} {draw(st.integers(-2, 7))}"
    return f"{side()} {operator} {side()}"


@st.composite
def frames(draw):
    sizes = [draw(st.integers(0, 9)) for _ in range(3)]
    x = torch.empty(sizes[0], sizes[1])
    base = torch.empty(sizes[2] * 3 + 4)
    step, offset = draw(st.integers(1, 3)), draw(st.integers(0, 3))
    y = base.as_strided((sizes[2],), (step,), offset)
    return {"x": x, "y": y}


@settings(max_examples=300, deadline=None)
@given(st.lists(linear_conditions(), min_size=1, max_size=4), st.lists(frames(), min_size=1,
                                                                       max_size=6))
def test_native_verdict_is_the_python_conditions(conditions, calls):
    guard = ShapeGuard(BINDINGS, tuple(conditions))
    native_check, python_check = _compiled(guard, True), _compiled(guard, False)
    assert "shape relations hold" in native_check.source_text
    assert "shape relations hold" not in python_check.source_text
    for frame in calls:
        values = [read.read(read.source.fetch(frame, {})) for _, read in BINDINGS]
        expected = guard.holds_for(values)
        assert native_check(frame, {}) == expected, (conditions, values)
        assert python_check(frame, {}) == expected
        assert (guard.reason_in(None, frame, {}) is None) == expected


@settings(max_examples=300, deadline=None)
@given(linear_conditions(), st.lists(st.integers(-20, 20), min_size=5, max_size=5))
def test_linear_form_evaluates_as_the_condition(condition, values):
    comparison, modulus, constant, terms, right = linear_relation(
        condition, {name: position for position, name in enumerate(NAMES)})
    left = constant + sum(coefficient * values[read] for coefficient, read in terms)
    if modulus:
        left %= modulus
    got = [left == right, left != right, left >= right, left > right, left <= right,
           left < right][comparison]
    assert got == eval(condition, dict(zip(NAMES, values)))


@pytest.mark.parametrize("condition", ["(s0 // 2) == s1", "(s0*s1) != 6", "s0 % s1 == 0",
                                       "math.floor(s0 / 2) == s1", "s0 >= 2 and s1 >= 2",
                                       "0 == s0 % 8", "s0 % 0 == 0"])
def test_conditions_outside_the_linear_form_stay_python(condition):
    assert linear_relation(condition, {"s0": 0, "s1": 1}) is None
    guard = ShapeGuard(BINDINGS[:2], ("s0 >= 0", condition))
    assert "shape relations hold" not in _compiled(guard, True).source_text


def test_a_value_read_stays_python():
    guard = ShapeGuard((("s0", SizeRead(X, "size", 0)), ("s1", SizeRead(LocalSource("n"),
                                                                        "value"))),
                       ("s1 <= s0",))
    check = _compiled(guard, True)
    assert "shape relations hold" not in check.source_text
    assert check({"x": torch.empty(4), "n": 3}, {}) and not check({"x": torch.empty(2), "n": 3},
                                                                  {})


def test_missing_dims_and_subclasses_read_as_python_does():
    class Tagged(torch.Tensor):
        pass

    guard = ShapeGuard(BINDINGS[:2], ("s1 == 2*s0",))
    check, reference = _compiled(guard, True), _compiled(guard, False)
    for x in (torch.empty(3, 6), torch.empty(3, 5), torch.empty(3), torch.empty(0, 0),
              torch.empty(3, 6).as_subclass(Tagged), torch.empty(2, 5).as_subclass(Tagged)):
        assert check({"x": x}, {}) == reference({"x": x}, {})
    assert check({"x": torch.empty(3, 6)}, {}) and not check({"x": torch.empty(3)}, {})
    assert not check({"x": 3}, {}) and not check({}, {})


def test_large_coefficients_compute_exactly():
    guard = ShapeGuard(BINDINGS[:1], (f"{2 ** 62}*s0 >= 0",))
    check = _compiled(guard, True)
    assert "shape relations hold" in check.source_text
    assert check({"x": torch.empty(1, 1)}, {})
    assert check({"x": torch.empty(0, 1)}, {})
