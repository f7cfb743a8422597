"""The graph fuzzer's repro scripts: a (minimized) program as a standalone Python file.

Input: a `Program` and its seed. Output: the text of a script that needs only torch and
`inductor`: the function, the tracing that turns it into the graph `dynamo` would hand over,
the inputs of the first call (literal values for small roots), `inductor.compile_fx`, and a
comparison with eager that raises on the first difference.
"""
from __future__ import annotations

import torch

from tests.fuzz.graphs.program import FACTORIES, Program, make_root

_TRACING = '''
FACTORIES = ("arange", "zeros", "ones", "full", "eye", "linspace", "tensor")
tracers = []


def recorded(function):  # factories and setitem become graph nodes, as dynamo records them
    def record(*args, **kwargs):
        if tracers:
            return tracers[-1].create_proxy("call_function", function, args, kwargs)
        return function(*args, **kwargs)
    return record


class TracedTorch:
    def __getattr__(self, name):
        value = getattr(real_torch, name)
        return recorded(value) if name in FACTORIES else value


setitem = recorded(operator.setitem)


def trace(function):
    global torch
    tracer = real_torch.fx.Tracer()
    tracers.append(tracer)
    torch = TracedTorch()
    try:
        graph = tracer.trace(function)
    finally:
        torch = real_torch
        tracers.pop()
    return torch.fx.GraphModule(tracer.root, graph, "f")
'''

_CHECK = '''

def shares(a, b):
    return a.untyped_storage().nbytes() > 0 and \\
        a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def viewed(value, inputs, outputs):
    """None, or what `value` views: an input, an output, or another tensor's shape, strides."""
    base = value._base
    if base is None:
        return None
    for kind, items in (("input", inputs), ("output", outputs)):
        for index, item in enumerate(items):
            if item is base:
                return (kind, index)
    return ("other", tuple(base.shape), tuple(stride for stride, extent in zip(
        base.stride(), base.shape) if extent > 1) if base.numel() else ())


def check(name, make_inputs):
    eager_inputs, compiled_inputs = make_inputs(), make_inputs()
    expected, actual = gm(*eager_inputs), compiled(*compiled_inputs)
    for position, (want, got) in enumerate(zip(expected, actual)):
        where = f"{name}, output {position}"
        print(f"{where}: eager {tuple(want.shape)} {want.stride()} {want.dtype}; "
              f"compiled {tuple(got.shape)} {got.stride()} {got.dtype}")
        torch.testing.assert_close(got, want, equal_nan=True, atol=@ATOL@, rtol=@RTOL@,
                                   msg=lambda m: f"{where}: {m}")
        for index, (a, b) in enumerate(zip(eager_inputs, compiled_inputs)):
            assert (want is a) == (got is b), f"{where} is input {index}: {got is b}"
            assert shares(want, a) == shares(got, b), f"{where} / input {index} aliasing"
        for index in range(position):
            assert shares(want, expected[index]) == shares(got, actual[index]), \\
                f"{name}: outputs {index} and {position} aliasing"
        views = viewed(got, compiled_inputs, actual), viewed(want, eager_inputs, expected)
        assert views[0] == views[1], f"{where} views {views[0]}, eager {views[1]}"
    for index, (a, b) in enumerate(zip(eager_inputs, compiled_inputs)):
        torch.testing.assert_close(b, a, equal_nan=True, atol=@ATOL@, rtol=@RTOL@,
                                   msg=lambda m: f"{name}, input {index} after the call: {m}")


gm = @TRACE@(f)
compiled = inductor.compile_fx(gm, inputs_call_1())
@CALLS@
print("compiled matches eager")
'''


def script_for(program: Program, seed: int, note: str = "", backend: str = "cpp") -> str:
    """The standalone repro script of `program` (see the module docstring)."""
    from tests.fuzz.graphs.check import aliasing_variant

    source = program.source()
    traced = "setitem(" in source or any(f"torch.{name}(" in source for name in FACTORIES)
    lines = ['"""' + (note.replace('"""', "'''") or "graph fuzzer repro") + '"""',
             "import operator" if traced else "", "import torch",
             "import torch as real_torch" if traced else "", "import inductor", "",
             "inductor.config.update(fallback_on_error=False, verify_ir=True, "
             f"cpu_backend={backend!r})",
             "F = torch.nn.functional", "aten = torch.ops.aten",
             f"DEVICE = torch.device({program.device!r})"]
    text = "\n".join(line for line in lines if line is not None) + "\n"
    if traced:
        text += _TRACING
    text += "\n\n" + source + "\n"
    calls = [("call 1", program, 0), ("call 2 (fresh inputs)", program, 1)]
    variant = aliasing_variant(program)
    if variant is not None:
        calls.append(("aliasing variant", variant, 2))
    for position, (_name, version, call) in enumerate(calls):
        text += "\n" + _inputs_text(version, seed, call, f"inputs_call_{position + 1}") + "\n"
    checks = "\n".join(f"check({name!r}, inputs_call_{position + 1})"
                       for position, (name, _version, _call) in enumerate(calls))
    return text + _CHECK.replace("@ATOL@", "1e-4").replace("@RTOL@", "1e-3").replace(
        "@CALLS@", checks).replace("@TRACE@", "trace" if traced else "torch.fx.symbolic_trace")


def _inputs_text(program: Program, seed: int, call: int, name: str) -> str:
    values = _root_values(program, seed, call)
    lines = [f"def {name}():", f"    generator = torch.Generator().manual_seed({call})"]
    used = {arg.root for arg in program.args}
    for index, (root, value) in enumerate(zip(program.roots, values)):
        if index not in used:
            continue
        dtype = f"torch.{root.dtype}"
        if value.numel() <= 64:
            literal = value.double().tolist() if value.is_floating_point() else value.tolist()
            text = repr(literal).replace("nan", "float('nan')").replace("inf", "float('inf')")
            lines.append(f"    r{index} = torch.tensor({text}, dtype={dtype}, device=DEVICE)"
                         f".reshape({tuple(root.shape)})")
        elif value.is_floating_point():
            lines.append(f"    r{index} = torch.randn({tuple(root.shape)}, "
                         f"generator=generator).to(DEVICE, {dtype})")
        else:
            lines.append(f"    r{index} = torch.randint(0, {max(root.high, 2)}, "
                         f"{tuple(root.shape)}, generator=generator).to(DEVICE, {dtype})")
    names, made = [], {}
    for arg in program.args:
        derived = made.setdefault((arg.root, arg.derive), arg.name)
        text = derived if derived != arg.name else arg.derive.replace("r", f"r{arg.root}", 1)
        lines.append(f"    {arg.name} = {text}")
        names.append(arg.name)
    lines.append(f"    return [{', '.join(names)}]")
    return "\n".join(lines) + "\n"


def _root_values(program: Program, seed: int, call: int) -> list:
    generator = torch.Generator().manual_seed(seed * 1000003 + call)
    return [make_root(root, generator, "cpu") for root in program.roots]

