"""The first jitted call on a new machine builds framejit's native helpers (35-53 s on the
2-core VM): it is no longer silent (issue 24, item 4). One progress line on stderr names each
helper and its seconds so far: rewritten in place on a terminal, written once at the end
elsewhere; nothing at all when the libraries are already built, or built ahead
(`python -m dynamo build`). Tiny sources and a compiler that takes a known time keep this fast.
"""
import io
import os
import re
import stat

import pytest

from guards.native import build

SOURCE = r"""
#include <Python.h>
static PyModuleDef module = {PyModuleDef_HEAD_INIT, "NAME", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_NAME(void) { return PyModule_Create(&module); }
"""

MADE: list = []


@pytest.fixture(autouse=True)
def own_registry(monkeypatch):
    monkeypatch.setattr(build, "_registry", {})
    yield
    while MADE:
        build.forget(MADE.pop())


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def slow_compiler(tmp_path, seconds: float) -> str:
    """A compiler that takes at least `seconds` (then runs gcc), for a visible progress line."""
    path = tmp_path / "slow-cc"
    path.write_text(f'#!/bin/sh\n[ "$1" = --version ] || sleep {seconds}\nexec gcc "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def helper(tmp_path, name: str, compiler: str):
    source = tmp_path / f"{name}.c"
    source.write_text(SOURCE.replace("NAME", name))
    MADE.append(build.register(build.NativeHelper(
        module=f"tests_notice.{name}", source=str(source), folder="notice",
        unavailable=f"{name} unavailable", root=lambda: str(tmp_path / "cache"),
        compiler=lambda: compiler)))
    return MADE[-1]


def test_first_use_shows_which_helper_builds_and_for_how_long(tmp_path, monkeypatch):
    terminal = Terminal()
    monkeypatch.setattr(build.sys, "stderr", terminal)
    slow = helper(tmp_path, "_slow", slow_compiler(tmp_path, 2.5))
    other = helper(tmp_path, "_other", "gcc")
    assert build.load(slow) is not None and build.load(other) is not None
    text = terminal.getvalue()
    updates = text.split("\r")[1:]
    assert len(updates) >= 2, text  # rewritten in place while building
    assert all(line.startswith("framejit: ") for line in updates)
    assert "framejit: building native helpers" in updates[0]
    assert "tests_notice._slow" in updates[0] and "tests_notice._other" in updates[0]
    final = updates[-1]
    assert final.endswith("\n") and text.count("\n") == 1  # one line
    assert final.startswith("framejit: built native helpers")
    seconds = float(re.search(r"tests_notice\._slow done in ([0-9.]+) s", final).group(1))
    assert seconds >= 2.4
    assert re.search(r"tests_notice\._other done in [0-9.]+ s", final)


def test_elsewhere_one_line_at_the_end(tmp_path, monkeypatch):
    stream = io.StringIO()
    monkeypatch.setattr(build.sys, "stderr", stream)
    tiny = helper(tmp_path, "_tiny", slow_compiler(tmp_path, 1.2))
    assert build.load(tiny) is not None
    assert "\r" not in stream.getvalue() and stream.getvalue().count("\n") == 1
    assert re.fullmatch(r"framejit: built native helpers \(once per machine, \d+ s\): "
                        r"tests_notice\._tiny done in [0-9.]+ s\n", stream.getvalue())


def test_nothing_when_already_built_or_built_ahead(tmp_path, monkeypatch):
    stream = io.StringIO()
    monkeypatch.setattr(build.sys, "stderr", stream)
    tiny = helper(tmp_path, "_ahead", "gcc")
    assert build.build_all([tiny]) == {tiny.module: build.library_path(tiny)}
    build.forget(tiny)  # as a new process would: on disk, not loaded
    assert build.load(tiny) is not None and os.path.exists(build.library_path(tiny))
    assert stream.getvalue() == ""


def test_python_m_dynamo_build_shows_progress_too(tmp_path, monkeypatch):
    stream = io.StringIO()
    monkeypatch.setattr(build.sys, "stderr", stream)
    tiny = helper(tmp_path, "_cli", "gcc")
    assert build.build_all([tiny], progress=True) == {tiny.module: build.library_path(tiny)}
    assert re.fullmatch(r"framejit: built native helpers \(once per machine, \d+ s\): "
                        r"tests_notice\._cli done in [0-9.]+ s\n", stream.getvalue())
