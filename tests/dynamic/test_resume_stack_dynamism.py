"""Automatic dynamic through a graph break whose resume function takes tensors on the stack
(issue 23: "through graph breaks (resume functions keep dynamism)").

Found by tests/dynamic/test_dynamic_properties.py::test_replaying_a_sweep_compiles_nothing_new
(view_computed, sizes [200, 0, 555, 207] replayed: 5 compiles, 4 the first time): size 0 makes
`x.view(0, -1)` raise in eager, so that frame breaks there; the symbolic entry compiled later
breaks at the same place, and its resume function gets `x` as `<stack[0] at the graph break>`,
whose size was guarded statically at every size (555, 207, 200: a recompile each, up to the
recompile limit, then eager): a view input stayed static. Fixed: a view's sizes follow the
dynamic-shape policy as any tensor's, its base's sizes bound by reads of `x._base`
(dynamo/shapes), and a region inherits what the frame before its break made symbolic
(dynamo/resume/inheritance.py): x is symbolic in the region from its first compile (555), the
view from the second (207), 4 compiles in all.
"""
import pytest
import torch

import dynamo
from dynamic_programs import counting_backend


def view_computed(x):
    return x.view(x.size(0), -1) * 2, x.reshape(-1, x.shape[-1]).sum(0)


def test_stack_tensors_of_a_resume_function_become_dynamic():
    dynamo.reset()
    counting = counting_backend("eager")
    jitted = dynamo.jit(view_computed, backend=counting, dynamic=None)
    sizes = [200, 0, 555, 207, 300, 301, 302]
    for n in sizes:
        x = torch.randn(n, 2, 3)
        try:
            expected = view_computed(x)
        except RuntimeError as error:
            with pytest.raises(RuntimeError, match=str(error)[:40].replace("[", r"\[")):
                jitted(x)
            continue
        for got, want in zip(jitted(x), expected):
            torch.testing.assert_close(got, want)
    first_pass = counting.frame_count
    for n in sizes[2:]:
        jitted(torch.randn(n, 2, 3))
    assert counting.frame_count == first_pass          # replaying seen sizes compiles nothing
    assert first_pass <= 4, first_pass                 # 200, symbolic main, resume x2
