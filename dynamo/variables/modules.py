"""`nn.Module`s and Python modules as values.

A module's parameters and buffers become graph inputs (through `ParamSource`/`BufferSource`),
so two instances of one class share one graph; children are modules again; `training` is
guarded; calling a module inlines its `forward` (after checking it has no hooks). Containers
(`Sequential`, `ModuleList`, `ModuleDict`, `ParameterList/Dict`) index and iterate directly.
"""
from __future__ import annotations

import types
from typing import Any

import torch

from dynamo.breaks import UNSUPPORTED_CALL, UNSUPPORTED_OBJECT, Unsupported
from dynamo.variables.base import NotConstant, Variable, variable
from dynamo.variables.constant import ConstantVariable
from guards import ConstantGuard, ModuleTrainingGuard, ObjectSnapshot, ObjectSnapshotGuard
from guards.sources import AttrSource, BufferSource, CallSource, ParamSource, SubmoduleSource
from dynamo.variables.attributes import (class_lookup, generic_hasattr, guard_class_attribute,
                                         guard_membership, preexisting_box)
from dynamo.variables.guarding import module_attribute_source
from dynamo.variables.objects import instance_getattr, lookup_dunder
from dynamo.variables.exceptions import python_error

_CONTAINERS = (torch.nn.Sequential, torch.nn.ModuleList, torch.nn.ModuleDict,
               torch.nn.ParameterList, torch.nn.ParameterDict)
_GLOBAL_HOOKS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                 "_global_backward_pre_hooks", "_global_forward_hooks_always_called")


@variable
class ModuleVariable(Variable):
    value: torch.nn.Module
    is_real: bool = True

    def python_type(self) -> type:
        return type(self.value)

    def describe(self) -> str:
        return self.source.name() if self.source is not None else \
            f"a {type(self.value).__name__} module"

    def as_constant(self) -> Any:
        raise NotConstant("a module")

    def getattr(self, tx, name: str) -> Variable:
        module = self.value
        box = tx.side_effects.box_for(module)
        if box is not None and name in box.contents:
            return box.contents[name]
        if name == "training":
            if self.source is not None:
                tx.guards.add(ModuleTrainingGuard(self.source, module.training))
            return ConstantVariable(module.training)
        registries = module.__dict__
        if name in registries.get("_parameters", {}):
            return self._member(tx, module._parameters[name], ParamSource, name)
        if name in registries.get("_buffers", {}):
            return self._member(tx, module._buffers[name], BufferSource, name)
        if name in registries.get("_modules", {}):
            return self._member(tx, module._modules[name], SubmoduleSource, name)
        return instance_getattr(tx, self, module, name, self.source)

    def _member(self, tx, value, source_kind, name: str) -> Variable:
        # a `None` member (a buffer registered as None, a missing bias) is guarded too
        return tx.wrap(value, None if self.source is None else source_kind(self.source, name))

    def has_attribute(self, tx, name: str) -> bool:
        box = tx.side_effects.box_for(self.value)
        if box is not None and name in box.contents:
            return True
        return generic_hasattr(type(self.value), name, None, self.value, tx, self.source)

    def attribute_box(self, tx):
        return preexisting_box(tx, self.value, self.source)

    def real_object(self) -> Any:
        return self.value

    def check_plain_attribute(self, tx, name: str, value: Variable) -> None:
        """Module.__setattr__ registers parameters, buffers and modules; we model only plain
        attributes."""
        registries = ("_parameters", "_buffers", "_modules")
        if any(name in self.value.__dict__.get(registry, {}) for registry in registries):
            current = self.getattr(tx, name)
            if current is value or (hasattr(current, "example") and
                                    getattr(value, "example", None) is current.example):
                return False  # `self.count += 1` stores the same tensor back
            raise Unsupported(UNSUPPORTED_OBJECT, f"reassigning module member {name!r}")
        if isinstance(value, ModuleVariable) or value.python_type() is torch.nn.Parameter:
            raise Unsupported(UNSUPPORTED_OBJECT, f"registering {name!r} on a module")
        return True

    # -- calling ---------------------------------------------------------------------------
    def call(self, tx, args, kwargs) -> Variable:
        module = self.value
        _check_no_global_hooks()
        # ... and none registered later: the check asks again (a global forward hook added
        # after the compile was ignored, the call's result not the hook's)
        tx.guards.add(ConstantGuard(CallSource(global_module_hooks_registered), False))
        hooks = ObjectSnapshot.of_module_hooks(module)
        if hooks.entries and any(getattr(module, entry, None) for entry in _hook_names()):
            raise Unsupported(UNSUPPORTED_CALL, f"calling {self.describe()}, which has hooks")
        if self.source is not None and hooks.entries:
            tx.guards.add(ObjectSnapshotGuard(self.source, hooks))
        forward = module.__dict__.get("forward")
        if forward is not None:
            patched = tx.wrap(forward, AttrSource(self.source, "forward") if self.source
                              else None)
            tx.pass_direct(self, patched)
            return patched.call(tx, args, kwargs)
        function = type(module).forward
        if not isinstance(function, types.FunctionType):
            raise Unsupported(UNSUPPORTED_CALL, f"{type(module).__name__}.forward is not a "
                              "Python function")
        guard_membership(tx, self.source, "forward", present=False)  # not patched on the module
        guard_class_attribute(tx, type(module), "forward", function)  # nor on its class
        tx.pass_direct(self, function)
        return tx.wrap(function, None).call(tx, [self, *args], kwargs)

    # -- containers ------------------------------------------------------------------------
    def iterate(self, tx) -> list[Variable]:
        module = self.value
        if isinstance(module, (torch.nn.Sequential, torch.nn.ModuleList)):
            return [self.getattr(tx, name) for name in module._modules]
        if isinstance(module, torch.nn.ModuleDict):
            return [ConstantVariable(name) for name in module._modules]
        if isinstance(module, torch.nn.ParameterList):
            return [self.getattr(tx, name) for name in module._parameters]
        if isinstance(module, torch.nn.ParameterDict):
            return [ConstantVariable(name) for name in module._parameters]
        method = lookup_dunder(tx, self, "__iter__")
        if method is None:
            raise Unsupported(UNSUPPORTED_OBJECT, f"iterating over {self.describe()}")
        return tx.iterate(method.call(tx, [], {}))

    def length(self) -> int:
        module = self.value
        if isinstance(module, (torch.nn.ParameterList, torch.nn.ParameterDict)):
            return len(module._parameters)
        return len(module._modules)

    def item(self, tx, index: Variable) -> Variable:
        module = self.value
        key = tx.constant(index, "a module container index")
        if isinstance(module, (torch.nn.ModuleDict, torch.nn.ParameterDict)):
            return self.getattr(tx, key)
        names = list(module._parameters if isinstance(module, torch.nn.ParameterList)
                     else module._modules)
        if isinstance(key, slice):
            if isinstance(module, torch.nn.ParameterList):
                raise Unsupported(UNSUPPORTED_OBJECT, "slicing a ParameterList")
            return ModuleSliceVariable(tuple(self.getattr(tx, name) for name in names[key]),
                                       type(module))
        try:
            return self.getattr(tx, names[key])
        except IndexError:
            raise python_error(IndexError, f"index {key} is out of range") \
                from None

    def is_container(self) -> bool:
        """A torch container whose indexing, length and iteration a subclass leaves as is."""
        kind = type(self.value)
        base = next((container for container in _CONTAINERS if issubclass(kind, container)),
                    None)
        return base is not None and all(class_lookup(kind, name) is class_lookup(base, name)
                                        for name in ("__getitem__", "__len__", "__iter__"))


@variable
class NewModuleVariable(ModuleVariable):
    """A stateless `torch.nn` module built during the trace (`construct._stateless_module`)
    from constant `arguments` (args, kwargs). Leaving the graph, it is built afresh."""

    arguments: tuple = ((), {})

    def describe(self) -> str:
        return f"a new {type(self.value).__name__} module"

    def rebuild(self, plan) -> str:
        existing = plan.rebuilt(id(self))
        if existing is not None:
            return existing
        args, kwargs = self.arguments
        kind = plan.bind(type(self.value), type(self.value).__name__)
        parts = [plan.constant(value) for value in args] + \
            [f"{name}={plan.constant(value)}" for name, value in kwargs.items()]
        return plan.remember(id(self), f"{kind}({', '.join(parts)})")

    def check_plain_attribute(self, tx, name: str, value: Variable) -> None:
        """Its attributes stay as built: the fresh object the glue builds would not have a
        changed one."""
        raise Unsupported(UNSUPPORTED_OBJECT, f"setting {name!r} on {self.describe()}")


@variable
class ModuleSliceVariable(Variable):
    """`sequential[1:3]`: a container built during the trace from existing modules."""

    modules: tuple
    container_type: type

    def python_type(self) -> type:
        return self.container_type

    def iterate(self, tx) -> list[Variable]:
        return list(self.modules)

    def item(self, tx, index: Variable) -> Variable:
        key = tx.constant(index, "a module container index")
        if isinstance(key, slice):
            return ModuleSliceVariable(self.modules[key], self.container_type)
        try:
            return self.modules[key]
        except IndexError:
            raise python_error(IndexError, f"index {key} is out of range") from None

    def call(self, tx, args, kwargs) -> Variable:
        if self.container_type is not torch.nn.Sequential:
            raise Unsupported(UNSUPPORTED_CALL, "calling a ModuleList")
        value = args[0]
        for module in self.modules:
            value = module.call(tx, [value], {})
        return value


def _hook_names():
    return ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
            "_state_dict_hooks", "_forward_hooks_with_kwargs")


def global_module_hooks_registered() -> bool:
    """Whether any global nn.Module hook (`register_module_forward_hook` and its kin) is
    registered: a traced module call runs none, so a trace is made and reused only while
    there are none."""
    registry = torch.nn.modules.module
    return any(getattr(registry, name, None) for name in _GLOBAL_HOOKS)


def _check_no_global_hooks() -> None:
    if global_module_hooks_registered():
        raise Unsupported(UNSUPPORTED_CALL, "global nn.Module hooks are registered")


@variable
class PythonModuleVariable(Variable):
    """An imported module (`torch`, `math`, `F`, a user module)."""

    value: types.ModuleType
    is_real: bool = True

    def python_type(self) -> type:
        return types.ModuleType

    def as_constant(self) -> Any:
        return self.value

    def describe(self) -> str:
        return f"module {self.value.__name__}"

    def getattr(self, tx, name: str) -> Variable:
        try:
            value = getattr(self.value, name)
        except AttributeError:
            raise Unsupported(UNSUPPORTED_OBJECT, f"module {self.value.__name__} has no "
                              f"attribute {name!r}") from None
        return tx.wrap(value, module_attribute_source(self.value, name, self.source))

    def has_attribute(self, tx, name: str) -> bool:
        return hasattr(self.value, name)
