"""A generated wrapper made only of allocations and kernel launches, run as one native call
(stage: run).

Input: a wrapper's source and globals (`codegen/wrapper.py`). Output: `plan_of(source,
globals)`, the wrapper's work as data, or None; `runner(plan, result)`, a callable running it
through `native.cpp`'s `run_program` (`functools.partial` over a capsule: no Python frame, line
or argument list per call), or None.

Only wrappers whose `call_with_argument_list` consists of these lines, each with a literal
layout and names bound in its globals, have a plan (a 64x64 `neg` is one):
    arg0, arg1, = arguments            arguments.clear()
    buf0 = empty_strided((64, 64), (64, 1), torch.float32, device_cpu)
    status = launch(entry10, arg0, buf0)      if status: / kernel_error(status)
    del arg0, arg1                     (inputs only: an intermediate freed early is not run)
    return [buf0, buf1]                (buffers it allocated, each once; None where an alias
                                       is rebuilt outside: `owning_plan` may fill it)
The program does just that: allocates every buffer (`at::empty_strided`, as the native
`empty_strided`), launches the entries in order with the data pointers, calls `kernel_error`
with a non-zero status, and returns the buffers as a list, a tuple or the one output
(`result`: what the caller would make of the list). Anything else (library calls, fallbacks,
memory reuse, views, symbolic sizes, stride checks) keeps the Python wrapper. The compiled
graph's `report.source` stays the Python wrapper: the program is its lines run in C++.
"""
from __future__ import annotations

import ast
import functools
import re
import weakref
from typing import Callable, Optional

import torch

from inductor.runtime import native
from inductor.runtime.output_aliases import OWN, alias_kinds

_UNPACK = re.compile(r"    ((?:\w+, )+)= arguments")
_ALLOCATE = re.compile(r"    (\w+) = empty_strided\((\([\d, ]*\)), (\([\d, ]*\)), "
                       r"torch\.(\w+), (\w+)\)")
_LAUNCH = re.compile(r"    status = launch\((\w+)((?:, \w+)*)\)")
_DELETE = re.compile(r"    del (\w+(?:, \w+)*)")
_RETURN = re.compile(r"    return \[(\w+(?:, \w+)*)\]")     # None: an alias rebuilt outside

LIST, TUPLE, ONE = 0, 1, 2


class _Reader:
    """Reads the wrapper's lines into allocations, launches and outputs."""

    def __init__(self, namespace: dict):
        self.namespace = namespace
        self.inputs: list = []
        self.buffers: list = []
        self.allocations: list = []
        self.launches: list = []
        self.outputs: Optional[list] = None

    def operand(self, name: str) -> Optional[int]:
        if name in self.inputs:
            return self.inputs.index(name)
        if name in self.buffers:
            return -(self.buffers.index(name) + 1)
        return None

    def allocation(self, match) -> bool:
        name, sizes, strides, dtype, device = match.groups()
        dtype = getattr(torch, dtype, None)
        device = self.namespace.get(device)
        if name in self.buffers or name in self.inputs or \
                not isinstance(dtype, torch.dtype) or not isinstance(device, torch.device):
            return False
        self.buffers.append(name)
        self.allocations.append((ast.literal_eval(sizes), ast.literal_eval(strides), dtype,
                                 device))
        return True

    def launch(self, match) -> bool:
        address = self.namespace.get(match.group(1))
        operands = [self.operand(name) for name in match.group(2).split(", ")[1:]]
        if not isinstance(address, int) or None in operands:
            return False
        self.launches.append((address, tuple(operands)))
        return True

    def line(self, text: str, following: str) -> int:
        """How many lines `text` (and `following`) account for; 0: not a program line."""
        if text == "    arguments.clear()":
            return 1
        if text == "    if status:":
            return 2 if following == "        kernel_error(status)" else 0
        for pattern, read in ((_ALLOCATE, self.allocation), (_LAUNCH, self.launch)):
            match = pattern.fullmatch(text)
            if match is not None:
                return 1 if read(match) else 0
        match = _DELETE.fullmatch(text)
        if match is not None:   # only inputs: the program frees buffers when it returns
            return 1 if all(name in self.inputs for name in match.group(1).split(", ")) else 0
        match = _RETURN.fullmatch(text)
        if match is not None and self.outputs is None:
            names = [name for name in match.group(1).split(", ") if name != "None"]
            if len(set(names)) == len(names) and all(name in self.buffers for name in names):
                self.outputs = [None if name == "None" else self.buffers.index(name)
                                for name in match.group(1).split(", ")]
                return 1
        return 0


def plan_of(source: str, namespace: dict) -> Optional[tuple]:
    """(inputs, allocations, launches, outputs, kernel_error) of a wrapper made only of the
    lines the module docstring lists, else None."""
    if native.programs() is None or namespace.get("empty_strided") is not native.empty_strided():
        return None     # the program allocates as the native `empty_strided` does
    lines = source.split("\n\n\n")[0].split("\n")
    if lines[0] != "def call_with_argument_list(arguments):":
        return None
    reader = _Reader(namespace)
    position = 1
    if len(lines) > 1 and _UNPACK.fullmatch(lines[1]):
        reader.inputs = _UNPACK.fullmatch(lines[1]).group(1).split(", ")[:-1]
        position = 2
    while position < len(lines):
        following = lines[position + 1] if position + 1 < len(lines) else ""
        taken = reader.line(lines[position], following)
        if not taken:
            return None
        position += taken
    if reader.outputs is None or not reader.launches:
        return None
    return (len(reader.inputs), tuple(reader.allocations), tuple(reader.launches),
            tuple(reader.outputs), namespace["kernel_error"])


def _extent(sizes: tuple, strides: tuple) -> int:
    """Elements of the storage `at::empty_strided` allocates for a layout."""
    if any(size == 0 for size in sizes):
        return 0
    return 1 + sum((size - 1) * stride for size, stride in zip(sizes, strides))


def owning_plan(plan: Optional[tuple], aliases: list) -> Optional[tuple]:
    """`plan` (whose outputs are the wrapper's: None where an alias is rebuilt outside, then
    the hidden bases) returning each alias as its base buffer allocated with the alias's
    geometry, where every alias is a tensor of its own over a hidden base
    (`output_aliases.OWN`) at offset 0 whose storage is the base's size: the same memory
    (kernels address it by pointer), no view, a version counter at 0, as eager's fresh
    output (`torch.stack`). Else None."""
    if plan is None:
        return None
    inputs, allocations, launches, outputs, kernel_error = plan
    count = len(aliases)
    kinds = alias_kinds(aliases, count)
    allocations, result = list(allocations), []
    for position, alias in enumerate(aliases):
        if alias is None:
            result.append(outputs[position])
            continue
        if kinds[position] != OWN or alias.storage_offset != 0 or \
                alias.base_index >= len(outputs) or outputs[alias.base_index] is None:
            return None
        buffer = outputs[alias.base_index]
        sizes, strides, dtype, device = allocations[buffer]
        size, stride = tuple(alias.size), tuple(alias.stride)
        if not all(isinstance(value, int) for value in size + stride) or \
                _extent(size, stride) != _extent(sizes, strides):
            return None
        allocations[buffer] = (size, stride, dtype, device)
        result.append(buffer)
    if None in result or len(set(result)) != len(result):
        return None
    return inputs, tuple(allocations), launches, tuple(result), kernel_error


def runner(plan: Optional[tuple], result: int) -> Optional[Callable]:
    """`run(*inputs)` returning the plan's outputs as a list (LIST), a tuple (TUPLE) or the one
    output (ONE), or None without a plan or the extension."""
    functions = native.programs()
    if plan is None or functions is None or None in plan[3] or \
            (result == ONE and len(plan[3]) != 1):
        return None
    make, run = functions
    inputs, allocations, launches, outputs, kernel_error = plan
    program = functools.partial(run, make(inputs, allocations, launches, outputs, result,
                                          kernel_error))
    # a copy is the program itself (it never changes): a capsule cannot be deep-copied, and a
    # compiled graph could be before (its run was a function)
    program.__deepcopy__ = lambda memo, itself=weakref.ref(program): itself()
    return program
