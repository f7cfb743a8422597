"""Running one generated program eagerly and jitted, call by call, and judging the difference.

Stage: execution. Input: program source text and a backend name. Output: an `Outcome`:
"pass", "fail" (a failure kind from `compare.KINDS`, the call and a detail) or "invalid" (the
program itself misbehaved: not deterministic eagerly, or `inputs()` raised: a fuzzer bug).

The source is executed three times into fresh module namespaces: two eager copies (the second
proves the program deterministic, so that a difference is the compiler's) and one whose `fn`
is jitted. Call k runs in all three before call k+1, and is compared right away: grad mode
after the call, exception (type, message, the program's own frames), arguments after the call,
the returned value, printed output, then every global, class attribute and module-object
attribute, and finally the gradients of `backward()` through the results.

Frames are compared where they are promised. An error raised while a compiled graph runs (the
frame under the program's innermost one is the graph call: framejit's glue at its `compiled(`
line, or torch.compile's frames) keeps eager's type and message but reports the compiled
function, not the inlined calls below it (docs/graph-breaks.md, "What differs from eager, by
design"): there the jitted frames must be eager's outer frames down to the compiled function,
lines equal but the compiled function's own. `strict_frames` compares every frame exactly.

`dynamic` (`DYNAMIC`) is the `dynamic=` argument the jitted side gets: "off" passes none
(today's default), "auto" `dynamic=None`, "true" `dynamic=True`, "false" `dynamic=False`; the
modes other than "off" come with programs whose calls sweep the batch size (`inputs.py`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import linecache
import os
import signal
import sys
import threading
import time
import traceback
import types
import warnings
from typing import Any, Callable, Optional

import torch

from tests.fuzz import compare
from tests.fuzz.compare import Comparer, Mismatch, backward_errors_differ
from tests.fuzz.tree import CALL_CONTEXTS



def _product_dirs() -> tuple:
    """The directories of the dynamo/guards/inductor packages actually imported."""
    import dynamo
    root = os.path.dirname(os.path.dirname(os.path.abspath(dynamo.__file__)))
    return tuple(os.path.join(root, name) + os.sep for name in ("dynamo", "guards",
                                                                 "inductor"))


NAMESPACE = "fuzzprog"
GLUE_FILES = "<framejit glue"  # dynamo/rewrite/glue.py names its generated functions so
HARNESS_NAMES = {"fn", "inputs", "CALLS", "CONTEXTS", "_t"}
DYNAMIC = {"off": {}, "auto": {"dynamic": None}, "true": {"dynamic": True},
           "false": {"dynamic": False}}  # --dynamic -> the jit call's keyword arguments


class Timeout(BaseException):
    """The program ran past its time (a BaseException: no generated handler catches it)."""


@dataclasses.dataclass
class Backend:
    """How to jit a function for one backend name, and what to read back about it."""

    name: str
    tolerance: compare.Tolerance
    compiler_dirs: tuple
    dynamic: str = "off"

    def wrap(self, fn: Callable) -> Callable:
        if self.name.startswith("torch.compile"):
            inner = self.name.partition(":")[2] or "inductor"
            return torch.compile(fn, backend=inner, **DYNAMIC[self.dynamic])
        import dynamo
        return dynamo.jit(fn, backend=self.name, **DYNAMIC[self.dynamic])

    def reset(self) -> None:
        if self.name.startswith("torch.compile"):
            import torch._dynamo
            torch._dynamo.reset()
            torch._dynamo.utils.counters.clear()
        else:
            import dynamo
            dynamo.reset()

    def configure(self) -> None:
        if self.name.startswith("torch.compile"):
            import torch._dynamo
            torch._dynamo.config.suppress_errors = False
        else:
            import dynamo
            import inductor
            dynamo.config.suppress_errors = False
            inductor.config.fallback_on_error = False  # compiler bugs surface (as in tests)
            inductor.config.verify_ir = True

    def graph_call(self, frame: traceback.FrameSummary) -> bool:
        """Whether `frame`, called from the program's innermost frame, runs a compiled graph."""
        if self.name.startswith("torch.compile"):
            return frame.filename.startswith(self.compiler_dirs)
        return frame.filename.startswith(GLUE_FILES) and \
            (frame.line or "").lstrip().startswith("out = compiled(")

    def inductor_fallbacks(self) -> dict:
        """inductor's counted fallbacks so far (`inductor.runtime.fallbacks`), if loaded."""
        module = sys.modules.get("inductor.runtime.fallbacks")
        return module.fallbacks() if module is not None else {}

    def stats(self, jitted) -> dict:
        if self.name.startswith("torch.compile"):
            from torch._dynamo.utils import counters
            breaks = counters.get("graph_break", {})
            return {"graphs": counters.get("stats", {}).get("unique_graphs", 0),
                    "breaks": sum(breaks.values()),
                    "break_kinds": {str(key)[:60]: value for key, value in breaks.items()}}
        records = getattr(getattr(jitted, "_framejit_driver", None), "records", [])
        kinds, failures = {}, {}
        for record in records:
            for item in record.breaks:
                kinds[item.title] = kinds.get(item.title, 0) + 1
            if record.failure is not None and not record.breaks:
                text = str(record.failure).split("\n")[0][:80]
                failures[text] = failures.get(text, 0) + 1
        return {"graphs": sum(1 for record in records if record.graph is not None),
                "breaks": sum(kinds.values()), "break_kinds": kinds,
                "fallbacks": sum(failures.values()), "fallback_reasons": failures}


def backend(name: str, dynamic: str = "off") -> Backend:
    if dynamic not in DYNAMIC:
        raise ValueError(f"unknown dynamic mode {dynamic!r}; use one of {sorted(DYNAMIC)}")
    if name.startswith("torch.compile"):
        inner = name.partition(":")[2] or "inductor"
        dirs = tuple(os.path.join(os.path.dirname(torch.__file__), part) + os.sep
                     for part in ("_dynamo", "_inductor", "_functorch"))
        return Backend(name, compare.TOLERANCES[inner], dirs, dynamic)
    import dynamo
    if name not in dynamo.list_backends():
        raise ValueError(f"unknown backend {name!r}; use one of {dynamo.list_backends()}, "
                         f"torch.compile or torch.compile:eager")
    return Backend(name, compare.TOLERANCES.get(name, compare.TOLERANCES["eager"]),
                   _product_dirs(), dynamic)


@dataclasses.dataclass
class Outcome:
    seed: int
    status: str  # "pass", "fail", "invalid"
    kind: str = ""
    call: int = -1
    detail: str = ""
    seconds: float = 0.0
    stats: dict = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class CallRun:
    args: Any
    value: Any = None
    error: Optional[BaseException] = None
    printed: str = ""
    grad_after: bool = True
    frames: list = dataclasses.field(default_factory=list)
    in_graph: bool = False  # the error came out of a compiled graph's call
    gradients: Any = "not run"  # what backward() through the results gave (run once)


def load(source: str, filename: str) -> dict:
    """Execute the program into a fresh module namespace."""
    lines = source.splitlines(keepends=True)
    linecache.cache[filename] = (len(source), None, lines, filename)
    module = types.ModuleType(NAMESPACE)
    namespace = module.__dict__
    exec(compile(source, filename, "exec"), namespace)
    return namespace


def call_mode(context: str):
    """The mode call `context` (a key of tree.CALL_CONTEXTS) runs in."""
    mode = CALL_CONTEXTS[context][1]
    return torch.no_grad() if mode == "no_grad" else \
        torch.inference_mode() if mode == "inference_mode" else contextlib.nullcontext()


def arguments_of(space: dict, index: int) -> tuple:
    """The arguments of call `index`, made under inference mode where its context says."""
    context = space.get("CONTEXTS", {}).get(index, "")
    with torch.inference_mode(CALL_CONTEXTS[context][0]):
        return space["inputs"](index)


def call(fn: Callable, args: tuple, filename: str,
         graph_call: Optional[Callable] = None, context: str = "") -> CallRun:
    run = CallRun(args)
    output = io.StringIO()
    torch.set_grad_enabled(True)
    with contextlib.redirect_stdout(output), call_mode(context):
        try:
            run.value = fn(*args)
        except Exception as error:  # compared with the other run
            run.error = error
        run.grad_after = torch.is_grad_enabled()    # what the call left, inside its mode
    torch.set_grad_enabled(True)
    run.printed = output.getvalue()
    if run.error is not None:
        frames = traceback.extract_tb(run.error.__traceback__)
        run.frames = [(frame.name, frame.lineno) for frame in frames
                      if frame.filename == filename]
        mine = [index for index, frame in enumerate(frames) if frame.filename == filename]
        if graph_call is not None and mine and mine[-1] + 1 < len(frames):
            run.in_graph = graph_call(frames[mine[-1] + 1])
    return run


def run_source(source: str, backend_name: str, seed: int = 0, timeout: float = 120.0,
               backward: bool = True, strict_frames: bool = False,
               dynamic: str = "off") -> Outcome:
    """Run and compare one program; never raises for anything the program or the compiler
    does."""
    chosen = backend(backend_name, dynamic)
    chosen.configure()
    chosen.reset()
    started = time.perf_counter()
    filename = f"<fuzzprog {seed}>"
    outcome = Outcome(seed, "pass")
    before = chosen.inductor_fallbacks()
    try:
        with _alarm(timeout), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _run_calls(source, chosen, filename, outcome, backward, strict_frames)
        outcome.stats["warnings"] = sum(1 for item in caught if "framejit" in str(item.message))
        kinds = {}  # graphs inductor ran through eager kernels or compiled per size, by kind
        for reason, count in chosen.inductor_fallbacks().items():
            added = count - before.get(reason, 0)
            if added > 0:
                kind = reason.split(":", 1)[0]
                kinds[kind] = kinds.get(kind, 0) + added
        if kinds:
            outcome.stats["inductor_fallbacks"] = kinds
    except Timeout:
        outcome.status, outcome.kind, outcome.detail = "fail", "timeout", f"over {timeout} s"
    finally:
        torch.set_grad_enabled(True)
        linecache.cache.pop(filename, None)
        chosen.reset()
    outcome.seconds = round(time.perf_counter() - started, 3)
    return outcome


def _run_calls(source, chosen, filename, outcome, backward, strict_frames) -> None:
    try:
        spaces = [load(source, filename) for _ in range(3)]
    except Exception as error:
        outcome.status, outcome.detail = "invalid", f"the program does not load: {error!r}"
        return
    eager, check, jit_space = spaces
    jitted = chosen.wrap(jit_space["fn"])
    outcome.stats["eager_raised"] = 0
    outcome.stats["calls"] = eager["CALLS"]
    for index in range(eager["CALLS"]):
        try:
            arguments = [arguments_of(space, index) for space in spaces]
        except Exception as error:
            if chosen.dynamic != "off" and index > 0:  # a class of the program cannot be
                outcome.stats["sweep_stopped"] = index  # built at this size: calls end here
                outcome.stats["calls"] = index
                break
            outcome.status, outcome.detail = "invalid", f"inputs({index}) raised {error!r}"
            return
        context = eager.get("CONTEXTS", {}).get(index, "")
        first = call(eager["fn"], arguments[0], filename, context=context)
        second = call(check["fn"], arguments[1], filename, context=context)
        actual = call(jitted, arguments[2], filename, chosen.graph_call, context)
        if isinstance(first.error, NameError):  # never generated on purpose: a fuzzer bug
            outcome.status, outcome.call = "invalid", index
            outcome.detail = f"eager raised {first.error!r}"
            return
        outcome.stats["eager_raised"] += first.error is not None
        if first.error is not None:
            errors = outcome.stats.setdefault("eager_errors", [])
            if type(first.error).__name__ not in errors:
                errors.append(type(first.error).__name__)
        same = _compare(first, second, eager, check, compare.EXACT, ())
        # the state after the call (params' gradients) is compared before the backward()
        # through the results, which resets the gradients of every leaf it reaches
        found = None if same is not None else _compare(
            first, actual, eager, jit_space, chosen.tolerance, chosen.compiler_dirs,
            strict_frames)
        if same is None and backward:
            same = _compare_backward(first, second, eager, check, compare.EXACT)
        if same is not None:
            outcome.status, outcome.call = "invalid", index
            outcome.detail = f"not deterministic eagerly: {same}"
            return
        if found is None and actual.frames != first.frames:  # a documented difference
            outcome.stats["graph_frames"] = outcome.stats.get("graph_frames", 0) + 1
        if found is None and backward:
            found = _compare_backward(first, actual, eager, jit_space, chosen.tolerance)
        if found is not None and _stale_view_quirk(first, actual) and \
                _agrees_when_observed(source, filename, index, actual, jit_space, chosen):
            outcome.stats["stale_view"] = outcome.stats.get("stale_view", 0) + 1
            break  # documented (P17): the calls after it ran from different states
        if found is not None:
            outcome.status, outcome.kind, outcome.call = "fail", found.kind, index
            outcome.detail = f"call {index}: {found}"
            break
    outcome.stats.update(chosen.stats(jitted))


LEAF_IN_PLACE = "a leaf Variable that requires grad is being used in an in-place operation"


def _stale_view_quirk(eager: CallRun, jitted: CallRun) -> bool:
    """Eager raised autograd's leaf error and the jitted call did not: eager autograd's
    observer effect (docs/graph-breaks.md, "What differs from eager, by design"). A view made
    before its base was written in place with an operand requiring grad carries a stale
    grad_fn until something reads its `grad_fn` or `is_leaf`; an in-place op on it before
    that raises this error, after it does not. Capture reads `is_leaf` of a graph's inputs
    (torch's fake-tensor converter does), so the jitted program never raises it."""
    return isinstance(eager.error, RuntimeError) and jitted.error is None and \
        str(eager.error).startswith(LEAF_IN_PLACE)


class _ObserveGradFn(torch.overrides.TorchFunctionMode):
    """Reads `grad_fn` of every tensor argument before each torch call, as capture does."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        for value in [*args, *kwargs.values()]:
            if isinstance(value, torch.Tensor):
                value.grad_fn  # regenerates a stale view's grad_fn
        return func(*args, **kwargs)


def _agrees_when_observed(source: str, filename: str, index: int, actual: CallRun,
                          jit_space: dict, chosen) -> bool:
    """Calls 0..index run again eagerly from a fresh namespace under `_ObserveGradFn`: call
    `index` must then agree with the jitted call in everything."""
    space = load(source, filename)
    for number in range(index + 1):
        arguments = arguments_of(space, number)
        with _ObserveGradFn():
            observed = call(space["fn"], arguments, filename,
                            context=space.get("CONTEXTS", {}).get(number, ""))
    return _compare(observed, actual, space, jit_space, chosen.tolerance,
                    chosen.compiler_dirs) is None


def _compare(expected: CallRun, actual: CallRun, space_e: dict, space_a: dict,
             tolerance, compiler_dirs, strict_frames=True) -> Optional[Mismatch]:
    found = _compare_error(expected, actual, compiler_dirs, tolerance, strict_frames)
    if found:
        return found
    if expected.grad_after != actual.grad_after:
        return Mismatch("grad_mode", "after the call", f"grad enabled {actual.grad_after}, "
                        f"eager {expected.grad_after}")
    comparer = Comparer(tolerance, check_layout=True)
    found = _relabel(comparer.same(expected.args, actual.args, "arguments"), "mutation")
    if found:
        return found
    if expected.error is None:
        found = comparer.same(expected.value, actual.value, "result")
        if found:
            return found
    text = compare.printed_differ(expected.printed, actual.printed, tolerance)
    if text:
        return Mismatch("print", "stdout", text)
    return _relabel(comparer.same(_globals(space_e), _globals(space_a), "globals"), "globals")


def _relabel(found: Optional[Mismatch], kind: str) -> Optional[Mismatch]:
    if found is not None and found.kind == "result":
        found.kind = kind
    return found


def _compare_error(expected: CallRun, actual: CallRun, compiler_dirs, tolerance,
                   strict_frames: bool = True) -> Optional[Mismatch]:
    """Type and message as eager's (numbers in the message within the backend's tolerance, as
    printed output: `raise ValueError(f"{x.item()}")` shows a compiled sum's last bits)."""
    a, b = expected.error, actual.error
    if a is None and b is None:
        return None
    if a is not None and b is not None and type(a).__qualname__ == type(b).__qualname__ and \
            compare.printed_differ(str(a), str(b), tolerance) is None:
        if not frames_agree(expected.frames, actual.frames,
                             actual.in_graph and not strict_frames):
            where = " (raised in a compiled graph)" if actual.in_graph else ""
            return Mismatch("traceback", type(a).__name__ + where,
                            f"jitted frames {actual.frames}, eager {expected.frames}")
        return None
    if b is not None and _from_compiler(b, compiler_dirs):
        return Mismatch("internal_error", "jitted raised", f"{_describe(b)} (eager: "
                        f"{_describe(a) if a else 'no exception'})\n{_compiler_frames(b)}")
    return Mismatch("exception", "raised", f"jitted {_describe(b) if b else 'no exception'}, "
                    f"eager {_describe(a) if a else 'no exception'}")


def frames_agree(eager: list, jitted: list, in_graph: bool) -> bool:
    """Exactly the same frames; for an error out of a compiled graph, eager's outer frames
    down to the compiled function (which reports its own line, not the failing one's)."""
    if not in_graph or eager == jitted:
        return eager == jitted
    count = len(jitted)
    return 0 < count <= len(eager) and jitted[:-1] == eager[:count - 1] and \
        jitted[-1][0] == eager[count - 1][0]


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {str(error)[:300]}"


def _from_compiler(error: BaseException, compiler_dirs) -> bool:
    module = type(error).__module__ or ""
    if module.split(".")[0] in ("dynamo", "guards", "inductor") or \
            module.startswith(("torch._dynamo", "torch._inductor")):
        return True
    return any(frame.filename.startswith(compiler_dirs)
               for frame in traceback.extract_tb(error.__traceback__))


def _compiler_frames(error: BaseException) -> str:
    frames = traceback.extract_tb(error.__traceback__)[-4:]
    return "\n".join(f"    {frame.filename}:{frame.lineno} {frame.name}" for frame in frames)


def _globals(space: dict) -> dict:
    """The program's state outside `fn`: data globals, class attributes, module objects."""
    state = {}
    for key, value in space.items():
        if key.startswith("__") or key in HARNESS_NAMES:
            continue
        if isinstance(value, types.ModuleType):
            if value.__name__ in sys.modules:
                continue  # torch, types, ...: not the program's
            state[key] = {k: v for k, v in vars(value).items() if not k.startswith("__")}
        elif isinstance(value, type):
            state[key] = {k: v for k, v in vars(value).items() if not k.startswith("__") and
                          not callable(v) and not isinstance(v, (property, staticmethod,
                                                                 classmethod))}
        elif not callable(value) or isinstance(value, torch.nn.Module):
            state[key] = value
    return state


def _compare_backward(expected: CallRun, actual: CallRun, space_e: dict, space_a: dict,
                      tolerance) -> Optional[Mismatch]:
    if expected.error is not None:
        return None
    first = _backward(expected, space_e)
    second = _backward(actual, space_a)
    if first is None and second is None:
        return None
    if (first is None) != (second is None):
        return Mismatch("backward", "results", "only one side has results requiring grad")
    (error_a, grads_a), (error_b, grads_b) = first, second
    if backward_errors_differ(error_a, error_b):
        return Mismatch("backward", "backward()", f"jitted {error_b}, eager {error_a}")
    found = Comparer(tolerance, check_layout=False).same(grads_a, grads_b, "gradients")
    if found is not None:
        found.kind = "backward"
    return found


def _backward(run: CallRun, space: dict):
    if run.gradients == "not run":
        run.gradients = _run_backward(run, space)
    return run.gradients


def _run_backward(run: CallRun, space: dict):
    outputs = [t for t in _tensors(run.value) if t.requires_grad and t.is_floating_point()]
    if not outputs:
        return None
    leaves = [t for t in _tensors(run.args) + _parameters(space)
              if t.is_leaf and t.requires_grad]
    for leaf in leaves:
        leaf.grad = None
    try:
        sum(output.sum() for output in outputs).backward()
    except Exception as error:  # compared with the other side
        for leaf in leaves:  # what the engine accumulated before the error depends on the
            leaf.grad = None  # order it ran the nodes in: not compared at the next call
        return f"{type(error).__name__}: {error}", None
    return None, [leaf.grad for leaf in leaves]


def _tensors(value, depth: int = 0) -> list:
    if depth > 4:
        return []
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item, depth + 1)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _tensors(item, depth + 1)]
    if isinstance(value, torch.nn.Module):
        return list(value.parameters())
    if hasattr(value, "__dict__") and not isinstance(value, (type, types.ModuleType)):
        return _tensors(vars(value), depth + 1)
    return []


def _parameters(space: dict) -> list:
    return [p for value in space.values() if isinstance(value, torch.nn.Module)
            for p in value.parameters()]


@contextlib.contextmanager
def _alarm(seconds: float):
    if threading.current_thread() is not threading.main_thread() or not seconds:
        yield
        return

    def expire(signum, frame):
        raise Timeout()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
