"""The graph fuzzer's minimizer: a failing program shrinks to a short one failing alike.

Input: a `Program`, its seed, the failure signature to keep (`Failure.signature()`), and a
`check(program) -> set of signatures` (run in a worker process by the driver, so a crashing
candidate costs a worker, not the minimizer). Output: a smaller `Program` whose check still
reports the signature. Candidates, biggest cuts first: one output alone, an input returned
instead, fewer outputs, statements dropped (dead pure statements all at once), an operand cut
loose into a fresh contiguous input, inputs made contiguous and unaliased, plain values,
unused inputs dropped.
Each candidate must still run eagerly before it is checked.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Iterator

import torch

from tests.fuzz.graphs.program import Arg, Program, Root, rename

MUTATING_MARKS = ("_(", "_.", "setitem(", "training=True")   # "_.": aten.add_.Tensor(


def runs_eagerly(program: Program, seed: int) -> bool:
    """Whether the program traces and runs eagerly on its first call's inputs."""
    try:
        outputs = program.graph_module()(*program.inputs(0, seed))
    except Exception:  # noqa: BLE001 (an invalid candidate)
        return False
    return all(isinstance(value, torch.Tensor) for value in outputs)


def minimize(program: Program, seed: int, signature: str,
             check: Callable[[Program], set], budget: int = 300) -> Program:
    """Shrink `program` while `check` keeps reporting `signature` (at most `budget` checks)."""
    current = program
    checks = 0
    progress = True
    while progress and checks < budget:
        progress = False
        for candidate in candidates(current):
            if not runs_eagerly(candidate, seed):
                continue
            checks += 1
            if signature in check(candidate):
                current = candidate
                progress = True
                break
            if checks >= budget:
                break
    return current


def candidates(program: Program) -> Iterator[Program]:
    yield from _fewer_outputs(program)
    yield from _inputs_as_outputs(program)
    for prune in (_without_dead_code, _without_unused_inputs):
        pruned = prune(program)
        if pruned is not None:
            yield pruned
    yield from _fewer_statements(program)
    yield from _cut_operands(program)
    yield from _simpler_inputs(program)
    yield from _unused_inputs_one_by_one(program)


def _fewer_outputs(program: Program) -> Iterator[Program]:
    if len(program.outputs) <= 1:
        return
    for name in program.outputs:
        candidate = program.copy()
        candidate.outputs = [name]
        yield candidate
    for position in range(len(program.outputs)):
        candidate = program.copy()
        del candidate.outputs[position]
        yield candidate


def _inputs_as_outputs(program: Program) -> Iterator[Program]:
    """Return one input instead (a failure that shows in a mutated input then needs no
    statement producing an output)."""
    if all(name.startswith("a") for name in program.outputs):
        return
    used = [name for stmt in program.stmts for name in stmt.uses if name.startswith("a")]
    for name in dict.fromkeys(used):
        if program.outputs != [name]:
            candidate = program.copy()
            candidate.outputs = [name]
            yield candidate


def _mutates(code: str) -> bool:
    return any(mark in code for mark in MUTATING_MARKS)


def _without_dead_code(program: Program):
    """Drop pure statements none of whose definitions are read later or returned."""
    candidate = program.copy()
    needed = set(candidate.outputs)
    kept = []
    for stmt in reversed(candidate.stmts):
        if _mutates(stmt.code) or any(name in needed for name in stmt.defines):
            kept.append(stmt)
            needed.update(stmt.uses)
    kept.reverse()
    if len(kept) == len(candidate.stmts):
        return None
    candidate.stmts = kept
    return candidate


def _fewer_statements(program: Program) -> Iterator[Program]:
    for position in reversed(range(len(program.stmts))):
        candidate = program.copy()
        removed = candidate.stmts.pop(position)
        candidate.outputs = [name for name in candidate.outputs if name not in removed.defines]
        if candidate.outputs:
            yield candidate


def _cut_operands(program: Program) -> Iterator[Program]:
    """A statement reads a fresh input instead of an earlier statement's value."""
    values = _tensor_examples(program)
    for position, stmt in enumerate(program.stmts):
        for name in stmt.uses:
            if not name.startswith("v") or name not in values:
                continue
            example = values[name]
            candidate = program.copy()
            fresh = f"a{_next_arg_number(candidate)}"
            kind = "bool" if example.dtype == torch.bool else (
                "float" if example.is_floating_point() else "int")
            candidate.roots.append(Root(tuple(example.shape), str(example.dtype).replace(
                "torch.", ""), kind))
            candidate.args.append(Arg(fresh, len(candidate.roots) - 1))
            target = candidate.stmts[position]
            target.code = rename(target.code, name, fresh)
            target.uses = [fresh if used == name else used for used in target.uses]
            yield candidate


def _next_arg_number(program: Program) -> int:
    return 1 + max((int(arg.name[1:]) for arg in program.args), default=-1)


def _tensor_examples(program: Program) -> dict:
    """Eager values of every statement's definitions (by tracing-free execution)."""
    from tests.fuzz.graphs.program import namespace_for
    namespace = namespace_for(program.device)
    for arg, value in zip(program.args, program.inputs(0, 0)):
        namespace[arg.name] = value
    found = {}
    try:
        for stmt in program.stmts:
            exec(compile(stmt.code, "<minimize>", "exec"), namespace)
            for name in stmt.defines:
                if isinstance(namespace.get(name), torch.Tensor):
                    found[name] = namespace[name].detach().clone()
    except Exception:  # noqa: BLE001 (values after a failing statement are unknown)
        pass
    return found


def _simpler_inputs(program: Program) -> Iterator[Program]:
    shapes = {arg.name: tuple(value.shape) for arg, value in
              zip(program.args, program.inputs(0, 0))}
    for position, arg in enumerate(program.args):
        root = program.roots[arg.root]
        shared = sum(1 for other in program.args if other.root == arg.root) > 1
        if arg.derive != "r" or shared or tuple(root.shape) != shapes[arg.name]:
            candidate = program.copy()
            candidate.roots.append(dataclasses.replace(root, shape=shapes[arg.name]))
            candidate.args[position] = Arg(arg.name, len(candidate.roots) - 1)
            yield candidate
        if root.special or root.scale != 1.0:
            candidate = program.copy()
            candidate.roots[arg.root] = dataclasses.replace(root, special=False, scale=1.0)
            yield candidate


def _without_unused_inputs(program: Program):
    used = set(program.outputs)
    for stmt in program.stmts:
        used.update(stmt.uses)
    kept = [arg for arg in program.args if arg.name in used]
    if len(kept) == len(program.args):
        return None
    candidate = program.copy()
    candidate.args = [dataclasses.replace(arg) for arg in kept]
    roots_used = sorted({arg.root for arg in candidate.args})
    candidate.roots = [program.roots[index] for index in roots_used]
    for arg in candidate.args:
        arg.root = roots_used.index(arg.root)
    return candidate


def _unused_inputs_one_by_one(program: Program) -> Iterator[Program]:
    """Each unused input dropped alone (dropping all of them may lose the aliasing a
    failure needs)."""
    used = set(program.outputs)
    for stmt in program.stmts:
        used.update(stmt.uses)
    for position, arg in enumerate(program.args):
        if arg.name in used:
            continue
        candidate = program.copy()
        del candidate.args[position]
        yield candidate
