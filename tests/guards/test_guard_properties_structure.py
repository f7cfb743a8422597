"""Property-based tests (hypothesis) on the machinery around guards: sources, dedup, order,
global state, modules, object snapshots, identity and robustness of the compiled check."""
import contextlib
import gc

import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from guard_oracle import same_guarded
from guard_strategies import VALUES, build
from guards import (AttrSource, DictItemSource, GlobalStateGuard, GuardSet, IdentityGuard,
                    ItemSource, LocalSource, ObjectSnapshot, ObjectSnapshotGuard, install_for)

X = LocalSource("x")


@st.composite
def nested_with_path(draw):
    """A nested container of ints and a valid path into it, as a source."""
    value = draw(st.recursive(st.integers(), lambda children: st.one_of(
        st.lists(children, min_size=1, max_size=3),
        st.dictionaries(st.text(max_size=3), children, min_size=1, max_size=3)), max_leaves=8))
    source, current = X, value
    while isinstance(current, (list, dict)) and draw(st.booleans()):
        if isinstance(current, list):
            index = draw(st.integers(-len(current), len(current) - 1))
            source, current = ItemSource(source, index), current[index]
        else:
            key = draw(st.sampled_from(list(current)))
            source, current = DictItemSource(source, key), current[key]
    return value, source, current


@given(nested_with_path())
def test_source_fetch_expr_and_name_reach_the_same_value(case):
    value, source, expected = case
    frame = {"L": {"x": value}, "G": {}}
    assert source.fetch(frame["L"], frame["G"]) is expected
    assert eval(source.expr(), {}, frame) is expected
    assert eval(source.name(), {}, frame) is expected
    assert eval(repr(source), {"LocalSource": LocalSource, "ItemSource": ItemSource,
                               "DictItemSource": DictItemSource}) == source


@given(VALUES)
def test_dedup_is_idempotent(spec):
    guards = install_for(build(spec), X)
    once, twice = GuardSet(guards), GuardSet(guards + install_for(build(spec), X))
    assert len(once) == len(twice) == len(set(guards))
    assert once.compile().source_text == twice.compile().source_text
    assert once.describe() == twice.describe()


@given(VALUES, VALUES, st.randoms(use_true_random=False))
def test_verdict_does_not_depend_on_insertion_order(first, second, random):
    guards = install_for(build(first), X)
    shuffled = list(guards)
    random.shuffle(shuffled)
    frame = {"x": build(second)}
    assert GuardSet(guards).compile()(frame, {}) == GuardSet(shuffled).compile()(frame, {})
    ranks = [guard.rank for guard in GuardSet(shuffled).ordered()]
    assert ranks == sorted(ranks)


@given(VALUES)
def test_describe_has_one_line_per_guard(spec):
    guard_set = GuardSet(install_for(build(spec), X))
    lines = guard_set.describe()
    assert len(lines) == len(guard_set)
    assert all(line and "\n" not in line for line in lines)


class Exploding:
    def __getattr__(self, name):
        raise RuntimeError(f"no {name}")

    def __len__(self):
        raise RuntimeError("no len")

    def __iter__(self):
        raise RuntimeError("no iter")

    def __eq__(self, other):
        raise RuntimeError("no eq")

    __hash__ = object.__hash__


@given(VALUES, st.one_of(VALUES.map(build), st.just(Exploding()), st.just([Exploding()])))
def test_check_never_raises_and_slow_path_never_raises(spec, candidate):
    guard_set = GuardSet(install_for(build(spec), X))
    assert guard_set.compile()({"x": candidate}, {}) in (True, False)
    assert guard_set.compile()({}, {}) is False
    assert isinstance(guard_set.failures({"x": candidate}, {}), list)


@contextlib.contextmanager
def set_state(name):
    """Change one global setting away from its default; restores it afterwards."""
    if name == "grad":
        with torch.no_grad():
            yield
    elif name == "autocast":
        with torch.autocast("cpu", dtype=torch.bfloat16):
            yield
    elif name == "default_dtype":
        torch.set_default_dtype(torch.float64)
        try:
            yield
        finally:
            torch.set_default_dtype(torch.float32)
    elif name == "deterministic":
        torch.use_deterministic_algorithms(True)
        try:
            yield
        finally:
            torch.use_deterministic_algorithms(False)
    elif name == "precision":
        torch.set_float32_matmul_precision("medium")
        try:
            yield
        finally:
            torch.set_float32_matmul_precision("highest")


STATE_ORDER = ["grad", "autocast", "default_dtype", "deterministic", "precision"]
STATE_SUBJECTS = {"grad": "grad mode:", "autocast": "autocast (cpu):",
                  "default_dtype": "default dtype:", "deterministic": "deterministic algorithms:",
                  "precision": "float32 matmul precision:"}


@given(st.sets(st.sampled_from(STATE_ORDER)), st.sets(st.sampled_from(STATE_ORDER)))
def test_global_state_guard_holds_iff_state_is_the_same(at_capture, at_call):
    with contextlib.ExitStack() as stack:
        for name in sorted(at_capture, key=STATE_ORDER.index):
            stack.enter_context(set_state(name))
        guard_set = GuardSet([GlobalStateGuard()])
    check = guard_set.compile()
    with contextlib.ExitStack() as stack:
        for name in sorted(at_call, key=STATE_ORDER.index):
            stack.enter_context(set_state(name))
        accepted, reasons = check({}, {}), guard_set.failures({}, {})
    assert accepted == (at_capture == at_call)
    changed = sorted(at_capture ^ at_call, key=STATE_ORDER.index)
    assert [reason.split(" expected")[0] for reason in reasons] == (
        [STATE_SUBJECTS[changed[0]]] if changed else [])


def small_model(widths):
    layers = [torch.nn.Linear(first, second) for first, second in zip(widths, widths[1:])]
    return torch.nn.Sequential(*layers, torch.nn.ReLU())


MODULE_CHANGES = ["eval_child", "freeze_weight", "resize_weight", "double_bias", "add_hook",
                  "replace_child_type", "nothing"]


def apply_change(model, change, index):
    layer = model[index]
    if change == "eval_child":
        layer.eval()
        return f"L['self']._modules['{index}'].training:"
    if change == "freeze_weight":
        layer.weight.requires_grad_(False)
        return f"L['self']._modules['{index}'].weight.requires_grad:"
    if change == "resize_weight":
        layer.weight = torch.nn.Parameter(torch.ones(layer.out_features + 1, layer.in_features))
        return f"L['self']._modules['{index}'].weight.size()[0]:"
    if change == "double_bias":
        layer.bias.data = layer.bias.data.double()
        return f"L['self']._modules['{index}'].bias.dtype:"
    if change == "add_hook":
        layer.register_forward_hook(lambda *args: None)
        return f"L['self']._modules['{index}']._forward_hooks.keys():"
    if change == "replace_child_type":
        model[index] = torch.nn.Identity()
        return f"type(L['self']._modules['{index}']):"
    return None


@given(st.lists(st.integers(1, 4), min_size=2, max_size=5), st.sampled_from(MODULE_CHANGES),
       st.data())
def test_module_changes_are_caught_and_named(widths, change, data):
    model = small_model(widths)
    index = data.draw(st.integers(0, len(widths) - 2))
    guard_set = GuardSet(install_for(model, LocalSource("self")))
    check = guard_set.compile()
    assert check({"self": model}, {})
    subject = apply_change(model, change, index)
    reasons = guard_set.failures({"self": model}, {})
    assert check({"self": model}, {}) == (subject is None)
    if subject is not None:
        assert reasons[0].startswith(subject), reasons


class Plain:
    pass


ATTRIBUTE_VALUES = st.one_of(st.integers(-2, 2), st.text(max_size=2), st.none(),
                             st.builds(Plain), st.lists(st.integers(), max_size=2))


@given(st.dictionaries(st.sampled_from("abcd"), ATTRIBUTE_VALUES, max_size=4),
       st.sampled_from("abcd"), st.one_of(st.just("delete"), ATTRIBUTE_VALUES))
def test_object_snapshot_holds_iff_instance_dict_unchanged(attributes, name, new_value):
    target = Plain()
    vars(target).update(attributes)
    guard_set = GuardSet([ObjectSnapshotGuard(X, ObjectSnapshot.of_object(target))])
    check = guard_set.compile()
    before = dict(vars(target))
    if new_value == "delete":
        vars(target).pop(name, None)
    else:
        setattr(target, name, new_value)
    after = vars(target)
    unchanged = list(before) == list(after) and all(
        before[key] is after[key] or (not isinstance(before[key], (Plain, list))
                                      and same_guarded(before[key], after[key]))
        for key in before)
    assert check({"x": target}, {}) == unchanged
    if not unchanged:
        reason = guard_set.failures({"x": target}, {})[0]
        assert reason.startswith(("L['x'].__dict__.keys():", f"L['x'].{name}:"))


@given(VALUES)
def test_identity_guard_accepts_only_the_same_object(spec):
    value = build(spec)
    assume(isinstance(value, (list, dict, torch.Tensor)))
    check = GuardSet([IdentityGuard(X, value)]).compile()
    assert check({"x": value}, {})
    assert not check({"x": build(spec)}, {})


@given(st.integers(1, 5))
def test_sets_die_with_identity_guarded_objects(count):
    targets = [Plain() for _ in range(count)]
    guard_set = GuardSet([IdentityGuard(AttrSource(X, f"t{index}"), target)
                          for index, target in enumerate(targets)])
    check = guard_set.compile()
    frame = {"x": Plain()}
    for index, target in enumerate(targets):
        setattr(frame["x"], f"t{index}", target)
    dropped = []
    guard_set.on_invalidate(dropped.append)
    assert check(frame, {})
    del frame, target
    targets.pop()
    gc.collect()
    assert dropped == [guard_set] and not guard_set.alive
    assert check({"x": None}, {}) is False
