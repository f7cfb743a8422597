"""Stage "debug dump", inductor's side: the artefacts of each graph compiled, for listeners.

Input: the pipeline's calls (`timed(stage, function, ...)`, `lowered(loop_graph)`,
`generated(plan, source)`) while it compiles a graph. Output: calls `listener(name, value)` to
every function registered with `add_listener` (dynamo's debug dump registers one while
`JIT_DEBUG_DIR` is set), with

    "timing"     (stage, seconds)   lower, schedule, build (wall time of each stage)
    "loop_ir"    text               the whole loop graph (`inductor.ir.printer.format_graph`)
    "kernels"    text               per kernel: its plan, then the loop IR of each member
    "source"     text               the generated wrapper and kernels (C++ or Triton)

Inductor never imports `dynamo`: the listener registry is the hand-over. With no listener,
nothing is rendered or timed; a listener or a rendering that raises never reaches the
compile (the text says what failed instead).
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

log = logging.getLogger("framejit.inductor")

_listeners: list = []
_lock = threading.Lock()


def add_listener(listener: Callable[[str, Any], None]) -> None:
    """Call `listener(name, value)` for every artefact from now on (once per function)."""
    with _lock:
        if listener not in _listeners:
            _listeners.append(listener)


def remove_listener(listener: Callable[[str, Any], None]) -> None:
    with _lock:
        if listener in _listeners:
            _listeners.remove(listener)


def listening() -> bool:
    return bool(_listeners)


def publish(name: str, make: Callable[[], Any]) -> None:
    """Hand `make()` to the listeners as artefact `name`; nothing runs without listeners."""
    if not _listeners:
        return
    try:
        value = make()
    except Exception as error:  # noqa: BLE001  (a dump never breaks a compile)
        value = f"<could not render {name}: {type(error).__name__}: {error}>"
    for listener in list(_listeners):
        try:
            listener(name, value)
        except Exception:  # noqa: BLE001
            log.debug("debug artefact listener failed on %s", name, exc_info=True)


def timed(stage: str, function: Callable, *args, **kwargs):
    """`function(*args, **kwargs)`, its wall time published as ("timing", (stage, seconds))."""
    if not _listeners:
        return function(*args, **kwargs)
    started = time.perf_counter()
    try:
        return function(*args, **kwargs)
    finally:
        seconds = time.perf_counter() - started
        publish("timing", lambda: (stage, seconds))


def lowered(loop_graph) -> None:
    """The loop IR of a lowered graph."""
    if _listeners:
        from inductor.ir.printer import format_graph
        publish("loop_ir", lambda: format_graph(loop_graph))


def generated(plan, source: str) -> None:
    """The loop IR per kernel of a scheduled plan, and the generated source."""
    if _listeners:
        publish("kernels", lambda: kernels_text(plan))
        publish("source", lambda: source)


def kernels_text(plan) -> str:
    """Every step of `plan`: a kernel's plan (loops, loads, stores, stages) followed by the
    loop IR of each buffer fused into it; a library call as its one line."""
    from inductor.ir.printer import format_buffer
    from inductor.schedule.plans import KernelPlan
    parts = []
    for step in plan.steps:
        if not isinstance(step, KernelPlan):
            buffer = step.node.buffer
            parts.append(f"# {step.name}: library call\n{format_buffer(buffer)}")
            continue
        lines = [f"# kernel {step.name}", step.describe()]
        for member in step.members():
            lines.append(format_buffer(member.node.buffer))
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"
