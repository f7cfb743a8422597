"""Project-wide test setup: internal compiler errors raise in tests instead of falling back,
every test starts with no compiled entries, and a test fails when inductor gives a graph up
(runs it through eager kernels: `inductor.fallbacks()`) unless it is marked
`@pytest.mark.expect_fallback(kinds..., reason=...)`.

Hypothesis profiles, one definition for every property test (tests/guards, tests/dynamic, ...):
`ci` (the default: 200 examples, derandomized when `CI` is set so that a CI verdict is
reproducible; locally each run draws new examples) and `thorough` (2,000, never derandomized),
chosen with `HYPOTHESIS_PROFILE`. They replace hypothesis's built-in `ci` profile on purpose.

Under `JIT_DYNAMIC_BY_DEFAULT=1` (`dynamo.config.dynamic_by_default`: every size >= 2 symbolic
from the first call; docs/dynamic-shapes.md, "Testing with every size dynamic") a test marked
`@pytest.mark.static_shapes` (it asserts static behaviour: compile counts per size, a literal
size in a guard or kernel) is skipped, and `per_size` fallbacks (documented compiles per size)
do not fail a test; the ones met are listed at the end of the run."""
import os

import pytest

try:
    from hypothesis import HealthCheck, settings
except ImportError:     # a torch-free, hypothesis-free interpreter (the debug CPython step)
    settings = None
if settings is not None:
    _SUPPRESSED = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                   HealthCheck.data_too_large]
    settings.register_profile("ci", max_examples=200, deadline=None, print_blob=True,
                              suppress_health_check=_SUPPRESSED,
                              derandomize=bool(os.environ.get("CI")))
    settings.register_profile("thorough", max_examples=2000, deadline=None, print_blob=True,
                              suppress_health_check=_SUPPRESSED)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _fresh_jit_state():
    try:
        import torch  # noqa: F401  (torch-free runs, e.g. a debug CPython, skip this)
        import dynamo
        from dynamo import hook
    except ImportError:
        yield
        return
    if not hook.SUPPORTED:
        yield
        return
    saved = dynamo.config.suppress_errors
    dynamo.config.suppress_errors = False
    yield
    dynamo.config.suppress_errors = saved
    dynamo.reset()


@pytest.fixture(autouse=True)
def _no_unexpected_fallback(request):
    """Fail the test if inductor ran a graph through eager kernels instead of generated code
    (kinds "error" and "unsupported"; "configured" fallbacks are asked for), unless marked."""
    try:
        from inductor.runtime import fallbacks
    except ImportError:     # torch-free runs
        yield
        return
    before = fallbacks.fallbacks()
    yield
    marker = request.node.get_closest_marker("expect_fallback")
    allowed = {"configured"} | (set(marker.args or fallbacks.KINDS) if marker else set())
    if _dynamic_by_default():
        per_size = {reason: count for reason, count in fallbacks.since(before).items()
                    if reason.startswith("per_size:")}
        for reason, count in per_size.items():
            graphs, tests = _PER_SIZE_MET.get(reason, (0, []))
            _PER_SIZE_MET[reason] = (graphs + count, tests + [request.node.nodeid])
        allowed.add("per_size")
    unexpected = {reason: count for reason, count in fallbacks.since(before).items()
                  if reason.split(":", 1)[0] not in allowed}
    if unexpected:
        listed = "\n".join(f"  {count} x {reason}" for reason, count in unexpected.items())
        pytest.fail("inductor ran graphs through eager kernels instead of generated code:\n"
                    f"{listed}\n(a compiler bug to fix, or mark the test "
                    "@pytest.mark.expect_fallback(kind, reason=...) if it is by design)",
                    pytrace=False)


_TORCH_CONFIGS = ("torch._dynamo.config", "torch._inductor.config", "torch._functorch.config")


def _hidden_torch_config_entries() -> set:
    """(module, name) of every torch config entry hidden now (`ConfigModule.__delattr__`)."""
    import sys
    hidden = set()
    for module_name in _TORCH_CONFIGS:
        entries = getattr(sys.modules.get(module_name), "_config", None) or {}
        hidden.update((module_name, name) for name, entry in entries.items()
                      if getattr(entry, "hide", False))
    return hidden


@pytest.fixture(autouse=True)
def _torch_config_intact():
    """Fail a test that leaves one of torch's config entries deleted. pytest's
    `monkeypatch.setattr(torch._dynamo.config, ...)` does that on undo (the value lives
    outside the module's `__dict__`, so undo deletes it), and torch then hides the entry for
    good: every later torch.compile in that worker failed with '... does not exist'. Patch
    torch's configs with their own `config.patch(...)`."""
    before = _hidden_torch_config_entries()
    yield
    deleted = _hidden_torch_config_entries() - before
    if deleted:
        names = ", ".join(sorted(f"{module}.{name}" for module, name in deleted))
        pytest.fail(f"the test deleted torch config entries ({names}): use torch's "
                    "`config.patch(...)`, not monkeypatch.setattr", pytrace=False)


_PER_SIZE_MET: dict = {}
"""Under the dynamic-by-default mode: "per_size: <reason>" -> (graphs, the tests), over the run."""


def _dynamic_by_default() -> bool:
    """Whether the suite runs with every size dynamic (`JIT_DYNAMIC_BY_DEFAULT=1`)."""
    try:
        import dynamo
    except ImportError:     # torch-free runs
        return False
    return bool(dynamo.config.dynamic_by_default)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "expect_fallback(*kinds, reason): the test expects inductor to run graphs "
        "through eager kernels (kinds of `inductor.runtime.fallbacks.KINDS`; default all); "
        "without it, such a fallback fails the test")
    config.addinivalue_line(
        "markers", "torch_compile: the test runs torch.compile (the anchor we measure against); "
        "skipped under `python -m dynamo nop-rewrite`, where every frame of torch.compile's own "
        "compiler would be rewritten too (a single such test ran for over an hour)")
    config.addinivalue_line(
        "markers", "static_shapes(reason): the test asserts static-size behaviour (compile "
        "counts per size, a literal size in a guard or kernel); skipped under "
        "JIT_DYNAMIC_BY_DEFAULT=1, where every size >= 2 is symbolic from the first call")


def pytest_runtest_setup(item):
    marker = item.get_closest_marker("static_shapes")
    if marker is not None and _dynamic_by_default():
        reason = marker.kwargs.get("reason") or (marker.args[0] if marker.args else "")
        pytest.skip(f"asserts static sizes, skipped under JIT_DYNAMIC_BY_DEFAULT=1: {reason}")
    if item.get_closest_marker("torch_compile") is None:
        return
    try:
        from dynamo import hook
        from dynamo.rewrite import NopRewriteDriver
    except ImportError:
        return
    if hook.SUPPORTED and isinstance(hook.get_callback(), NopRewriteDriver):
        pytest.skip("runs torch.compile, whose own compiler nop-rewrite would rewrite too")


def pytest_terminal_summary(terminalreporter):
    if not _PER_SIZE_MET:
        return
    terminalreporter.section("per_size fallbacks met under JIT_DYNAMIC_BY_DEFAULT=1")
    for reason, (count, tests) in sorted(_PER_SIZE_MET.items()):
        terminalreporter.write_line(f"{count:4d} x {reason}")
        for test in sorted(set(tests)):
            terminalreporter.write_line(f"       in {test}")
