"""Stage "compile": one subject wrapped by each compared compiler setting, compiles counted.

Input: a variant name and the subject's callable. Output: a `Variant` whose `function` is
called like the subject, whose `first_call` times one call (a compile, when the variant has
no entry for these sizes yet) while counting what it compiled, and whose `counts()` reports
compiles, graphs, recompile reasons, inductor fallbacks and the product's warnings.

Variants (names used in every result file):
- `eager`: the subject itself (the reference for values and time);
- `framejit-static` / `framejit-auto` / `framejit-dynamic`: `dynamo.jit(..., dynamic=False /
  None / True)`; the static one's recompile limit is raised to the number of sizes, so that
  it really holds one specialised entry per size (the baseline of the dynamic/static ratio);
  the others keep the default limit, as a user gets it;
- `torch.compile-static` / `torch.compile-auto` / `torch.compile-dynamic`: `torch.compile(...,
  dynamic=False / None / True)`, the anchor (allowed in benchmarks, never in the product).

Every compiled variant gets its own code object: a copy of the function's code, or for a
module a small calling function compiled from a per-variant copy of `_call_template`.
torch.compile keeps its cache entries and its automatic-dynamic memory per code object, so
two settings wrapping the same code would serve each other's calls; framejit's entries are
per `jit` wrapper already, and gets the same treatment so both measure the same program.

Counting: framejit from its driver's compile records (one per frame compiled, with the
recompile reason and seconds per stage); torch.compile from `torch._dynamo.utils.counters`
(frames compiled, unique graphs), read before and after each first call. Inductor's
fallbacks (`inductor.runtime.fallbacks`) and the product's warnings (recompile limit, eager
fallbacks, `dynamic=True` unsupported) are recorded per variant, so a slowdown by fallback is
visible in the results.
"""
from __future__ import annotations

import collections
import types
import warnings
from typing import Callable, Optional

import torch

from benchmarks.timing import timed

VARIANTS = ("eager", "framejit-static", "framejit-auto", "framejit-dynamic",
            "torch.compile-static", "torch.compile-auto", "torch.compile-dynamic")
_DYNAMIC = {"static": False, "auto": None, "dynamic": True}
_KEPT_MESSAGES = 6


def _call_template(*args):
    return target(*args)  # noqa: F821  (`target` is the global of each per-variant copy)


def own_code(subject: Callable, tag: str) -> Callable:
    """A function behaving like `subject` whose code object no other variant shares."""
    label = "call_" + "".join(c if c.isalnum() else "_" for c in tag)
    if isinstance(subject, types.FunctionType):
        code = subject.__code__.replace(co_name=f"{subject.__name__}_{label}",
                                        co_qualname=f"{subject.__qualname__}_{label}")
        return types.FunctionType(code, subject.__globals__, code.co_name,
                                  subject.__defaults__, subject.__closure__)
    code = _call_template.__code__.replace(co_name=label, co_qualname=label)
    return types.FunctionType(code, {"target": subject, "__builtins__": __builtins__}, label)


def _torch_counts() -> tuple[int, int]:
    from torch._dynamo.utils import counters
    return int(counters["frames"]["ok"]), int(counters["stats"]["unique_graphs"])


def _inductor_fallbacks() -> dict:
    try:
        from inductor.runtime import fallbacks
    except ImportError:
        return {}
    return fallbacks.fallbacks()


class Variant:
    """A compiled (or eager) callable plus what compiling it cost and produced."""

    def __init__(self, name: str, subject: Callable, size_count: int = 20):
        if name not in VARIANTS:
            raise ValueError(f"unknown variant {name!r}; known: {', '.join(VARIANTS)}")
        self.name = name
        self.framework, _, setting = name.rpartition("-") if name != "eager" else ("eager",
                                                                                    "", "")
        self.dynamic = _DYNAMIC.get(setting)
        self.messages: collections.Counter = collections.Counter()
        self.fallbacks: collections.Counter = collections.Counter()
        self._torch = [0, 0]  # frames compiled, unique graphs
        self._driver = None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.function = self._build(subject, size_count)
        self._note(caught)

    def _build(self, subject: Callable, size_count: int) -> Callable:
        if self.framework == "eager":
            return subject
        function = own_code(subject, self.name)
        if self.framework == "torch.compile":
            import torch._dynamo
            torch._dynamo.config.automatic_dynamic_shapes = True
            if self.dynamic is False:
                limit = max(size_count + 4, torch._dynamo.config.recompile_limit)
                torch._dynamo.config.recompile_limit = limit
            return torch.compile(function, dynamic=self.dynamic)
        import dynamo
        options = {"recompile_limit": size_count + 4} if self.dynamic is False else None
        jitted = dynamo.jit(function, dynamic=self.dynamic, options=options)
        self._driver = jitted._framejit_driver
        return jitted

    def _note(self, caught) -> None:
        for warning in caught:
            text = str(warning.message).strip().splitlines()
            self.messages[f"{warning.category.__name__}: {text[0][:200] if text else ''}"] += 1

    def first_call(self, args: tuple, synchronize: Callable):
        """(result, seconds) of one call, counting the compiles and fallbacks it caused."""
        return self.counted(lambda: self.function(*args), synchronize)

    def counted(self, work: Callable[[], object], synchronize: Callable):
        """(result, seconds) of `work()` (calls of `function`), counting the compiles and
        fallbacks they caused and the warnings they gave."""
        torch_before = _torch_counts() if self.framework == "torch.compile" else None
        fallbacks_before = _inductor_fallbacks() if self.framework == "framejit" else None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result, seconds = timed(work, synchronize)
        self._note(caught)
        if torch_before is not None:
            after = _torch_counts()
            self._torch = [self._torch[0] + after[0] - torch_before[0],
                           self._torch[1] + after[1] - torch_before[1]]
        if fallbacks_before is not None:
            now = _inductor_fallbacks()
            for key, count in now.items():
                if count > fallbacks_before.get(key, 0):
                    self.fallbacks[key] += count - fallbacks_before.get(key, 0)
        return result, seconds

    def work_count(self) -> int:
        """Compiles plus fallbacks counted so far (a per-size code variant is a fallback
        record): unchanged across a call that reused existing code."""
        return (self.compiles() or 0) + sum(self.fallbacks.values())

    def compiles(self) -> Optional[int]:
        """Frames compiled so far (every entry made, recompiles included)."""
        if self.framework == "framejit":
            return len(self._driver.records)
        if self.framework == "torch.compile":
            return self._torch[0]
        return 0

    def counts(self) -> dict:
        """Compiles, graphs, recompile reasons, fallbacks and warnings, JSON-ready."""
        counts = {"compiles": self.compiles(), "graphs": 0, "recompile_reasons": [],
                  "fallbacks": dict(self.fallbacks),
                  "warnings": dict(self.messages.most_common(_KEPT_MESSAGES))}
        if self.framework == "framejit":
            records = self._driver.records
            counts["graphs"] = sum(1 for record in records if record.graph is not None)
            reasons = [record.reason for record in records if record.reason]
            counts["recompile_reasons"] = reasons[:_KEPT_MESSAGES]
            counts["recorded_compile_seconds"] = round(sum(
                record.seconds.get("total", 0.0) for record in records), 3)
            counts["source"] = "dynamo driver records"
        elif self.framework == "torch.compile":
            counts["graphs"] = self._torch[1]
            counts["source"] = "torch._dynamo.utils.counters"
        return counts


def torch_compiles_total() -> Optional[int]:
    """All frames torch.compile compiled in this process (to catch compiles while timing)."""
    try:
        return _torch_counts()[0]
    except Exception:  # torch._dynamo unavailable: no torch.compile variant ran
        return None


def _warm_up_function(x):
    return (x + 1).sum()


def warm_up(frameworks: set, device: str) -> dict:
    """{framework: seconds} of compiling and calling a tiny unrelated function once per
    compiler, so that one-off process costs (imports, first code generation, loading native
    helpers) are not charged to whichever variant compiles first."""
    seconds = {}
    for framework in sorted(frameworks - {"eager"}):
        variant = Variant(f"{framework}-auto", _warm_up_function)
        _, seconds[framework] = variant.counted(
            lambda: variant.function(torch.ones(3, device=device)), lambda: None)
    return {name: round(value, 2) for name, value in seconds.items()}

