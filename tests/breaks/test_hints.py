"""Every graph-break kind, and every reason-specific hint, tells the user what to do (issue 24,
item 3: `loss.backward()`, `opt.step()` and `opt.zero_grad()` used to get "pass tensors,
numbers, containers or modules instead").

Each kind has a program here that breaks that way under `fullgraph=True`; the error names the
kind and carries its hint (or a reason-specific one). Each `breaks.REASON_HINTS` entry has a
program whose break gets exactly that entry's hint, so a changed reason text cannot silently
send users back to the kind's hint.
"""
import os
import sys
import threading

import pytest
import torch

import dynamo
from dynamo import breaks

# texts that describe instead of advising, or advise nothing in particular
NOT_ACTIONABLE = ("pass tensors, numbers, containers or modules instead", "this is intended",
                  "the raise runs eagerly as written", "restructure the code, or report",
                  "report the function if it should be supported")
ACTIONS = ("use ", "move ", "call ", "keep ", "return ", "remove ", "raise ", "check ", "read ",
           "set ", "build ", "create ", "register ", "format ", "jit ")


def _class_statement(x):
    class Local:
        pass
    return x + 1


def _raises(x):
    raise ValueError("bad shape")


def _with_lock(x, lock):
    with lock:
        return x + 1


def _recurse(x, depth):
    return x if depth == 0 else _recurse(x + 1, depth - 1)


def _deep(x):
    return _recurse(x, 5)


@dynamo.disable
def _eager_only(t):
    return t * 3


def _calls_disabled(x):
    return _eager_only(x) + 1


KIND_PROGRAMS = {
    "GB001": (lambda x: print("x", x.shape) or x + 1, lambda: (torch.ones(3),), {}),
    "GB002": (lambda x: x + 1 if x.sum() > 0 else x - 1, lambda: (torch.ones(3),), {}),
    "GB003": (lambda x: x / x.max().item(), lambda: (torch.ones(3),), {}),
    "GB004": (lambda x: x[x > 0], lambda: (torch.ones(3),), {}),
    "GB005": (lambda x: x + os.getpid(), lambda: (torch.ones(3),), {}),
    "GB006": (_class_statement, lambda: (torch.ones(3),), {}),
    "GB007": (_calls_disabled, lambda: (torch.ones(3),), {}),
    "GB008": (_raises, lambda: (torch.ones(3),), {}),
    "GB009": (_with_lock, lambda: (torch.ones(3), threading.Lock()), {}),
    "GB010": (_deep, lambda: (torch.ones(3),), {"options": {"inline_depth": 2}}),
}


def first_break(function, arguments, **options) -> dynamo.GraphBreakError:
    jitted = dynamo.jit(function, fullgraph=True, backend="eager", **options)
    with pytest.raises(dynamo.GraphBreakError) as raised:
        jitted(*arguments)
    return raised.value


def test_every_kind_has_a_program_here():
    assert sorted(KIND_PROGRAMS) == sorted(breaks.KINDS)


@pytest.mark.parametrize("kind_id", sorted(breaks.KINDS))
def test_every_kind_has_a_specific_actionable_hint(kind_id):
    kind = breaks.KINDS[kind_id]
    others = [other.hint for other in breaks.KINDS.values() if other is not kind]
    assert kind.hint not in others, "a hint shared by kinds is a generic fallback"
    assert not any(text in kind.hint for text in NOT_ACTIONABLE), kind.hint
    assert any(action in f" {kind.hint}" for action in ACTIONS), \
        f"{kind_id}'s hint names no action: {kind.hint!r}"
    function, arguments, options = KIND_PROGRAMS[kind_id]
    error = first_break(function, arguments(), **options)
    assert error.failure.kind.id == kind_id
    assert error.failure.kind.hint in [kind.hint] + [entry.hint for entry in breaks.REASON_HINTS]
    assert f"hint: {error.failure.kind.hint}" in str(error)


def test_every_reason_hint_is_actionable_and_distinct():
    hints = [entry.hint for entry in breaks.REASON_HINTS]
    kind_hints = [kind.hint for kind in breaks.KINDS.values()]
    assert len(set(hints)) == len(hints) and not set(hints) & set(kind_hints)
    names = [entry.name for entry in breaks.REASON_HINTS]
    assert len(set(names)) == len(names)
    for entry in breaks.REASON_HINTS:
        assert entry.reason or entry.place
        assert not any(text in entry.hint for text in NOT_ACTIONABLE), entry.hint
        assert any(action in f" {entry.hint}" for action in ACTIONS), entry.hint


def _sets_requires_grad(x):
    x.requires_grad = True
    return x * 2


def _hooks(x):
    x.register_hook(lambda grad: grad)
    return x * 2


def _new_module(x):
    return torch.nn.Linear(3, 3)(x)


def _new_object(x):
    import fractions
    return x * float(fractions.Fraction(1, 2))


def _backward(x):
    loss = (x * 2).sum()
    loss.backward()
    return loss


def _disabled_by_torch(t):
    return t * 5


_disabled_by_torch = torch.compiler.disable(_disabled_by_torch)


def _calls_torch_disabled(x):
    return _disabled_by_torch(x + 1) - 1


def _autocast_with_print(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ x.T
        print("in autocast")
    return y.float()


def _disable_block(x):
    y = x + 1
    with dynamo.disable():
        y = y * 2
    return y - 1


def _optimizer_step(x):
    model = _OPTIMIZED["model"]
    loss = model(x).sum()
    _OPTIMIZED["optimizer"].step()
    return loss


_OPTIMIZED: dict = {}


def _optimizer_arguments():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    model(torch.ones(1, 3)).sum().backward()  # grads for the step
    _OPTIMIZED.update(model=model, optimizer=torch.optim.Adagrad(model.parameters()))
    return (torch.ones(4, 3),)


REASON_PROGRAMS = {
    "optimizer": (_optimizer_step, _optimizer_arguments),
    "torch.compile disable": (_calls_torch_disabled, lambda: (torch.ones(3),)),
    "disable block": (_disable_block, lambda: (torch.ones(3),)),
    "backward": (_backward, lambda: (torch.ones(3, requires_grad=True),)),
    "gradients": (lambda x: x.grad, lambda: (torch.ones(3),)),
    "autograd hooks": (_hooks, lambda: (torch.ones(3, requires_grad=True),)),
    "tensor internals": (lambda x: x.data + 1, lambda: (torch.ones(3),)),
    "requires_grad": (_sets_requires_grad, lambda: (torch.ones(3),)),
    "tensor storage": (lambda x: x.data_ptr(), lambda: (torch.ones(3),)),
    "with block cut by a break": (_autocast_with_print, lambda: (torch.ones(4, 4),)),
    "call stack": (lambda x: sys._getframe() and x + 1, lambda: (torch.ones(3),)),
    "module construction": (_new_module, lambda: (torch.ones(3),)),
    "object construction": (_new_object, lambda: (torch.ones(3),)),
    "string formatting": (lambda x: f"{x}", lambda: (torch.ones(3),)),
}


def test_every_reason_hint_has_a_program_here():
    assert sorted(REASON_PROGRAMS) == sorted(entry.name for entry in breaks.REASON_HINTS)


@pytest.mark.parametrize("entry", breaks.REASON_HINTS, ids=lambda entry: entry.name)
def test_each_reason_hint_reaches_the_user(entry):
    function, arguments = REASON_PROGRAMS[entry.name]
    report = dynamo.explain(function)(*arguments())
    hints = [info.hint for info in report.breaks if info.kind != "GB001"]
    if entry.name == "optimizer" and not hints:
        pytest.skip("the optimizer step no longer breaks the graph")
    assert hints, f"{entry.name}: the program did not break"
    assert hints[0] == entry.hint, (entry.name, report.breaks[0])
    assert hints[0] in str(report)


def test_fullgraph_error_carries_the_reason_hint():
    error = first_break(_backward, (torch.ones(3, requires_grad=True),))
    backward = next(entry for entry in breaks.REASON_HINTS if entry.name == "backward")
    assert error.failure.kind.id == "GB009" and error.failure.kind.hint == backward.hint
    assert f"hint: {backward.hint}" in str(error)
    assert error.failure.registered_kind is breaks.UNSUPPORTED_OBJECT


def test_a_training_step_under_jit_gets_hints_that_say_what_to_do():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(x, y):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    report = dynamo.explain(step)(torch.randn(8, 4), torch.randn(8, 2))
    assert report.breaks, "the step has at least its backward break"
    by_name = {entry.name: entry.hint for entry in breaks.REASON_HINTS}
    for info in report.breaks:
        assert info.hint not in NOT_ACTIONABLE and info.hint != breaks.UNSUPPORTED_OBJECT.hint
        places = " ".join([info.location or "", *info.calls])
        if info.source_line == "loss.backward()":
            assert info.hint == by_name["backward"]
        elif "torch/optim/" in places:
            assert info.hint == by_name["optimizer"], info
    assert any(info.source_line == "loss.backward()" for info in report.breaks)


@pytest.mark.parametrize("detail, places, name", [
    ("attribute '_torchdynamo_orig_callable' of function Optimizer.zero_grad (AttributeError)",
     ["/venv/torch/_dynamo/eval_frame.py:722", "/venv/torch/_compile.py:51", "train.py:5"],
     "optimizer"),
    ("reading tensor.grad", ["/venv/torch/optim/sgd.py:88", "train.py:8"], "optimizer"),
    ("reading tensor.grad", ["train.py:8"], "gradients"),
    ("torch._C._dynamo.eval_frame.set_eval_frame() changes process state",
     ["/venv/torch/_dynamo/eval_frame.py:1525", "train.py:5"], "torch.compile disable"),
    ("helper is marked torch.compiler.disable", ["train.py:5"], "torch.compile disable"),
    ("Optimizer.zero_grad is marked torch.compiler.disable", ["train.py:5"], "optimizer"),
])
def test_the_first_matching_entry_wins(detail, places, name):
    expected = next(entry.hint for entry in breaks.REASON_HINTS if entry.name == name)
    assert breaks.specific_hint(breaks.UNSUPPORTED_OBJECT, detail, places) == expected


def test_a_reason_without_an_entry_keeps_its_kinds_hint():
    assert breaks.specific_hint(breaks.PRINT, "print()", ["a.py:3"]) == breaks.PRINT.hint
    failure = breaks.Unsupported(breaks.PRINT, "print()")
    assert failure.kind is breaks.PRINT
