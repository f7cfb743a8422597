"""The public API: `jit` in its three forms, module wrapping, `disable`, `reset`, options."""
import io
import os
import subprocess
import sys

import pytest
import torch

import dynamo
from dynamo import hook

pytestmark = pytest.mark.skipif(not hook.SUPPORTED, reason=str(hook.unsupported_reason()))


def add_one(x):
    """Adds one."""
    return x + 1


def test_three_forms_of_jit():
    before = hook.get_callback()  # None, or the driver of `python -m dynamo nop-rewrite`
    x = torch.randn(3)
    plain = dynamo.jit(add_one)
    configured = dynamo.jit(backend="eager")(add_one)

    @dynamo.jit
    def decorated(x):
        return x * 2

    torch.testing.assert_close(plain(x), x + 1)
    torch.testing.assert_close(configured(x), x + 1)
    torch.testing.assert_close(decorated(x), x * 2)
    assert plain.__name__ == "add_one" and plain.__doc__ == "Adds one."
    assert plain.__wrapped__ is add_one and dynamo.is_jitted(plain)
    assert hook.get_callback() is before  # nothing left installed after the call


def test_jitted_method_binds_self():
    class Scaler:
        factor = 3

        @dynamo.jit
        def scale(self, x):
            return x * self.factor

    assert Scaler().scale(2) == 6


def test_exception_from_jitted_function_reads_as_eager():
    @dynamo.jit
    def broken(x):
        return x.no_such_method()

    with pytest.raises(AttributeError, match="no_such_method") as info:
        broken(torch.ones(1))
    names = [entry.name for entry in info.traceback]
    assert names[-1] == "broken" and "ScopedCall" not in str(info.traceback)


def test_module_shares_parameters_buffers_and_state_dict():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    jitted = dynamo.jit(model)
    assert isinstance(jitted, torch.nn.Sequential)
    assert all(a is b for a, b in zip(jitted.parameters(), model.parameters()))
    assert jitted[0].weight is model[0].weight
    assert list(jitted.state_dict()) == list(model.state_dict())
    saved_jitted, saved_model = io.BytesIO(), io.BytesIO()
    torch.save(jitted.state_dict(), saved_jitted)
    torch.save(model.state_dict(), saved_model)
    assert saved_jitted.getvalue() == saved_model.getvalue()
    jitted.eval()
    assert not model.training and not model[1].training
    jitted.extra = 5
    assert model.extra == 5
    x = torch.randn(2, 4)
    torch.testing.assert_close(jitted(x), model(x))


def test_module_pickles_as_the_original():
    model = torch.nn.Linear(2, 2)
    buffer = io.BytesIO()
    torch.save(dynamo.jit(model), buffer)
    buffer.seek(0)
    restored = torch.load(buffer, weights_only=False)
    assert type(restored) is torch.nn.Linear
    torch.testing.assert_close(restored.weight, model.weight)


@pytest.mark.parametrize("kwargs,message", [
    ({"mode": "fastest"}, "unknown mode 'fastest'"),
    ({"options": {"no_such_option": 1}}, "unknown options \\['no_such_option'\\]"),
    ({"backend": "no_such_backend"}, "unknown backend 'no_such_backend'"),
    ({"dynamic": "yes"}, "dynamic must be None, True or False"),
])
def test_bad_options_raise_value_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        dynamo.jit(add_one, **kwargs)


def test_backends_registry_lists_eager_and_inductor():
    assert {"eager", "inductor"} <= set(dynamo.list_backends())


def test_disable_as_decorator_and_context_manager():
    seen = []

    @dynamo.disable
    def eager_only():
        seen.append(hook.get_callback())
        return 1

    @dynamo.jit
    def outer():
        with dynamo.disable():
            seen.append(hook.get_callback())
        seen.append(hook.get_callback() is not None)
        return eager_only()

    assert outer() == 1
    assert seen == [None, True, None]


def test_nop_rewrite_inside_jit_regions_and_reset():
    def inner(x):
        return x * 3

    def outer(x):
        return inner(x) + 1

    jitted = dynamo.jit(outer, options={"nop_rewrite": True})
    assert jitted(2) == 7 and jitted(5) == 16
    assert len(hook.entries(outer.__code__)) == 1 and len(hook.entries(inner.__code__)) == 1
    dynamo.reset()
    assert hook.entries(outer.__code__) == [] and hook.entries(inner.__code__) == []


def test_frames_rewritten_by_nop_rewrite_are_still_captured_by_jit():
    """A NOP-rewritten entry answers only under the driver that made it: a function first run
    under `python -m dynamo nop-rewrite` is captured when called through `jit` afterwards, and
    entries made inside one jit wrapper's nop-rewrite region do not answer another's."""
    from dynamo.rewrite import NopRewriteDriver

    def scale(x):
        return x * 2 + 1

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm

    previous = hook.set_callback(NopRewriteDriver())
    try:
        scale(torch.ones(2))
        assert len(hook.entries(scale.__code__)) == 1
        assert torch.equal(dynamo.jit(scale, backend=backend)(torch.ones(2)), torch.full((2,), 3.))
    finally:
        hook.set_callback(previous)
    assert len(graphs) == 1
    dynamo.reset()
    rewriting = dynamo.jit(scale, backend=backend, options={"nop_rewrite": True})
    rewriting(torch.ones(2))
    assert len(graphs) == 1
    dynamo.jit(scale, backend=backend)(torch.ones(2))
    assert len(graphs) == 2
    dynamo.reset()


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=environment, timeout=300)


def test_config_reads_environment_overrides():
    result = run_python("import dynamo; print(dynamo.config.recompile_limit, "
                        "dynamo.config.nop_rewrite)", JIT_RECOMPILE_LIMIT="3", JIT_NOP_REWRITE="1")
    assert result.stdout.split() == ["3", "True"], result.stderr


def test_config_rejects_unknown_names_and_bad_values():
    with pytest.raises(AttributeError, match="no option 'recompile_limt'"):
        dynamo.config.recompile_limt = 3
    with pytest.raises(ValueError, match="expected an integer"):
        dynamo.config.recompile_limit = "many"


def test_log_channels_switch_on_from_the_environment():
    code = ("import dynamo\n"
            "def f(x):\n    return x + 1\n"
            "dynamo.jit(f, options={'nop_rewrite': True})(1)\n")
    result = run_python(code, JIT_LOGS="hook")
    assert "[framejit.hook] nop-rewrite f" in result.stderr, result.stderr


def test_importing_dynamo_does_not_import_torch_dynamo():
    result = run_python("import sys, dynamo; dynamo.jit; import torch\n"
                        "bad = [m for m in sys.modules if m.startswith(('torch._dynamo', "
                        "'torch._inductor'))]\nprint(bad)")
    assert result.stdout.strip() == "[]", result.stderr
