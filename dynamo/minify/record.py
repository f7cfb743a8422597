"""Stage "record" of the minifier: run the user's script and note every graph and failure.

Input: a script path and its arguments, the backend to test (None: each `dynamo.jit` call's
own) and the kinds of failure looked for. Output: a `Recording`: for each FX graph a backend
received (`GraphRecord`: the graph, the values of the call that failed or of its first call,
the failure), the jitted calls whose results differed from eager's (`CallRecord`), and the
exception that ended the script, if any.

While the script runs, `dynamo.jit` is replaced by a version that wraps the chosen backend in
a `RecordingBackend`. That backend notes each graph and its example inputs, and the callable
it returns runs the graph eagerly beside the compiled code on copies of every call's inputs,
so a failure is pinned on one graph. A jitted function's call is also rerun eagerly (capture
off, printed output swallowed, torch's and `random`'s generators reset) on deep copies of its
arguments: a difference no graph shows is in capture, not in the backend, or comes from a
side effect on Python state the rerun made a second time.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import io
import random
import runpy
import sys
import threading
import warnings
from typing import Any, Callable, Optional

import torch

import dynamo.api
from dynamo.backends import lookup_backend
from dynamo.minify.compare import (Failure, clone_inputs, clone_value, compare_runs,
                                   differences, error_failure, error_fallback_reasons,
                                   fallback_counts, fallback_failure, run_eager)


@dataclasses.dataclass
class GraphRecord:
    """One graph a backend received, and how it failed (if it did)."""

    label: str  # "<function> graph <n>"
    gm: torch.fx.GraphModule
    inputs: list  # values of the failing call (else of the compile's example inputs)
    backend: Callable  # the backend it was compiled with (unwrapped)
    failure: Optional[Failure] = None


@dataclasses.dataclass
class CallRecord:
    """A jitted call whose results differed from its eager rerun."""

    label: str
    failure: Failure


@dataclasses.dataclass
class Recording:
    """What running the script under the recording `jit` produced."""

    graphs: list = dataclasses.field(default_factory=list)  # GraphRecord, in compile order
    calls: list = dataclasses.field(default_factory=list)  # CallRecord
    script_error: Optional[BaseException] = None
    internal_errors: list = dataclasses.field(default_factory=list)  # dynamo's, by warning

    def failing_graphs(self, check: str) -> list:
        return [graph for graph in self.graphs
                if graph.failure is not None and graph.failure.wanted(check)]


INTERNAL_ERROR = "framejit: internal error while compiling"  # dynamo/driver.py's warning
_eager_reference = threading.local()  # set while a jitted call is rerun eagerly


class RecordingBackend:
    """Wraps a backend: records each graph, and checks each compiled call against eager."""

    def __init__(self, inner: Callable, label: str, recording: Recording):
        self.inner, self.label, self.recording = inner, label, recording

    def __call__(self, gm: torch.fx.GraphModule, example_inputs):
        number = sum(1 for graph in self.recording.graphs if graph.label.startswith(
            self.label + " graph "))
        pristine = torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))  # backends may edit gm
        record = GraphRecord(f"{self.label} graph {number}", pristine,
                             clone_inputs([_concrete(value) for value in example_inputs]),
                             self.inner)
        self.recording.graphs.append(record)
        before = fallback_counts()
        try:
            compiled = self.inner(gm, example_inputs)
        except Exception as error:
            record.failure = error_failure(error, "compiling the graph")
            raise  # dynamo runs the frame eagerly, as it would without the minifier
        reasons = error_fallback_reasons(before)
        if reasons:
            record.failure = fallback_failure(reasons)
        return functools.partial(_checked_call, compiled, record)


def _concrete(value):
    """A SymInt example input as the int it stands for."""
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return value.node.hint if getattr(value.node, "hint", None) is not None else value
    return value


def _checked_call(compiled: Callable, record: GraphRecord, *args):
    """Run the compiled graph on the real arguments and eager beside it on copies, until the
    graph has failed once."""
    if record.failure is not None:
        return compiled(*args)  # one failure per graph is enough
    inputs = clone_inputs(args)
    state = torch.get_rng_state()
    fallbacks_before = fallback_counts()
    try:
        result, compiled_error = compiled(*args), None
    except Exception as error:  # noqa: BLE001  (compared with eager below, then re-raised)
        result, compiled_error = None, error
    after = torch.get_rng_state()
    reasons = error_fallback_reasons(fallbacks_before)  # compiled lazily, at its first call
    if reasons:
        record.inputs, record.failure = inputs, fallback_failure(reasons)
    else:
        _compare_with_eager(record, inputs, state, result, compiled_error, args)
    torch.set_rng_state(after)
    if compiled_error is not None:
        raise compiled_error
    return result


def _compare_with_eager(record, inputs, state, result, compiled_error, args) -> None:
    torch.set_rng_state(state)
    eager_inputs = clone_inputs(inputs)
    expected, eager_error = run_eager(record.gm, eager_inputs)
    failure = compare_runs(expected, eager_error, result, compiled_error, eager_inputs, args)
    if failure is not None:
        record.inputs, record.failure = inputs, failure


def recording_jit(recording: Recording, backend_override, check: str, original: Callable):
    """A `dynamo.jit` that records graphs through `RecordingBackend`."""
    def jit(fn_or_module=None, *, backend="inductor", mode=None, **options):
        if fn_or_module is None:
            return lambda target: jit(target, backend=backend, mode=mode, **options)
        chosen = lookup_backend(backend_override or backend)
        if mode not in (None, "default"):
            chosen = functools.partial(chosen, mode=mode)
        label = getattr(fn_or_module, "__qualname__", type(fn_or_module).__qualname__)
        wrapped = RecordingBackend(chosen, label, recording)
        jitted = original(fn_or_module, backend=wrapped, **options)
        if isinstance(fn_or_module, torch.nn.Module) or check == "error":
            return jitted
        return _compared_function(fn_or_module, jitted, label, recording)
    return jit


def _compared_function(function: Callable, jitted: Callable, label: str,
                       recording: Recording) -> Callable:
    """The jitted function, rerun eagerly on copies of each call's arguments and compared."""
    eager = dynamo.api.disable(function)

    def call(*args, **kwargs):
        if getattr(_eager_reference, "active", False):
            return function(*args, **kwargs)  # inside another function's eager rerun
        arguments = _deep_copy((args, kwargs))
        state = (torch.get_rng_state(), random.getstate())
        try:
            result = jitted(*args, **kwargs)
        except Exception as error:
            _compare_call(eager, arguments, state, None, error, label, recording)
            raise
        _compare_call(eager, arguments, state, result, None, label, recording)
        return result
    functools.update_wrapper(call, jitted)
    return call


def _deep_copy(value):
    try:
        return copy.deepcopy(value)
    except Exception:  # noqa: BLE001  (an argument that cannot be copied: shared)
        return clone_value(value)


def _compare_call(eager, arguments, state, result, error, label, recording) -> None:
    after = (torch.get_rng_state(), random.getstate())
    torch.set_rng_state(state[0])
    random.setstate(state[1])
    args, kwargs = arguments
    _eager_reference.active = True
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            expected, eager_error = eager(*args, **kwargs), None
    except Exception as caught:  # noqa: BLE001  (compared below)
        expected, eager_error = None, caught
    finally:
        _eager_reference.active = False
        torch.set_rng_state(after[0])
        random.setstate(after[1])
    failure = _call_failure(expected, eager_error, result, error)
    if failure is not None and not any(call.label == label for call in recording.calls):
        recording.calls.append(CallRecord(label, failure))


def _call_failure(expected, eager_error, result, error) -> Optional[Failure]:
    if error is not None:
        if eager_error is not None and type(eager_error) is type(error):
            return None
        return error_failure(error, "running the jitted function")
    if eager_error is not None:
        return Failure("mismatch", "mismatch", f"eager raised {type(eager_error).__name__}: "
                       f"{eager_error}; the jitted function did not")
    found = differences(expected, result)
    return Failure("mismatch", "mismatch", "; ".join(found[:3])) if found else None


def run_script(path: str, arguments: list, jit: Optional[Callable]) -> Optional[BaseException]:
    """Run the script as `__main__` with `dynamo.jit` replaced by `jit` (None: unchanged);
    return the exception that ended it (None: it finished; `SystemExit(0)` counts as that)."""
    saved_argv, saved_jit = sys.argv, dynamo.api.jit
    sys.argv = [path, *arguments]
    if jit is not None:
        dynamo.api.jit = jit
        sys.modules["dynamo"].jit = jit
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as error:
        return None if error.code in (None, 0) else error
    except Exception as error:  # noqa: BLE001  (the script's failure, reported)
        return error
    finally:
        sys.argv = saved_argv
        dynamo.api.jit = saved_jit
        sys.modules["dynamo"].jit = saved_jit
    return None


def record_script(path: str, arguments: list, backend_override: Optional[str],
                  check: str) -> Recording:
    """Run the script once under the recording `jit` (stage "record")."""
    recording = Recording()
    original = dynamo.api.jit
    dynamo.api.reset()
    jit = recording_jit(recording, backend_override, check, original)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        recording.script_error = run_script(path, arguments, jit)
    for warning in caught:  # shown as they would have been, and capture's errors kept
        text = str(warning.message)
        if text.startswith(INTERNAL_ERROR):
            recording.internal_errors.append(text.splitlines()[0])
        warnings.showwarning(warning.message, warning.category, warning.filename,
                             warning.lineno)
    return recording


def script_fails_eagerly(path: str, arguments: list) -> Optional[BaseException]:
    """Run the script with `dynamo.jit` returning functions unchanged: its own failure."""
    def no_jit(fn_or_module=None, **_options) -> Any:
        return (lambda target: target) if fn_or_module is None else fn_or_module
    dynamo.api.reset()
    return run_script(path, arguments, no_jit)
