"""Replacement code run by the hook: arguments, cells, exceptions, cache walk, lifetimes."""
import contextlib
import gc
import os
import subprocess
import sys
import traceback
import weakref

import pytest

from dynamo import _C, hook
from dynamo.rewrite import NopRewriteDriver, nop_rewrite
from tests.hook.conftest import Recorder

pytestmark = pytest.mark.skipif(not hook.SUPPORTED, reason=str(hook.unsupported_reason()))


def run_rewritten(fn, *args, **kwargs):
    """Call fn with every frame NOP-rewritten; returns (result, exception)."""
    previous = _C.set_callback(NopRewriteDriver())
    try:
        return fn(*args, **kwargs), None
    except Exception as error:  # compared with eager by the caller
        return None, error
    finally:
        _C.set_callback(previous)
        hook.clear_all()


def signature_zoo(a, /, b, c=3, *args, d, e=5, **kwargs):
    return a, b, c, args, d, e, kwargs


@pytest.mark.parametrize("args,kwargs", [
    ((1, 2), {"d": 4}),
    ((1, 2, 30, 40, 50), {"d": 4, "e": 6, "z": 7}),
    ((1,), {"b": 2, "d": 4, "c": 9}),
    ((1, 2, 3, 4), {"d": None, "**": "odd key"}),
])
def test_arguments_of_every_kind(args, kwargs):
    expected = signature_zoo(*args, **kwargs)
    assert run_rewritten(signature_zoo, *args, **kwargs) == (expected, None)


def test_cells_free_variables_and_an_argument_that_is_a_cell():
    def outer(x, y=10):
        z = x * 2

        def middle(w):
            def inner():
                nonlocal z
                z += 1
                return x + y + z + w
            return inner() + inner()
        return middle(100), z

    assert run_rewritten(outer, 1) == (outer(1), None)


def test_super_and_class_cell():
    class Base:
        def value(self, k):
            return k

    class Child(Base):
        def value(self, k):
            return super().value(k) * 2

    assert run_rewritten(Child().value, 21) == (42, None)


def failing(n):
    values = [1, 2, 3]
    if n > 1:
        return failing(n - 1)
    return values[n + 5]  # IndexError on this line


def frames_of(error):
    return [(frame.filename, frame.lineno, frame.name)
            for frame in traceback.extract_tb(error.__traceback__)]


def test_exceptions_keep_type_message_and_traceback_lines():
    with pytest.raises(IndexError) as eager:
        failing(3)
    _, rewritten = run_rewritten(failing, 3)
    assert type(rewritten) is IndexError and str(rewritten) == str(eager.value)
    assert frames_of(rewritten)[-3:] == frames_of(eager.value)[-3:]  # the three `failing` frames
    assert frames_of(rewritten)[-1][1] == failing.__code__.co_firstlineno + 4


def test_generators_coroutines_and_context_managers_inside_hooked_code():
    log = []

    @contextlib.contextmanager
    def managed(tag):
        log.append(f"enter {tag}")
        try:
            yield tag
        finally:
            log.append(f"exit {tag}")

    def gen(n):
        for i in range(n):
            received = yield i
            if received:
                log.append(received)

    async def coro(x):
        return x * 2

    def body():
        with managed("a") as tag:
            g = gen(3)
            first = next(g)
            second = g.send("sent")
            try:
                coro(5).send(None)
            except StopIteration as stop:
                doubled = stop.value
            with pytest.raises(ZeroDivisionError), managed("b"):
                1 / 0
        return tag, first, second, doubled, list(g)

    expected = body()
    expected_log, log[:] = list(log), []
    assert run_rewritten(body) == (expected, None)
    assert log == expected_log


def recurse(n):
    return 0 if n == 0 else 1 + recurse(n - 1)


def test_recursion_500_deep():
    assert run_rewritten(recurse, 500) == (500, None)


def test_cache_hit_path_calls_no_python_callback(install):
    def target(x):
        return x * 3

    replacement = nop_rewrite(target.__code__)

    def answer(view):
        if view.f_code is target.__code__:
            hook.add_entry(target.__code__, lambda L, G: L["x"] < 100, replacement)
            return replacement
        return hook.SKIP

    recorder = Recorder(answer=answer)
    install(recorder)
    results = [target(i) for i in range(50)]
    misses = recorder.names.count("target")
    target(1000)  # fails the check: back to the callback
    install(None)
    assert results == [i * 3 for i in range(50)]
    assert misses == 1
    assert recorder.names.count("target") == 2


def test_hit_moves_entry_to_the_front(install):
    def target(x):
        return x

    code = target.__code__
    first, second = nop_rewrite(code), nop_rewrite(code)
    hook.add_entry(code, lambda L, G: L["x"] == 1, first)
    hook.add_entry(code, lambda L, G: L["x"] == 2, second)
    assert [entry[1] for entry in hook.entries(code)] == [second, first]
    install(Recorder(answer=hook.SKIP))
    target(1)
    install(None)
    assert [entry[1] for entry in hook.entries(code)] == [first, second]


def test_a_check_that_raises_counts_as_a_miss(install):
    def target(x):
        return x

    hook.add_entry(target.__code__, lambda L, G: L["missing"], nop_rewrite(target.__code__))
    recorder = Recorder(answer=None)
    install(recorder)
    assert target(5) == 5
    install(None)
    assert recorder.names.count("target") == 1


def test_code_object_and_entries_die_with_the_function():
    namespace = {}
    exec("def doomed(x):\n    return x + 1\n", namespace)
    code = namespace["doomed"].__code__
    replacement = nop_rewrite(code)
    check = lambda L, G: True  # noqa: E731
    hook.add_entry(code, check, replacement)
    watch = [weakref.ref(obj) for obj in (code, replacement, check)]
    del namespace, code, replacement, check
    gc.collect()
    assert [ref() for ref in watch] == [None, None, None]


def test_reset_drops_entries_and_skip_marks():
    def target(x):
        return x

    replacement = nop_rewrite(target.__code__)
    hook.add_entry(target.__code__, None, replacement)
    hook.mark_skip(target.__code__)
    watch = weakref.ref(replacement)
    del replacement
    hook.clear_all()
    gc.collect()
    assert watch() is None
    assert hook.entries(target.__code__) == [] and not hook.is_skipped(target.__code__)


def test_no_reference_leak_over_100000_calls(install):
    def target(x, y):
        return y

    payload = object()
    hook.add_entry(target.__code__, lambda L, G: True, nop_rewrite(target.__code__))
    install(Recorder(answer=hook.SKIP))
    for _ in range(1000):
        target(payload, payload)
    gc.collect()
    before_refs = sys.getrefcount(payload)
    before_objects = len(gc.get_objects())
    total_before = getattr(sys, "gettotalrefcount", lambda: 0)()
    for _ in range(100_000):
        target(payload, payload)
    total_after = getattr(sys, "gettotalrefcount", lambda: 0)()
    install(None)
    gc.collect()
    assert sys.getrefcount(payload) == before_refs
    assert len(gc.get_objects()) - before_objects < 50
    assert total_after - total_before < 100  # debug builds: interpreter-wide count


def test_no_leak_when_the_callback_fails(install):
    def target(x):
        return x

    payload = object()

    def bad(view):
        if view.f_code is target.__code__:
            raise RuntimeError("no")

    install(bad)
    before = sys.getrefcount(payload)
    for _ in range(10_000):
        try:
            target(payload)
        except RuntimeError:
            pass
    install(None)
    assert sys.getrefcount(payload) == before


OTHER_USER_OF_CODE_EXTRA = r"""
import ctypes, gc, weakref
from dynamo import _C  # registers our co_extra slot first, so its index is the lower one
api = ctypes.pythonapi
request = getattr(api, "PyUnstable_Eval_RequestCodeExtraIndex", None) \
    or api._PyEval_RequestCodeExtraIndex
set_extra = getattr(api, "PyUnstable_Code_SetExtra", None) or api._PyCode_SetExtra
request.restype, request.argtypes = ctypes.c_ssize_t, [ctypes.c_void_p]
set_extra.restype = ctypes.c_int
set_extra.argtypes = [ctypes.py_object, ctypes.c_ssize_t, ctypes.c_void_p]
index = request(None)
namespace = {}
exec("def other(x):\n    return x\n", namespace)
code = namespace["other"].__code__
assert set_extra(code, index, 1) == 0
watch = weakref.ref(code)
del namespace, code
gc.collect()
print("freed" if watch() is None else "alive")
"""


def test_code_object_with_only_another_users_extra_data_is_freed(tmp_path):
    # torch.compile, debuggers and profilers keep data on co_extra too. CPython then calls our
    # free function with NULL for code objects we never touched; it must not crash.
    env = {"PYTHONPATH": os.pathsep.join(sys.path)}
    result = subprocess.run([sys.executable, "-c", OTHER_USER_OF_CODE_EXTRA], cwd=tmp_path,
                            capture_output=True, text=True, env=env, timeout=60)
    assert (result.returncode, result.stdout.strip()) == (0, "freed"), result.stderr
