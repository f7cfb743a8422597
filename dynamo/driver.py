"""The per-frame driver: the only module that knows the order of the capture stages.

Input: a `FrameView` handed over by the hook on a cache miss. Output: the hook's answer —
`None` (run as is), `SKIP` (never intercept this code again) or a replacement code object that
is also stored as a cache entry with its check; and a `CompileRecord` (read by `explain()`),
built once from the values the stages return.

Stages per frame, each one function returning a value:

    trace     dynamo/trace/capture.py   trace_frame(view, stops) -> Capture
    stops     dynamo/resume/stops.py    StopPlanner: a graph break -> stops, trace again
    glue plan dynamo/rewrite/frame.py   plan_glue(capture) -> PlannedGlue (graph outputs)
    backend   dynamo/backends/          settings.backend(graph module, example inputs)
    rewrite   dynamo/rewrite/frame.py   build_glue -> glue; replacement.py or resume/stops.py
                                        -> the replacement code object
    install   here                      guards.compile() + hook.add_entry

The recompile policy lives here too: a limit of entries per code object, after which misses
run eagerly with one warning naming the last reason; the stance (`dynamo.stance`: run eagerly
or raise instead of recompiling); frames of functions marked `torch.compiler.disable` run with
capture off. Warnings point at the user's line (`warn_at_user`).
"""
from __future__ import annotations

import collections
import dataclasses
import functools
import logging
import sys
import threading
import time
import warnings
import weakref
from types import CodeType
from typing import Any, Optional

import torch

from dynamo import _C, debug, hook, logs, rewrite, skips, stance
from dynamo.breaks import UNSUPPORTED_BYTECODE, GraphBreakError, Unsupported, without_frames
from dynamo.resume import regions
from dynamo.resume.stops import (StopPlanner, forget_stops, inherited_dynamism,
                                 skeleton_replacement, stop_state)
from dynamo.rewrite.frame import PlannedGlue, as_is, build_glue, plan_glue
from dynamo.rewrite.replacement import replacement_calling
from dynamo.settings import config
from dynamo.shapes import (STATIC, DimensionPolicy, SizeHistory, SymbolicTraceTooSlow,
                           UnboundSymbol)
from dynamo.trace.capture import Capture, trace_frame
from dynamo.resume.state import region_state
from dynamo.variables.disabled import torch_disable_marks
from guards import GuardSet
from guards.held import HeldObject
from guards.kinds.base import RANK_TYPE, Guard
from guards.sources import GlobalStateSource

_log_recompiles = logs.get("recompiles")
_log_bytecode = logs.get("bytecode")
_log_graph = logs.get("graph")
_log_breaks = logs.get("graph_breaks")
_log_guards = logs.get("guards")


@dataclasses.dataclass(frozen=True)
class CompileRecord:
    """What compiling one frame produced (read by `explain()` and tests)."""

    code: CodeType
    graph: Optional[torch.fx.GraphModule]
    guards: list[str]
    replacement: Optional[CodeType]
    glue_source: str = ""
    reason: Optional[str] = None  # why this was a recompile
    failure: Optional[Unsupported] = None  # why the frame runs eagerly
    seconds: dict = dataclasses.field(default_factory=dict)
    compiled: Any = None
    breaks: list = dataclasses.field(default_factory=list)  # trace.capture.BreakRecord, in order
    runs_as_is: bool = False  # the entry runs the original code (failure or no tensor work)
    stops: list = dataclasses.field(default_factory=list)  # instructions that run eagerly


class _CodeState:
    """Per code object and `jit` wrapper: the guard sets of the entries it compiled, whether
    the limit warning was given."""

    def __init__(self):
        self.compiles = 0
        self.warned = False
        self.guard_sets: list = []
        self.recent = collections.deque(maxlen=4)  # last guard sets, dead ones too (reasons)
        self.sizes = SizeHistory()  # automatic dynamic shapes (`dynamo.shapes.policy`)
        self.static_sizes = False   # a symbolic trace could not be guarded: specialise

    def live_entries(self) -> int:
        """Entries of this wrapper still cached (an entry dies with the objects it
        identity-guards, or when `reset()` drops it)."""
        self.guard_sets = [guard_set for guard_set in self.guard_sets if guard_set.alive]
        return len(self.guard_sets)


_CHURN_FACTOR = 4
"""Compiles per code object and wrapper are capped at this many times the recompile limit,
even while entries keep dying (a fresh lambda passed on every call): compiling on every call
would be slower than running eagerly."""

_drivers: "weakref.WeakSet[FrameDriver]" = weakref.WeakSet()
_drivers_lock = threading.Lock()
_compile_lock = threading.RLock()
"""One compile at a time in the process: tracing and the backends use process-wide state
(torch.fx's patcher, inductor's code generation) that is not thread-safe. A thread that
waited for it first looks for an entry another thread compiled meanwhile."""


class FrameDriver:
    """The frame callback of one `jit(...)` call: capture policy plus compiled-entry bookkeeping.

    Its compile state (entry counts, guard sets) is its own: entries made for one wrapper never
    count against another's recompile limit, and die with the wrapper (see `JitScopeGuard`).
    Compiles take `_compile_lock`.
    """

    def __init__(self, settings):
        self.settings = settings
        self._allowed: "weakref.WeakSet[CodeType]" = weakref.WeakSet()
        self.records: list[CompileRecord] = []
        self._nop = None  # rewrites frames when the `nop_rewrite` option is on
        self._states: "weakref.WeakKeyDictionary[CodeType, _CodeState]" = \
            weakref.WeakKeyDictionary()
        with _drivers_lock:
            _drivers.add(self)

    def allow(self, code: CodeType) -> None:
        """Capture frames of `code` even if it lives in a library file."""
        self._allowed.add(code)

    def dimension_policy(self, code: CodeType) -> DimensionPolicy:
        """Which input dimensions a trace of `code` makes symbolic (`dynamo.shapes.policy`)."""
        state = self._states.get(code)
        if state is not None and state.static_sizes:
            return STATIC
        dynamic = self.settings.dynamic
        if dynamic is None and self.option("dynamic_by_default"):
            dynamic = True
        return DimensionPolicy(dynamic, None if state is None else state.sizes)

    def inherit(self, dims_by_region: dict) -> None:
        """What the regions after a graph break start with that the trace before it made
        symbolic: their first compiles trace it symbolically (`dynamo.resume.inheritance`)."""
        for code, dims in dims_by_region.items():
            state = self._states.get(code)
            if state is None:
                state = self._states[code] = _CodeState()
            state.sizes.inherit(dims)

    def option(self, name: str):
        """A `dynamo.config` value, overridden by this jit call's `options`."""
        return self.settings.options.get(name, getattr(config, name))

    def __call__(self, view):
        code = view.f_code
        hook.note_seen(code)
        if self.option("nop_rewrite"):
            if self._nop is None:
                self._nop = rewrite.NopRewriteDriver(owner=self)
            return self._nop(view)
        disabled = _torch_disabled(view.f_func)
        if disabled is not None:
            return disabled
        origin = regions.origin_of(code)
        if skips.is_own(code) or (skips.is_library(origin) and origin not in self._allowed):
            return hook.SKIP
        try:
            with _compile_lock:
                return self._compile(view)
        except (GraphBreakError, stance.RecompileError):
            raise
        except Exception as error:  # an internal compiler error never breaks the program
            if not self.option("suppress_errors"):
                raise
            _warn_fallback(code, view.f_globals, error)
            return hook.SKIP

    def _compile(self, view):
        code = view.f_code
        state = self._states.get(code)
        if state is None:
            state = self._states[code] = _CodeState()
        found = _entry_matching_now(view)
        if found is not None:
            return found  # another thread compiled it while this one waited for the lock
        policy = stance.current()
        if policy == "eager_on_recompile":
            return None  # cached entries still serve the calls they match
        limit = self.option("recompile_limit")
        live = state.live_entries()
        full = live >= limit or state.compiles >= _CHURN_FACTOR * limit
        if state.warned and full:
            return None  # past the limit: run eagerly without explaining every miss again
        reason = _recompile_reason(state, view)
        if full:
            _log_recompiles.debug("not recompiling %s (%s:%d), recompile_limit (%d) reached: "
                                  "%s", code.co_qualname, code.co_filename,
                                  code.co_firstlineno, limit, reason)
            _warn_limit(code, view.f_globals, state, reason, limit)
            return None
        if reason is not None:
            _log_recompiles.debug("recompiling %s (%s:%d): %s", code.co_qualname,
                                  code.co_filename, code.co_firstlineno, reason)
        if policy == "fail_on_recompile" and _may_do_tensor_work(view):
            raise stance.recompile_error(code, reason)
        debug.start_frame()  # the debug dump (JIT_DEBUG_DIR): nothing when off
        try:
            record = compile_frame(view, self, reason)
        except UnboundSymbol as error:  # facts no guard here can read, or too slow: specialise
            _log_recompiles.debug("%s: traced again with static sizes (%s)",
                                  code.co_qualname, error)
            state.static_sizes = True
            record = compile_frame(view, self, reason if not isinstance(
                error, SymbolicTraceTooSlow) else f"traced with static sizes: {error}")
        self.records.append(record)
        debug.frame_compiled(record)
        if record.failure is not None:
            _eager_after_failure(code, record.failure)
            without_frames(record.failure)  # kept: not the frames on the stack (P49)
        if record.replacement is None:
            return hook.SKIP  # no tensor work: nothing to compile, now or later
        state.compiles += 1
        state.guard_sets.append(record.compiled.guard_set)
        state.recent.append(record.compiled.guard_set)
        return record.replacement

    def forget(self) -> None:
        """`dynamo.reset()`: drop this wrapper's compile state; its entries die."""
        with _compile_lock:
            states, self._states = list(self._states.values()), weakref.WeakKeyDictionary()
        for state in states:
            for guard_set in state.guard_sets:
                guard_set.invalidate()


def _entry_matching_now(view) -> Optional[CodeType]:
    """The replacement of a cached entry whose check accepts the frame now, if any."""
    for check, replacement in list(hook.entries(view.f_code)):
        if check is None or check(view.f_locals, view.f_globals):
            return replacement
    return None


_MAX_ATTEMPTS = 8


def compile_frame(view, driver: FrameDriver, reason: Optional[str]) -> CompileRecord:
    """Trace -> glue plan -> backend -> rewrite -> install, for one frame.

    A graph break makes stops and the frame is traced again up to the first one; a break
    that cannot resume caches the original code under the trace's guards (the same guards
    would fail the same way); a frame without tensor work gets no entry at all.
    """
    code = view.f_code
    started = now()
    planner = StopPlanner(code, driver.settings.fullgraph)
    breaks: list = []
    failure = None
    for _ in range(_MAX_ATTEMPTS):
        capture, glue, failure = _trace(view, driver, planner)
        if glue is not None:
            break
        capture.release()
        if failure is None:
            continue  # a planned nested stop was replaced: trace again
        met = planner.after_break(failure)
        breaks.append(met)
        if driver.settings.fullgraph:
            raise GraphBreakError.from_failure(failure)
        if not met.resumed:
            replacement, check = _install(code, capture.guards, as_is(code))
            return CompileRecord(code, None, capture.guards.describe(), replacement,
                                 reason=reason, failure=failure, compiled=check,
                                 breaks=breaks, runs_as_is=True)
        _log_breaks.debug("graph break in %s at %s: %s %s: %s%s", code.co_qualname,
                          failure.location, failure.kind.id, failure.kind.title,
                          failure.detail, "".join(f"\n  called from {frame}"
                                                  for frame in failure.user_frames[1:]))
    else:
        kind = failure.kind if failure is not None else UNSUPPORTED_BYTECODE
        return CompileRecord(code, None, [], None, reason=reason, breaks=breaks,
                             failure=Unsupported(kind, "too many graph breaks"))
    seconds = {"trace": now() - started}
    if capture.graph.op_count() == 0 and capture.stop is None:
        capture.release()
        if not _may_do_tensor_work(view):  # none to expect: the driver skips the code
            return CompileRecord(code, None, [], None, reason=reason, seconds=seconds,
                                 breaks=breaks)
        replacement, check = _install(code, capture.guards, as_is(code))
        return CompileRecord(code, None, capture.guards.describe(), replacement,
                             reason=reason, seconds=seconds, compiled=check, breaks=breaks,
                             runs_as_is=True)  # other values may take a path with tensor work
    record = _compile_and_install(view, driver, capture, glue, planner, seconds, reason,
                                  breaks)
    capture.release()
    log_capture(record)
    return record


def _trace(view, driver: FrameDriver, planner: StopPlanner
           ) -> tuple[Capture, Optional[PlannedGlue], Optional[Unsupported]]:
    """One trace and its glue's plan: (capture, glue, None) when it can be compiled, else
    (capture, None, the graph break), or (capture, None, None) to trace again."""
    capture = trace_frame(view, stop_at=planner.stop_at(),
                          nested_stops=planner.nested_points(),
                          guards=(JitScopeGuard(driver),),
                          inline_depth=driver.option("inline_depth"),
                          argument_factories=_region_arguments(view.f_code),
                          dimensions=driver.dimension_policy(view.f_code))
    if capture.failure is not None:
        return capture, None, capture.failure
    settled = planner.settle(capture)
    if settled.retrace:
        return capture, None, None
    failure = settled.failure
    if failure is None:
        result = None if capture.stop is None else \
            functools.partial(stop_state, capture=capture, stop=planner.stop_of(capture.stop))
        glue = plan_glue(capture, view.f_globals, result)
        if glue.failure is None:
            return capture, glue, None
        failure = glue.failure
    if failure.location is None:  # met settling the stop or planning the glue
        failure.location = capture.location
        failure.user_frames = [failure.location]
    return capture, None, failure


def _compile_and_install(view, driver: FrameDriver, capture: Capture, glue: PlannedGlue,
                         planner: StopPlanner, seconds: dict, reason: Optional[str],
                         breaks: list) -> CompileRecord:
    """Backend -> glue -> replacement -> install; the record of a compiled frame."""
    code, graph, plan = view.f_code, capture.graph, glue.plan
    module = compiled = None
    if graph.op_count() or plan.outputs:
        module = graph.output(plan.outputs)
        graph.shapes.traced()
        started = now()
        compiled = driver.settings.backend(module, list(graph.example_inputs))
        seconds["backend"] = now() - started
        compiled = _C.ScopedCall(compiled, None)  # nothing inside a compiled graph is captured
    function, text = build_glue(code, plan, compiled, graph.input_sources, glue.returned)
    capture.guards.extend(graph.shapes.guards())  # after the backend: it may learn facts too
    stops = planner.stops if capture.stop is not None else None
    if stops is None:
        replacement = replacement_calling(code, function, plan.parameters,
                                          plan.cell_parameters)
    else:
        replacement = skeleton_replacement(code, function, plan, stops)
        driver.inherit(inherited_dynamism(capture, stops))
    replacement, check = _install(code, capture.guards, replacement)
    seconds["total"] = sum(seconds.values())
    described = capture.guards.describe() + graph.shapes.specialisations()
    return CompileRecord(code, module, described, replacement, glue_source=text,
                         reason=reason, seconds=seconds, compiled=check,
                         breaks=breaks, stops=sorted(stops) if stops else [])


def _install(code: CodeType, guards: GuardSet, replacement: CodeType) -> tuple:
    """Cache `replacement` on `code` under the guards' check: (replacement, check). The
    entry is dropped when the guard set is invalidated."""
    check = guards.compile()
    entry = hook.add_entry(code, check, replacement)
    code_ref = weakref.ref(code)

    def drop(_guard_set, entry=entry):
        live = code_ref()
        if live is not None:
            hook.remove_entry(live, entry)
    guards.on_invalidate(drop)
    return replacement, check


def _region_arguments(code: CodeType) -> Optional[dict]:
    """A resumed region's `__state` realises as the special variable its prologue's `enter`
    unpacks."""
    if regions.region_info(code) is None:
        return None
    return {regions.STATE: lambda value, source: lambda: region_state(code, value, source)}


def _may_do_tensor_work(view) -> bool:
    """Whether a frame that did no tensor work this time may on other calls: a resumed
    region, or a frame given tensors or modules."""
    if regions.region_info(view.f_code) is not None:
        return True
    values = list(view.f_locals.values())
    for value in list(values):
        if isinstance(value, (list, tuple)):
            values.extend(value[:16])
        elif isinstance(value, dict):
            values.extend(list(value.values())[:16])
    return any(isinstance(value, (torch.Tensor, torch.nn.Module)) for value in values)


class JitScopeGuard(Guard):
    """The frame runs under the `jit(...)` call that compiled the entry.

    Cache entries live on code objects, which every `jit` wrapper of a function shares; this
    guard keeps an entry compiled for one backend or `fullgraph` setting from answering calls
    made through another. It holds the driver weakly (a `HeldObject`, whose weak reference
    is owned by the guard, so nothing global keeps the guard set alive): when the wrapper dies,
    so do its entries.
    """

    rank = RANK_TYPE

    def __init__(self, driver: "FrameDriver"):
        self.source = GlobalStateSource()
        self.held = HeldObject(driver)
        self.driver = self.held.reference  # a weak reference

    def key(self):
        return self.held.object_id

    def emit(self, writer) -> None:
        compiled_by = writer.bind(self.driver, "compiled_by")
        if self.held.weak:  # one C call (~30 ns) where two calls and a compare took ~75
            writer.require([f"{writer.bind(_C.is_current_callback, 'is_current_jit')}"
                            f"({compiled_by})"])
            return
        current = writer.bind(_C.get_callback, "current_jit")
        writer.require([f"{compiled_by}() is {current}()"])

    def reason(self, value) -> Optional[str]:
        if self.driver() is _C.get_callback():
            return None
        return "called through a different dynamo.jit wrapper (another backend or options)"

    def describe(self) -> str:
        return "the frame runs under the dynamo.jit call that compiled it"

    def watch(self, callback) -> None:
        self.held.watch(lambda: callback(self))


def _recompile_reason(state: _CodeState, view) -> Optional[str]:
    """Why no cached entry matched (None for the first compile): the first failing guard of
    the closest entry (fewest failing guards; the most recently hit one among equals), then
    the first failing guard of each other entry, most recently hit first. When
    this wrapper's entries have all died (an object they guard by identity died, or
    `dynamo.reset()`), the closest of the last ones; when only other wrappers have entries
    for the code, that."""
    live = [guard_set for guard_set in state.guard_sets if guard_set.alive]
    if not live:
        if state.recent:
            return _reason_of_dead(list(state.recent), view)
        if hook.entries(view.f_code):
            return "the code was compiled through another dynamo.jit wrapper (each wrapper " \
                   "compiles its own entries: its backend or options differ)"
        return None
    hit_order = [getattr(check, "guard_set", None) for check, _ in hook.entries(view.f_code)]
    live.sort(key=lambda guard_set: hit_order.index(guard_set) if guard_set in hit_order
              else len(hit_order))
    failures = [guard_set.failures(view.f_locals, view.f_globals) for guard_set in live]
    closest = min(failures, key=len)
    if not closest:
        return "a cached entry was dropped"
    others = [failed[0] for failed in failures if failed is not closest and failed]
    if not others:
        return closest[0]
    shown = "; ".join(others[:OTHER_ENTRIES_SHOWN]) + \
        ("; ..." if len(others) > OTHER_ENTRIES_SHOWN else "")
    return f"{closest[0]} (and {len(others)} other entr{'y' if len(others) == 1 else 'ies'} " \
           f"failed: {shown})"


OTHER_ENTRIES_SHOWN = 3   # a recompile reason names the closest entry's failure, then these


def _reason_of_dead(recent: list, view) -> str:
    """The reason against entries that died: the failing guard of the most recent one that
    fails, else the fact that they died."""
    for guard_set in reversed(recent):
        failures = guard_set.failures(view.f_locals, view.f_globals)
        if failures:
            return f"{failures[0]} (the entries compiled before have died since)"
    return ("the entries compiled before were dropped: an object they guard by identity died "
            "(a function, module or object made anew for each call?) or dynamo.reset() ran")


def _warn_limit(code: CodeType, f_globals: dict, state: _CodeState, reason: Optional[str],
                limit: int) -> None:
    if state.warned:
        return
    churn = "" if state.live_entries() >= limit else \
        f" ({state.compiles} compiles whose entries died since)"
    state.warned = True
    warn_at_user(f"framejit: {code.co_qualname} ({code.co_filename}:{code.co_firstlineno}) "
                 f"reached dynamo.config.recompile_limit ({limit}){churn}; calls "
                 f"that match no compiled entry now run eagerly. Last reason: {reason}",
                 RuntimeWarning, code, f_globals)


def _eager_after_failure(code: CodeType, failure: Unsupported):
    _log_breaks.debug("%s (%s:%d) runs eagerly: %s", code.co_qualname, code.co_filename,
                      code.co_firstlineno, failure, exc_info=failure if config.verbose else None)
    return None


def _warn_fallback(code: CodeType, f_globals: dict, error: Exception) -> None:
    where = f"{code.co_filename}:{code.co_firstlineno}"
    detail = "" if config.verbose else " (set dynamo.config.verbose=True for the traceback)"
    if config.verbose:
        import traceback
        detail = "\n" + "".join(traceback.format_exception(error))
    warn_at_user(f"framejit: internal error while compiling {code.co_qualname} at {where}; "
                 f"running it eagerly: {type(error).__name__}: {error}{detail}",
                 RuntimeWarning, code, f_globals)


def warn_at_user(message: str, category: type, code: Optional[CodeType] = None,
                 f_globals: Optional[dict] = None) -> None:
    """Warn at the user's line: the innermost frame on the stack that is neither framejit's
    nor a library's (the call of the jitted function, or of `jit`), else the definition of
    `code`. `warnings` filters and once-per-place deduplication apply as for a warning
    raised there."""
    frame = sys._getframe(1)
    while frame is not None and (skips.is_own(frame.f_code) or
                                 skips.is_library(frame.f_code)):
        frame = frame.f_back
    if frame is not None:
        filename, lineno, f_globals = frame.f_code.co_filename, frame.f_lineno, frame.f_globals
    elif code is not None:
        filename, lineno = code.co_filename, code.co_firstlineno
    else:
        warnings.warn(message, category, stacklevel=2)
        return
    f_globals = f_globals if f_globals is not None else {}
    registry = f_globals.setdefault("__warningregistry__", {}) \
        if isinstance(f_globals, dict) else None
    lineno = lineno if isinstance(lineno, int) else 0
    try:
        warnings.warn_explicit(message, category, filename, lineno,
                               module=f_globals.get("__name__"), registry=registry,
                               module_globals=_with_a_loader(f_globals))
    except Warning:
        raise   # a filter made it an error: what the program asked for
    except Exception:  # noqa: BLE001  (the source line unreadable: warn without it)
        # CPython's warn_explicit reads the line from the globals' loader and raises
        # IndexError where `lineno` is past that source's end or 0 (code compiled from
        # another text than the module's file runs with its globals): a warning must never
        # fail the program (the detection model's GPU run failed so, stop 47)
        warnings.warn_explicit(message, category, filename, lineno,
                               module=f_globals.get("__name__"), registry=registry)


def _with_a_loader(f_globals: dict) -> Optional[dict]:
    """The module globals warn_explicit may read the source line through; None for globals
    without a loader (a script run by runpy.run_path: `__loader__` and `__spec__` None),
    which CPython 3.12's warn_explicit refuses with a ValueError instead of warning."""
    if not isinstance(f_globals, dict):
        return None
    loader = f_globals.get("__loader__") or getattr(f_globals.get("__spec__"), "loader", None)
    return f_globals if loader is not None else None


def _torch_disabled(function) -> Optional[object]:
    """The hook's answer for a frame of a function marked `torch.compiler.disable` or
    `torch._dynamo.disable` (their wrapper): run it with capture off (recursive, torch's
    default), or with only the wrapped function's own code never intercepted
    (`recursive=False`, as torch skips it); None for any other function."""
    marks = torch_disable_marks(function)
    if marks is None:
        return None
    original, recursive, _message = marks
    if recursive:
        return hook.DISABLE
    code = getattr(original, "__code__", None)
    if code is not None:
        hook.mark_skip(code)
    return hook.SKIP


def reset_driver_state() -> None:
    """Forget every wrapper's compile state (recompile counts, guard sets, which die) and the
    graph-break stops."""
    with _drivers_lock:
        drivers = list(_drivers)
    for driver in drivers:
        driver.forget()
    forget_stops()


def log_capture(record: CompileRecord) -> None:
    code = record.code
    if record.graph is not None and _log_graph.isEnabledFor(logging.DEBUG):
        _log_graph.debug("graph of %s:\n%s", code.co_qualname, record.graph.code)
    if _log_guards.isEnabledFor(logging.DEBUG):
        _log_guards.debug("guards of %s:\n  %s", code.co_qualname, "\n  ".join(record.guards))
    if record.replacement is not None and _log_bytecode.isEnabledFor(logging.DEBUG):
        import dis
        import io
        text = io.StringIO()
        dis.dis(record.replacement, file=text)
        _log_bytecode.debug("glue of %s:\n%s\nrewritten bytecode:\n%s", code.co_qualname,
                            record.glue_source, text.getvalue())


def now() -> float:
    return time.perf_counter()
