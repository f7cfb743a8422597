"""Test helper: run guards through both paths (generated check and slow-path reasons)."""
from guards import GuardSet


def verdict(guards, L, G=None):
    """(accepted by the compiled check, reasons from the slow path) for `guards` on a frame.

    Also asserts the two paths agree: the check accepts exactly when there is no reason.
    """
    guard_set = GuardSet(guards if isinstance(guards, (list, tuple)) else [guards])
    G = {} if G is None else G
    accepted = guard_set.compile()(L, G)
    reasons = guard_set.failures(L, G)
    assert bool(accepted) == (not reasons), (accepted, reasons)
    return accepted, reasons


def reason(guards, L, G=None):
    """The first failure reason, asserting that the compiled check rejects."""
    accepted, reasons = verdict(guards, L, G)
    assert not accepted
    return reasons[0]


def holds(guards, L, G=None):
    """Whether the guards hold (both paths agreeing)."""
    return verdict(guards, L, G)[0]
