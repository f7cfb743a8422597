"""Module training flags and snapshots of user objects: mutation since capture is caught."""
import gc

import torch

from guard_checking import holds, reason
from guards import (AttrSource, LocalSource, ModuleTrainingGuard, ObjectSnapshot,
                    ObjectSnapshotGuard)

SELF = LocalSource("self")


class Config:
    scale = 1.0

    def __init__(self):
        self.depth = 3
        self.name = "small"
        self.table = [1, 2]


def test_training_flag():
    module = torch.nn.Linear(2, 2)
    guard = ModuleTrainingGuard(SELF, True)
    assert holds(guard, {"self": module})
    module.eval()
    assert reason(guard, {"self": module}) == (
        "L['self'].training: expected True (train mode), got False (eval mode)")
    assert holds(ModuleTrainingGuard(SELF, False), {"self": module})
    assert guard.describe() == "L['self'].training is True"
    module.training = 1  # not a bool: rejected, and the reason shows the value as it is
    assert reason(guard, {"self": module}) == (
        "L['self'].training: expected True (train mode), got 1")


def test_snapshot_catches_value_identity_and_absence_changes():
    config = Config()
    guard = ObjectSnapshotGuard.of(SELF, config, attributes=["depth", "name", "table", "scale"])
    frame = {"self": config}
    assert holds(guard, frame)
    config.depth = 4
    assert reason(guard, frame) == "L['self'].depth: expected 3, got 4"
    config.depth = 3
    config.table = [1, 2]
    assert reason(guard, frame).startswith(
        "L['self'].table: expected the same object as at capture (a list object), got a "
        "different object")
    guard = ObjectSnapshotGuard.of(SELF, config, attributes=["table", "scale"])
    assert holds(guard, frame)
    config.scale = 2.0
    assert reason(guard, frame) == "L['self'].scale: expected absent, got 2.0"
    del config.table
    assert reason(guard, frame) == (
        "L['self'].table: expected the same object as at capture (a list object), got absent")


def test_snapshot_of_whole_object_sees_new_attributes():
    config = Config()
    guard = ObjectSnapshotGuard(SELF, ObjectSnapshot.of_object(config))
    assert holds(guard, {"self": config})
    config.extra = 1
    assert reason(guard, {"self": config}) == (
        "L['self'].__dict__.keys(): expected ['depth', 'name', 'table'], "
        "got ['depth', 'name', 'table', 'extra']")


def test_snapshot_paths_reach_into_module_registries():
    module = torch.nn.Linear(2, 2)
    guard = ObjectSnapshotGuard.of(SELF, module, attributes=[("_parameters", "weight")],
                                   key_sets=["_forward_hooks", "_parameters"])
    assert holds(guard, {"self": module})
    assert "L['self']._parameters.keys() == ['weight', 'bias']" in guard.describe()
    captured_weight = module.weight
    module.weight = torch.nn.Parameter(torch.ones(2, 2))
    assert captured_weight is not module.weight
    assert reason(guard, {"self": module}).startswith(
        "L['self'].weight: expected the same object as at capture (Parameter(size=[2, 2], "
        "dtype=torch.float32, device=cpu)), got a different object")


def test_module_hook_added_after_capture():
    module = torch.nn.Linear(2, 2)
    guard = ObjectSnapshotGuard(SELF, ObjectSnapshot.of_module_hooks(module))
    assert holds(guard, {"self": module})
    handle = module.register_forward_hook(lambda *args: None)
    assert reason(guard, {"self": module}) == (
        f"L['self']._forward_hooks.keys(): expected [], got [{handle.id}]")
    handle.remove()
    assert holds(guard, {"self": module})
    assert guard.describe().startswith(
        "L['self'] unchanged since capture: L['self']._forward_pre_hooks empty; ")


def test_snapshot_dies_when_an_identity_entry_dies():
    config = Config()
    holder = Config()
    holder.child = config
    guard = ObjectSnapshotGuard.of(SELF, holder, attributes=["child"])
    died = []
    guard.watch(died.append)
    del holder.child, config
    gc.collect()
    assert died == [guard]
    assert reason(guard, {"self": holder}) == (
        "L['self'].child: expected the same object as at capture (a Config object), got absent")


def test_snapshot_equality_follows_entries():
    config = Config()
    first = ObjectSnapshotGuard.of(SELF, config, attributes=["depth", "table"])
    second = ObjectSnapshotGuard.of(SELF, config, attributes=["depth", "table"])
    assert first == second and hash(first) == hash(second)
    assert first != ObjectSnapshotGuard.of(AttrSource(SELF, "x"), config, attributes=["depth"])


def test_membership_snapshot_names_what_changed():
    config = Config()
    absent = ObjectSnapshotGuard(SELF, ObjectSnapshot.membership("scale", False))
    present = ObjectSnapshotGuard(SELF, ObjectSnapshot.membership("depth", True))
    frame = {"self": config}
    assert holds(absent, frame) and holds(present, frame)
    assert absent.describe() == "L['self'] unchanged since capture: L['self'].scale absent"
    config.scale = 3.0  # shadows the class attribute read at capture
    assert reason(absent, frame) == "L['self'].scale: expected absent, got 3.0"
    del config.depth
    assert reason(present, frame) == "L['self'].depth: expected present, got absent"
