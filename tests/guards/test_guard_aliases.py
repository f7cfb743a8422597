"""Alias guards: an object the trace reached through two sources is guarded once as `second is
first`, and every other guard reads it through the first (guards/kinds/values.py AliasGuard,
guards/guard_set.py). Checks that the rewriting reads shared attributes once, that a frame whose
sources stop naming one object is rejected (and recompiled, with eager's result), and that the
slow path explains it."""
import torch

import dynamo
from guards import AliasGuard, AttrSource, ConstantGuard, GuardSet, LocalSource, TypeGuard


class Settings:
    """A configuration object with a Python `__getattribute__`, as transformers' have."""

    def __init__(self, scale: float, shift: float) -> None:
        self.scale = scale
        self.shift = shift

    def __getattribute__(self, name):
        return object.__getattribute__(self, name)


class Layer(torch.nn.Module):
    def __init__(self, settings: Settings) -> None:
        super().__init__()
        self.settings = settings

    def forward(self, x):
        return x * self.settings.scale + self.settings.shift


class Stack(torch.nn.Module):
    def __init__(self, settings: Settings, depth: int = 6) -> None:
        super().__init__()
        self.settings = settings
        self.layers = torch.nn.ModuleList(Layer(settings) for _ in range(depth))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x + self.settings.scale


SELF = LocalSource("self")


def test_guards_through_an_alias_are_read_through_the_first_source():
    first = AttrSource(SELF, "settings")
    second = AttrSource(AttrSource(SELF, "layer"), "settings")
    guards = [TypeGuard(first, Settings), ConstantGuard(AttrSource(first, "scale"), 2.0),
              TypeGuard(second, Settings), AliasGuard(second, first),
              ConstantGuard(AttrSource(second, "scale"), 2.0),
              ConstantGuard(AttrSource(second, "shift"), 1.0)]
    ordered = GuardSet(guards).ordered()
    described = [guard.describe() for guard in ordered]
    assert "L['self'].layer.settings is L['self'].settings" in described
    constants = [guard.source.name() for guard in ordered if isinstance(guard, ConstantGuard)]
    assert constants == ["L['self'].settings.scale", "L['self'].settings.shift"]
    assert sum(isinstance(guard, TypeGuard) for guard in ordered) == 1


def test_alias_check_rejects_sources_that_name_different_objects():
    first = AttrSource(SELF, "settings")
    second = AttrSource(AttrSource(SELF, "layer"), "settings")
    guard_set = GuardSet([TypeGuard(first, Settings), AliasGuard(second, first),
                          ConstantGuard(AttrSource(second, "scale"), 2.0)])
    check = guard_set.compile()

    class Owner:
        pass
    shared = Settings(2.0, 1.0)
    owner, inner = Owner(), Owner()
    owner.settings, owner.layer, inner.settings = shared, inner, shared
    assert check({"self": owner}, {})
    inner.settings = Settings(2.0, 1.0)       # equal values, another object: rejected
    assert not check({"self": owner}, {})
    assert guard_set.failures({"self": owner}, {}) == [
        "L['self'].layer.settings: expected the object L['self'].settings names, got a "
        "different object (a Settings object)"]


def test_shared_configuration_is_read_once_per_check_and_changes_recompile():
    settings = Settings(2.0, 1.0)
    model = Stack(settings)
    compiled = dynamo.jit(model)
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), model(x))
    [record] = [record for record in compiled._framejit_driver.records
                if record.graph is not None]
    # each attribute guarded once, through the first source met (layer 0's), not once per
    # layer; the other five layers' and the stack's own reference are aliases of it
    first = "L['self'].layers._modules['0'].settings"
    values = [text for text in record.guards if text.endswith(("== 2.0", "== 1.0"))]
    assert sorted(values) == [f"{first}.scale == 2.0", f"{first}.shift == 1.0"], values
    aliases = [text for text in record.guards if text.endswith(f" is {first}")]
    assert len(aliases) == 6, record.guards
    # a layer given its own settings (other values): the alias guard rejects, eager's result
    model.layers[3].settings = Settings(3.0, -1.0)
    torch.testing.assert_close(compiled(x), model(x))
    # the same values in another object still recompile rather than run a stale graph
    model.layers[3].settings = Settings(2.0, 1.0)
    torch.testing.assert_close(compiled(x), model(x))
    settings.shift = 5.0
    torch.testing.assert_close(compiled(x), model(x))


def test_alias_check_runs_in_the_native_program_and_agrees_with_python():
    """`second is first` between two values the native program reads is a native step
    (no Python line left), answering as the Python condition does."""
    import pytest

    from guards import native
    if not native.enabled() or native.load() is None:
        pytest.skip("native guard programs unavailable")
    first = AttrSource(SELF, "settings")
    second = AttrSource(AttrSource(SELF, "layer"), "settings")
    guards = [TypeGuard(first, Settings), AliasGuard(second, first)]
    native_check = GuardSet(guards).compile()
    native.set_enabled(False)
    try:
        python_check = GuardSet(guards).compile()
    finally:
        native.set_enabled(True)
    body = [line.strip() for line in native_check.source_text.splitlines()[2:-3]
            if line.strip() and not line.strip().startswith("#")]
    assert body == ["if native_program(L, G) is None:", "return False"], body

    class Owner:
        pass
    shared = Settings(2.0, 1.0)
    owner, inner = Owner(), Owner()
    owner.settings, owner.layer, inner.settings = shared, inner, shared
    for expected in (True, False):
        assert native_check({"self": owner}, {}) is expected
        assert python_check({"self": owner}, {}) is expected
        inner.settings = Settings(2.0, 1.0)
