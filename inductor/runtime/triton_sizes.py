"""Launching Triton kernels over symbolic sizes (issue 23): one launcher per size bucket.

Input: a kernel's functions and its `LaunchSpec`, whose extents (`xnumel`, `ynumel`,
`rnumel`) are sympy expressions in the graph's size symbols, and the example call's sizes
(`GraphPlan.size_hints`). Output: a `SizedLauncher`, called by the wrapper with the kernel's
buffers, then one int per size symbol (`KernelPlan.size_symbols()` order).

Per call it evaluates the extents from the sizes, returns without launching where the grid
is empty (a size 0), and hands the call to the `Launcher` of the extents' size bucket: the
next power of two of each symbolic extent (all in one generated frame, `dispatch`: 0.9 us
against 3.1 us for the same steps through three helper frames, 2-core VM). Block sizes, the
persistent-or-looped choice and autotuning depend on the bucket only (every candidate masks the
symbolic axes, so it is right for any size in it): two sizes in one bucket tune once, and the
record on disk is keyed by the bucket. At most `TUNED_BUCKETS` buckets per kernel are timed;
later buckets launch their first candidate untimed (counted in `untuned_buckets`, logged once).
"""
from __future__ import annotations

import dataclasses
import logging
import threading

import sympy

from inductor.runtime.triton_launch import Launcher

log = logging.getLogger("framejit.inductor")

TUNED_BUCKETS = 16      # size buckets timed per kernel (docs/triton.md, "Symbolic sizes")
EXTENTS = ("xnumel", "ynumel", "rnumel")


def bucket_value(extent: int) -> int:
    """The bucket of one extent: its next power of two (0 stays 0: nothing launches)."""
    return 0 if extent <= 0 else 1 << (extent - 1).bit_length()


def extent_function(spec, names: list):
    """A function of the size values (named `names`, in order) returning (xnumel, ynumel,
    rnumel) as ints. The expressions hold products, sums and the loop IR's `FloorDiv` /
    `ModularIndexing`, printed as Python integer arithmetic."""
    from inductor.codegen.expressions import index_text

    texts = [index_text(sympy.sympify(getattr(spec, field)), "//") for field in EXTENTS]
    source = f"lambda {', '.join(names) or '*_'}: ({', '.join(texts)},)"
    return eval(compile(source, "<framejit launch extents>", "eval"))  # noqa: S307


def bucket_spec(spec, extents: tuple):
    """The `LaunchSpec` candidates are chosen from for the bucket of `extents` (ints): each
    symbolic extent of `spec` replaced by its bucket value, so every size of the bucket gives
    the same candidates and the same tuning record."""
    values = {field: max(1, bucket_value(extent)) for field, extent in zip(EXTENTS, extents)
              if not sympy.sympify(getattr(spec, field)).is_Integer}
    return dataclasses.replace(spec, **values)


class SizedLauncher:
    """Runs a kernel over symbolic sizes (see the module docstring). `make_launcher(spec)`
    builds the `Launcher` of a bucket from that bucket's spec; `hints`: size name -> the
    example call's value (the bucket whose functions compile ahead of the first call)."""

    def __init__(self, source, make_launcher, hints: dict):
        self.name = source.plan_name
        self.symbolic_spec = source.spec
        self.size_names = list(source.size_symbols)     # names, in argument order
        self.buffer_count = len(source.arguments)
        self.extents = extent_function(source.spec, self.size_names)
        self.symbolic_axes = [position for position, field in enumerate(EXTENTS)
                              if not sympy.sympify(getattr(source.spec, field)).is_Integer]
        self.make_launcher = make_launcher
        self.launchers: dict = {}       # bucket -> Launcher
        self.untuned_buckets = 0
        self._creating = threading.Lock()
        example = self.extents(*[hints.get(name, 1) for name in self.size_names])
        self.example = self._launcher(self._bucket(example), example)
        self.dispatch = self._dispatch_function()

    @property
    def device(self):
        return self.example.device

    def compile_tasks(self) -> dict:
        """The example bucket's compilations (other buckets compile on first use)."""
        return self.example.compile_tasks()

    def _bucket(self, extents: tuple) -> tuple:
        return tuple(bucket_value(extents[axis]) for axis in self.symbolic_axes)

    def _launcher(self, bucket: tuple, extents: tuple) -> Launcher:
        with self._creating:
            launcher = self.launchers.get(bucket)
            if launcher is None:
                launcher = self.make_launcher(bucket_spec(self.symbolic_spec, extents))
                tuned = sum(1 for known in self.launchers.values() if known.tuned_here)
                launcher.tuned_here = launcher.choice is None
                if launcher.tuned_here and tuned >= TUNED_BUCKETS:
                    if not self.untuned_buckets:
                        log.warning("Triton kernel %s: %d size buckets tuned (TUNED_BUCKETS); "
                                    "further buckets launch untimed configurations",
                                    self.name, tuned)
                    self.untuned_buckets += 1
                    launcher.choice, launcher.tuned_here = launcher.candidates[0], False
                self.launchers[bucket] = launcher
            return launcher

    def __call__(self, *arguments) -> None:
        """`dispatch` (generated wrappers call that themselves: a frame less per launch)."""
        return self.dispatch(*arguments)

    def _dispatch_steps(self, *arguments) -> None:
        """What `dispatch` does, step by step (size names that are no plain identifiers)."""
        extents = self.extents(*arguments[self.buffer_count:])
        if extents[0] == 0 or extents[1] == 0:      # an empty grid: nothing to launch
            return
        bucket = self._bucket(extents)
        launcher = self.launchers.get(bucket)
        if launcher is None:
            launcher = self._launcher(bucket, extents)
        launcher._call(*arguments, *extents)

    def _dispatch_function(self):
        """`dispatch(*buffers, *sizes)`, generated for this kernel: its extents, the empty
        grid's early return, the bucket and the bucket's launcher's call in one frame (the
        same steps through `extents`, `_bucket` and a generator took three more Python
        frames per launch)."""
        from inductor.codegen.expressions import index_text
        buffers = [f"t{position}" for position in range(self.buffer_count)]
        sizes = list(self.size_names)       # size symbols' names (`s0`), as `extent_function`
        if not all(name.isidentifier() and name[0] == "s" for name in sizes):
            return self._dispatch_steps
        texts = [index_text(sympy.sympify(getattr(self.symbolic_spec, field)), "//")
                 for field in EXTENTS]
        buckets = [f"0 if {EXTENTS[axis]} <= 0 else 1 << ({EXTENTS[axis]} - 1).bit_length()"
                   for axis in self.symbolic_axes]
        parameters = ", ".join(buffers + sizes)
        bucket = f"({', '.join(f'({text})' for text in buckets)}{',' if buckets else ''})"
        lines = [f"def dispatch({parameters}):",
                 *[f"    {field} = {text}" for field, text in zip(EXTENTS, texts)],
                 "    if xnumel == 0 or ynumel == 0:     # an empty grid: nothing to launch",
                 "        return",
                 f"    bucket = {bucket}",
                 "    launcher = launchers.get(bucket)",
                 "    if launcher is None:",
                 "        launcher = make(bucket, (xnumel, ynumel, rnumel))",
                 f"    launcher._call({parameters}, xnumel, ynumel, rnumel)"]
        namespace = {"launchers": self.launchers, "make": self._launcher}
        exec(compile("\n".join(lines), f"<framejit sized launch {self.name}>", "exec"),
             namespace)
        return namespace["dispatch"]
