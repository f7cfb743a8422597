"""The one configuration object of `dynamo` and its environment overrides.

Every option is a typed field of `Config`; `JIT_<FIELD>` in the environment overrides its
default when `dynamo` is imported (`JIT_RECOMPILE_LIMIT=4`, `JIT_NOP_REWRITE=1`). Code reads
`dynamo.config.<field>` at the moment it needs a value, so assignments take effect at once.
Parsing and checking of values are `guards.environment`'s. `docs/api.md` lists every field.
"""
from __future__ import annotations

import dataclasses

from guards.environment import Settings, setting


@dataclasses.dataclass
class Config(Settings):
    """Options of the frame capture. Assign attributes to change them at run time."""

    OWNER = "dynamo.config"

    recompile_limit: int = 8
    """Compiled entries per code object; further guard misses run eagerly with one warning."""

    nop_rewrite: bool = False
    """Send every intercepted frame through decode -> insert NOPs -> assemble (a self-test)."""

    suppress_errors: bool = True
    """On an internal compiler error run the frame eagerly with one warning; False raises."""

    inline_depth: int = 32
    """How deep user function calls are inlined into one graph before the call breaks it."""

    verbose: bool = False
    """Attach the full internal traceback to warnings about fallbacks."""

    disable: bool = False
    """Capture nothing: every jitted function and module runs eagerly (`JIT_DISABLE=1`),
    in every thread, from the next call on; compiled entries stay cached but unused."""

    dynamic_by_default: bool = False
    """`jit(dynamic=None)` behaves as `dynamic=True` (`JIT_DYNAMIC_BY_DEFAULT=1`): every dimension
    of size >= 2 is symbolic from the first call (sizes 0/1, `mark_static` and an explicit
    `dynamic=False` keep specialising). A testing mode (CI runs parts of the suite under it),
    also for users who know their sizes vary. Read at compile time."""

    symbolic_trace_seconds: float = 30.0
    """A trace with symbolic sizes still running after this many seconds is abandoned and the
    frame traced again with static sizes, for good (torch's ShapeEnv can spend minutes
    simplifying size expressions such as swin_t's padded windows); `explain()` lists it
    among the recompiles. 0: no limit."""

    debug_dir: str = setting("", kind="path")
    """Write a debug dump of every compiled frame under this folder (`JIT_DEBUG_DIR`): bytecode,
    graphs, guards, loop IR, kernels, timings, graph breaks and an index.html per run
    (`dynamo/debug/`, docs/troubleshooting.md); empty: nothing is written."""

    def __setattr__(self, name: str, value) -> None:
        super().__setattr__(name, value)
        if name == "disable":
            for listener in DISABLE_LISTENERS:
                listener()


DISABLE_LISTENERS: list = []
"""Called after `config.disable` is assigned (`dynamo.stance` turns capture off in C)."""


config = Config.from_environment()
