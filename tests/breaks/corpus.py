"""The break-placement corpus: every place a graph break can sit, crossed with break kinds.

Each case is a small program generated from a placement template (top level, loop bodies,
branches, `try`/`except`/`finally`, `with` blocks, helpers one to three calls deep,
comprehensions, module methods, tensor-valued conditions) with one break kind substituted at
`{BREAK}` (print, logging, `.item()`, a tensor branch, `nonzero`, a `dynamo.disable`d helper,
NumPy, a C function). The sources are registered with `linecache`, so tracebacks and
`explain()` show real lines. Used by tests/breaks/test_corpus.py and
benchmarks/breaks/compare.py.
"""
from __future__ import annotations

import dataclasses
import linecache
import logging
import os
import textwrap
from typing import Callable

import torch

import dynamo

LOG_LINES: list = []


class _ListHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        LOG_LINES.append(record.getMessage())


logger = logging.getLogger("framejit.tests.breaks")
logger.addHandler(_ListHandler())
logger.setLevel(logging.INFO)
logger.propagate = False


@dynamo.disable
def eager_helper(t):
    return t * 3


class Recorder:
    """A user context manager with visible side effects."""

    def __init__(self, events: list):
        self.events = events

    def __enter__(self):
        self.events.append("enter")
        return self

    def __exit__(self, *exc_info):
        self.events.append("exit")
        return False


# Break kinds: a statement that updates `x`, and the break id explain() must report.
KINDS = {
    "print": ('print("x has", x.shape[0], "rows")', "GB001"),
    "logging": ('logger.info("x has %d rows", x.shape[0])', "GB001"),
    "item": ("x = x + x.sum().item()", "GB003"),
    "branch": ("x = x + 1 if x.sum() > 0 else x - 1", "GB002"),
    "nonzero": ("x = x + x.nonzero().shape[0]", "GB004"),
    "disable": ("x = eager_helper(x)", "GB007"),
    "numpy": ("x = x + float(x.detach().numpy().sum())", "GB003"),
    "cfunction": ("x = x + (os.getpid() > 0)", "GB005"),
}

# Placements: a function `f(x, ...)` whose body holds `{BREAK}` (indented as needed).
PLACEMENTS = {
    "top": """
        def f(x):
            x = x * 2
            {BREAK}
            return x.sin()
    """,
    "for_range": """
        def f(x):
            for i in range(3):
                x = x * 2
                {BREAK}
                x = x - i
            return x.sin()
    """,
    "for_list": """
        def f(x, ws):
            for w in ws:
                x = x * w
                {BREAK}
            return x.cos()
    """,
    "while": """
        def f(x):
            steps = 0
            while steps < 3:
                x = x + 1
                {BREAK}
                steps += 1
            return x * steps
    """,
    "nested_loops": """
        def f(x):
            for i in range(2):
                for j in range(2):
                    x = x * 1.5
                    {BREAK}
                x = x - 1
            return x
    """,
    "loop_break_continue": """
        def f(x):
            for i in range(4):
                if i == 1:
                    continue
                x = x + i
                {BREAK}
                if i == 2:
                    break
            return x.exp()
    """,
    "if_taken": """
        def f(x, flag=True):
            x = x.relu()
            if flag:
                {BREAK}
                x = x * 3
            return x + 1
    """,
    "else_taken": """
        def f(x, flag=False):
            x = x.abs()
            if flag:
                x = x * 3
            else:
                {BREAK}
                x = x - 3
            return x / 2
    """,
    "try_body": """
        def f(x):
            try:
                x = x * 2
                {BREAK}
                x = x + 1
            except ValueError:
                x = x * 0
            return x.tanh()
    """,
    "finally": """
        def f(x):
            try:
                x = x * 2
            finally:
                {BREAK}
                x = x + 1
            return x.tanh()
    """,
    "except_fires": """
        def f(x):
            try:
                x = x * 2
                raise KeyError("k")
            except KeyError:
                {BREAK}
                x = x + 1
            return x.sigmoid()
    """,
    "with_no_grad": """
        def f(x):
            with torch.no_grad():
                y = x * 2
                x = y
                {BREAK}
                z = x + 1
            return z, z.requires_grad
    """,
    "with_user_context": """
        def f(x, events):
            with Recorder(events):
                x = x * 2
                {BREAK}
                x = x + 1
            return x.sin()
    """,
    "helper_depth1": """
        def helper(x):
            x = x + 1
            {BREAK}
            return x * 2

        def f(x):
            x = x.cos()
            x = helper(x)
            return x - 1
    """,
    "helper_depth2": """
        def inner(x):
            x = x + 1
            {BREAK}
            return x * 2

        def outer(x):
            return inner(x.sin()) + 1

        def f(x):
            return outer(x.cos()) - 1
    """,
    "helper_depth3": """
        def level3(x):
            x = x + 1
            {BREAK}
            return x * 2

        def level2(x):
            return level3(x * 3) + 2

        def level1(x):
            return level2(x - 3) * 2

        def f(x):
            return level1(x.cos()).sum()
    """,
    "module_method": """
        class Block(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(4, 4)

            def forward(self, x):
                x = self.lin(x)
                {BREAK}
                return x.relu()

        block = Block()

        def f(x):
            with torch.no_grad():
                return block(x) * 2
    """,
    "tensor_condition_loop": """
        def f(x):
            for i in range(3):
                x = x * 0.9
                {BREAK}
                if (x.abs().sum() > 100):
                    x = x / 2
            return x
    """,
}

# Placements whose break must be an expression (inside a comprehension).
EXPRESSION_KINDS = {
    "print": ('print("row", t.shape[0]) or t * 2', "GB001"),
    "item": ("t * t.sum().item()", "GB003"),
    "branch": ("(t + 1 if t.sum() > 0 else t - 1)", "GB002"),
    "disable": ("eager_helper(t)", "GB007"),
}
COMPREHENSION = """
    def f(x):
        rows = [{BREAK} for t in x]
        return torch.stack(rows).sum(0)
"""


# Placements where the frame runs eagerly by design (the test checks it does, and that the
# results agree): a break inside an `except` body is in code that runs while an exception is
# being handled, whose state (`sys.exc_info()`, the handler's saved exception and `lasti`)
# a region cannot rebuild (dynamo.resume.analysis.handling).
EAGER_PLACEMENTS = {"except_fires"}


@dataclasses.dataclass
class Case:
    name: str
    function: Callable
    args: tuple
    kind_id: str
    source: str
    resumes: bool = True


def _arguments(placement: str) -> tuple:
    x = torch.linspace(-1.0, 2.0, 4)
    if placement == "for_list":
        return (x, [0.5, 2.0, 1.5])
    if placement == "with_user_context":
        return (x, [])
    if placement == "with_no_grad":
        return (x.clone().requires_grad_(),)
    if placement == "comprehension":
        return (torch.linspace(-1.0, 2.0, 12).reshape(3, 4),)
    return (x,)


def _compile(name: str, template: str, statement: str) -> tuple[Callable, str]:
    body = textwrap.dedent(template).strip("\n")
    lines = body.splitlines()
    for index, line in enumerate(lines):
        if "{BREAK}" in line:
            indent = line[:len(line) - len(line.lstrip())]
            replaced = [indent + part if position else line.replace("{BREAK}", part)
                        for position, part in enumerate(statement.splitlines())]
            lines[index:index + 1] = replaced
    source = "\n".join(lines) + "\n"
    filename = f"<break corpus {name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"torch": torch, "os": os, "logger": logger, "eager_helper": eager_helper,
                 "Recorder": Recorder, "__name__": f"break_corpus_{name}"}
    exec(compile(source, filename, "exec"), namespace)
    return namespace["f"], source


def cases() -> list[Case]:
    """Every (placement, kind) case, in a stable order."""
    found = []
    for placement, template in PLACEMENTS.items():
        for kind, (statement, kind_id) in KINDS.items():
            if kind == "numpy" and placement == "with_no_grad":
                continue  # .numpy() on a tensor that requires grad raises in eager too
            name = f"{placement}-{kind}"
            function, source = _compile(name, template, statement)
            found.append(Case(name, function, _arguments(placement), kind_id, source,
                              placement not in EAGER_PLACEMENTS))
    for kind, (expression, kind_id) in EXPRESSION_KINDS.items():
        name = f"comprehension-{kind}"
        function, source = _compile(name, COMPREHENSION, expression)
        found.append(Case(name, function, _arguments("comprehension"), kind_id, source))
    return found
