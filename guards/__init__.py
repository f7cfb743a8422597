"""guards: sources, guard kinds and compiled cache checks (stage: guard; input: the facts a trace
specialised on; output: one fast check callable per compiled entry and readable failure reasons).

A leaf package: it imports nothing from `dynamo` or `inductor`. Data flows
`install_for(value, source) -> [Guard] -> GuardSet -> GuardSet.compile() -> check(L, G)`.
"""
from guards.guard_set import Check, GuardSet
from guards.install import UnguardableValue, install_for
from guards.kinds import (AliasGuard, ConstantGuard, ContainsGuard, DictKeysGuard,
                          GlobalStateGuard, Guard, HasAttrGuard, IdentityFacts, IdentityGuard,
                          LengthGuard, ModuleTrainingGuard, NoneGuard, ObjectSnapshot,
                          ObjectSnapshotGuard, PartitionGuard, TensorMatchGuard, TensorProperties,
                          TorchState, TruthGuard, TypeGuard, is_constant)
from guards.sources import (AttrSource, BufferSource, CallSource, ClosureCellSource,
                            ConstantSource, DictItemSource, GlobalModuleSource, GlobalSource,
                            GlobalsSource, GlobalStateSource, ItemSource, LocalSource,
                            MethodCallSource, ObjectSource, ParamSource, Source, SubmoduleSource,
                            TypeSource)

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
