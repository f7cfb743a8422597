"""The shape-relation guard kind (guards/kinds/shapes.py): checks, reasons, descriptions."""
import torch

from guards import GuardSet
from guards.kinds.shapes import ShapeGuard, SizeRead
from guards.sources import LocalSource

X, Y, N = LocalSource("x"), LocalSource("y"), LocalSource("n")


def _guard():
    return ShapeGuard((("s0", SizeRead(X, "size", 0)), ("s1", SizeRead(Y, "size", 1)),
                       ("v2", SizeRead(Y, "stride", 0)), ("s3", SizeRead(N, "value"))),
                      ("s0 >= 2", "s0 % 8 == 0", "s1 == 2*s0", "v2 == s1", "s3 <= s0"))


def _check(guard):
    guards = GuardSet()
    guards.add(guard)
    return guards.compile()


def test_holds_when_every_relation_holds():
    check = _check(_guard())
    assert check({"x": torch.ones(8, 3), "y": torch.ones(2, 16), "n": 8}, {})
    assert check({"x": torch.ones(16), "y": torch.ones(5, 32), "n": 2}, {})


def test_fails_on_each_relation():
    check = _check(_guard())
    assert not check({"x": torch.ones(4, 3), "y": torch.ones(2, 8), "n": 2}, {})   # % 8
    assert not check({"x": torch.ones(8), "y": torch.ones(2, 15), "n": 2}, {})     # == 2*s0
    assert not check({"x": torch.ones(8), "y": torch.ones(2, 32)[:, ::2], "n": 2}, {})  # stride
    assert not check({"x": torch.ones(8), "y": torch.ones(2, 16), "n": 9}, {})     # n <= s0


def test_reason_names_the_relation_in_the_users_terms():
    guard = _guard()
    frame = {"x": torch.ones(8), "y": torch.ones(2, 15), "n": 2}
    reason = guard.reason_in(frame["x"], frame, {})
    assert reason.startswith("L['y'].size()[1] == 2*L['x'].size()[0] does not hold")
    assert "L['x'].size()[0] = 8" in reason and "L['y'].size()[1] = 15" in reason
    assert guard.reason_in(frame["x"], {"x": torch.ones(8), "y": torch.ones(2, 16), "n": 2},
                           {}) is None


def test_describe_reads_every_condition():
    text = _guard().describe()
    assert "L['x'].size()[0] % 8 == 0" in text and "L['n'] <= L['x'].size()[0]" in text
    assert "L['y'].stride()[0] == L['y'].size()[1]" in text


def test_symbol_names_inside_longer_names_are_not_replaced():
    guard = ShapeGuard((("s1", SizeRead(X, "size", 0)), ("s10", SizeRead(Y, "size", 0))),
                       ("s10 >= s1",))
    assert guard.describe() == "shapes: L['y'].size()[0] >= L['x'].size()[0]"


def test_equal_guards_are_one():
    guards = GuardSet()
    assert guards.add(_guard()) and not guards.add(_guard())
