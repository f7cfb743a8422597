"""Aliasing between inputs was not guarded (Soundness I, class 6). `f(a, b)` compiled for
`f(a, a)` (one placeholder for both) then called with distinct tensors returned the aliased
answer; the same with `[a, a]` then `[a, b]` in a list, a list passed twice, and two attributes
that become one object later. Now: sources the trace merged must still name one object, and
the storage partition of the input tensors is guarded when the graph writes to an input (and
the distinctness of containers and objects the trace kept apart)."""
import pytest
import torch

from tests.repros.after_change import check_after_changes


def add_then_read(a, b):
    a.add_(1)
    return b * 2


def test_aliased_then_distinct_then_aliased(backend):
    def aliased():
        a = torch.ones(3)
        return a, a

    def distinct():
        return torch.ones(3), torch.ones(3)
    check_after_changes(add_then_read, backend,
                        [(None, aliased), (None, distinct), (None, aliased), (None, distinct)],
                        compiles=2)


def test_distinct_then_aliased(backend):
    def aliased():
        a = torch.ones(3)
        return a, a
    check_after_changes(add_then_read, backend,
                        [(None, lambda: (torch.ones(3), torch.ones(3))), (None, aliased)],
                        compiles=2)


@pytest.mark.expect_fallback("unsupported", reason="inductor runs a graph writing into an "
                            "input that shares its storage with another as is")
def test_a_view_of_another_input(backend):
    def view():
        a = torch.ones(2, 3)
        return a, a[0]

    def overlapping():
        a = torch.ones(6)
        return a[:3], a[1:4]
    check_after_changes(add_then_read, backend, [
        (None, lambda: (torch.ones(3), torch.ones(3))), (None, lambda: (torch.ones(3),) * 2),
        (None, lambda: (torch.ones(2, 3), torch.ones(3))), (None, view), (None, overlapping),
        (None, lambda: (torch.ones(3), torch.ones(3)))])


def test_no_mutation_needs_no_storage_guard(backend):
    def f(a, b):
        return a * 2 + b
    x = torch.ones(3)
    check_after_changes(f, backend, [(None, lambda: (x, x.clone())), (None, lambda: (x, x[:])),
                                     (None, lambda: (x.clone(), x))], compiles=1)


def test_aliased_items_of_a_list(backend):
    def f(items):
        items[0].add_(1)
        return items[1] * 2

    def aliased():
        a = torch.ones(3)
        return ([a, a],)
    check_after_changes(f, backend, [(None, aliased),
                                     (None, lambda: ([torch.ones(3), torch.ones(3)],)),
                                     (None, aliased)])


def test_a_list_passed_twice(backend):
    def f(x, first, second):
        first.append(1)
        return x * len(second)

    def twice():
        items = [0]
        return torch.ones(2), items, items
    check_after_changes(f, backend, [(None, twice), (None, lambda: (torch.ones(2), [0], [0])),
                                     (None, twice), (None, lambda: (torch.ones(2), [0], [0]))],
                        compiles=2)


class Holder:
    pass


def test_two_attributes_that_become_one_object(backend):
    def f(h, x):
        h.a.add_(1)
        return h.b * x

    def distinct():
        h = Holder()
        h.a, h.b = torch.ones(4), torch.ones(4)
        return h, torch.arange(4.0)

    def shared():
        h = Holder()
        h.a = h.b = torch.ones(4)
        return h, torch.arange(4.0)
    check_after_changes(f, backend, [(None, distinct), (None, shared), (None, distinct)])


def test_objects_that_become_one(backend):
    def f(x, first, second):
        first.count = 5
        return x * second.count

    def make(shared):
        first = Holder()
        first.count = 1
        second = first if shared else Holder()
        second.count = 1
        return torch.ones(2), first, second
    check_after_changes(f, backend, [(None, lambda: make(False)), (None, lambda: make(True)),
                                     (None, lambda: make(False))], compiles=2)


def test_identity_comparison_of_modules(backend):
    def f(x, first, second):
        return x + 1 if first is second else x - 1
    lin, other = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    check_after_changes(f, backend, [(None, lambda: (torch.ones(2), lin, other)),
                                     (None, lambda: (torch.ones(2), lin, lin)),
                                     (None, lambda: (torch.ones(2), other, lin))], compiles=2)


def test_tensors_as_dict_keys(backend):
    def f(a, b):
        table = {a: 1}
        table[b] = 2
        return a * len(table)
    x, y = torch.ones(2), torch.ones(2)
    check_after_changes(f, backend, [(None, lambda: (x, y)), (None, lambda: (x, x)),
                                     (None, lambda: (y, x))], compiles=2)


def test_tied_weights_stay_tied(backend):
    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.first = torch.nn.Linear(3, 3, bias=False)
            self.second = torch.nn.Linear(3, 3, bias=False)
            self.second.weight = self.first.weight

        def forward(self, x):
            return self.second(self.first(x))
    module = Tied()
    x = torch.ones(2, 3)

    def untie():
        module.second.weight = torch.nn.Parameter(torch.full((3, 3), 0.5))
    check_after_changes(module, backend, [(None, lambda: (x,)), (untie, lambda: (x,))],
                        compiles=2)


def test_identity_of_tuples_read_twice(backend):
    """Tuples are not merged by the trace (one variable per read): reaching one tuple twice
    needs no guard, unless `is` looked at it."""
    def f(x, first, second):
        return x + 1 if first is second else x - 1
    shared = (1, 2)
    check_after_changes(f, backend, [(None, lambda: (torch.ones(2), shared, shared)),
                                     (None, lambda: (torch.ones(2), shared, tuple([1, 2]))),
                                     (None, lambda: (torch.ones(2), shared, shared))],
                        compiles=2)
