"""Stage "rewrite": what a rewritten frame does when its compiled graph raises.

Input: the traced graph (its `GraphBuilder`) and what the trace saw of the error path
(`side_effects.ExceptionPath`). Output: an `ErrorPath`, which the glue (`glue.GluePlan.build`)
turns into a `try` around the graph call, and the helpers that code calls (fuzzer P42).

Eager performs a frame's Python effects in program order and runs its `with` exits, `finally`
and `except` clauses while an error propagates; the glue replays the trace's effects after
the graph. An error the graph raises when it runs (one fake tensors cannot see: an index out
of range, a write eager refuses) would skip them all. So:

- the glue puts back grad mode and autocast (the exits of the `with` blocks the error left);
- where an error would run Python code of the frame (a user `__exit__`, `finally`, `except`)
  or skip a replayed effect (`ExceptionPath.exposed`), a graph that can run again -- its
  writes into inputs copied before it runs, its random generators' states saved -- returns
  `RUN_EAGERLY`, and the replacement runs the frame's own code from its start, in the same
  frame: eager's error, effects, handlers and line, exactly. Counted (`reruns()`) and
  logged on the `graph_breaks` channel: a slow path, never a silent one;
- elsewhere the error is re-raised (what eager leaves, but reported at the compiled
  function: fuzzer P7). A graph that cannot run again (a write giving an input autograd
  history, or changing its shape) is never exposed: the trace broke the graph before any
  operation that would make it so (`dynamo.variables.contexts.check_exception_path`).
"""
from __future__ import annotations

import collections
import dataclasses
import threading
from typing import Optional

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from dynamo import logs
from dynamo.breaks import UNSUPPORTED_CALL, Unsupported
from dynamo.variables.side_effects import ExceptionPath, effect_of, memory_of_inputs

_log = logs.get("graph_breaks")
_lock = threading.Lock()
_reruns: collections.Counter = collections.Counter()


class _RunEagerly:
    """The glue's result when its graph raised and the frame's own code must run."""

    def __repr__(self) -> str:
        return "RUN_EAGERLY"


RUN_EAGERLY = _RunEagerly()
_GRAD = torch._C._set_grad_enabled
_AUTOCAST = (torch.amp._enter_autocast, torch.amp._exit_autocast)


@dataclasses.dataclass(frozen=True)
class ErrorPath:
    """How the glue handles an error out of its graph."""

    runs_again: bool  # the frame's code runs eagerly once the graph's effects are put back
    grad_mode: bool  # the graph switches grad mode: the glue puts it back
    autocast: tuple = ()  # device types whose autocast state the graph switches
    saved_inputs: tuple = ()  # positions of the inputs the graph writes: copied before it
    generators: tuple = ()  # devices whose random generator the graph draws from
    lasting: str = ""  # why the graph cannot run again (a write no copy puts back)

    @property
    def needed(self) -> bool:
        return self.runs_again or self.grad_mode or bool(self.autocast)


def plan_error_path(builder, path: ExceptionPath) -> ErrorPath:
    """The error path of a traced graph (`builder`: its GraphBuilder; `path`: what the trace
    saw). A graph runs again only where an error in it would otherwise not leave what eager
    leaves (`path.exposed`); for one that writes inputs or draws random numbers that costs a
    copy of the written inputs and of the generators' states on every call. Elsewhere it
    re-raises, reported at the compiled function as documented (fuzzer P7): a compiled graph
    raising where eager does not is never hidden by an eager run."""
    nodes = builder.graph.nodes
    inputs = memory_of_inputs(nodes)
    lasting, grad, devices, written, generators = path.lasting, False, [], set(), []
    for node in nodes:
        if node.op not in ("call_function", "call_method", "call_module"):
            continue
        if node.target is _GRAD:
            grad = True
        elif node.target is _AUTOCAST[0]:
            device = node.args[0] if node.args else None
            devices.append(device)
            lasting = lasting or ("" if isinstance(device, str) else "an autocast region")
        elif node.target is not _AUTOCAST[1]:
            effect = effect_of(node, inputs)
            lasting = lasting or (effect.reason if effect.kind == "lasting" else "")
            written.update(effect.storages)
            generators += [effect.device] if effect.kind == "random" else []
    if lasting and path.exposed and not path.lasting:  # the trace's view and ours differ
        raise Unsupported(UNSUPPORTED_CALL, f"an error in this graph ({lasting}) could not "
                          "leave what eager leaves: the frame runs eagerly")
    devices = tuple(dict.fromkeys(devices))
    if lasting or not path.exposed:  # re-raising leaves what eager leaves (but the frames)
        return ErrorPath(False, grad, devices, lasting=lasting)
    placeholders = [node for node in nodes if node.op == "placeholder"]
    if written and len(placeholders) != len(builder.input_sources):
        raise Unsupported(UNSUPPORTED_CALL, "an error in this graph could not leave what "
                          "eager leaves (written inputs the glue cannot tell apart): the "
                          "frame runs eagerly")
    saved = tuple(position for position, node in enumerate(placeholders)
                  if _storage(node) in written)
    return ErrorPath(True, grad, devices, saved, tuple(dict.fromkeys(generators)))


def _storage(node: torch.fx.Node):
    example = node.meta.get("example_value")
    return StorageWeakRef(example.untyped_storage()) \
        if isinstance(example, torch.Tensor) else None


# -- what the glue calls ---------------------------------------------------------------------
def save_modes(devices: tuple) -> tuple:
    """Grad mode and, per device type in `devices`, the autocast state, before the graph."""
    autocast = tuple((device, torch.is_autocast_enabled(device),
                      torch.get_autocast_dtype(device)) for device in devices)
    level = 0
    if devices:
        level = torch.autocast_increment_nesting() - 1
        torch.autocast_decrement_nesting()
    return torch.is_grad_enabled(), autocast, torch.is_autocast_cache_enabled(), level


def restore_modes(saved: tuple) -> None:
    """Put back what `save_modes` saw: the graph raised inside `with` blocks it entered,
    whose exits eager would have run (autocast's drops its cache at nesting level 0)."""
    grad, autocast, cache, level = saved
    torch._C._set_grad_enabled(grad)
    if not autocast:
        return
    current = torch.autocast_increment_nesting() - 1
    torch.autocast_decrement_nesting()
    while current > level:
        current = torch.autocast_decrement_nesting()
        if current == 0:
            torch.clear_autocast_cache()
    for device, enabled, dtype in autocast:
        torch.set_autocast_enabled(device, enabled)
        torch.set_autocast_dtype(device, dtype)
    torch.set_autocast_cache_enabled(cache)


def run_eagerly(name: str, error: BaseException) -> _RunEagerly:
    """Count and log a graph that raised (the frame's code now runs eagerly)."""
    reason = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    with _lock:
        _reruns[(name, reason[:200])] += 1
    _log.debug("the compiled graph of %s raised %s; the frame's own code runs eagerly",
               name, reason)
    return RUN_EAGERLY


def reruns() -> dict:
    """`{"<frame>: <error>": times}`: frames whose compiled graph raised and which then ran
    their own code eagerly, since the process started (or `reset_reruns()`)."""
    with _lock:
        return {f"{name}: {reason}": count for (name, reason), count in sorted(_reruns.items())}


def reset_reruns() -> None:
    with _lock:
        _reruns.clear()


def save_inputs(arguments: tuple, positions: tuple) -> list:
    """Copies of the inputs the graph writes, with their version counters."""
    return [(tensor, tensor.detach().clone(),
             None if tensor.is_inference() else tensor._version)
            for tensor in (arguments[position] for position in positions)]


def restore_inputs(saved: list) -> None:
    """Put back the values (and version counters) `save_inputs` copied."""
    for tensor, copy, version in saved:
        with torch.inference_mode() if version is None else torch.no_grad():
            tensor.copy_(copy)
        if version is not None:
            torch._C._autograd._unsafe_set_version_counter((tensor,), (version,))


def save_generators(devices: tuple) -> list:
    """The states of the random generators of `devices` ("cpu", "cuda:N")."""
    return [(device, torch.get_rng_state() if device == "cpu" else
             torch.cuda.get_rng_state(device)) for device in devices]


def restore_generators(saved: list) -> None:
    for device, state in saved:
        if device == "cpu":
            torch.set_rng_state(state)
        else:
            torch.cuda.set_rng_state(state, device)


def glue_lines(path: Optional[ErrorPath], inputs: list[str], name: str) -> list[str]:
    """The glue's statements calling the graph on `inputs` (expressions) into `out`."""
    call = f"out = compiled({', '.join(inputs)})"
    if path is None or not path.needed:
        return [call]
    before, after = [], []
    if path.autocast:
        before, after = [f"m = save_modes({path.autocast!r})"], ["restore_modes(m)"]
    elif path.grad_mode:
        before, after = ["g = is_grad_enabled()"], ["set_grad_enabled(g)"]
    if path.runs_again and path.saved_inputs:
        before += [f"a = ({''.join(f'{value}, ' for value in inputs)})",
                   f"s = save_inputs(a, {path.saved_inputs!r})"]
        call = "out = compiled(*a)"
    if path.runs_again and path.generators:
        before.append(f"q = save_generators({path.generators!r})")
    lines = [*before, "try:", f"    {call}"]
    if path.runs_again:
        undo = after + (["restore_inputs(s)"] if path.saved_inputs else []) + \
            (["restore_generators(q)"] if path.generators else [])
        lines += ["except Exception as e:", *(f"    {line}" for line in undo),
                  f"    return run_eagerly({name!r}, e)"]
    if after:
        lines += ["except BaseException:", *(f"    {line}" for line in after), "    raise"]
    return lines


GLUE_NAMES = {"save_modes": save_modes, "restore_modes": restore_modes,
              "run_eagerly": run_eagerly, "save_inputs": save_inputs,
              "restore_inputs": restore_inputs, "save_generators": save_generators,
              "restore_generators": restore_generators,
              "is_grad_enabled": torch.is_grad_enabled,
              "set_grad_enabled": torch._C._set_grad_enabled}
