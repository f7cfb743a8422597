"""Sources: rendering, generated expressions, fetching, equality and hashing."""
import types

import pytest
import torch

from guards.sources import (AttrSource, BufferSource, ClosureCellSource, ConstantSource,
                            DictItemSource, GlobalModuleSource, GlobalSource, GlobalStateSource,
                            ItemSource, LocalSource, ParamSource, SubmoduleSource, TypeSource)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)
        self.register_buffer("scale", torch.ones(2))
        self.layers = torch.nn.Sequential(torch.nn.Linear(2, 2))


def make_closure():
    captured = 41

    def inner():
        return captured + 1

    return inner


@pytest.fixture
def frame():
    block = Block()
    L = {"self": block, "xs": [10, (20, 30)], "d": {"k": 5, 3: "three"}, "x": torch.ones(2),
         "fn": make_closure(), "class": "keyword-named local"}
    G = {"cfg": types.SimpleNamespace(flag=True, **{"odd name": 7}), "torch": torch}
    return L, G


CASES = [
    (LocalSource("x"), "L['x']", "L['x']"),
    (GlobalSource("cfg"), "G['cfg']", "G['cfg']"),
    (GlobalModuleSource("torch"), "G['torch']", "G['torch']"),
    (AttrSource(GlobalSource("cfg"), "flag"), "G['cfg'].flag", "G['cfg'].flag"),
    (AttrSource(GlobalSource("cfg"), "odd name"), "getattr(G['cfg'], 'odd name')",
     "getattr(G['cfg'], 'odd name')"),
    (ItemSource(LocalSource("xs"), 0), "L['xs'][0]", "L['xs'][0]"),
    (ItemSource(ItemSource(LocalSource("xs"), 1), -1), "L['xs'][1][-1]", "L['xs'][1][-1]"),
    (DictItemSource(LocalSource("d"), "k"), "L['d']['k']", "L['d']['k']"),
    (DictItemSource(LocalSource("d"), 3), "L['d'][3]", "L['d'][3]"),
    (TypeSource(LocalSource("x")), "type(L['x'])", "type(L['x'])"),
    (SubmoduleSource(LocalSource("self"), "lin"), "L['self'].lin", "L['self']._modules['lin']"),
    (ParamSource(SubmoduleSource(LocalSource("self"), "lin"), "weight"), "L['self'].lin.weight",
     "L['self']._modules['lin']._parameters['weight']"),
    (BufferSource(LocalSource("self"), "scale"), "L['self'].scale",
     "L['self']._buffers['scale']"),
    (ParamSource(SubmoduleSource(SubmoduleSource(LocalSource("self"), "layers"), "0"), "bias"),
     "L['self'].layers._modules['0'].bias",
     "L['self']._modules['layers']._modules['0']._parameters['bias']"),
    (ClosureCellSource(LocalSource("fn"), 0), "L['fn'].__closure__[0].cell_contents",
     "L['fn'].__closure__[0].cell_contents"),
    (LocalSource("class"), "L['class']", "L['class']"),
]


@pytest.mark.parametrize("source, name, expr", CASES, ids=[case[1] for case in CASES])
def test_name_expr_and_fetch_agree(frame, source, name, expr):
    L, G = frame
    assert source.name() == name
    assert str(source) == name
    assert source.expr() == expr
    fetched = source.fetch(L, G)
    assert eval(expr, {}, {"L": L, "G": G}) is fetched
    # The readable name is also valid Python that reaches the same object.
    assert eval(name, {}, {"L": L, "G": G}) is fetched


def test_attribute_chain_renders_like_user_code(frame):
    L, G = frame
    source = AttrSource(AttrSource(LocalSource("self"), "lin"), "weight")
    assert source.name() == "L['self'].lin.weight"
    assert source.fetch(L, G) is L["self"].lin.weight
    assert source.root() == LocalSource("self")
    assert source.chain()[0] == LocalSource("self") and source.chain()[-1] is source


def test_sources_are_immutable_hashable_values():
    first = ParamSource(SubmoduleSource(LocalSource("self"), "lin"), "weight")
    second = ParamSource(SubmoduleSource(LocalSource("self"), "lin"), "weight")
    assert first == second and hash(first) == hash(second)
    assert first != BufferSource(SubmoduleSource(LocalSource("self"), "lin"), "weight")
    assert LocalSource("x") != GlobalSource("x")
    assert GlobalSource("torch") != GlobalModuleSource("torch")
    assert len({first, second, LocalSource("x"), LocalSource("x")}) == 2
    with pytest.raises(Exception):
        first.member = "bias"


def test_fetch_raises_when_missing(frame):
    L, G = frame
    with pytest.raises(KeyError):
        LocalSource("missing").fetch(L, G)
    with pytest.raises(AttributeError):
        AttrSource(LocalSource("x"), "no_such_attribute").fetch(L, G)
    with pytest.raises(IndexError):
        ItemSource(LocalSource("xs"), 5).fetch(L, G)


def test_invalid_keys_and_indices_are_refused():
    with pytest.raises(TypeError, match="must be an int"):
        ItemSource(LocalSource("xs"), "0")
    with pytest.raises(TypeError, match="source key"):
        DictItemSource(LocalSource("d"), (1, 2))
    with pytest.raises(TypeError, match="source key"):
        DictItemSource(LocalSource("d"), float("nan"))


def test_constant_and_global_state_sources():
    marker = object()
    source = ConstantSource("marker", marker)
    assert source.name() == "marker"
    assert source.fetch({}, {}) is marker
    assert source == ConstantSource("marker", None)
    state_source = GlobalStateSource()
    assert state_source.name() == "torch global state"
    assert state_source.fetch({}, {}).grad_enabled == torch.is_grad_enabled()
