"""Corpus: the values the tracer models — numbers, strings, None, `torch.Size`, dtypes,
devices; tuples, lists, dicts, sets, `OrderedDict`, `defaultdict`, namedtuples, dataclasses,
dict subclasses (a `ModelOutput`-like class), `range`, `slice`; iterators and `itertools` —
passed in, built in the frame and returned."""
import collections
import dataclasses
import itertools
from typing import NamedTuple, Optional

import pytest
import torch

from tests.capture.differential import check

x4 = torch.randn(4)
m34 = torch.randn(3, 4)

Pair = collections.namedtuple("Pair", ["left", "right"])


class Point(NamedTuple):
    x: torch.Tensor
    y: float = 1.0

    def norm(self):
        return self.x * self.y


@dataclasses.dataclass
class Settings:
    scale: float
    shift: float = 0.0
    names: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Output:
    value: torch.Tensor
    extra: Optional[torch.Tensor] = None


class Record(collections.OrderedDict):
    """A ModelOutput-style class: a dict subclass whose fields are also attributes."""

    def __init__(self, **fields):
        super().__init__()
        for name, value in fields.items():
            self[name] = value

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        object.__setattr__(self, key, value)

    def __getitem__(self, key):
        if isinstance(key, int):
            return list(self.values())[key]
        return super().__getitem__(key)


class Registry(dict):
    def get(self, key):
        return super().get(key.lower(), 0)


class Stack(list):
    def push(self, value):
        self.append(value)
        return len(self)


@pytest.mark.parametrize("value", [3, 2.5, True, None, "text", 1 + 2j, b"raw"])
def test_constants_passed_and_returned(value):
    check(lambda x, value: (x + 1, value, type(value).__name__), x4, value)


def test_torch_size_dtype_device_values():
    def f(x, dtype, device):
        size = x.shape
        y = torch.zeros(size, dtype=dtype, device=device)
        return y + x.to(dtype), size, size[1:], torch.Size([2, 3]), dtype, device, x.device
    check(f, m34, torch.float64, torch.device("cpu"))


def test_dtype_properties_fold():
    def f(x):
        info = torch.finfo(x.dtype)
        return x.clamp(min=info.min, max=info.max) * info.eps, x.dtype.is_floating_point, \
            x.dtype.itemsize, torch.iinfo(torch.int8).max
    check(f, x4)


def test_tuple_building_unpacking_and_methods():
    def f(x, pair):
        a, b = pair
        (c, d), e = (a, b), 3
        values = (1, 2, 2, 3)
        return a + b + c * d * e, values.count(2), values.index(3), pair[::-1]
    check(f, x4, (x4, x4 * 2))


def test_list_methods_on_new_list():
    def f(x):
        items = [x, x + 1]
        items.append(x + 2)
        items.extend([x + 3])
        items.insert(0, x - 1)
        last = items.pop()
        items.reverse()
        removed = items.pop(0)
        return items, last, removed, len(items)
    check(f, x4)


def test_list_sort_and_index_on_numbers():
    def f(x, values):
        ordered = list(values)
        ordered.sort(reverse=True)
        return x * ordered[0], ordered, ordered.index(2), values.count(1)
    check(f, x4, [1, 3, 2, 1])


def test_dict_methods_on_new_dict():
    def f(x):
        d = {"a": x}
        d.update(b=x * 2)
        d.setdefault("c", x * 3)
        d.setdefault("a", x * 100)
        popped = d.pop("b")
        return d, popped, d.get("zz", 7), list(d.keys()), list(d.values()), list(d.items())
    check(f, x4)


def test_dict_merge_operators_and_unpacking():
    def f(x, base):
        merged = {**base, "x": x}
        merged |= {"y": x + 1}
        other = base | {"z": 3}
        return merged, other, dict(base, w=2), dict([("p", x)])
    check(f, x4, {"a": 1})


def test_set_operations():
    def f(x, names):
        seen = set(names)
        seen.add("new")
        seen.discard("missing")
        both = seen & {"a", "new"}
        either = seen | {"z"}
        only = seen - {"a"}
        return x * len(seen), sorted(both), sorted(either), sorted(only), "a" in seen
    check(f, x4, ["a", "b", "a"])


def test_frozenset_and_set_comparisons():
    def f(x, names):
        frozen = frozenset(names)
        return x * len(frozen), frozen <= {"a", "b", "c"}, {"a"}.issubset(frozen)
    check(f, x4, ["a", "b"])


def test_ordered_dict_operations():
    def f(x, od):
        od2 = collections.OrderedDict(od)
        od2["new"] = x + 1
        od2.move_to_end("a")
        return od2, list(od2), od2.popitem()
    check(f, x4, collections.OrderedDict([("a", 1), ("b", 2)]))


def test_defaultdict_grouping():
    def f(xs, keys):
        groups = collections.defaultdict(list)
        for key, t in zip(keys, xs):
            groups[key].append(t)
        return {key: torch.stack(items).sum(0) for key, items in groups.items()}
    check(f, [x4, x4 + 1, x4 + 2], ["a", "b", "a"])


def test_defaultdict_passed_in_and_mutated():
    def f(x, counts):
        counts["calls"] += 1
        counts["new"] += 2
        return x * counts["calls"]
    check(f, x4, collections.defaultdict(int, {"calls": 3}))


def test_namedtuple_fields_and_methods():
    def f(pair):
        swapped = pair._replace(left=pair.right)
        return pair.left + pair.right, swapped, pair._asdict()["left"], Pair(1, 2)
    check(f, Pair(x4, x4 * 3))


def test_typed_namedtuple_with_method_and_default():
    def f(x):
        point = Point(x)
        other = Point(x, 3.0)
        return point.norm() + other.norm(), other, point.y
    check(f, x4)


def test_dataclass_created_and_returned():
    def f(x, scale):
        settings = Settings(scale, names=["a"])
        settings.shift = 1.5
        settings.names.append("b")
        return x * settings.scale + settings.shift, settings
    check(f, x4, 2.0)


def test_dataclass_passed_in_is_read_and_replaced():
    def f(x, settings):
        updated = dataclasses.replace(settings, shift=settings.shift + 1)
        return x * updated.scale + updated.shift, dataclasses.asdict(updated)["names"]
    check(f, x4, Settings(3.0, 0.5, ["n"]))


def test_dataclass_with_tensor_fields_returned():
    def f(x):
        return Output(x * 2), Output(x + 1, extra=x - 1)
    check(f, x4)


def test_dict_subclass_model_output_style():
    def f(x):
        record = Record(logits=x * 2, hidden=x + 1)
        return record, record[0], record["hidden"], record.logits, len(record), list(record)
    check(f, x4)


def test_dict_subclass_with_overridden_get():
    def f(x, registry):
        return x * registry.get("SCALE") + registry.get("missing"), registry
    check(f, x4, Registry(scale=2))


def test_list_subclass_created_and_used():
    def f(x):
        stack = Stack()
        depth = stack.push(x)
        stack.push(x + depth)
        return stack, sum(stack), isinstance(stack, list)
    check(f, x4)


def test_range_objects():
    def f(x, n):
        r = range(1, n, 2)
        return x * len(r) + r[-1] + sum(r), list(r), 3 in r, r.start
    check(f, x4, 8)


@pytest.mark.parametrize("name", ["enumerate", "zip", "map", "filter", "reversed"])
def test_builtin_iterators(name):
    def f(x, values):
        if name == "enumerate":
            items = [x * i * v for i, v in enumerate(values, start=1)]
        elif name == "zip":
            items = [x * a * b for a, b in zip(values, values[1:])]
        elif name == "map":
            items = list(map(lambda v: x * v, values))
        elif name == "filter":
            items = [x * v for v in filter(lambda v: v > 1, values)]
        else:
            items = [x * v for v in reversed(values)]
        return items
    check(f, x4, [1, 2, 3])


def test_zip_strict_and_uneven():
    def f(xs, ws):
        return [t * w for t, w in zip(xs, ws)], list(zip(ws, "ab"))
    check(f, [x4, x4], [1, 2, 3])


def test_iter_and_next_on_containers():
    def f(x, values):
        iterator = iter(values)
        first = next(iterator)
        rest = list(iterator)
        return x * first, rest, next(iter({}), "empty")
    check(f, x4, [5, 6, 7])


@pytest.mark.parametrize("case", ["chain", "product", "accumulate", "islice", "repeat",
                                  "pairwise", "count", "zip_longest"])
def test_itertools_helpers(case):
    def f(x, values):
        if case == "chain":
            out = list(itertools.chain(values, [10]))
        elif case == "product":
            out = list(itertools.product(values, "ab"))
        elif case == "accumulate":
            out = list(itertools.accumulate(values))
        elif case == "islice":
            out = list(itertools.islice(values, 1, None))
        elif case == "repeat":
            out = list(itertools.repeat(values[0], 3))
        elif case == "pairwise":
            out = list(itertools.pairwise(values))
        elif case == "count":
            out = [v * c for v, c in zip(values, itertools.count(5))]
        else:
            out = list(itertools.zip_longest(values, [1], fillvalue=0))
        return x * len(out), out
    check(f, x4, [1, 2, 3])


def test_nested_containers_returned_keep_structure():
    def f(x):
        inner = [x, {"k": (x + 1, None)}]
        return {"outer": inner, "same": inner}, [inner, inner]
    check(f, x4)


def test_returned_containers_alias_the_same_new_object():
    def f(x):
        shared = [x + 1]
        return shared, shared
    import dynamo
    a, b = dynamo.jit(f, backend="eager")(x4)
    assert a is b and torch.equal(a[0], x4 + 1)


def test_containers_of_tensors_as_inputs():
    def f(batch):
        return batch["a"] + batch["b"][0] * batch["b"][1], len(batch)
    check(f, {"a": x4, "b": [x4, x4 * 2]})


def test_none_and_ellipsis_and_notimplemented():
    def f(x, missing):
        marker = ...
        return x[marker] if missing is None else x, marker is Ellipsis, NotImplemented
    check(f, m34, None)


def test_int_float_bool_conversions_of_python_values():
    def f(x, text, number):
        return x * int(text) + float(number) + bool(number) + int(3.9) + float("1.5")
    check(f, x4, "4", 2)


def test_tuple_of_tensors_from_torch_ops_unpacked():
    def f(x):
        values, indices = x.max(dim=1)
        first, *rest = x.split(1, dim=0)
        return values, indices, first, len(rest), x.chunk(2, dim=1)
    check(f, m34)


def test_bytes_and_str_formatting_fold():
    def f(x, name):
        label = "%s-%d" % (name, 3)
        return {label: x + 1}, "{}:{:.1f}".format(name, 2.25), str(3) + repr("a")
    check(f, x4, "n")


def test_set_passed_in_read_and_mutated():
    def f(x, seen):
        hit = "a" in seen
        seen.add("b")
        seen.discard("c")
        return x * (len(seen) + hit)
    check(f, x4, {"a", "c"})
