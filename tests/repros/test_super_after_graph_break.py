"""Zero-argument super() after a graph break: CPython reads `self` from the frame's first
local slot, which a resumed region must keep (it once held the region's state instead, and
super() raised "obj must be an instance or subtype of type" / "super(): arg[0] deleted")."""
import torch

from tests.capture.differential import check


class Registry(dict):
    def put(self, name, value):
        super().__setitem__(name, value)
        print("stored", name)
        super().__setattr__(name, value)
        return value * 2


class Block(torch.nn.Module):
    def forward(self, x):
        x = x + 1
        print("halfway")
        return super().__getattr__("training") if False else x * 2


def test_super_in_a_dict_subclass_method_after_a_break():
    check(Registry.put, Registry(), "x", torch.ones(3), graphs=None, breaks=None)


def test_super_in_a_module_method_after_a_break():
    check(Block(), torch.ones(3), graphs=None, breaks=None)


def test_super_in_a_loop_body_region():
    class Totals(dict):
        def add_all(self, values):
            for index, value in enumerate(values):
                print("adding", index)
                super().__setitem__(index, value * 2)
            return len(self)
    check(Totals.add_all, Totals(), [torch.ones(2), torch.zeros(2)], graphs=None, breaks=None)
