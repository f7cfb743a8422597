"""The graph fuzzer's repro scripts: a (minimized) program as a standalone Python file.

Input: a `Program` and its seed. Output: the text of a script that needs only torch and
`inductor`: the function, the tracing that turns it into the graph `dynamo` would hand over,
the inputs of the first call (literal values for small roots), `inductor.compile_fx`, and a
comparison with eager that raises on the first difference.
"""
from __future__ import annotations

import torch

from tests.fuzz.graphs.program import Program, make_root

_HEADER = '''"""{note}"""
import operator
import torch
import inductor

inductor.config.fallback_on_error = False
F = torch.nn.functional
DEVICE = torch.device({device!r})
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
        value = getattr(torch, name)
        return recorded(value) if name in FACTORIES else value


setitem = recorded(operator.setitem)

'''

_FOOTER = '''

def trace(function):
    global torch
    tracer, real_torch = torch.fx.Tracer(), torch
    tracers.append(tracer)
    torch = TracedTorch()
    try:
        graph = tracer.trace(function)
    finally:
        torch = real_torch
        tracers.pop()
    return torch.fx.GraphModule(tracer.root, graph, "f")


def shares(a, b):
    return a.untyped_storage().nbytes() > 0 and \\
        a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


gm = trace(f)
compiled = inductor.compile_fx(gm, make_inputs())
eager_inputs, compiled_inputs = make_inputs(), make_inputs()
expected, actual = gm(*eager_inputs), compiled(*compiled_inputs)
for position, (want, got) in enumerate(zip(expected, actual)):
    print(f"output {{position}}: eager {{tuple(want.shape)}} {{want.stride()}} {{want.dtype}}; "
          f"compiled {{tuple(got.shape)}} {{got.stride()}} {{got.dtype}}")
    torch.testing.assert_close(got, want, equal_nan=True, atol={atol}, rtol={rtol},
                               msg=lambda m: f"output {{position}}: {{m}}")
    for index, (a, b) in enumerate(zip(eager_inputs, compiled_inputs)):
        assert shares(want, a) == shares(got, b), f"output {{position}} / input {{index}} aliasing"
    for index in range(position):
        assert shares(want, expected[index]) == shares(got, actual[index]), \\
            f"outputs {{index}} and {{position}} aliasing"
for index, (a, b) in enumerate(zip(eager_inputs, compiled_inputs)):
    torch.testing.assert_close(b, a, equal_nan=True, atol={atol}, rtol={rtol},
                               msg=lambda m: f"input {{index}} after the call: {{m}}")
print("compiled matches eager")
'''


def script_for(program: Program, seed: int, note: str = "") -> str:
    """The standalone repro script of `program` (see the module docstring)."""
    header = _HEADER.format(note=note.replace('"""', "'''") or "graph fuzzer repro",
                            device=program.device)
    body = program.source()
    inputs = _inputs_text(program, seed)
    return header + body + "\n\n" + inputs + _FOOTER.format(atol=1e-4, rtol=1e-3)


def _inputs_text(program: Program, seed: int) -> str:
    values = _root_values(program, seed)
    lines = ["def make_inputs():"]
    for index, (root, value) in enumerate(zip(program.roots, values)):
        dtype = f"torch.{root.dtype}"
        if value.numel() <= 64:
            literal = value.double().tolist() if value.is_floating_point() else value.tolist()
            text = repr(literal).replace("nan", "float('nan')").replace("inf", "float('inf')")
            lines.append(f"    r{index} = torch.tensor({text}, dtype={dtype}, device=DEVICE)")
        else:
            maker = "torch.randn" if value.is_floating_point() else "torch.randint(0, 4, "
            if value.is_floating_point():
                lines.append(f"    r{index} = {maker}({tuple(root.shape)}, dtype={dtype}, "
                             f"device=DEVICE)")
            else:
                lines.append(f"    r{index} = {maker}{tuple(root.shape)}, device=DEVICE)"
                             f".to({dtype})")
    names, made = [], {}
    for arg in program.args:
        derived = made.setdefault((arg.root, arg.derive), arg.name)
        text = derived if derived != arg.name else arg.derive.replace("r", f"r{arg.root}", 1)
        lines.append(f"    {arg.name} = {text}")
        names.append(arg.name)
    lines.append(f"    return [{', '.join(names)}]")
    return "\n".join(lines) + "\n"


def _root_values(program: Program, seed: int) -> list:
    generator = torch.Generator().manual_seed(seed * 1000003)
    return [make_root(root, generator, "cpu") for root in program.roots]

