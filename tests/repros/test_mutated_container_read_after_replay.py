"""A container argument mutated, then read: the glue replayed the mutation first and then read
the returned items through their sources (`L_lst[1]` after `L_lst[:] = [...]`), so
`lst.reverse(); return lst[1]` returned the old `lst[1]` and `del lst[0]; return lst[-1]`
raised IndexError. Sources denote entry values; the glue now reads them before any replay."""
import torch

from tests.capture.differential import check


def test_reverse_then_read(backend):
    def f(x, lst):
        y = x.sin()
        lst.reverse()
        return lst[1], y
    check(f, torch.ones(3), [torch.ones(2), torch.zeros(2)], backend=backend)


def test_delete_then_read(backend):
    def f(x, lst):
        y = x.sin()
        del lst[0]
        return lst[-1], y
    check(f, torch.ones(3), [torch.ones(2), torch.zeros(2)], backend=backend)


def test_pop_before_a_graph_break(backend):
    def f(x, lst):
        v = lst.pop()
        s = v.sum().item()
        return x * s
    check(f, torch.ones(3), [torch.ones(2), torch.full((2,), 2.0)], graphs=2, breaks=1,
          backend=backend)


def test_one_list_feeds_another(backend):
    def f(x, a, b):
        a.reverse()
        b.append(a[0])
        return x + 1
    check(f, torch.ones(3), [1, 2, 3], [], backend=backend)


def test_old_object_of_a_rebound_attribute(backend):
    class Holder:
        def __init__(self):
            self.items = [1]

    def f(x, holder):
        old = holder.items
        holder.items = []
        old.append(2)
        return x * len(old)
    check(f, torch.ones(3), Holder(), backend=backend)


def test_dict_item_popped_and_read(backend):
    def f(x, d):
        first = d.pop("a")
        d["b"] = first * 2
        return d["b"] + x, first
    check(f, torch.ones(3), {"a": torch.ones(3), "b": torch.zeros(3)}, backend=backend)


def test_mutations_before_an_uncaught_error_from_a_container(backend):
    """`[].pop()` in the trace raised a real IndexError out of the tracer (an internal error
    that looked like the user's), and the frame's earlier pops were lost. Such errors are
    raised in the traced code now: the frame runs eagerly, as a raise does."""
    def f(x, lst, d):
        y = x + 1
        lst.pop()
        lst.pop()
        lst.pop()
        return y, d.popitem()
    check(f, torch.ones(3), [0, 1], {}, graphs=None, breaks=None, backend=backend)

    def g(x, lst):
        try:
            lst.pop()
            lst.pop()
        except IndexError as error:
            return x * len(lst), str(error)
        return x
    check(g, torch.ones(3), [0], backend=backend)


def doubling(base, log):
    for index in range(3):
        base.mul_(base)
        log.append(index)
        yield base


def test_consumers_pull_generator_items_one_at_a_time(backend):
    """Program-fuzzer finding P8: `sum(gen())` ran the whole generator before adding, so
    each addend read the tensor after the generator's last in-place update; `any()` ran it
    past the first true item (its side effects included). Builtins that consume an iterable
    item by item (sum, any, all, min, max, functools.reduce) now pull lazily."""
    import functools

    def f(x, log):
        total = sum(doubling(x[:, 1], log))
        first = any(t.sum() > -1e9 for t in doubling(x[:, 0], log))
        biggest = max(doubling(x[:, 2], log), key=lambda t: float(t.sum()))
        folded = functools.reduce(lambda a, b: a + b, doubling(x[:, 1], log))
        return total, first, biggest, folded
    check(f, torch.arange(6.0).reshape(2, 3) / 4, [], graphs=None, breaks=None,
          backend=backend)
