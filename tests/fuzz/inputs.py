"""The entry function's parameters, its return value, and the calls the runner makes.

Stage: generation. Input: the generator (its random stream, classes, modules, knobs). Output:
parameter variables for `fn`, the returned expression, and one `CallSpec` per call.

Calls change, between one and the next: values (always), the batch size N (shapes; with
`Settings.size_sweep`, the `--dynamic` modes, N changes on most calls, over `SWEEP_SIZES`), the
float dtype (float32/float64), aliasing (one tensor, list or object passed for two parameters, or
twice inside a list or an object, then distinct), Python scalars (values, and int for float),
requires_grad, list lengths, and the globals, class attributes, module-object attributes and
module modes the program reads (the knobs registered by the constructs).
"""
from __future__ import annotations

import dataclasses
import random

from tests.fuzz import slots
from tests.fuzz.scope import Scope, Var
from tests.fuzz.slots import (BATCH, BOOL, FLOAT, Dim, DictT, ListT, ModT, ObjT, ScalarT,
                              TensorT, TupleT)
from tests.fuzz.tree import CallSpec, Expr, lit, name, op


@dataclasses.dataclass
class CallState:
    n: int
    dtype: str  # "float32" / "float64"
    seed: int
    grad: bool
    lengths: dict
    scalars: dict
    alias: tuple = ()  # (param, param) passed one object
    inner_alias: bool = False  # a list or object holds one tensor twice
    layout: str = ""  # "offset": tensors are views at offset 1; "strided": transposed
    tagged: bool = False  # tensor parameters carry a Python attribute `tag`
    notes: list = dataclasses.field(default_factory=list)


def make_params(gen, scope: Scope) -> list:
    """The parameters of `fn` (x first), added to `scope`."""
    m = slots.Dim(gen.width)
    row, square, vec = (BATCH, m), (m, m), (m,)
    menu = [
        ("y", 3, lambda: TensorT(gen.choice([row, row, vec, square]))),
        ("w", 2, lambda: TensorT(square)),
        ("s", 2, lambda: FLOAT),
        ("n", 1.5, lambda: slots.int_slot(1, 3)),
        ("flag", 1, lambda: BOOL),
        ("lst", 2.5 if gen.on("list") else 0, lambda: ListT(TensorT(gen.choice([vec, row])))),
        ("d", 1.5 if gen.on("dict") else 0, lambda: DictT(("a", "b"), TensorT(vec))),
        ("o", 1.5 if gen.on("class") else 0, lambda: "object"),
        ("m", 1 if gen.on("module") else 0, lambda: "module"),
    ]
    params = [scope.add(Var("x", TensorT(row), roots=frozenset(["x"])))]
    count = gen.rng.randint(1, 4)
    chosen = [entry for entry in menu if entry[1] > 0]
    gen.rng.shuffle(chosen)
    chosen.sort(key=lambda entry: -entry[1] * gen.rng.random())
    slots_ = [(param_name, make()) for param_name, _, make in chosen[:count]]
    if gen.on("grad"):  # decided first: classes and modules made below depend on it
        gen.grad_params = {param_name for param_name, slot in [("x", None)] + slots_
                           if (slot is None or isinstance(slot, TensorT)) and gen.chance(0.3)}
    for param_name, slot in slots_:
        if slot == "object":
            from tests.fuzz.constructs import objects
            slot = objects.any_class(gen, scope).slot
        elif slot == "module":
            from tests.fuzz.constructs import modules
            slot = modules.any_module(gen, scope).slot
        var = Var(param_name, slot, roots=frozenset([param_name]))
        if isinstance(slot, ListT):
            var.state = scope.new_list_state(2, [param_name])
        elif isinstance(slot, DictT):
            var.state = scope.new_dict_state(slot.keys, [param_name])
        params.append(scope.add(var))
    if "lst" in scope.vars and gen.chance(0.3):  # a second list, to pass one list twice
        slot = scope.vars["lst"].slot
        var = Var("lst2", slot, roots=frozenset(["lst2"]),
                  state=scope.new_list_state(2, ["lst2"]))
        params.append(scope.add(var))
    for var in params:
        var.grad_leaf = var.name in gen.grad_params
        if isinstance(var.slot, TensorT) and gen.chance(0.15):
            gen.strided.add(var.name)  # may come transposed: never assumed contiguous
            var.contiguous = False
        if isinstance(var.slot, TensorT) and gen.chance(0.1):
            gen.tagged.add(var.name)
    return params


def make_result(gen, scope: Scope) -> Expr:
    """What `fn` returns: one to three values held in scope (tensors most often)."""
    candidates = [var for var in scope.all() if not var.is_global and var.name != "self"]
    tensors = [var for var in candidates if isinstance(var.slot, TensorT)]
    others = [var for var in candidates if not isinstance(var.slot, TensorT)]
    count = gen.rng.randint(1, 3)
    picked = []
    for _ in range(count):
        pool = tensors if (gen.chance(0.75) or not others) else others
        if pool:
            picked.append(gen.choice(pool))
    fresh = [var for var in tensors if not var.roots]
    if fresh and gen.chance(0.7):
        picked[0:1] = [gen.choice(fresh)]
    unique = {var.name: var for var in picked}
    items = [name(var.name, var.slot) for var in unique.values()]
    if len(items) == 1 and gen.chance(0.6):
        return items[0]
    shape = gen.choice(["tuple", "tuple", "list", "dict"])
    slot = TupleT(tuple(item.slot for item in items))
    if shape == "tuple":
        return op("(" + ", ".join("{%d}" % i for i in range(len(items))) + ",)", slot, *items)
    if shape == "list":
        return op("[" + ", ".join("{%d}" % i for i in range(len(items))) + "]", slot, *items)
    keys = ", ".join(f'"r{i}": {{{i}}}' for i in range(len(items)))
    return op("{{" + keys + "}}", slot, *items)


# -- calls --------------------------------------------------------------------------------------
def make_calls(gen, params: list) -> list:
    rng = gen.rng
    sweep = gen.settings.size_sweep
    count = rng.randint(5, 7) if sweep else rng.randint(3, 5)
    base_n = rng.randint(*slots.N_RANGE)
    aliasable = _alias_pairs(gen, params)
    base = CallState(base_n, "float32", 100, False, _lengths(gen, params), _scalars(gen, params))
    sizes = size_sweep(rng, base_n, count) if sweep else None
    states = []
    for index in range(count):
        state = dataclasses.replace(base, seed=100 * (index + 1), notes=[],
                                    lengths=dict(base.lengths), scalars=dict(base.scalars))
        setup = []
        if index == 0 and aliasable and rng.random() < 0.3:
            state.alias = rng.choice(aliasable)
            state.notes.append(f"{state.alias[0]} is {state.alias[1]}")
        if index > 0:
            for _ in range(rng.choice([0, 1]) if sweep else rng.choice([0, 1, 1, 2])):
                _vary(gen, state, params, aliasable, setup)
            if gen.training_knobs and rng.random() < 0.6:  # a training step's state changes
                description, make = rng.choice(gen.training_knobs)
                setup.extend(make(rng))
                state.notes.append(description)
        if sweep and index > 0:
            state.n = sizes[index]
            state.notes = [note for note in state.notes if not note.startswith("N=")]
            state.notes.insert(0, f"N={state.n}")
        states.append((state, setup))
    specs = [_render_call(gen, params, state, setup) for state, setup in states]
    _choose_contexts(gen, specs, [state for state, _ in states])
    return specs


# Share of programs whose calls change mode (no_grad, inference_mode, inference tensors), and
# of such a program's calls that run in one.
CONTEXT_PROGRAMS, CONTEXT_CALLS = 0.25, 0.5


def _choose_contexts(gen, specs: list, states: list) -> None:
    """Some calls run under `no_grad` or `inference_mode`, or take inference tensors (then
    only where no argument requires grad: an inference tensor cannot). Drawn from a random
    stream of its own, so a seed's program and call values stay what they were before
    contexts existed."""
    rng = random.Random(f"contexts {gen.seed}")
    if rng.random() >= CONTEXT_PROGRAMS:
        return
    for spec, state in zip(specs, states):
        if rng.random() >= CONTEXT_CALLS:
            continue
        names = ["no_grad", "inference_mode"]
        if not (state.grad and gen.grad_params):
            names += ["inference_tensors", "inference_tensors_outside"]
        spec.context = rng.choice(names)
        spec.note = ", ".join(part for part in (spec.note, spec.context) if part)


# The batch sizes of a size sweep (`--dynamic`): 0/1-specialised 1, small sizes, primes (no
# divisibility a guard could assume), powers of two, and a large one.
SWEEP_SIZES = (1, 2, 3, 4, 5, 7, 8, 11, 13, 16, 17, 31, 64)
SWEEP_PRIMES = (5, 7, 11, 13, 17, 31)


def size_sweep(rng, first: int, count: int) -> list:
    """`count` batch sizes for a program's calls: the generator's own N first (2-4, so the
    first compile sees what the program was made for), then a new size on most calls, an
    earlier one again on some (an unchanged shape must not recompile), and at least one
    prime of 5 or more; 1 on about half of the sweeps."""
    sizes = [first]
    for _ in range(count - 1):
        if len(sizes) > 1 and rng.random() < 0.2:
            sizes.append(rng.choice(sizes))
        else:
            sizes.append(rng.choice([n for n in SWEEP_SIZES if n != sizes[-1]]))
    if 1 not in sizes and rng.random() < 0.5:
        sizes[rng.randrange(1, count)] = 1
    if not any(n in SWEEP_PRIMES for n in sizes):
        free = [index for index in range(1, count) if sizes[index] != 1]
        sizes[rng.choice(free)] = rng.choice(SWEEP_PRIMES)
    return sizes


def _alias_pairs(gen, params: list) -> list:
    pairs = []
    for i, first in enumerate(params):
        for second in params[i + 1:]:
            if first.slot == second.slot and not isinstance(first.slot, (ScalarT, ModT)) and \
                    first.grad_leaf == second.grad_leaf:
                pairs.append((first.name, second.name))
    return pairs


def _lengths(gen, params: list) -> dict:
    return {var.name: gen.rng.randint(2, 4) for var in params if isinstance(var.slot, ListT)}


def _scalars(gen, params: list) -> dict:
    values = {}
    for var in params:
        if isinstance(var.slot, ScalarT):
            values[var.name] = _scalar_value(gen, var.slot)
    return values


def _scalar_value(gen, slot: ScalarT) -> str:
    if slot.kind == "float":
        return gen.choice(["0.5", "1.5", "-1.25", "2.0", "0.75", "2"])
    if slot.kind == "int":
        return str(gen.rng.randint(slot.lo, slot.hi))
    if slot.kind == "bool":
        return gen.choice(["True", "False"])
    return gen.choice(["'a'", "'b'"])


def _vary(gen, state: CallState, params: list, aliasable: list, setup: list) -> None:
    """Change one thing for this call."""
    rng = gen.rng
    options = ["values", "shape", "scalar", "alias", "grad", "knob", "length", "dtype",
               "inner_alias", "layout", "tag"]
    what = rng.choice(options)
    if what == "shape":
        state.n = rng.choice([n for n in range(slots.N_RANGE[0], slots.N_RANGE[1] + 1)
                              if n != state.n])
        state.notes.append(f"N={state.n}")
    elif what == "dtype" and not gen.dtype_fixed:
        state.dtype = "float64"
        state.notes.append("float64")
    elif what == "scalar" and state.scalars:
        key = rng.choice(sorted(state.scalars))
        slot = next(var.slot for var in params if var.name == key)
        state.scalars[key] = _scalar_value(gen, slot)
        state.notes.append(f"{key}={state.scalars[key]}")
    elif what == "alias" and aliasable:
        state.alias = () if state.alias else rng.choice(aliasable)
        state.notes.append("aliased" if state.alias else "distinct")
    elif what == "inner_alias":
        state.inner_alias = not state.inner_alias
        state.notes.append("repeated items" if state.inner_alias else "distinct items")
    elif what == "grad" and gen.grad_params:
        state.grad = not state.grad
        state.notes.append("requires_grad" if state.grad else "no grad")
    elif what == "knob" and gen.knobs:
        description, make = rng.choice(gen.knobs)
        setup.extend(make(rng))
        state.notes.append(description)
    elif what == "layout":
        state.layout = rng.choice(["", "offset", "strided"] if gen.strided else ["", "offset"])
        state.notes.append(f"layout {state.layout or 'dense'}")
    elif what == "tag" and gen.tagged:
        state.tagged = not state.tagged
        state.notes.append("tagged" if state.tagged else "untagged")
    elif what == "length" and state.lengths:
        key = rng.choice(sorted(state.lengths))
        state.lengths[key] = rng.randint(2, 4)
        state.notes.append(f"len({key})={state.lengths[key]}")


def _tensor_text(gen, state: CallState, counter, slot: TensorT, param: str) -> str:
    """The source of one tensor argument of the call: `_t(seed, sizes...)` in the call's
    dtype, layout and tagging; each tensor takes the next seed from `counter`."""
    sizes = list(slots.concrete(slot.shape, state.n))
    seed = state.seed + next(counter)
    extra = "" if state.dtype == "float32" else ", dtype=torch.float64"
    if state.grad and param in gen.grad_params:
        extra += ", grad=True"
    suffix = ""
    if state.layout == "offset" and sizes:
        sizes[0] += 1
        suffix = "[1:]"
    elif state.layout == "strided" and len(sizes) == 2 and param in gen.strided:
        sizes.reverse()
        suffix = ".T"
    shape = ", ".join(map(str, sizes))
    text = f"_t({seed}{', ' if shape else ''}{shape}{extra}){suffix}"
    if state.tagged and param in gen.tagged:
        text = f"_tag({text}, {1 + seed % 3})"
    return text


def _render_call(gen, params: list, state: CallState, setup: list) -> CallSpec:
    counter = iter(range(1000))
    bindings = []

    def tensor(slot: TensorT, param: str) -> str:
        return _tensor_text(gen, state, counter, slot, param)

    def value(var: Var) -> str:
        slot = var.slot
        if isinstance(slot, TensorT):
            return tensor(slot, var.name)
        if isinstance(slot, ScalarT):
            return state.scalars[var.name]
        if isinstance(slot, ListT):
            items = [tensor(slot.elem, var.name) for _ in range(state.lengths[var.name])]
            if state.inner_alias:
                bindings.append((f"item_{var.name}", items[0]))
                items[0] = items[1] = f"item_{var.name}"
            return "[" + ", ".join(items) + "]"
        if isinstance(slot, DictT):
            return "{" + ", ".join(f'"{key}": {tensor(slot.value, var.name)}'
                                   for key in slot.keys) + "}"
        if isinstance(slot, ObjT):
            info = gen.classes[slot.cls]
            args = [tensor(arg, var.name) for arg in info.init_slots]
            if state.inner_alias and len(args) >= 2:
                bindings.append((f"item_{var.name}", args[0]))
                args[0] = args[1] = f"item_{var.name}"
            return f"{slot.cls}({', '.join(args)})"
        if isinstance(slot, ModT):
            return gen.modules[slot.cls].instance
        raise TypeError(slot)

    args = []
    for var in params:
        if state.alias and var.name == state.alias[1]:
            args.append("shared")
            continue
        text = value(var)
        if state.alias and var.name == state.alias[0]:
            bindings.append(("shared", text))
            text = "shared"
        args.append(text)
    return CallSpec(list(setup), bindings, args, ", ".join(state.notes))


__all__ = ["make_params", "make_result", "make_calls", "size_sweep", "lit", "Dim"]
