"""guards: sources, guard kinds and compiled cache checks (stage: guard; input: the facts a trace
specialised on; output: one fast check callable per compiled entry and readable failure reasons).

A leaf package: it imports nothing from `dynamo` or `inductor`. Data flows
`install_for(value, source) -> [Guard] -> GuardSet -> GuardSet.compile() -> check(L, G)`.
"""
import importlib

# Public names load on first use (PEP 562), so that `guards.environment`, which `dynamo` imports
# at its own import, brings no torch with it (`import dynamo` stays torch-free).
_PUBLIC = {
    "guards.guard_set": ("Check", "GuardSet"),
    "guards.install": ("UnguardableValue", "install_for"),
    "guards.kinds": ("AliasGuard", "ConstantGuard", "ContainsGuard", "DictKeysGuard",
                     "GlobalStateGuard", "Guard", "HasAttrGuard", "IdentityFacts",
                     "IdentityGuard", "LengthGuard", "ModuleTrainingGuard", "NoneGuard",
                     "ObjectSnapshot", "ObjectSnapshotGuard", "PartitionGuard",
                     "TensorMatchGuard", "TensorProperties", "TorchState", "TruthGuard",
                     "TypeGuard", "is_constant"),
    "guards.sources": ("AttrSource", "BufferSource", "CallSource", "ClosureCellSource",
                       "ConstantSource", "DictItemSource", "GlobalModuleSource", "GlobalSource",
                       "GlobalsSource", "GlobalStateSource", "ItemSource", "LocalSource",
                       "MethodCallSource", "ObjectSource", "ParamSource", "Source",
                       "SubmoduleSource", "TypeSource"),
}
_HOME = {name: module for module, names in _PUBLIC.items() for name in names}


def __getattr__(name):
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'guards' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_HOME))


__all__ = [
    "Check", "GuardSet", "UnguardableValue", "install_for",
    "Guard", "AliasGuard", "ConstantGuard", "ContainsGuard", "DictKeysGuard", "GlobalStateGuard",
    "HasAttrGuard", "IdentityFacts", "IdentityGuard", "LengthGuard", "ModuleTrainingGuard",
    "NoneGuard", "ObjectSnapshot", "ObjectSnapshotGuard", "PartitionGuard", "TensorMatchGuard",
    "TensorProperties", "TorchState", "TruthGuard", "TypeGuard", "is_constant",
    "Source", "AttrSource", "BufferSource", "CallSource", "ClosureCellSource", "ConstantSource",
    "DictItemSource", "GlobalModuleSource", "GlobalSource", "GlobalsSource", "GlobalStateSource",
    "ItemSource", "LocalSource", "MethodCallSource", "ObjectSource", "ParamSource",
    "SubmoduleSource", "TypeSource",
]
