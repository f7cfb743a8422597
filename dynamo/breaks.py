"""The registry of graph-break kinds: stable ids, user-facing messages, hints, docs anchors.

A graph break is always one of these kinds; `Unsupported` carries the kind, the specific
detail and the user's `file:line`. Messages speak of the user's program, never of framejit's
classes. The catalogue section of `docs/graph-breaks.md` is generated from this table
(`python -m dynamo.breaks --write docs/graph-breaks.md`; a test keeps it current).
"""
from __future__ import annotations

import dataclasses
import re
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
                         "use torch.where or a mask multiplied in (a fixed-size result), or run "
                         "the operation after the jitted call",
                         "kept = x[x > 0]")
UNSUPPORTED_CALL = _kind("GB005", "call to an unsupported function",
                         "a call to a function framejit cannot trace into (C functions, "
                         "unsupported builtins, functions with side effects on the "
                         "interpreter), or a class whose instances it cannot model: an "
                         "nn.Module with parameters or buffers, tensor or non-constant "
                         "arguments, or a class outside torch.nn, created in the compiled code "
                         "(stateless torch.nn modules such as CrossEntropyLoss() are built "
                         "during the trace)",
                         "call the function before the jitted call and pass its result in as "
                         "an argument; where it must stay, it runs eagerly with the same result "
                         "(report the function if it should be traced)",
                         "pid = os.getpid()")
UNSUPPORTED_BYTECODE = _kind("GB006", "unsupported Python construct",
                             "a Python construct framejit does not trace",
                             "move the construct to module level or into a helper called "
                             "before the jitted call (report the construct if it should be "
                             "traced)",
                             "class Local: ...  # a class statement inside the function")
DISABLED = _kind("GB007", "dynamo.disable",
                 "a function marked with dynamo.disable runs eagerly",
                 "remove the disabling decorator (dynamo.disable, torch.compiler.disable) to "
                 "compile the function, or call it before or after the jitted call so that "
                 "the graph around the call stays whole",
                 "y = eager_only(x)  # @dynamo.disable")
RAISE = _kind("GB008", "raise",
              "an exception is raised on the traced path and not caught there",
              "check the condition before the jitted call if the raise is on the hot path; "
              "otherwise nothing to do: the exception propagates exactly as in eager",
              'raise ValueError("bad shape")')
UNSUPPORTED_OBJECT = _kind("GB009", "unsupported value",
                           "a value of a type framejit cannot model (or guard) is used",
                           "read what you need from the object before the jitted call and pass "
                           "tensors, numbers, strings or containers of them as arguments",
                           "handle.read()  # an object from a C extension")
INLINE_DEPTH = _kind("GB010", "call depth", "calls nest deeper than dynamo.config.inline_depth",
                     "raise dynamo.config.inline_depth, or mark the helper dynamo.disable",
                     "return recurse(x, depth - 1)")


@dataclasses.dataclass(frozen=True)
class ReasonHint:
    """A hint more specific than its kind's, for the breaks whose reason, or whose place (the
    break's `file:line` and the calls leading there), matches. The first that matches wins."""

    name: str  # stable, for tests
    applies: str  # what in the user's program it is about, for the docs
    reason: str = ""  # a regular expression searched in the break's reason
    place: str = ""  # one searched in each `file:line` of the break and its callers
    hint: str = ""

    def matches(self, detail: str, places: list) -> bool:
        if self.reason and re.search(self.reason, detail):
            return True
        return bool(self.place) and any(re.search(self.place, where or "") for where in places)


_OPTIMIZER_CLASSES = r"\b(Optimizer|SGD|Adam|AdamW|Adamax|NAdam|RAdam|RMSprop|Rprop|Adagrad|" \
    r"Adadelta|ASGD|LBFGS|SparseAdam)\.(step|zero_grad)\b"

REASON_HINTS: list[ReasonHint] = [
    ReasonHint("optimizer", "opt.step(), opt.zero_grad(), code inside torch.optim",
               reason=_OPTIMIZER_CLASSES, place=r"[/\\]torch[/\\]optim[/\\]",
               hint="this optimizer's step() or zero_grad() runs eagerly here (its update is "
                    "not captured into the graph) and the code after it starts a new graph; "
                    "call it after the jitted call returns, or use an optimizer whose step "
                    "framejit compiles (docs/training.md, \"Compiled optimizer steps\")"),
    ReasonHint("torch.compile disable",
               "functions marked torch.compiler.disable or torch._dynamo.disable, and "
               "torch.compile's own code",
               reason=r"torch\.compiler\.disable|torch\._dynamo|_torchdynamo",
               place=r"[/\\]torch[/\\](_dynamo[/\\]|_compile\.py|compiler[/\\])",
               hint="the function is marked torch.compiler.disable (or torch._dynamo.disable), "
                    "which framejit honours as torch.compile does: it runs eagerly; remove the "
                    "mark to compile it, or call it before or after the jitted call to keep the "
                    "graph whole"),
    ReasonHint("disable block", "`with dynamo.disable():` inside a jitted function",
               reason=r"`with dynamo\.disable\(\):` block|dynamo\.disable\(\.\.\.\) applied "
                      r"inside",
               hint="move the `with dynamo.disable():` block out of the jitted function, or put "
                    "its code in a helper decorated with @dynamo.disable where it is defined: "
                    "after the block, the rest of this call runs eagerly too"),
    ReasonHint("backward", "loss.backward()", reason=r"tensor\.backward\(\)",
               hint="loss.backward() runs eagerly here: the autograd engine runs the backward "
                    "of the compiled forward before it (the inductor backend compiles that "
                    "backward too), and the code after it (opt.step(), ...) continues in a new "
                    "compiled graph; keep it so, or call loss.backward() after the jitted call "
                    "if you want the forward alone in one graph"),
    ReasonHint("gradients", "reading p.grad", reason=r"reading tensor\.grad$",
               hint="autograd fills .grad outside any graph, so reading it runs eagerly: read "
                    "or clip gradients after the jitted call, between loss.backward() and "
                    "opt.step()"),
    ReasonHint("autograd hooks", "t.register_hook(...), t.retain_grad()",
               reason=r"tensor\.(register_hook|retain_grad)\(\)",
               hint="register hooks or call retain_grad() once, before the jitted call (for "
                    "example where the model is built), not on every call"),
    ReasonHint("tensor internals", "t.data, t.grad_fn, t._base, t._version",
               reason=r"reading tensor\.(data|grad_fn|_base|_version)$",
               hint="use x.detach() instead of x.data; inspect grad_fn, _base or _version on "
                    "the jitted function's inputs or outputs, outside it"),
    ReasonHint("requires_grad", "t.requires_grad = ..., t.requires_grad_()",
               reason=r"changing requires_grad|attribute 'requires_grad'",
               hint="set requires_grad (or call requires_grad_()) on the tensors before the "
                    "jitted call, for example when the model is built"),
    ReasonHint("tensor storage", "t.data_ptr(), t.untyped_storage(), t.set_(), t.resize_()...",
               reason=r"tensor\.(data_ptr|untyped_storage|storage|share_memory_|pin_memory|"
                      r"record_stream|set_|resize_)\(\)",
               hint="storage-level calls need real memory, which the graph does not have: call "
                    "them on the jitted function's inputs or outputs, outside it"),
    ReasonHint("with block cut by a break", "leaving a `with` block after a break inside it",
               reason=r"a block cut by a graph break",
               hint="this follows from the break inside the `with` block (listed before it), "
                    "which makes the block's exit run eagerly: remove that break to keep the "
                    "block in one graph"),
    ReasonHint("call stack", "sys._getframe()", reason=r"sys\._getframe",
               hint="code that inspects the call stack (sys._getframe, inspect.stack, a "
                    "library finding its caller) runs eagerly in your frame: move it before or "
                    "after the jitted call"),
    ReasonHint("module construction", "nn.Linear(...) created inside the jitted function",
               reason=r"^creating a module \(",
               hint="build the module once, outside the jitted function (in __init__, or "
                    "where the model is built), and call it from the jitted function"),
    ReasonHint("object construction", "instances of your classes created inside it",
               reason=r"^creating an? \w+ (object|\(custom __new__\))",
               hint="create the object once, before the jitted call, and pass it in as an "
                    "argument or keep it on the module"),
    ReasonHint("string formatting", 'f"{tensor}", str(tensor)',
               reason=r"^formatting .* into a string",
               hint="formatting a tensor reads its values: format it after the jitted call"),
]


def specific_hint(kind: BreakKind, detail: str, places: list) -> str:
    """The hint for one break: the first `REASON_HINTS` entry matching its reason or place,
    else its kind's."""
    for entry in REASON_HINTS:
        if entry.matches(detail, places):
            return entry.hint
    return kind.hint


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
        self.registered_kind = kind
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

    @property
    def kind(self) -> BreakKind:
        """The registered kind, with the hint specific to this break (`REASON_HINTS`): its
        place is known once the interpreter has filled in `location` and `user_frames`."""
        kind = self.registered_kind
        hint = specific_hint(kind, self.detail, [self.location, *self.user_frames])
        return kind if hint == kind.hint else dataclasses.replace(kind, hint=hint)

    def __str__(self) -> str:
        where = f" at {self.location}" if self.location else ""
        return f"{self.kind.id} {self.kind.title}{where}: {self.detail}"


def without_frames(error: Optional[BaseException]) -> Optional[BaseException]:
    """`error`, framejit's own failure, without its traceback and its links to the exceptions
    it chained (`__context__`, `__cause__`): for a failure kept after the `except` that
    caught it (a `Capture`'s, a `PlannedGlue`'s, `CompileRecord.failure`). A chained exception
    is left as it is: it may be the program's, raised again eagerly with its traceback (seed
    63048: the traced `raise` inside a `with` block whose `__exit__` breaks the graph).

    A traceback holds the frames it passed, and a frame that has returned holds its caller's
    (`f_back`), up to the frames of the program that were on the stack when the hook was
    called. A kept failure with its traceback kept those alive with their locals: as long as
    the `jit` wrapper (its records), or until the cyclic GC (the failure in the locals of a
    frame its own traceback holds). Eager frees a frame's locals when it returns. Issue P49:
    the `torch._C._DisableFuncTorch()` guard local to `torch._tensor_str._str`, whose tensor
    printing called a function that failed to compile, stayed in force after `_str` returned;
    functorch's dispatch keys stayed excluded, and a later `functionalize` ran without its
    layer. Returns `error`."""
    if error is not None:
        error.__traceback__ = None
        error.__context__ = error.__cause__ = None
    return error


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
    lines += ["### Hints for particular reasons", "",
              "Whatever its kind, a break whose reason (or the code it is in) matches one of "
              "these gets its hint instead of its kind's; the first match wins.", "",
              "| applies to | hint |", "|---|---|"]
    lines += [f"| {entry.applies} | {entry.hint} |" for entry in REASON_HINTS]
    return "\n".join(lines + ["", _END])


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
