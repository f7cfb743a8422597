"""Guard kinds (stage: guard; input: a source and what was seen at capture; output: check code,
failure reasons and descriptions). See `base.Guard` for the protocol every kind follows."""
from guards.kinds.aliasing import IdentityFacts, PartitionGuard
from guards.kinds.base import (RANK_GLOBAL_STATE, RANK_OBJECT, RANK_TENSOR, RANK_TYPE, RANK_VALUE,
                               Guard)
from guards.kinds.constants import ConstantGuard, constants_match, is_constant
from guards.kinds.objects import (ModuleTrainingGuard, ObjectSnapshot, ObjectSnapshotGuard,
                                  SnapshotEntry)
from guards.kinds.shapes import ShapeGuard, SizeRead
from guards.kinds.state import GlobalStateGuard, TorchState
from guards.kinds.tensors import TensorMatchGuard, TensorProperties
from guards.kinds.values import (AliasGuard, ContainsGuard, DictKeysGuard, HasAttrGuard,
                                 HeldObject, IdentityGuard, LengthGuard, NoneGuard, TruthGuard,
                                 TypeGuard)

__all__ = [
    "Guard", "RANK_TYPE", "RANK_VALUE", "RANK_OBJECT", "RANK_TENSOR", "RANK_GLOBAL_STATE",
    "ConstantGuard", "constants_match", "is_constant", "ModuleTrainingGuard", "ObjectSnapshot",
    "ObjectSnapshotGuard", "SnapshotEntry", "GlobalStateGuard", "TorchState", "TensorMatchGuard",
    "TensorProperties", "DictKeysGuard", "HasAttrGuard", "HeldObject", "IdentityGuard",
    "LengthGuard", "NoneGuard", "TruthGuard", "TypeGuard", "AliasGuard", "ContainsGuard",
    "IdentityFacts", "PartitionGuard", "ShapeGuard", "SizeRead",
]
