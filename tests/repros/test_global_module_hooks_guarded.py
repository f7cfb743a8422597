"""A global nn.Module hook registered after a compile was ignored: `lin(x)` traced while no
global hook existed kept returning the call's result after
`register_module_forward_hook(lambda m, i, o: o * 0)`, where eager returns zeros (found by the
guard-policy review of issue 22: the registries were checked at trace time, never guarded).
The trace now guards that none is registered; a registered one makes the call a graph break
(the module runs eagerly with its hooks), and removing it again reuses the first trace.
With inductor a second bug showed: its compile called framejit's own GraphModules through
`nn.Module.__call__`, so the user's global hook ran on them while they were traced (a hook
mapping the graph's output tuple to `()` made the compiled graph return `()`); inductor now
calls their `forward` (`inductor/graph_calls.py`)."""


def test_global_hooks_do_not_reach_inductor_tracing():
    import inductor
    gm = torch.fx.symbolic_trace(lambda x: (x * 2,))
    handle = torch.nn.modules.module.register_module_forward_hook(
        lambda module, inputs, output: () if isinstance(output, tuple) else output)
    try:
        compiled = inductor.compile_fx(gm, [torch.ones(2)])
    finally:
        handle.remove()
    result = compiled(torch.ones(2))
    result = result[0] if isinstance(result, (tuple, list)) else result
    torch.testing.assert_close(result, torch.full((2,), 2.0))
import torch

import dynamo
from tests.repros.conftest import values

_LIN = torch.nn.Linear(2, 2)


def _call(x):
    return _LIN(x) + 1


def test_hooks_registered_after_the_compile_run(backend):
    jitted = dynamo.jit(_call, backend=backend)
    x = values((3, 2), 0)
    torch.testing.assert_close(jitted(x), _call(x))
    registry = torch.nn.modules.module
    for register, hook in ((registry.register_module_forward_hook, lambda m, i, o: o * 0),
                           (registry.register_module_forward_pre_hook,
                            lambda m, i: (i[0] * 2,))):
        handle = register(hook)
        try:
            expected, actual = _call(x), jitted(x)
            torch.testing.assert_close(actual, expected)
        finally:
            handle.remove()
        torch.testing.assert_close(jitted(x), _call(x))
