"""The function objects that run replacements are reused (eval_frame.c, `take_function`): a reused
one must keep nothing alive once idle, and never change under a frame that still uses it."""
import gc
import sys
import threading
import weakref

import pytest

from dynamo import _C, hook
from dynamo.rewrite import nop_rewrite
from tests.hook.conftest import Recorder

pytestmark = pytest.mark.skipif(not hook.SUPPORTED, reason=str(hook.unsupported_reason()))


class Payload:
    pass


def cached(function):
    """Give `function`'s code one always-matching NOP-rewritten entry."""
    hook.add_entry(function.__code__, None, nop_rewrite(function.__code__))
    return function


def test_idle_functions_keep_no_globals_closures_or_code_alive(install):
    namespace = {"payload": Payload()}
    exec("def from_globals(x):\n    return payload, x\n", namespace)
    kept = Payload()

    def make(value):
        def from_closure(x):
            return value, x
        return from_closure

    from_closure = make(kept)
    cached(namespace["from_globals"])
    cached(from_closure)
    install(Recorder(answer=hook.SKIP))
    for _ in range(3):
        assert namespace["from_globals"](1)[1] == 1 and from_closure(2) == (kept, 2)
    install(None)
    watch = [weakref.ref(namespace["payload"]), weakref.ref(kept),
             weakref.ref(hook.entries(from_closure.__code__)[0][1])]
    hook.clear_all()
    del namespace, kept, from_closure
    gc.collect()
    assert [ref() for ref in watch] == [None, None, None]


def test_each_call_sees_its_own_closure_and_globals(install):
    def make(value):
        def inner(x):
            return value + x
        return inner

    functions = [make(value) for value in range(5)]
    cached(functions[0])  # one code object: every closure shares the entry
    namespaces = [{"base": base} for base in (100, 200)]
    for namespace in namespaces:
        exec("def shifted(x):\n    return base + x\n", namespace)
    for namespace in namespaces:
        cached(namespace["shifted"])
    install(Recorder(answer=hook.SKIP))
    results = [[f(10) for f in functions] for _ in range(3)]
    shifted = [namespace["shifted"](1) for namespace in namespaces for _ in range(3)]
    install(None)
    assert results == [[10, 11, 12, 13, 14]] * 3
    assert shifted == [101] * 3 + [201] * 3


def test_escaped_frames_keep_their_globals(install):
    frames = []
    namespaces = [{"frames": frames, "sys": sys, "tag": tag} for tag in ("a", "b", "c")]
    for namespace in namespaces:
        exec("def grab(x):\n    frames.append(sys._getframe())\n"
             "    if x:\n        raise ValueError(tag)\n    return tag\n", namespace)
        cached(namespace["grab"])
    install(Recorder(answer=hook.SKIP))
    tracebacks = []
    for namespace in namespaces:
        assert namespace["grab"](0) == namespace["tag"]
        try:
            namespace["grab"](1)
        except ValueError as error:
            tracebacks.append(error.__traceback__)
    install(None)
    hook.clear_all()
    del namespaces, namespace  # the frames alone keep each function, and so its globals
    gc.collect()
    overwrite = [{"tag": index} for index in range(1000)]  # reuse freed memory, if any
    assert [frame.f_globals["tag"] for frame in frames] == ["a", "a", "b", "b", "c", "c"]
    assert [frame.f_code.co_name for frame in frames] == ["grab"] * 6
    assert [tb.tb_next.tb_frame.f_globals["tag"] for tb in tracebacks] == ["a", "b", "c"]
    assert len(overwrite) == 1000


def recursive(n):
    return n if n == 0 else recursive(n - 1) + 1


def test_recursion_and_threads_with_a_hit_at_every_level(install):
    cached(recursive)
    errors = []

    def work():
        previous = _C.set_callback(Recorder(answer=hook.SKIP))
        try:
            for _ in range(20):
                assert recursive(200) == 200
        except BaseException as error:  # reported by the main thread
            errors.append(error)
        finally:
            _C.set_callback(previous)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    install(Recorder(answer=hook.SKIP))
    hits = _C.counters()["hits"]
    assert recursive(300) == 300
    assert _C.counters()["hits"] - hits >= 301
    install(None)
    for thread in threads:
        thread.join()
    assert errors == []


def test_each_call_sees_its_own_module_name(install):
    # 3.12: namedtuple, enum, dataclasses and typing take __module__ from
    # sys._getframemodulename(), which reads the running function's module
    namespaces = [{"__name__": name} for name in ("first_module", "second_module")]
    for namespace in namespaces:
        exec("import collections\n"
             "def make():\n    return collections.namedtuple('Point', 'x y')\n", namespace)
        cached(namespace["make"])
    install(Recorder(answer=hook.SKIP))
    modules = [namespace["make"]().__module__ for _ in range(2) for namespace in namespaces]
    install(None)
    assert modules == ["first_module", "second_module"] * 2
