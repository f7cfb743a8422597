"""guards/native/build: the one run-time build of native helpers. A helper builds once and
later loads hit the disk cache; the folder's file lock is held while building; a source that
does not compile (or no compiler) gives None and its reason, logged once; a first-use build
logs one notice and builds the other registered helpers alongside. Tiny sources without torch's
headers keep these fast."""
import logging
import os
import subprocess
import sys
import threading
import time

import pytest

from guards.native import build

CPP_SOURCE = r"""
#include <Python.h>
static PyObject* answer(PyObject*, PyObject*) { return PyLong_FromLong(42); }
static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, nullptr}, {nullptr}};
static PyModuleDef module = {PyModuleDef_HEAD_INIT, "NAME", nullptr, -1, methods};
PyMODINIT_FUNC PyInit_NAME() { return PyModule_Create(&module); }
"""

C_SOURCE = CPP_SOURCE.replace("(PyObject*, PyObject*)", "(PyObject* a, PyObject* b)") \
    .replace("nullptr", "NULL")


@pytest.fixture(autouse=True)
def own_registry(monkeypatch):
    """Helpers of these tests stay out of the product's registry and are forgotten after."""
    monkeypatch.setattr(build, "_registry", {})
    yield
    while MADE:
        build.forget(MADE.pop())


MADE: list = []


def helper(tmp_path, name="_tiny", source=CPP_SOURCE, suffix=".cpp", **changes):
    """A helper built from `source` (NAME: its module name) into tmp_path/cache/tiny."""
    path = tmp_path / f"{name}{suffix}"
    path.write_text(source.replace("NAME", name))
    options = dict(module=f"tests_native.{name}", source=str(path), folder="tiny",
                   unavailable=f"{name} unavailable, using Python",
                   root=lambda: str(tmp_path / "cache"))
    options.update(changes)
    MADE.append(build.NativeHelper(**options))
    return MADE[-1]


def test_builds_once_then_loads_from_the_cache(tmp_path, monkeypatch):
    tiny = helper(tmp_path)
    module = build.load(tiny)
    assert module.answer() == 42
    path = build.library_path(tiny)
    assert os.path.dirname(os.path.dirname(path)) == str(tmp_path / "cache" / "tiny")
    assert os.path.exists(path) and build.load(tiny) is module
    build.forget(tiny)       # as a new process would: nothing loaded, the library on disk

    def refuse(*_arguments, **_keywords):
        raise AssertionError("the compiler ran although the cache holds the library")
    monkeypatch.setattr(build, "_Build", refuse)
    assert build.load(tiny).answer() == 42
    assert [name for name in os.listdir(os.path.dirname(path)) if name.startswith(".build-")] \
        == []


def test_a_new_process_loads_without_building(tmp_path):
    tiny = helper(tmp_path)
    assert build.load(tiny) is not None
    code = ("import sys\nfrom guards.native import build\n"
            "build._Build = None  # any build would fail\n"
            f"helper = build.NativeHelper(module={tiny.module!r}, source={tiny.source!r}, "
            f"folder='tiny', unavailable='x', root=lambda: {str(tmp_path / 'cache')!r})\n"
            "print(build.load(helper).answer())\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
                            timeout=300)
    assert result.stdout.split() == ["42"], result.stderr


def test_a_c_source_builds_against_python_only(tmp_path):
    tiny = helper(tmp_path, "_tiny_c", source=C_SOURCE, suffix=".c")
    assert not tiny.against_torch and "-ltorch" not in build.compile_command(tiny, "out")
    assert build.load(tiny).answer() == 42


def test_the_key_covers_source_and_compiler(tmp_path, monkeypatch):
    tiny = helper(tmp_path)
    key = build.cache_key(tiny)
    with open(tiny.source, "a") as handle:
        handle.write("\n// changed\n")
    assert build.cache_key(tiny) != key
    changed = build.cache_key(tiny)
    monkeypatch.setattr(build, "compiler_version", lambda compiler: "g++ (other) 99.0")
    assert build.cache_key(tiny) != changed


def test_the_folder_lock_is_held_while_building(tmp_path):
    tiny = helper(tmp_path)
    path = build.library_path(tiny)
    lock = build.FileLock(os.path.join(os.path.dirname(path), ".lock"))
    assert lock.acquire()          # as another process building the same library would
    loaded = []
    worker = threading.Thread(target=lambda: loaded.append(build.load(tiny)))
    worker.start()
    time.sleep(1.0)
    assert worker.is_alive() and not os.path.exists(path), "load did not wait for the lock"
    lock.release()
    worker.join(timeout=300)
    assert loaded and loaded[0].answer() == 42


def test_a_broken_source_gives_none_and_its_reason_once(tmp_path, caplog):
    broken = helper(tmp_path, "_broken", source="this is not C++ NAME")
    with caplog.at_level(logging.WARNING):
        assert build.load(broken) is None
        assert build.load(broken) is None
    assert "compiler failed" in build.unavailable_reason(broken)
    reasons = [record for record in caplog.records
               if record.getMessage().startswith("_broken unavailable, using Python: ")]
    assert len(reasons) == 1 and "compiler failed" in reasons[0].getMessage()
    folder = os.path.dirname(build.library_path(broken))
    assert [name for name in os.listdir(folder) if name.startswith(".build-")] == []


def test_no_compiler_gives_the_reason_without_a_notice(tmp_path, caplog):
    tiny = helper(tmp_path, compiler=lambda: str(tmp_path / "no-compiler"))
    with caplog.at_level(logging.WARNING):
        assert build.load(tiny) is None
    assert "no C++ compiler" in build.unavailable_reason(tiny)
    assert not any("building framejit's native helpers" in record.getMessage()
                   for record in caplog.records)


def test_a_first_use_build_says_so_once_and_builds_the_others_too(tmp_path, caplog):
    first = build.register(helper(tmp_path, "_first"))
    second = build.register(helper(tmp_path, "_second"))
    unwanted = build.register(helper(tmp_path, "_unwanted", wanted=lambda: False))
    with caplog.at_level(logging.WARNING, logger="framejit"):
        assert build.load(first).answer() == 42
    notices = [record for record in caplog.records
               if "building framejit's native helpers once" in record.getMessage()]
    assert len(notices) == 1 and notices[0].name == "framejit"
    assert "python -m dynamo build" in notices[0].getMessage()
    assert os.path.exists(build.library_path(second))
    assert not os.path.exists(build.library_path(unwanted))


def test_build_all_builds_every_registered_helper_without_a_notice(tmp_path, caplog):
    helpers = [build.register(helper(tmp_path, name)) for name in ("_one", "_two")]
    with caplog.at_level(logging.WARNING, logger="framejit"):
        results = build.build_all()
    assert results == {item.module: build.library_path(item) for item in helpers}
    assert all(build.load(item).answer() == 42 for item in helpers)
    assert not caplog.records
