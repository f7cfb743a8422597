"""`dynamo.set_stance` with torch.compiler's stances (issue 24, item 2), and torch.compile's
`options=` keys (item 4).

Each test compares jitted results with eager ones and counts what a backend compiled and which
compiled graphs ran.
"""
import threading

import pytest
import torch

import dynamo
from dynamo import hook, stance

from tests.api.counting import Counting

pytestmark = pytest.mark.skipif(not hook.SUPPORTED, reason=str(hook.unsupported_reason()))


@pytest.fixture(autouse=True)
def _fresh():
    dynamo.reset()
    yield
    dynamo.set_stance("default")
    dynamo.reset()


def scaled(x):
    return torch.sin(x) * 2


def test_force_eager_as_call_compiles_nothing_and_ignores_entries():
    backend = Counting()
    jitted = dynamo.jit(scaled, backend=backend)
    x = torch.randn(3)
    jitted(x)
    dynamo.set_stance("force_eager")
    assert stance.current() == "force_eager"
    torch.testing.assert_close(jitted(x), scaled(x))
    torch.testing.assert_close(jitted(x.double()), scaled(x.double()))
    fresh = dynamo.jit(lambda y: y.cos(), backend=backend)
    torch.testing.assert_close(fresh(x), x.cos())
    assert len(backend.graphs) == 1 and backend.runs == 1
    dynamo.set_stance("default")
    jitted(x)
    assert backend.runs == 2


def test_force_eager_as_context_manager_and_decorator():
    backend = Counting()
    jitted = dynamo.jit(scaled, backend=backend)
    x = torch.randn(3)
    with dynamo.set_stance("force_eager"):
        torch.testing.assert_close(jitted(x), scaled(x))
    assert stance.current() == "default" and backend.graphs == []

    @dynamo.set_stance("force_eager")
    def serve(value):
        return jitted(value)

    assert stance.current() == "default"  # decorating does not change the stance
    torch.testing.assert_close(serve(x), scaled(x))
    assert backend.graphs == [] and stance.current() == "default"
    with pytest.raises(RuntimeError):
        with dynamo.set_stance("force_eager"):
            raise RuntimeError("inside")
    assert stance.current() == "default"
    jitted(x)
    assert len(backend.graphs) == 1


def test_stance_is_process_wide():
    backend = Counting()
    jitted = dynamo.jit(scaled, backend=backend)
    results = []
    with dynamo.set_stance("force_eager"):
        worker = threading.Thread(target=lambda: results.append(jitted(torch.ones(2))))
        worker.start()
        worker.join()
    torch.testing.assert_close(results[0], scaled(torch.ones(2)))
    assert backend.graphs == []


def test_eager_on_recompile_uses_entries_and_never_compiles_again():
    backend = Counting()
    jitted = dynamo.jit(scaled, backend=backend, dynamic=False)
    x = torch.randn(3)
    jitted(x)
    with dynamo.set_stance("eager_on_recompile"):
        torch.testing.assert_close(jitted(x), scaled(x))
        assert backend.runs == 2  # the cached entry served the matching call
        for other in (torch.randn(5), x.double(), torch.randn(2, 2)):
            torch.testing.assert_close(jitted(other), scaled(other))
        assert len(backend.graphs) == 1 and backend.runs == 2
    jitted(torch.randn(5))
    assert len(backend.graphs) == 2  # default again: compiles


def test_fail_on_recompile_names_the_function_and_the_failed_guard():
    backend = Counting()
    jitted = dynamo.jit(scaled, backend=backend)
    x = torch.randn(3)
    jitted(x)
    with dynamo.set_stance("fail_on_recompile"):
        torch.testing.assert_close(jitted(x), scaled(x))  # a hit is fine
        with pytest.raises(dynamo.RecompileError) as info:
            jitted(x.double())
        message = str(info.value)
        assert "scaled" in message and "test_stance.py" in message
        assert "dtype" in message and "fail_on_recompile" in message
        with pytest.raises(dynamo.RecompileError, match="no compiled entry yet"):
            dynamo.jit(lambda y: y.cos(), backend=backend)(x)
    assert len(backend.graphs) == 1
    torch.testing.assert_close(jitted(x.double()), scaled(x.double()))


def test_unknown_stances_and_options_raise():
    with pytest.raises(ValueError, match="unknown stance 'eager_then_compile'"):
        dynamo.set_stance("eager_then_compile")
    with pytest.raises(ValueError, match="force_backend"):
        dynamo.set_stance("default", force_backend="eager")
    assert stance.current() == "default"


# -- torch.compile's options= keys -------------------------------------------------------------
@pytest.mark.parametrize("options, mode", [
    ({"max_autotune": True}, "max-autotune-no-cudagraphs"),
    ({"max_autotune": True, "triton.cudagraphs": True}, "max-autotune"),
    ({"triton.cudagraphs": True}, "reduce-overhead"),
    ({"max_autotune": False}, None),
    ({"max_autotune_gemm": True, "recompile_limit": 3}, "max-autotune-no-cudagraphs"),
])
def test_torch_compile_mode_options_map_to_modes(options, mode):
    jitted = dynamo.jit(scaled, options=options)
    settings = jitted._framejit_driver.settings
    assert settings.mode == mode
    assert settings.options == {key: value for key, value in options.items()
                                if key == "recompile_limit"}
    x = torch.randn(3)
    torch.testing.assert_close(jitted(x), scaled(x))


def test_torch_compile_options_without_counterpart_name_the_accepted_keys():
    with pytest.raises(ValueError) as info:
        dynamo.jit(scaled, options={"epilogue_fusion": True, "some_inductor_flag": 1})
    message = str(info.value)
    assert "'epilogue_fusion' (framejit keeps matmuls as library calls" in message
    assert "'some_inductor_flag'" in message
    assert "max_autotune" in message and "triton.cudagraphs" in message
    assert "recompile_limit" in message
    with pytest.raises(ValueError, match="give one or the other"):
        dynamo.jit(scaled, mode="reduce-overhead", options={"max_autotune": True})


def _switches_stance(x):
    y = x + 1
    dynamo.set_stance("force_eager")
    z = torch.sin(y) * 2
    dynamo.set_stance("default")
    return z - 1


def test_set_stance_inside_a_jitted_function_is_a_plain_break():
    x = torch.randn(3)
    expected = _switches_stance(x)
    backend = Counting()
    jitted = dynamo.jit(_switches_stance, backend=backend)
    for _ in range(2):
        torch.testing.assert_close(jitted(x), expected)
    assert stance.current() == "default"
    assert len(backend.graphs) == 1  # x + 1; after the call the frame ran eagerly
    report = dynamo.explain(_switches_stance)(x)
    assert report.graph_break_count == 1
    (info,) = report.breaks
    assert "dynamo.set_stance(...) inside a jitted function runs eagerly" in info.reason
    assert "framejit itself" not in str(report) and "__init__" not in info.reason
