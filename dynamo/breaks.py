"""The registry of graph-break kinds: stable ids, user-facing messages, hints, docs anchors.

A graph break is always one of these kinds; `Unsupported` carries the kind, the specific
detail and the user's `file:line`. Messages speak of the user's program, never of framejit's
classes. The catalogue section of `docs/graph-breaks.md` is generated from this table
(`python -m dynamo.breaks --write docs/graph-breaks.md`; a test keeps it current).
"""
from __future__ import annotations

import dataclasses
import sys
from typing import Optional


@dataclasses.dataclass(frozen=True)
class BreakKind:
    id: str
    title: str
    message: str
    hint: str
    example: str = ""  # a line of user code that breaks this way

    @property
    def anchor(self) -> str:
        return f"docs/graph-breaks.md#{self.id.lower()}"


KINDS: dict[str, BreakKind] = {}


def _kind(id_: str, title: str, message: str, hint: str, example: str = "") -> BreakKind:
    kind = BreakKind(id_, title, message, hint, example)
    KINDS[id_] = kind
    return kind


PRINT = _kind("GB001", "print, logging or warnings",
              "a call that writes output (print, logging, warnings) runs eagerly",
              "move the call out of the hot path, or log tensors after the compiled region",
              'print("loss", loss)')
TENSOR_BRANCH = _kind("GB002", "branch on a tensor's value",
                      "a Python `if`/`while`/`and`/`or` depends on the value inside a tensor",
                      "use torch.where or masking so that both paths become tensor operations",
                      "if x.sum() > 0:")
SCALAR_OUT = _kind("GB003", "tensor to Python value",
                   "a tensor is converted to a Python value (.item(), .tolist(), int(), "
                   "float(), bool() or NumPy)",
                   "keep the value as a 0-d tensor, or convert it outside the compiled region",
                   "scale = x.max().item()")
DYNAMIC_SHAPE_OP = _kind("GB004", "data-dependent output shape",
                         "an operation's output shape depends on tensor values (nonzero, "
                         "boolean-mask indexing, unique, ...)",
                         "use torch.where or a fixed-size formulation, or run it outside",
                         "kept = x[x > 0]")
UNSUPPORTED_CALL = _kind("GB005", "call to an unsupported function",
                         "a call to a function framejit cannot trace into (C functions, "
                         "unsupported builtins, functions with side effects on the "
                         "interpreter), or a class whose instances it cannot model: an "
                         "nn.Module with parameters or buffers, tensor or non-constant "
                         "arguments, or a class outside torch.nn, created in the compiled code "
                         "(stateless torch.nn modules such as CrossEntropyLoss() are built "
                         "during the trace)",
                         "wrap the call in a function decorated with dynamo.disable, or "
                         "report the function if it should be supported",
                         "pid = os.getpid()")
UNSUPPORTED_BYTECODE = _kind("GB006", "unsupported Python construct",
                             "a Python construct framejit does not trace",
                             "restructure the code, or report the construct",
                             "class Local: ...  # a class statement inside the function")
DISABLED = _kind("GB007", "dynamo.disable",
                 "a function marked with dynamo.disable runs eagerly", "this is intended",
                 "y = eager_only(x)  # @dynamo.disable")
RAISE = _kind("GB008", "raise",
              "an exception is raised on the traced path and not caught there",
              "the raise runs eagerly as written", 'raise ValueError("bad shape")')
UNSUPPORTED_OBJECT = _kind("GB009", "unsupported value",
                           "a value of a type framejit cannot model (or guard) is used",
                           "pass tensors, numbers, containers or modules instead",
                           "handle.read()  # an object from a C extension")
INLINE_DEPTH = _kind("GB010", "call depth", "calls nest deeper than dynamo.config.inline_depth",
                     "raise dynamo.config.inline_depth, or mark the helper dynamo.disable",
                     "return recurse(x, depth - 1)")


@dataclasses.dataclass(frozen=True)
class BreakFrame:
    """One frame of the trace when a break happened (the compiled frame, then inlined calls)."""

    code: object  # types.CodeType
    index: int  # the instruction it was executing
    opname: str
    layout: tuple  # its stack: below the call's operands for callers, before the instruction
    function: object = None  # the real function object of an inlined call, if any
    is_generator: bool = False
    direct: bool = False  # the caller's instruction called it (Tracer.call_directly)


class Unsupported(Exception):
    """Tracing cannot continue at this point of the user's program."""

    def __init__(self, kind: BreakKind, detail: str = "", location: Optional[str] = None,
                 exact_frames: bool = False):
        super().__init__(detail or kind.message)
        self.kind = kind
        self.detail = detail or kind.message
        self.location = location  # "file:line", filled in by the interpreter
        self.user_frames: list[str] = []  # file:line of the frames inlined, innermost first
        self.root_index: Optional[int] = None  # instruction of the compiled frame it stops at
        self.root_layout: Optional[tuple] = None  # that frame's stack layout there
        self.chain: Optional[list] = None  # BreakFrame per frame, the compiled frame first
        # the construct must run in the frames eager runs it in: it raises (an operation that
        # failed on the example inputs: the traceback must show every inlined call), or it
        # looks at the frame stack (sys._getframe, warnings' stacklevel, logging's caller).
        # The break then stops at the compiled frame's own call instead of resuming inside
        # the inlined calls (whose instruction would run in the compiled frame)
        self.exact_frames = exact_frames

    def __str__(self) -> str:
        where = f" at {self.location}" if self.location else ""
        return f"{self.kind.id} {self.kind.title}{where}: {self.detail}"


class GraphBreakError(RuntimeError):
    """`dynamo.jit(..., fullgraph=True)` met a construct that needs a graph break.

    Cause: the named construct (at the named `file:line` of your program) cannot be captured
    into a graph. Fix: rewrite it as the hint says, or drop `fullgraph=True` to let framejit
    split the program at that point (see docs/graph-breaks.md for every kind).
    """

    def __init__(self, message: str, failure: Optional[Unsupported] = None):
        super().__init__(message)
        self.failure = failure

    @classmethod
    def from_failure(cls, failure: Unsupported) -> "GraphBreakError":
        kind = failure.kind
        where = failure.location or "an unknown location"
        chain = "".join(f"\n  called from {frame}" for frame in failure.user_frames[1:])
        return cls(f"fullgraph=True, but {kind.title} ({kind.id}) at {where}: "
                   f"{failure.detail}{chain}\nhint: {kind.hint} (see {kind.anchor})", failure)


_START, _END = "<!-- catalogue: generated by `python -m dynamo.breaks --write` -->", \
    "<!-- end of catalogue -->"


def catalogue_markdown() -> str:
    """The catalogue section of `docs/graph-breaks.md`, generated from the registry."""
    lines = [_START, ""]
    for kind in KINDS.values():
        lines += [f"### {kind.id}", "", f"**{kind.title}.** {kind.message[0].upper()}"
                  f"{kind.message[1:]}.", ""]
        if kind.example:
            lines += ["```python", kind.example, "```", ""]
        lines += [f"*Hint:* {kind.hint}.", ""]
    return "\n".join(lines + [_END])


def with_catalogue(document: str) -> str:
    """`document` with its catalogue section replaced by the generated one."""
    if _START not in document or _END not in document:
        raise ValueError("the document has no catalogue section markers")
    before, rest = document.split(_START, 1)
    return before + catalogue_markdown() + rest.split(_END, 1)[1]


def main(argv: list) -> None:
    if argv[:1] == ["--write"] and len(argv) == 2:
        with open(argv[1]) as handle:
            document = handle.read()
        with open(argv[1], "w") as handle:
            handle.write(with_catalogue(document))
    else:
        print(catalogue_markdown())


if __name__ == "__main__":
    main(sys.argv[1:])
