"""Native guard programs (stage: guard; input: the reads and checks a `CheckWriter` hands over;
output: a `GuardProgram` from the native module, and the same steps as readable lines).

A check of a module-heavy frame is mostly reads of attributes and dict items (`self._modules[
'encoder']`) and pointer comparisons (`type(x) is Linear`, `x.training is False`). Interpreted,
each costs ~20 ns (narrow BERT: 4,300 lines, 90 us per call); as steps of a native program,
a few. The program reads into registers; the writer exports the registers that the remaining
Python conditions use, and the check unpacks them (see `guards.codegen`).

Step tuples: (operation, target register, source register, operand, number, tensor registers).
"""
from __future__ import annotations

from typing import Any, Optional

(LOCAL, GLOBAL, ATTRIBUTE, ITEM, TYPE_OF, TYPE_IS, IDENTITY, IS, IS_NOT, LENGTH, EQUAL, FLOAT,
 TENSORS, FALSY, KEYS, CONSTANT, SAME, CONTAINS, FALSY_ITEMS, TYPE_ID, WEAK, PARTITION,
 GLOBALS, SIZES, STATE) = range(25)

BY_OBJECT, BY_STORAGE = 0, 1
"""What a PARTITION step groups registers by: the object itself, or the tensor's storage."""

EQUAL_TYPES = (int, str, bytes)
"""Constant types whose equality the program tests with `==` after an exact type check (their
`__eq__` cannot run user code)."""


class ProgramBuilder:
    """Collects the steps of one `GuardProgram` and a line of text for each."""

    def __init__(self, module: Any) -> None:
        self.module = module
        self.steps: list[tuple] = []
        self.lines: list[str] = []
        self.register_count = 0
        self.exports: list[int] = []
        self.specs: list[tuple] = []

    def read(self, operation: int, source: int, operand: Any, text: str) -> int:
        """A step reading a value into a new register; returns the register."""
        target = self.register_count
        self.register_count += 1
        self.steps.append((operation, target, source, operand, 0, ()))
        self.lines.append(text)
        return target

    def check(self, operation: int, source: int, text: str, operand: Any = None,
              number: int = 0) -> None:
        """A step that must hold."""
        self.steps.append((operation, -1, source, operand, number, ()))
        self.lines.append(text)

    def same(self, source: int, other: int, text: str) -> None:
        """A step that holds when two registers hold one object."""
        self.steps.append((SAME, -1, source, None, 0, (other,)))
        self.lines.append(text)

    def partition(self, registers: list[int], labels: tuple, by: int, text: str) -> None:
        """A step that holds when registers are one object (`BY_OBJECT`) or share one storage
        (`BY_STORAGE`) exactly where their labels are equal."""
        self.steps.append((PARTITION, -1, -1, tuple(labels), by, tuple(registers)))
        self.lines.append(text)

    def tensors(self, registers: list[int], specs: list[tuple], text: str) -> None:
        """One step matching each register's tensor against its spec (see `TensorMatcher`)."""
        self.steps.append((TENSORS, -1, -1, None, 0, tuple(registers)))
        self.specs += specs
        self.lines.append(text)

    def sizes(self, registers: list[int], reads: tuple, relations: tuple, text: str) -> None:
        """One step that holds when the integer reads of the tensors in `registers` (tensor
        slot, kind, index) satisfy every relation (`guards.kinds.shapes.linear_relation`)."""
        self.steps.append((SIZES, -1, -1, (tuple(reads), tuple(relations)), 0,
                           tuple(registers)))
        self.lines.append(text)

    def state(self, spec: tuple, text: str) -> bool:
        """One step that holds when torch's global state equals the snapshot `spec`
        (`guards.kinds.state.native_state_spec`); False, adding nothing, when the module was
        built without it (torch before 2.4)."""
        if not getattr(self.module, "HAS_STATE_STEP", False):
            return False
        self.steps.append((STATE, -1, -1, spec, 0, ()))
        self.lines.append(text)
        return True

    def export(self, register: int) -> None:
        if register not in self.exports:
            self.exports.append(register)

    def build(self) -> Optional[Any]:
        """The native program, or None when it has no steps."""
        if not self.steps:
            return None
        return self.module.GuardProgram(self.steps, self.register_count, self.exports,
                                        self.specs)


def builder() -> Optional[ProgramBuilder]:
    """A builder when native checks are on and the native module loads (with `GuardProgram`),
    else None (checks stay Python)."""
    from guards import native
    if not native.enabled():
        return None
    module = native.load()
    if module is None or not hasattr(module, "GuardProgram"):
        return None
    return ProgramBuilder(module)
