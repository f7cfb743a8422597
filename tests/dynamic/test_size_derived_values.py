"""Values computed from sizes that used to compile once per size (issue 23, stop 38 list):
tensors built from sizes (`torch.tensor([x.size(0)])`, `torch.tensor([pos])`,
`torch.full((n,), v)`, `x.new_zeros(n, 4)`), and Python branches on a size (`max(n, 8)`,
`min(n, 8)`, `n if n > 4 else 4`: one entry per side of the relation at most). A size-derived
int passed across a graph break is in test_dynamism_through_breaks.py (`int_across`).

Each call runs eagerly and jitted on equal arguments; counts are the backend's compiles.
"""
import pytest
import torch

import dynamo
from dynamic_programs import BACKENDS, assert_same_outcome, counting_backend, outcome

pytestmark = pytest.mark.filterwarnings("ignore:dynamo.jit\\(dynamic=True\\):UserWarning")

SIZES = (3, 5, 6, 7, 9, 10, 12)


def tensor_of_size(x):
    return x.sum(0) + torch.tensor([x.size(0)])


def tensor_of_position(x, position):
    return x * torch.tensor([position]), torch.as_tensor((position, 2), dtype=torch.float64)


def float_tensor_of_size(x):
    return torch.tensor(x.size(0) * 1.5) * x, torch.tensor([x.size(0) / 4, 2.5])


def nested_tensor_of_sizes(x):
    n = x.size(0)
    return torch.tensor([[n, 1], [n // 2, True]]), torch.tensor([n > 4, False])


def full_of_size(x):
    n = x.size(0)
    return torch.full((n,), 2.0) + x[:, 0], x.new_zeros(n, 4) + x[:, :1]


def max_of_size(x):
    n = max(x.size(0), 8)
    return x.new_ones(n).sum() + x.sum()


def min_of_size(x):
    return x[:min(x.size(0), 8)] * 2


def branch_on_size(x):
    n = x.size(0)
    m = n if n > 4 else 4
    return x.new_zeros(m).sum() + x.sum()


def arguments(function, n, seed):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, generator=generator)
    return (x, n + 1) if function is tensor_of_position else (x,)


def sweep(function, backend, dynamic, sizes=SIZES, jitted=None, counting=None):
    """Eager and jitted calls at each size, compared; the counting backend and the jitted
    function (a new one unless given)."""
    if jitted is None:
        dynamo.reset()
        counting = counting_backend(backend)
        jitted = dynamo.jit(function, backend=counting, dynamic=dynamic)
    for index, n in enumerate(sizes):
        assert_same_outcome(outcome(function, arguments(function, n, index)),
                            outcome(jitted, arguments(function, n, index)),
                            f"{function.__name__}, n={n}, dynamic={dynamic}")
    return counting, jitted


# entries for SIZES under dynamic=True: 1 serves every size, 2 one per side of a relation
ENTRIES = {tensor_of_size: 1, tensor_of_position: 1, float_tensor_of_size: 1,
           nested_tensor_of_sizes: 1, full_of_size: 1, max_of_size: 2, min_of_size: 2,
           branch_on_size: 2}
# automatic dynamic: the first size's static entry, then the symbolic ones (3 is on the
# `n <= 4` side of branch_on_size: its static entry is that side's)
AUTOMATIC = {**{function: entries + 1 for function, entries in ENTRIES.items()},
             branch_on_size: 2}
CASES = pytest.mark.parametrize("function", list(ENTRIES), ids=lambda f: f.__name__)


@CASES
def test_dynamic_true_compiles_once_or_once_per_side(function):
    counting, _ = sweep(function, "eager", True)
    assert counting.frame_count == ENTRIES[function], counting.frame_count


@CASES
def test_automatic_dynamic_adds_one_static_entry(function):
    counting, jitted = sweep(function, "eager", None)
    assert counting.frame_count == AUTOMATIC[function], counting.frame_count
    sweep(function, "eager", None, SIZES[::-1], jitted, counting)  # seen sizes: nothing new
    assert counting.frame_count == AUTOMATIC[function], counting.frame_count


@CASES
def test_dynamic_false_still_compiles_per_size(function):
    counting, _ = sweep(function, "eager", False, SIZES[:3])
    assert counting.frame_count == 3, counting.frame_count


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("function", [tensor_of_size, nested_tensor_of_sizes, full_of_size],
                         ids=lambda f: f.__name__)
def test_tensors_of_sizes_on_both_backends(function, backend):
    counting, _ = sweep(function, backend, True, SIZES[:4])
    assert counting.frame_count == min(ENTRIES[function], 4)


def test_a_tensor_of_a_size_that_requires_grad_specialises_correctly():
    """`requires_grad=True` makes a leaf: not built from the symbol; the size specialises
    (a guard), and every size still gets eager's answer."""
    def leaf(x):
        return x.sum() * torch.tensor([x.size(0)], dtype=torch.float32, requires_grad=True)
    counting, _ = sweep(leaf, "eager", True, SIZES[:3])
    assert counting.frame_count == 3


def test_explain_names_the_line_that_specialised_a_size():
    """What stays per size says why: explain()'s guards name the size fixed and the line."""
    def leaf(x):
        return x.sum() * torch.tensor([x.size(0)], dtype=torch.float32, requires_grad=True)
    report = dynamo.explain(leaf, dynamic=True)(torch.randn(5, 2))
    lines = [line for guards in report.guards for line in guards if "specialised" in line]
    line = leaf.__code__.co_firstlineno + 1
    assert lines == [f"specialised: L['x'].size()[0] == 5 at {__file__}:{line}"], lines
    report = dynamo.explain(tensor_of_size, dynamic=True)(torch.randn(5, 2))
    assert not [line for guards in report.guards for line in guards if "specialised" in line]
