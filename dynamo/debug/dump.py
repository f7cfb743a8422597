"""Debug dump: every compiled frame's artefacts written to files.

Input: `dynamo.config.debug_dir` (`JIT_DEBUG_DIR`), the per-frame driver's calls
`start_frame()` before compiling a frame and `frame_compiled(record)` after, and inductor's
artefacts of the graphs compiled in between (`inductor.debug_artifacts`, a listener
registry). Output: under `<debug_dir>/<run id>/<frame n>_<function>/`:

    original.dis.txt      dis listing of the frame's code
    rewritten.dis.txt     dis listing of the replacement code (nested code included)
    rewritten.py.txt      its Python-like rendering (`rendering.python_like`) and the glue
    graph.py              the FX graph's readable code        graph_table.txt  its node table
    guards.txt            the guards by source, and the compiled check
    loop_ir.txt           inductor's loop IR                  kernels.txt  loop IR per kernel
    kernels.cpp / kernels_triton.py   the generated source (wrapper and kernels)
    timings.txt           compile seconds per stage (dynamo's and inductor's)
    breaks.txt            each graph break: kind, reason, user line, hint
    recompile.txt         why this frame was compiled again (recompiles only)

and `<debug_dir>/<run id>/index.html` (`report.py`), rewritten after every frame. With the
setting empty nothing is written or imported. A failure while dumping is one warning, never
an exception in the user's program, and the compile goes on unchanged.
"""
from __future__ import annotations

import atexit
import os
import re
import sys
import threading
import time
import warnings
import weakref
from typing import Optional

from dynamo.debug import rendering, report
from dynamo.resume import regions
from dynamo.settings import config

_lock = threading.Lock()
_INDEX_INTERVAL = 2.0  # seconds between rewrites of a run's index.html

_known_breaks: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
"""code -> the breaks its last compile that met any met: a later compile (a recompile, or one
after `explain`) halts at the stops they planned without meeting them again."""
_state = {"run": None, "frame": None, "warned": False, "listening": False, "failed": None}


class FrameArtefacts:
    """What inductor handed over while one frame compiled: name -> list of values."""

    def __init__(self):
        self.values: dict = {}

    def add(self, name: str, value) -> None:
        self.values.setdefault(name, []).append(value)


class Run:
    """One process's dump under one folder: its frames, for the index."""

    def __init__(self, root: str):
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        self.root = root
        self.directory = os.path.join(root, f"run-{stamp}-{os.getpid()}")
        self.frames: list = []
        self.fallbacks_before = _fallbacks()
        self.written_at = 0.0
        self.pending = False
        os.makedirs(self.directory, exist_ok=True)
        atexit.register(self.write_pending)

    def index_changed(self) -> None:
        """Rewrite index.html now, or (within `_INDEX_INTERVAL` of the last write) at the
        next change after it or at exit: a long run's index costs no more than its frames."""
        self.pending = True
        if time.monotonic() - self.written_at >= _INDEX_INTERVAL or len(self.frames) < 8:
            self.write_pending()

    def write_pending(self) -> None:
        if not self.pending:
            return
        self.pending = False
        try:
            report.write_index(self, _fallbacks())
        except Exception as error:  # noqa: BLE001  (at exit too: never an exception)
            _warn_once(error)
        self.written_at = time.monotonic()


def start_frame() -> None:
    """Before a frame compiles: collect inductor's artefacts for it (when dumping)."""
    if not config.debug_dir or config.debug_dir == _state["failed"]:
        return
    try:
        _listen_to_inductor()
        _state["frame"] = FrameArtefacts()
    except Exception as error:  # noqa: BLE001  (a dump never breaks the program)
        _warn_once(error)


def frame_compiled(record) -> None:
    """After a frame compiled: write its files and the run's index (when dumping)."""
    artefacts, _state["frame"] = _state["frame"], None
    if record.breaks:
        _known_breaks[record.code] = list(record.breaks)
    directory = config.debug_dir
    if not directory or directory == _state["failed"]:
        return
    try:
        with _lock:
            run = _current_run(directory)
            entry = write_frame(run, record, artefacts or FrameArtefacts())
            run.frames.append(entry)
            run.index_changed()
    except Exception as error:  # noqa: BLE001
        _warn_once(error)


def _current_run(directory: str) -> Run:
    """The run folder of this process under `directory` (a new one when the setting changed);
    callers hold `_lock`."""
    run = _state["run"]
    if run is None or run.root != directory:
        run = _state["run"] = Run(directory)
    return run


def _warn_once(error: Exception) -> None:
    _state["failed"] = config.debug_dir  # skipped from now on, until the setting changes
    if _state["warned"]:
        return
    _state["warned"] = True
    try:
        warnings.warn(f"framejit: the debug dump (dynamo.config.debug_dir / JIT_DEBUG_DIR = "
                      f"{config.debug_dir!r}) could not be written, and is skipped from now "
                      f"on: {type(error).__name__}: {error}", RuntimeWarning, stacklevel=2)
    except Warning:  # warnings turned into errors: still never raise into the program
        pass


def _listen_to_inductor() -> None:
    """Register the collector with inductor's artefact registry (inductor never imports
    dynamo; this loads inductor, only while dumping)."""
    if _state["listening"]:
        return
    import inductor.debug_artifacts as artifacts  # only with the dump on
    artifacts.add_listener(_collect)
    _state["listening"] = True


def _collect(name: str, value) -> None:
    if not config.debug_dir:
        return
    frame = _state["frame"]
    if frame is not None:
        frame.add(name, value)
        return
    # a graph compiled while the program runs (a training backward at its first backward
    # call, a static variant at a new size): its own folder, once its source is in
    late = _state.get("late")
    if late is None:
        late = _state["late"] = FrameArtefacts()
    late.add(name, value)
    if name == "source":
        _state["late"] = None
        _write_late(late)


def _write_late(artefacts: FrameArtefacts) -> None:
    """`<run>/<n>_graph_compiled_later/`: loop IR, kernels, source and timings."""
    directory = config.debug_dir
    if directory == _state["failed"]:
        return
    try:
        with _lock:
            run = _current_run(directory)
            name = f"{len(run.frames):03d}_graph_compiled_later"
            files = _write_files(run, name, _late_texts(artefacts))
            run.frames.append({"number": len(run.frames), "name": name, "code": None,
                               "origin": None, "status": "a graph inductor compiled while the "
                               "program ran (a training backward, a new size)",
                               "reason": None, "breaks": [], "files": files})
            run.index_changed()
    except Exception as error:  # noqa: BLE001
        _warn_once(error)


def _late_texts(artefacts: FrameArtefacts) -> dict:
    values = artefacts.values
    sources = values.get("source") or []
    triton = any("@triton.jit" in source for source in sources)
    timings = "".join(f"inductor {stage}: {seconds * 1000:.2f} ms\n" for stage, seconds in
                      values.get("timing", []))
    return {"loop_ir.txt": _joined(values.get("loop_ir")),
            "kernels.txt": _joined(values.get("kernels")),
            "kernels_triton.py" if triton else "kernels.cpp": _joined(sources),
            "timings.txt": timings or None}


def _fallbacks() -> dict:
    module = sys.modules.get("inductor.runtime.fallbacks")
    return module.fallbacks() if module is not None else {}


def write_frame(run: Run, record, artefacts: FrameArtefacts) -> dict:
    """The files of one frame; the index's entry for it."""
    code = record.code
    number = len(run.frames)
    breaks, earlier = list(record.breaks), False
    if not breaks and record.stops:  # stops planned by an earlier compile of this code
        breaks, earlier = _known_breaks.get(code, []), True
    origin = regions.origin_of(code)
    resumed = "_resumed" if origin is not code else ""  # a region after a graph break
    name = f"{number:03d}_{re.sub(r'[^A-Za-z0-9_]+', '_', code.co_name)[:60]}{resumed}"
    files = _write_files(run, name, frame_texts(record, artefacts, breaks, earlier))
    return {"number": number, "name": name, "code": code, "origin": origin,
            "status": _status(record), "reason": record.reason, "breaks": breaks,
            "files": files}


def _write_files(run: Run, name: str, texts: dict) -> dict:
    """Write `texts` (file name -> text, None skipped) under `<run>/<name>/`; file name ->
    path relative to the run."""
    directory = os.path.join(run.directory, name)
    os.makedirs(directory, exist_ok=True)
    files = {}
    for filename, text in texts.items():
        if text is None:
            continue
        with open(os.path.join(directory, filename), "w", encoding="utf-8") as file:
            file.write(text)
        files[filename] = f"{name}/{filename}"
    return files


def _status(record) -> str:
    if record.failure is not None:
        return f"runs eagerly: {record.failure}"
    if record.replacement is None:
        return "no tensor work: runs as is, never intercepted again"
    if record.runs_as_is:
        return "cached as is (no graph)"
    return "compiled" + (" (resumes after a graph break)" if record.stops else "")


def frame_texts(record, artefacts: FrameArtefacts, breaks: list, earlier: bool) -> dict:
    """File name -> text (None: nothing to write) for one frame; `breaks` met by an
    `earlier` compile of the code when this one halted at the stops they planned."""
    values = artefacts.values
    texts = {"original.dis.txt": rendering.disassembly(record.code),
             "timings.txt": _timings(record, values.get("timing", []))}
    if record.replacement is not None:
        texts["rewritten.dis.txt"] = rendering.disassembly(record.replacement)
        texts["rewritten.py.txt"] = rendering.python_like(record.replacement) + (
            f"\n# the glue function the rewritten code calls\n{record.glue_source}\n"
            if record.glue_source else "")
        texts["guards.txt"] = rendering.guard_tree(record.compiled, record.guards)
    if record.graph is not None:
        texts["graph.py"] = record.graph.code
        texts["graph_table.txt"] = rendering.graph_table(record.graph)
    texts["loop_ir.txt"] = _joined(values.get("loop_ir"))
    texts["kernels.txt"] = _joined(values.get("kernels"))
    sources = values.get("source") or []
    triton = any("@triton.jit" in source for source in sources)
    texts["kernels_triton.py" if triton else "kernels.cpp"] = _joined(sources)
    texts["breaks.txt"] = None if not breaks else (
        "# met by an earlier compile of this code; this one halts at the same places\n"
        if earlier else "") + _breaks_text(breaks)
    texts["recompile.txt"] = f"{record.reason}\n" if record.reason else None
    return texts


def _joined(values: Optional[list]) -> Optional[str]:
    """Several graphs' texts (a training forward and backward, size variants) in one file."""
    if not values:
        return None
    if len(values) == 1:
        return f"{values[0]}\n"
    return "\n".join(f"# ---- graph {index} ----\n{value}" for index, value in
                     enumerate(values)) + "\n"


def _timings(record, inductor_timings: list) -> str:
    lines = [f"dynamo {stage}: {seconds * 1000:.2f} ms" for stage, seconds in
             record.seconds.items()]
    lines += [f"inductor {stage}: {seconds * 1000:.2f} ms" for stage, seconds in
              inductor_timings]
    return "\n".join(lines or ["(nothing timed)"]) + "\n"


def _breaks_text(breaks: list) -> str:
    parts = []
    for met in breaks:
        lines = [f"{met.kind_id} {met.title} at {met.location or '<unknown location>'}",
                 f"    {report.source_line(met.location)}",
                 f"    reason: {met.detail}"]
        lines += [f"    called from {where}" for where in met.frames[1:]]
        if not met.resumed:
            lines.append("    (the frame ran eagerly: framejit could not resume after it)")
        lines.append(f"    hint: {met.hint}")
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"
