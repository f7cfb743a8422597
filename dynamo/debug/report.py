"""Debug dump, report: one index.html per run linking every dumped frame's files.

Input: a run's frame entries (`dump.write_frame`) and inductor's fallback counts. Output:
`<run>/index.html` with a summary, a table of frames (status, recompile reason, links to
each file), the user's source of each compiled function with every graph break marked on
its line (`class="break"`, the break's kind, reason and hint from the catalogue shown under
it), the recompiles with their reasons, and the graphs inductor ran through eager kernels
during the run (`inductor.runtime.fallbacks`), counted by reason.
"""
from __future__ import annotations

import html
import inspect
import linecache
import os
import time
from typing import Optional

from dynamo.breaks import KINDS

_STYLE = """body{font-family:sans-serif;margin:1.5em}pre{background:#f6f6f6;padding:.5em}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;vertical-align:top}
.break{background:#ffd6d6;font-weight:bold}.why{color:#900;display:block;margin-left:4em;
white-space:pre-wrap}.number{color:#888}"""


def source_line(location: Optional[str]) -> str:
    """The text of the user's line at `file:line`, stripped ('' when unknown)."""
    if not location or ":" not in location:
        return ""
    filename, _, line = location.rpartition(":")
    try:
        return linecache.getline(filename, int(line)).strip()
    except ValueError:
        return ""


def write_index(run, fallbacks_now: dict) -> None:
    """(Re)write `index.html` of `run`."""
    fallbacks = {reason: count - run.fallbacks_before.get(reason, 0)
                 for reason, count in fallbacks_now.items()
                 if count > run.fallbacks_before.get(reason, 0)}
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>framejit debug dump"
             f"</title><style>{_STYLE}</style></head><body>",
             f"<h1>framejit debug dump</h1><p>{html.escape(run.directory)}<br>written "
             f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}</p>",
             _summary(run.frames, fallbacks), _frame_table(run.frames),
             _sources(run.frames), _recompiles(run.frames), _fallbacks(fallbacks),
             "</body></html>"]
    path = os.path.join(run.directory, "index.html")
    with open(path + ".tmp", "w", encoding="utf-8") as file:
        file.write("\n".join(parts))
    os.replace(path + ".tmp", path)


def _summary(frames: list, fallbacks: dict) -> str:
    breaks = sum(len(frame["breaks"]) for frame in frames)
    recompiles = sum(1 for frame in frames if frame["reason"])
    return (f"<p id='summary'>{len(frames)} frame(s) compiled, {breaks} graph break(s), "
            f"{recompiles} recompile(s), {sum(fallbacks.values())} inductor fallback(s)</p>")


def _frame_table(frames: list) -> str:
    rows = ["<h2>Frames</h2><table id='frames'><tr><th>#</th><th>function</th><th>where"
            "</th><th>status</th><th>recompile reason</th><th>files</th></tr>"]
    for frame in frames:
        code = frame["code"]
        qualname, where = ("(inductor graph)", "") if code is None else \
            (code.co_qualname, f"{code.co_filename}:{code.co_firstlineno}")
        links = " ".join(f"<a href='{html.escape(path)}'>{html.escape(name)}</a>"
                         for name, path in frame["files"].items())
        rows.append(f"<tr><td>{frame['number']}</td><td>{html.escape(qualname)}</td>"
                    f"<td>{html.escape(where)}</td>"
                    f"<td>{html.escape(frame['status'])}</td>"
                    f"<td>{html.escape(frame['reason'] or '')}</td><td>{links}</td></tr>")
    return "\n".join(rows) + "</table>"


def _sources(frames: list) -> str:
    """Each compiled function's source, once, with the breaks met in any of its frames."""
    origins: dict = {}
    for frame in [frame for frame in frames if frame["origin"] is not None]:
        breaks = origins.setdefault(frame["origin"], [])
        breaks += [met for met in frame["breaks"] if met not in breaks]
    parts = ["<h2>Sources</h2>"]
    for origin, breaks in origins.items():
        parts.append(f"<h3>{html.escape(origin.co_qualname)} "
                     f"({html.escape(origin.co_filename)}:{origin.co_firstlineno})</h3>")
        parts.append(_marked_source(origin, breaks))
    return "\n".join(parts)


def _marked_source(origin, breaks: list) -> str:
    try:
        lines, first = inspect.getsourcelines(origin)
    except (OSError, TypeError):
        return "<p>(source not available)</p>" + _break_list(breaks)
    filename = origin.co_filename
    marks: dict = {}
    unplaced = []
    for met in breaks:
        line = _line_in(met, filename, first, first + len(lines))
        if line is None:
            unplaced.append(met)
        else:
            marks.setdefault(line, []).append(met)
    rendered = []
    for offset, text in enumerate(lines):
        number = first + offset
        body = f"<span class='number'>{number:5d}</span>  {html.escape(text.rstrip())}"
        if number in marks:
            body = f"<span class='break' id='break-{number}'>{body}</span>" + "".join(
                f"<span class='why'>{_why(met)}</span>" for met in marks[number])
        rendered.append(body)
    return "<pre>" + "\n".join(rendered) + "</pre>" + _break_list(unplaced)


def _line_in(met, filename: str, first: int, end: int) -> Optional[int]:
    """The line of `filename` in [first, end) where the break is, or the call leading to it."""
    for where in [met.location, *met.frames]:
        if not where or ":" not in where:
            continue
        path, _, line = where.rpartition(":")
        if path == filename and line.isdigit() and first <= int(line) < end:
            return int(line)
    return None


def _why(met) -> str:
    kind = KINDS.get(met.kind_id)
    anchor = f" ({kind.anchor})" if kind is not None else ""
    inner = "" if not met.frames[1:] else f" [in an inlined call, at {met.location}]"
    eager = "" if met.resumed else " (the frame ran eagerly)"
    return html.escape(f"graph break {met.kind_id} {met.title}{inner}{eager}: {met.detail}\n"
                       f"hint: {met.hint}{anchor}")


def _break_list(breaks: list) -> str:
    if not breaks:
        return ""
    return "<ul>" + "".join(f"<li class='break'>{html.escape(str(met.location))}: "
                            f"{_why(met)}</li>" for met in breaks) + "</ul>"


def _recompiles(frames: list) -> str:
    items = [f"<li>{html.escape(frame['code'].co_qualname)} (frame {frame['number']}): "
             f"{html.escape(frame['reason'])}</li>" for frame in frames if frame["reason"]]
    return "<h2>Recompiles</h2><ul id='recompiles'>" + ("".join(items) or "<li>none</li>") + \
        "</ul>"


def _fallbacks(fallbacks: dict) -> str:
    items = [f"<li>{count} x {html.escape(reason)}</li>" for reason, count in fallbacks.items()]
    return ("<h2>Inductor fallbacks</h2><p>graphs run through eager kernels instead of "
            f"generated code: {sum(fallbacks.values())}</p><ul id='fallbacks'>" +
            "".join(items) + "</ul>")
