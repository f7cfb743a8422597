"""The cache policy around guards, through `dynamo.jit`: most recently hit entry first, the
recompile limit and its one warning, recompile reasons (log channel and compile records), entries
dying with the objects they identity-guard, and `dynamo.reset()`."""
import gc
import os
import subprocess
import sys
import warnings
import weakref

import pytest
import torch

import dynamo
from dynamo import hook

pytestmark = pytest.mark.skipif(not hook.SUPPORTED, reason=str(hook.unsupported_reason()))


def double(x):
    return x * 2


def jit_counting(function, **options):
    """Sizes key the entries here: dynamic=False keeps one entry per size (the subject is the
    cache policy; tests/capture/test_symbolic_sizes.py covers sizes becoming dynamic)."""
    counting = dynamo.CountingBackend()
    return dynamo.jit(function, backend=counting, dynamic=False,
                      options=options or None), counting


def front_sizes(code) -> list:
    """The size each cache entry of `code` was compiled for, front of the list first."""
    sizes = []
    for check, _ in hook.entries(code):
        lines = [line for line in check.guard_set.describe() if line.startswith("L['x']:")]
        sizes.append(lines[0].split("size=")[1].split("]")[0] + "]")
    return sizes


def test_most_recently_hit_entry_is_first():
    jitted, counting = jit_counting(double)
    for size in (1, 2, 3):
        jitted(torch.ones(size))
    assert front_sizes(double.__code__) == ["[3]", "[2]", "[1]"]
    hits = hook.counters()["hits"]
    jitted(torch.ones(1))
    assert front_sizes(double.__code__) == ["[1]", "[3]", "[2]"]
    jitted(torch.ones(2))
    assert front_sizes(double.__code__) == ["[2]", "[1]", "[3]"]
    assert hook.counters()["hits"] - hits == 2 and counting.frame_count == 3


def test_recompile_limit_warns_once_naming_the_last_reason():
    jitted, counting = jit_counting(double, recompile_limit=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = [jitted(torch.ones(size)) for size in (1, 2, 3, 4, 3, 1)]
    for size, result in zip((1, 2, 3, 4, 3, 1), results):
        torch.testing.assert_close(result, torch.full((size,), 2.0))  # eager past the limit
    messages = [str(warning.message) for warning in caught]
    assert len(messages) == 1, messages
    assert "reached dynamo.config.recompile_limit (2)" in messages[0]
    assert messages[0].endswith("Last reason: L['x'].size()[0]: expected 2, got 3 (and 1 "
                                "other entry failed: L['x'].size()[0]: expected 1, got 3)")
    assert counting.frame_count == 2 and len(hook.entries(double.__code__)) == 2


def test_recompile_reasons_are_recorded_for_explain():
    jitted, _ = jit_counting(double)
    jitted(torch.ones(2))
    jitted(torch.ones(2, dtype=torch.float64))
    with torch.no_grad():
        jitted(torch.ones(2))
    reasons = [record.reason for record in jitted._framejit_driver.records]
    assert reasons == [None, "L['x'].dtype: expected torch.float32, got torch.float64",
                       "grad mode: expected enabled, got disabled (and 1 other entry failed: "
                       "L['x'].dtype: expected torch.float64, got torch.float32)"]


def test_a_recompile_reason_names_every_entrys_failure():
    """With several entries, the reason names the closest entry's failing guard, then each
    other entry's (the first three), as torch.compile's recompile log lists them."""
    jitted, _ = jit_counting(double)
    for size in (1, 2, 3, 4, 5, 6):
        jitted(torch.ones(size))
    reasons = [record.reason for record in jitted._framejit_driver.records]
    assert reasons[-1].startswith("L['x'].size()[0]: expected ")
    assert "(and 4 other entries failed: " in reasons[-1] and reasons[-1].endswith("; ...)")
    assert reasons[-1].count("got 6") == 4


@pytest.mark.static_shapes(reason="a recompile from size 2 to 5, read in a static guard")
def test_recompiles_log_channel():
    code = ("import torch, dynamo\n"
            "def scale(x):\n    return x * 3\n"
            "jitted = dynamo.jit(scale, backend='eager')\n"
            "jitted(torch.ones(2)); jitted(torch.ones(5)); jitted(torch.ones(2))\n")
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), JIT_LOGS="recompiles")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=environment, timeout=300)
    lines = [line for line in result.stderr.splitlines() if line.startswith("[framejit.")]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("[framejit.recompiles] recompiling scale (<string>:2): ")
    assert lines[0].endswith("L['x'].size()[0]: expected 2, got 5")


def call_through(x, function):
    return function(x) + 1


def test_entries_die_with_identity_guarded_objects():
    jitted, _ = jit_counting(call_through)
    functions = [lambda x: x * 2, lambda x: x * 3]
    x = torch.ones(2)
    for function in functions:
        torch.testing.assert_close(jitted(x, function), function(x) + 1)
    guard_sets = [check.guard_set for check, _ in hook.entries(call_through.__code__)]
    assert len(guard_sets) == 2 and all(guard_set.alive for guard_set in guard_sets)
    watch = weakref.ref(functions[0])
    del functions[0], function
    gc.collect()
    assert watch() is None
    assert len(hook.entries(call_through.__code__)) == 1
    assert sorted(guard_set.alive for guard_set in guard_sets) == [False, True]
    torch.testing.assert_close(jitted(x, functions[0]), x * 3 + 1)


def test_reset_drops_entries_counts_and_the_limit_warning():
    jitted, counting = jit_counting(double, recompile_limit=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jitted(torch.ones(1))
        jitted(torch.ones(2))
    assert len(caught) == 1 and counting.frame_count == 1
    dynamo.reset()
    assert hook.entries(double.__code__) == []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jitted(torch.ones(2))  # compiles again: the count started over
    assert caught == [] and counting.frame_count == 2
    check, replacement = (weakref.ref(part) for part in hook.entries(double.__code__)[0])
    dynamo.reset()
    del jitted  # its compile records (for explain) were the last holders
    gc.collect()
    assert check() is None and replacement() is None
