"""The graph fuzzer's generator: a seed becomes a random `Program`.

Input: a seed and a device. Output: a `Program` whose statements all ran eagerly on the
first call's inputs while it was built (each candidate statement is executed on real
tensors; one that raises, or makes a tensor too large, is dropped), so every generated graph
is one eager can run. Op families live in `ops_compute.py`, `ops_memory.py` and
`ops_aten.py` (ATen overloads called directly); this module holds the state they draw from:
live values, fresh inputs with varied layouts and aliasing, shapes and scalars.
"""
from __future__ import annotations

import math
import random
from typing import Callable, Optional

import torch

from tests.fuzz.graphs.program import (DTYPES, FLOAT_NAMES, Arg, Program, Root, Stmt,
                                       derive_args, make_root, names_in, namespace_for)

MAX_NUMEL = 2048
DTYPE_WEIGHTS = {"float32": 40, "float64": 8, "float16": 7, "bfloat16": 7, "int64": 11,
                 "int32": 8, "int16": 2, "int8": 2, "uint8": 2, "bool": 8}
RANK_WEIGHTS = {0: 7, 1: 22, 2: 36, 3: 24, 4: 11}
EXTENTS = [1, 1, 2, 2, 3, 3, 4, 4, 5, 6, 7, 8]
SCALARS = [0, 1, -1, 2, 3, -2, 0.5, -1.5, 2.25, 1e-3, 10.0, True, False]


class Rejected(Exception):
    """A candidate statement cannot be used (raised eagerly or made an unusable value)."""


class Generator:
    """Builds one program; op families call its helpers and return code (or None)."""

    def __init__(self, seed: int, device: str = "cpu", max_stmts: Optional[int] = None):
        self.seed = seed
        self.rng = random.Random(seed)
        self.device = device
        self.program = Program([], [], [], [], device)
        self.env = namespace_for(device)
        self.root_values: list = []
        self.values: list = []          # tensor-valued names, in definition order
        self.counter = 0
        self.max_stmts = max_stmts if max_stmts is not None else self.rng.choice(
            [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14])

    # ----- randomness --------------------------------------------------------------------

    def chance(self, probability: float) -> bool:
        return self.rng.random() < probability

    def choice(self, options):
        return self.rng.choice(list(options))

    def weighted(self, table: dict):
        keys = list(table)
        return self.rng.choices(keys, weights=[table[key] for key in keys])[0]

    def dtype(self, kinds: str = "any") -> str:
        table = {name: weight for name, weight in DTYPE_WEIGHTS.items()
                 if kinds == "any" or (kinds == "float" and name in FLOAT_NAMES)
                 or (kinds == "int" and name not in FLOAT_NAMES and name != "bool")}
        return self.weighted(table)

    def shape(self, rank: Optional[int] = None) -> tuple:
        rank = self.weighted(RANK_WEIGHTS) if rank is None else rank
        shape = [self.choice(EXTENTS) for _ in range(rank)]
        if shape and self.chance(0.04):
            shape[self.rng.randrange(rank)] = 0
        while math.prod(shape) > 512:
            shape[shape.index(max(shape))] //= 2
        return tuple(shape)

    def scalar(self, dtype: Optional[torch.dtype] = None):
        value = self.choice(SCALARS)
        if dtype is not None and not dtype.is_floating_point and isinstance(value, float):
            value = int(value * 2)
        if dtype == torch.bool and not isinstance(value, bool):
            value = bool(value)
        return value

    # ----- values ------------------------------------------------------------------------

    def fresh(self) -> str:
        self.counter += 1
        return f"v{self.counter - 1}"

    def tensor(self, name: str) -> torch.Tensor:
        return self.env[name]

    def pick(self, where: Optional[Callable] = None) -> Optional[str]:
        """A live tensor name (recent ones likelier) for which `where(tensor)` holds."""
        names = [name for name in self.values if where is None or where(self.env[name])]
        if not names:
            return None
        weights = [1.0 + position for position in range(len(names))]
        return self.rng.choices(names, weights=weights)[0]

    def operand(self, where: Optional[Callable] = None, make: Optional[Callable] = None):
        """A live value satisfying `where`, or a fresh input from `make()` (shape, dtype)."""
        name = self.pick(where) if self.chance(0.75) else None
        if name is None and make is not None:
            shape, dtype = make()
            name = self.new_input(shape, dtype)
        return name

    def new_input(self, shape: tuple, dtype: str, kind: Optional[str] = None,
                  high: int = 0, dim: int = 0) -> str:
        """A new graph input of exactly `shape`: contiguous, transposed, strided, offset,
        expanded, or a view of an existing root (aliasing)."""
        shape = tuple(int(extent) for extent in shape)
        kind = kind or ("bool" if dtype == "bool" else "float" if dtype in FLOAT_NAMES
                        else "int")
        name = f"a{len(self.program.args)}"
        indices = kind in ("index", "unique")
        shared = None if indices else self._aliasing_derivation(shape, dtype, kind)
        if shared is not None:
            root_index, derive = shared
        else:
            root_shape, derive = (shape, "r") if indices else self._layout(shape)
            root = Root(root_shape, dtype, kind, high, special=kind == "float" and
                        self.chance(0.08), scale=self.choice([1.0, 1.0, 1.0, 3.0, 0.1]),
                        dim=dim)
            self.program.roots.append(root)
            generator = torch.Generator().manual_seed(self.seed * 1000003)
            for earlier in self.program.roots[:-1]:  # the same draws as Program.inputs
                make_root(earlier, generator, "cpu")
            self.root_values.append(make_root(root, generator, self.device))
            root_index = len(self.program.roots) - 1
        arg = Arg(name, root_index, derive)
        existing = [other for other in self.program.args
                    if (other.root, other.derive) == (root_index, derive)]
        value = self.env[existing[0].name] if existing else \
            derive_args([arg], self.root_values)[0]
        if tuple(value.shape) != shape:
            raise AssertionError(f"input derivation {derive} gave {tuple(value.shape)}, "
                                 f"wanted {shape}")
        self.program.args.append(arg)
        self.env[name] = value
        self.values.append(name)
        return name

    def _layout(self, shape: tuple):
        rank = len(shape)
        kind = self.weighted({"plain": 55, "permuted": 12, "strided": 10, "offset": 8,
                              "expanded": 8, "storage": 7})
        if kind == "permuted" and rank >= 2:
            order = list(range(rank))
            while order == list(range(rank)):
                self.rng.shuffle(order)
            root = tuple(shape[dim] for dim in order)
            inverse = [order.index(dim) for dim in range(rank)]
            return root, f"r.permute({', '.join(map(str, inverse))})"
        if kind in ("strided", "offset") and rank >= 1:
            dim = self.rng.randrange(rank)
            root = list(shape)
            pieces = [":"] * rank
            if kind == "strided":
                step = self.choice([2, 3])
                root[dim] = shape[dim] * step
                pieces[dim] = f"::{step}"
            else:
                root[dim] = shape[dim] + 2
                pieces[dim] = f"1:{shape[dim] + 1}"
            return tuple(root), f"r[{', '.join(pieces)}]"
        if kind == "expanded" and rank >= 1 and 0 not in shape:
            root = tuple(1 if self.chance(0.5) else extent for extent in shape)
            if root != shape:
                return root, f"r.expand({', '.join(map(str, shape))})"
        if kind == "storage" and 0 not in shape:
            extra = self.choice([0, 1, 3])
            numel = math.prod(shape)
            return (numel + extra,), f"r[{extra}:].view({', '.join(map(str, shape))})" \
                if rank else f"r[{extra}:{extra + 1}].view(())"
        return shape, "r"

    def _aliasing_derivation(self, shape: tuple, dtype: str, kind: str):
        """Sometimes (when a root of this dtype exists): the same tensor again, its
        transpose, or a window of its memory."""
        if not self.chance(0.15):
            return None
        candidates = [index for index, root in enumerate(self.program.roots)
                      if root.dtype == dtype and root.kind == kind]
        if not candidates:
            return None
        index = self.choice(candidates)
        root = self.program.roots[index]
        same = [arg.derive for arg in self.program.args
                if arg.root == index and tuple(self.env[arg.name].shape) == shape]
        if same and self.chance(0.6):
            return index, self.choice(same)
        if len(shape) == 2 and tuple(root.shape) == (shape[1], shape[0]):
            return index, "r.t()"
        numel, available = math.prod(shape), math.prod(root.shape)
        if 0 < numel <= available:
            start = self.rng.randrange(available - numel + 1)
            view = ", ".join(map(str, shape)) if shape else "()"
            return index, f"r.reshape(-1)[{start}:{start + numel}].view({view})"
        return None

    # ----- statements --------------------------------------------------------------------

    def emit(self, code: str, defines: list) -> bool:
        """Run `code` on the live values; keep it if it succeeds and makes usable values."""
        before = {name: self.env.get(name) for name in defines}
        try:
            exec(compile(code, "<fuzz-statement>", "exec"), self.env)
            for name in defines:
                value = self.env[name]
                if isinstance(value, torch.Tensor):
                    if value.numel() > MAX_NUMEL or value.is_complex() or value.dim() > 5:
                        raise Rejected(f"{name}: unusable value")
                elif not isinstance(value, (tuple, list)):
                    raise Rejected(f"{name}: not a tensor")
        except Exception:  # noqa: BLE001 (any eager error rejects the candidate)
            for name, value in before.items():
                if value is None:
                    self.env.pop(name, None)
            return False
        self.program.stmts.append(Stmt(code, list(defines), [
            name for name in names_in(code) if name not in defines]))
        self.values.extend(name for name in defines
                           if isinstance(self.env[name], torch.Tensor))
        return True

    def finish(self) -> Program:
        """Choose the returned values: recent results, sometimes an input, a duplicate."""
        defined = [name for name in self.values if name.startswith("v")]
        pool = defined or list(self.values)
        count = min(len(pool), self.choice([1, 1, 2, 2, 3, 4]))
        outputs = self.rng.sample(pool[-6:], min(count, len(pool[-6:])))
        if self.program.args and self.chance(0.1):
            outputs.append(self.choice([arg.name for arg in self.program.args]))
        if self.values and self.chance(0.12):
            outputs.append(self.pick())
        if outputs and self.chance(0.05):
            outputs.append(outputs[0])
        self.program.outputs = outputs
        return self.program


def generate(seed: int, device: str = "cpu", max_stmts: Optional[int] = None) -> Program:
    """A random program for `seed` (see the module docstring)."""
    from tests.fuzz.graphs.ops_aten import ATEN_FAMILIES
    from tests.fuzz.graphs.ops_compute import COMPUTE_FAMILIES
    from tests.fuzz.graphs.ops_memory import MEMORY_FAMILIES

    families = {**COMPUTE_FAMILIES, **MEMORY_FAMILIES, **ATEN_FAMILIES}
    generator = Generator(seed, device, max_stmts)
    with torch.no_grad():
        for _ in range(generator.rng.choice([1, 1, 2, 3])):
            generator.new_input(generator.shape(), generator.dtype())
        attempts = 0
        while len(generator.program.stmts) < generator.max_stmts and attempts < 200:
            attempts += 1
            family = generator.weighted({name: weight for name, (weight, _) in
                                         families.items()})
            candidate = families[family][1](generator)
            if candidate is None:
                continue
            code, defines = candidate
            generator.emit(code, defines)
    return generator.finish()


def fmt(value) -> str:
    """A Python literal for a scalar or shape."""
    if isinstance(value, float):
        if math.isinf(value):
            return "float('inf')" if value > 0 else "float('-inf')"
        return repr(value)
    if isinstance(value, (list, tuple)):
        inner = ", ".join(fmt(item) for item in value)
        return f"({inner},)" if isinstance(value, tuple) and len(value) == 1 else \
            (f"({inner})" if isinstance(value, tuple) else f"[{inner}]")
    return repr(value)


def dtype_name(dtype: torch.dtype) -> str:
    return "torch." + str(dtype).replace("torch.", "")


def is_float(tensor: torch.Tensor) -> bool:
    return tensor.is_floating_point()


def dtype_of_name(name: str) -> torch.dtype:
    return DTYPES[name]
