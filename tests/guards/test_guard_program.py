"""Native guard programs (`guards.native.program`): checks of module trees run as native steps,
answer exactly as the Python conditions do, and leave only what the program cannot read or
compare to Python."""
import os

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from guards import GuardSet, LocalSource, native
from guards.install import install_for
from guards.kinds.constants import ConstantGuard
from guards.kinds.objects import ObjectSnapshot, ObjectSnapshotGuard
from guards.native import program as native_program

NATIVE_OFF = os.environ.get("JIT_NATIVE_GUARDS", "1") in ("0", "false", "no", "off")
pytestmark = pytest.mark.skipif(NATIVE_OFF, reason="JIT_NATIVE_GUARDS=0")


def compiled(guards, use_native: bool):
    saved = native.enabled()
    native.set_enabled(use_native)
    try:
        return GuardSet(guards).compile()
    finally:
        native.set_enabled(saved)


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Dropout(0.1),
                               torch.nn.Sequential(torch.nn.LayerNorm(3))).eval()


def python_lines(check) -> list:
    body = check.source_text.splitlines()[2:-3]
    return [line.strip() for line in body if not line.strip().startswith("#")]


def test_module_tree_checks_run_natively():
    net = model()
    check = compiled(install_for(net, LocalSource("m")), True)
    assert "native_program: " in check.source_text
    assert python_lines(check) == ["if native_program(L, G) is None:", "return False"]
    assert check({"m": net}, {})
    net[1].train()
    assert not check({"m": net}, {})


def test_program_exports_what_python_conditions_read():
    guards = [ConstantGuard(LocalSource("t"), (1, 2.5)), ConstantGuard(LocalSource("n"), 3),
              ConstantGuard(LocalSource("f"), -0.0), ConstantGuard(LocalSource("s"), "a")]
    check = compiled(guards, True)
    assert "t, = values" in check.source_text
    frame = {"t": (1, 2.5), "n": 3, "f": -0.0, "s": "a"}
    assert check(frame, {})
    for name, value in (("t", (1, 2.5, 0)), ("n", 3.0), ("n", True), ("f", 0.0), ("s", b"a"),
                        ("t", [1, 2.5])):
        assert not check(dict(frame, **{name: value}), {}), (name, value)
    assert not check({"n": 3}, {})  # a missing local fails the check, it does not raise


def test_snapshot_membership_runs_natively_and_agrees():
    """Absences (`'missing' not in c.__dict__`, recorded where a read went past the instance
    dict to the class) and presences are native `CONTAINS` steps, and agree with Python."""
    class Config:
        pass
    config = Config()
    config.scale = 2.0
    source = LocalSource("c")
    guards = [ObjectSnapshotGuard.of(source, config, attributes=["scale", "missing"]),
              ObjectSnapshotGuard(source, ObjectSnapshot.membership("scale", True)),
              ObjectSnapshotGuard(source, ObjectSnapshot.membership("method", False))]
    native_check, python_check = compiled(guards, True), compiled(guards, False)
    assert python_lines(native_check) == ["if native_program(L, G) is None:", "return False"]
    assert "'missing' not in" in native_check.source_text
    assert "'scale' in" in native_check.source_text
    assert native_check.source_text.count("c_dict = c.__dict__") == 1  # one read, shared
    outcomes = []
    for mutate in (lambda c: None, lambda c: setattr(c, "missing", 1),
                   lambda c: setattr(c, "method", len), lambda c: delattr(c, "scale"),
                   lambda c: setattr(c, "scale", -2.0), lambda c: setattr(c, "scale", "2")):
        candidate = Config()
        candidate.__dict__.update(config.__dict__)
        mutate(candidate)
        frame = {"c": candidate}
        assert native_check(frame, {}) is python_check(frame, {})
        outcomes.append(native_check(frame, {}))
    assert outcomes == [True, False, False, False, False, False]


class Loud:
    """An attribute read that raises a BaseException, or an Exception."""

    def __init__(self, error):
        self.error = error

    @property
    def value(self):
        raise self.error


def test_reads_that_raise_exceptions_fail_and_base_exceptions_propagate():
    from guards.sources import AttrSource
    guards = [ConstantGuard(AttrSource(LocalSource("x"), "value"), 1)]
    check = compiled(guards, True)
    assert "native_program" in check.source_text
    assert not check({"x": Loud(RuntimeError("no"))}, {})
    with pytest.raises(KeyboardInterrupt):
        check({"x": Loud(KeyboardInterrupt())}, {})


def test_program_rejects_malformed_steps():
    module = native.load()
    with pytest.raises(ValueError):
        module.GuardProgram([(native_program.ATTRIBUTE, 0, 5, "a", 0, ())], 1, [], [])
    with pytest.raises(ValueError):
        module.GuardProgram([(native_program.LOCAL, 0, -1, "a", 0, ())], 1, [3], [])
    with pytest.raises(TypeError):
        module.GuardProgram([(native_program.FLOAT, -1, 0, 1, 0, ())], 1, [], [])
    with pytest.raises(ValueError):  # reads register 0 before any step set it
        module.GuardProgram([(native_program.TYPE_IS, -1, 0, int, 0, ())], 1, [], [])
    with pytest.raises(ValueError):  # exports a register no step sets
        module.GuardProgram([], 1, [0], [])
    with pytest.raises(ValueError):  # a constant read needs a target register
        module.GuardProgram([(native_program.CONSTANT, -1, -1, {}, 0, ())], 1, [], [])
    with pytest.raises(ValueError):  # a same-object step names exactly one other register
        module.GuardProgram([(native_program.LOCAL, 0, -1, "a", 0, ()),
                             (native_program.SAME, -1, 0, None, 0, ())], 1, [], [])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["train", "eval", "swap", "weight", "hook", "drop", "same"]),
                max_size=3))
def test_native_and_python_checks_agree_on_mutated_modules(mutations):
    net = model()
    guards = install_for(net, LocalSource("m"))
    native_check, python_check = compiled(guards, True), compiled(guards, False)
    for mutation in mutations:
        if mutation in ("swap", "weight") and not isinstance(net[0], torch.nn.Linear):
            continue
        if mutation == "train":
            net.train()
        elif mutation == "eval":
            net.eval()
        elif mutation == "swap":
            net[0] = torch.nn.Linear(3, 3)
        elif mutation == "weight":
            net[0].weight = torch.nn.Parameter(torch.ones(3, 2))
        elif mutation == "hook":
            net[len(net) - 1].register_forward_hook(lambda *args: None)
        elif mutation == "drop" and len(net) > 1:
            del net[len(net) - 1]
    frame = {"m": net}
    assert native_check(frame, {}) is python_check(frame, {})
    assert native_check(frame, {}) is (not GuardSet(guards).failures(frame, {}))


class Holder:
    scale = 1  # a class attribute an instance entry may shadow

    def __getattr__(self, name):
        if name == "dynamic":
            return 5
        raise AttributeError(name)


class Slotted:
    __slots__ = ("scale",)


def test_attribute_reads_follow_python_lookup_as_types_change():
    from guards.sources import AttrSource
    guards = [ConstantGuard(AttrSource(LocalSource("h"), "scale"), 2),
              ConstantGuard(AttrSource(LocalSource("h"), "dynamic"), 5)]
    native_check, python_check = compiled(guards, True), compiled(guards, False)

    def agree(value) -> bool:
        verdict = native_check({"h": value}, {})
        assert verdict is python_check({"h": value}, {})
        return verdict

    holder = Holder()
    holder.scale = 2
    assert agree(holder) and agree(holder)  # the second read takes the cached path
    del holder.scale
    assert not agree(holder)  # the class attribute (1) again
    Holder.scale = 2
    assert agree(holder)
    holder.scale = 3
    Holder.scale = property(lambda self: 2)  # a data descriptor now wins over the instance
    try:
        assert agree(holder)
        Holder.dynamic = property(lambda self: 6)
        assert not agree(holder)
        del Holder.dynamic
        Holder.__getattribute__ = lambda self, name: 2 if name == "scale" else 5
        assert agree(holder)
        del Holder.__getattribute__
    finally:
        Holder.scale = 1
    slotted = Slotted()
    slotted.scale = 2
    assert not agree(slotted)  # no __getattr__: `dynamic` cannot be read


def test_reads_from_a_bound_constant_run_natively():
    """Guards rooted at a value bound into the check (the globals of a module whose function
    was inlined: `ConstantSource("globals of m", m.__dict__)`) read it from a native register,
    so their conditions run natively too, and answer as the Python check does."""
    from guards.kinds.values import IdentityGuard, TypeGuard
    from guards.sources import ConstantSource, DictItemSource

    namespace = {"flag": object(), "config": {"size": 4}}
    root = ConstantSource("globals of helpers", namespace)
    flag, config = DictItemSource(root, "flag"), DictItemSource(root, "config")
    guards = [IdentityGuard(flag, namespace["flag"]), TypeGuard(config, dict),
              ConstantGuard(DictItemSource(config, "size"), 4)]
    native_check, python_check = compiled(guards, True), compiled(guards, False)
    assert python_lines(native_check) == ["if native_program(L, G) is None:", "return False"]
    for change in (None, ("flag", object()), ("config", {"size": 5}), ("config", [4]),
                   ("config", {})):
        if change is not None:
            saved = namespace[change[0]]
            namespace[change[0]] = change[1]
        expected = change is None
        assert native_check({}, {}) is expected and python_check({}, {}) is expected, change
        if change is not None:
            namespace[change[0]] = saved


def test_empty_hook_dicts_are_one_native_step_and_agree():
    """A module's empty hook dicts are one `FALSY_ITEMS` step (not a read and a check each),
    and a hook of any kind added after capture, or a hook dict deleted, fails it as Python's
    conditions do."""
    steps = []
    build = native_program.ProgramBuilder.build

    def counting(self):
        steps.append([step[0] for step in self.steps])
        return build(self)
    net = torch.nn.Linear(3, 3)
    guards = install_for(net, LocalSource("m"))
    native_program.ProgramBuilder.build = counting
    try:
        native_check = compiled(guards, True)
    finally:
        native_program.ProgramBuilder.build = build
    python_check = compiled(guards, False)
    (operations,) = steps
    assert operations.count(native_program.FALSY_ITEMS) == 1
    assert native_program.FALSY not in operations
    assert "not m_dict['_forward_pre_hooks'] and not m_dict['_forward_hooks']" in \
        native_check.source_text
    mutations = [lambda m: None,
                 lambda m: m.register_forward_hook(lambda *args: None),
                 lambda m: m.register_forward_pre_hook(lambda *args: None),
                 lambda m: m.register_full_backward_hook(lambda *args: None),
                 lambda m: m._backward_pre_hooks.__setitem__(0, print),
                 lambda m: m.__dict__.pop("_forward_hooks")]
    outcomes = []
    for mutate in mutations:
        candidate = torch.nn.Linear(3, 3)
        candidate.load_state_dict(net.state_dict())
        mutate(candidate)
        frame = {"m": candidate}
        assert native_check(frame, {}) is python_check(frame, {})
        outcomes.append(native_check(frame, {}))
    assert outcomes == [True] + [False] * (len(mutations) - 1)
