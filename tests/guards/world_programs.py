"""Generated programs that read what the fuzzer's programs read, in a world that changes between
calls: aliased arguments and containers, in-place mutation of arguments, of objects and of
globals, storage offsets, Python attributes on tensors and `is_leaf`, attributes of a module
object, `functools.partial` arguments, and torch's process-wide flags.

A `World` is built twice from the same seed, once for eager and once for the jitted program:
the same pool of tensors, a holder object, a list global, a module object `cfg` and a partial
`scale`. Each step of a `Script` first applies an `Event` to both worlds (or the process, for
torch flags), then calls both programs with arguments picked from the world (`ArgSpec`: a fresh
tensor, a pool tensor, a view of one at some offset, the same object as `a`). The oracle is
eager re-execution: the results, the arguments and every object of the two worlds must agree
after each call. Nothing here knows what the guards check.

Programs print as source, so a shrunk failure reads as a program plus its steps:

    Program('''
    def program(x, a, b, lst, other, h):
        y = x
        a.add_(1)
        y = y + b.sum()
        return y
    ''')  [Step(Event('tag', 0, 5), ArgSpec('pool', 0), ArgSpec('same'), ...)]
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import types
from typing import Any, Optional

import torch
from hypothesis import strategies as st

STATEMENTS = (
    "a.add_(1)\ny = y + b.sum()",
    "b.mul_(2)\ny = y + a.sum()",
    "if a is b:\n    y = y + 1",
    "y = y + a.storage_offset() + b.storage_offset()",
    "y = y * getattr(a, 'tag', 1)",
    "if hasattr(b, 'tag'):\n    y = y - 1",
    "if a.requires_grad and a.is_leaf:\n    y = y + 2",
    "y = y * cfg.S",
    "if cfg.FLAG:\n    y = y - 3",
    "y = y + scale(2)",
    "lst.append(1)\ny = y * len(other)",
    "other.pop()\ny = y + len(lst)",
    "h.count = h.count + 1\ny = y * h.count",
    "h.a.add_(1)\ny = y + h.b.sum()",
    "LOG.append(1)\ny = y + len(LOG)",
    "if torch.backends.mkldnn.enabled:\n    y = y + 4",
    "if torch.backends.cudnn.enabled:\n    y = y - 4",
    "y = y * torch.get_num_threads()",
    "if torch.are_deterministic_algorithms_enabled():\n    y = y * 3",
    "y = y + torch.tensor(1.5).dtype.itemsize",
    "if h.a is h.b:\n    y = y * 5",
    "if lst is other:\n    y = y + 7",
    "table = {a: 1}\ntable[b] = 2\ny = y * len(table)",
)


@dataclasses.dataclass(frozen=True)
class Program:
    """`program(x, a, b, lst, other, h)` from statement templates (see the module docstring)."""

    statements: tuple[str, ...]

    def source(self) -> str:
        body = ["y = x.clone()", *self.statements]
        lines = [line for statement in body for line in statement.splitlines()]
        return ("def program(x, a, b, lst, other, h):\n" +
                "".join(f"    {line}\n" for line in lines) + "    return y\n")

    def build(self, world: "World"):
        """The program, its globals those of `world` (each world has its own)."""
        exec(compile(self.source(), "<world program>", "exec"), world.namespace)
        return world.namespace["program"]

    def __repr__(self) -> str:
        return f"Program('''\n{self.source()}''')"

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(repr(self))


programs = st.lists(st.sampled_from(STATEMENTS), min_size=1, max_size=4).map(
    lambda statements: Program(tuple(statements)))


class Holder:
    """A plain object the programs read and write (`h.count`, `h.a`, `h.b`)."""


def _combine(n, a=1, b=0):
    return n * a + b


class World:
    """The objects one side (eager or jitted) runs against."""

    POOL = 3

    def __init__(self) -> None:
        self.pool = [torch.arange(8.0) + 10 * index for index in range(self.POOL)]
        self.holder = Holder()
        self.holder.count = 0
        self.holder.a, self.holder.b = torch.ones(4), torch.ones(4)
        self.cfg = types.ModuleType("world_cfg")
        self.cfg.S, self.cfg.FLAG = 2.0, False
        self.scale = functools.partial(_combine, a=2)
        self.log: list = []
        self.namespace = {"torch": torch, "cfg": self.cfg, "scale": self.scale,
                          "LOG": self.log}

    def state(self) -> dict:
        """Everything a program may have changed, for comparison after a call."""
        return {"pool": list(self.pool), "count": self.holder.count,
                "holder": (self.holder.a, self.holder.b), "log": list(self.log),
                "tags": [getattr(tensor, "tag", None) for tensor in self.pool],
                "cfg": (self.cfg.S, self.cfg.FLAG), "scale": dict(self.scale.keywords)}


@dataclasses.dataclass(frozen=True)
class Event:
    """A change between calls: `kind` with an index into the pool and a value."""

    kind: str
    index: int = 0
    value: Any = None

    def apply(self, world: World) -> None:
        if self.kind == "tag":
            world.pool[self.index].tag = self.value
        elif self.kind == "untag":
            world.pool[self.index].__dict__.pop("tag", None)
        elif self.kind == "cfg_s":
            world.cfg.S = self.value
        elif self.kind == "cfg_flag":
            world.cfg.FLAG = not world.cfg.FLAG
        elif self.kind == "partial":
            world.scale.keywords["a"] = self.value
        elif self.kind == "share":  # h.a and h.b become one tensor
            world.holder.b = world.holder.a
        elif self.kind == "unshare":
            world.holder.b = world.holder.a.clone()
        elif self.kind == "grad":
            world.pool[self.index].requires_grad_(bool(self.value))

    @contextlib.contextmanager
    def process(self):
        """Torch's process-wide flags for the call (restored afterwards)."""
        with contextlib.ExitStack() as stack:
            if self.kind == "mkldnn":
                stack.enter_context(torch.backends.mkldnn.flags(enabled=bool(self.value)))
            elif self.kind == "cudnn":
                stack.enter_context(torch.backends.cudnn.flags(enabled=bool(self.value)))
            elif self.kind == "threads":
                saved = torch.get_num_threads()
                torch.set_num_threads(self.value)
                stack.callback(torch.set_num_threads, saved)
            elif self.kind == "deterministic":
                saved = torch.are_deterministic_algorithms_enabled()
                torch.use_deterministic_algorithms(bool(self.value))
                stack.callback(torch.use_deterministic_algorithms, saved)
            yield


EVENTS = st.one_of(
    st.just(Event("none")),
    st.builds(Event, st.just("tag"), st.integers(0, World.POOL - 1), st.sampled_from([2, 3])),
    st.builds(Event, st.just("untag"), st.integers(0, World.POOL - 1)),
    st.builds(Event, st.just("cfg_s"), st.just(0), st.sampled_from([2.0, 3.0, 0.5])),
    st.just(Event("cfg_flag")),
    st.builds(Event, st.just("partial"), st.just(0), st.sampled_from([2, 5])),
    st.just(Event("share")), st.just(Event("unshare")),
    st.builds(Event, st.just("grad"), st.integers(0, World.POOL - 1), st.booleans()),
    st.builds(Event, st.sampled_from(["mkldnn", "cudnn", "deterministic"]), st.just(0),
              st.booleans()),
    st.builds(Event, st.just("threads"), st.just(0), st.sampled_from([1, 2])),
)


@dataclasses.dataclass(frozen=True)
class ArgSpec:
    """Where a tensor argument comes from: a fresh tensor, a pool tensor, a view of a pool
    tensor at `offset`, the same object as `a` (for `b`), or a leaf-or-not version."""

    kind: str
    index: int = 0
    offset: int = 0

    def value(self, world: World, first: Optional[torch.Tensor] = None) -> torch.Tensor:
        if self.kind == "same" and first is not None:
            return first
        if self.kind == "pool":
            return world.pool[self.index]
        if self.kind == "view":
            return world.pool[self.index][self.offset:self.offset + 4]
        if self.kind == "nonleaf":
            return torch.arange(4.0, requires_grad=True) * 1
        return torch.arange(4.0) + self.index


ARGS = st.one_of(
    st.builds(ArgSpec, st.just("fresh"), st.integers(0, 2)),
    st.builds(ArgSpec, st.just("pool"), st.integers(0, World.POOL - 1)),
    st.builds(ArgSpec, st.just("view"), st.integers(0, World.POOL - 1), st.integers(0, 4)),
    st.just(ArgSpec("same")), st.just(ArgSpec("nonleaf")),
)


@dataclasses.dataclass(frozen=True)
class Step:
    """One event, then one call."""

    event: Event
    a: ArgSpec
    b: ArgSpec
    lists_shared: bool  # `lst` and `other` are one list

    def arguments(self, world: World) -> tuple:
        a = self.a.value(world) if self.a.kind != "same" else self.a.value(world)
        b = self.b.value(world, first=a)
        # long enough that no program pops them empty: what a traced frame leaves behind when
        # it raises is the program fuzzer's subject (tests/fuzz), not the guards'
        lst = [0, 1, 2, 3, 4]
        other = lst if self.lists_shared else [0, 1, 2, 3, 4]
        x = torch.ones(4)
        return x, a, b, lst, other, world.holder


steps = st.builds(Step, EVENTS, ARGS, ARGS, st.booleans())
scripts = st.lists(steps, min_size=1, max_size=5)


def _value_of(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return (value.detach().clone(), value.requires_grad, value.dtype)
    if isinstance(value, (list, tuple)):
        return [_value_of(item) for item in value]
    if isinstance(value, dict):
        return {key: _value_of(item) for key, item in value.items()}
    return value


def snapshot(value: Any) -> Any:
    """A comparable copy (tensors by value, requires_grad and dtype)."""
    return _value_of(value)


def assert_same(expected: Any, actual: Any, where: str) -> None:
    if isinstance(expected, tuple) and len(expected) == 3 and \
            isinstance(expected[0], torch.Tensor):
        assert isinstance(actual, tuple) and isinstance(actual[0], torch.Tensor), where
        assert expected[1:] == actual[1:], f"{where}: {expected[1:]} != {actual[1:]}"
        torch.testing.assert_close(actual[0], expected[0], equal_nan=True,
                                   msg=lambda text: f"{where}: {text}")
    elif isinstance(expected, (list, tuple)):
        assert type(actual) is type(expected) and len(actual) == len(expected), where
        for index, (first, second) in enumerate(zip(expected, actual)):
            assert_same(first, second, f"{where}[{index}]")
    elif isinstance(expected, dict):
        assert list(expected) == list(actual), where
        for key in expected:
            assert_same(expected[key], actual[key], f"{where}[{key!r}]")
    else:
        assert type(actual) is type(expected) and actual == expected, \
            f"{where}: expected {expected!r}, got {actual!r}"


def run(function, arguments: tuple):
    """(snapshot of the result, the error's type)"""
    try:
        return snapshot(function(*arguments)), None
    except Exception as error:  # noqa: BLE001  (compared with the other side's)
        return None, type(error)
