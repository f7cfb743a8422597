"""Blocked VML calls: an innermost loop computing `jit_vml_<f>` runs in blocks of `BLOCK`.

Input: the lines of an innermost `for` loop just closed (its pragma, header, body and closing
brace) and the name of the index-error flag. Output: the same loop strip-mined, or None where
it has no VML call or another shape (the vector variants of prelude.h then call VML per 4,
8 or 16 lanes: exact, but about 30 ns a call, 10x libmvec's time).

An MKL VML call costs about 30 ns beyond its elements, so a call per vector of lanes took 5 ms
for `exp` of a million floats, where eager's one call per 2048 elements takes 1.1 ms. In the
blocked form each VML call of the body becomes a phase: a loop over the block computes (again)
the lines its argument needs and stores it in a stack buffer, one call turns the buffer into
its results in place (`jit_vml_<f>_block`), and the final loop computes the whole body with
each call's result read back from its buffer. Lines other than `const` definitions (stores,
accumulator updates) run in the final loop only.

A reduction's lane loop (`for (y = y_block; y < y_block + 64; ++y)` inside the loop over its
blocks) is blocked with that loop: blocks of 512 positions each fill the buffers in one
loop and make one VML call per function, then run their 8 (or 32) lane blocks reading the
results back. Blocking the lane loop alone made one VML call per 64 elements (logsumexp
along rows of 1024: 16 calls a row).
"""
from __future__ import annotations

import re
from typing import Optional

BLOCK = 512
_HEADER = re.compile(r"^for \(int64_t (\w+) = (.+); \1 < (.+); \+\+\1\) \{$")
_DEFINITION = re.compile(r"^const ([\w:]+) (\w+) = (.*);$")
_CALL = re.compile(r"^jit_vml_(\w+)\((\w+)\)$")
_NAME = re.compile(r"\b[A-Za-z_]\w*\b")
_LANE_BLOCKS = re.compile(r"^for \(int64_t (\w+)_block = (.+); \1_block \+ (\d+) <= (.+); "
                          r"\1_block \+= \3\) \{$")


def strip_mine(pragma: Optional[str], header: str, body: list, flag: str) -> Optional[list]:
    """The blocked loop's lines (unindented; the caller indents), or None (see the module
    docstring). `pragma` is the loop's `#pragma omp ...` line or None."""
    lane_blocks = _LANE_BLOCKS.match(header)
    if lane_blocks is not None:
        return _strip_mine_lane_blocks(header, lane_blocks.groups(), body, flag)
    match = _HEADER.match(header)
    if match is None or any(line.startswith(("for ", "#pragma", "{", "}")) for line in body):
        return None
    variable, start, end = match.groups()
    definitions, calls = _calls(body)
    if not calls:
        return None
    if pragma is not None and ("collapse" in pragma or "omp simd" not in pragma and
                               "parallel for simd" not in pragma):
        return None
    outer, inner = _pragmas(pragma, any(flag in line for line in body))
    base, stop = f"{variable}_vml", f"{variable}_vml_end"
    lane = f"{variable} - {base}"
    results = {name: f"jit_vml_buffer{number}" for number, (name, *_rest) in enumerate(calls)}
    lines = ([outer] if outer else []) + [
        f"for (int64_t {base} = {start}; {base} < {end}; {base} += {BLOCK}) {{",
        f"  const int64_t {stop} = {base} + {BLOCK} < ({end}) ? {base} + {BLOCK} : ({end});"]
    loop = f"for (int64_t {variable} = {base}; {variable} < {stop}; ++{variable}) {{"
    for number, (name, ctype, function, argument) in enumerate(calls):
        buffer = results[name]
        needed = _needed(argument, definitions, results)
        lines.append(f"  {ctype} {buffer}[{BLOCK}] __attribute__((aligned(64)));")
        lines += ([f"  {inner}"] if inner else []) + [f"  {loop}"]
        lines += [f"    {_line(body, position, definitions, results, lane)}"
                  for position in needed]
        lines += [f"    {buffer}[{lane}] = {argument};", "  }"]
        lines.append(f"  jit_vml_{function}_block({stop} - {base}, {buffer});")
    lines += ([f"  {inner}"] if inner else []) + [f"  {loop}"]
    lines += [f"    {_line(body, position, definitions, results, lane)}"
              for position in range(len(body))]
    lines += ["  }", "}"]
    return lines


def _calls(body: list) -> tuple:
    """({name: (position, expression)} of the body's `const` definitions, [(name, C++ type,
    function, argument)] of those that call VML on a float or double)."""
    definitions, calls = {}, []
    for position, line in enumerate(body):
        found = _DEFINITION.match(line)
        if found is None:
            continue
        ctype, name, expression = found.groups()
        definitions[name] = (position, expression)
        call = _CALL.match(expression)
        if call is not None and ctype in ("float", "double"):
            calls.append((name, ctype, call.group(1), call.group(2)))
    return definitions, calls


def _strip_mine_lane_blocks(header: str, groups: tuple, body: list,
                            flag: str) -> Optional[list]:
    """A reduction's loop over lane blocks (`header`, its `groups`: variable, start, lanes,
    end) whose body holds the lane loop: blocked with its lane loop where the lines around
    the lane loop are plain statements, else with the lane loop blocked alone (per block),
    or None where the lane loop calls no VML."""
    variable, start, lanes, end = groups
    lane_header = (f"for (int64_t {variable} = {variable}_block; {variable} < "
                   f"{variable}_block + {lanes}; ++{variable}) {{")
    if lane_header not in body or body.index(lane_header) == 0:
        return None
    first = body.index(lane_header)
    last = _closing(body, first)
    if last is None or not body[first - 1].startswith("#pragma omp simd"):
        return None
    pragma, lane_body = body[first - 1], body[first + 1:last]
    if not any("jit_vml_" in line for line in lane_body):
        return None
    before, after = body[:first - 1], body[last + 1:]
    plain = not any(line.startswith(("for ", "#pragma", "{", "}")) or "{" in line or
                    "}" in line for line in before + lane_body)
    definitions, calls = _calls(lane_body)
    if not plain or not calls or pragma != "#pragma omp simd" or int(lanes) > BLOCK or \
            BLOCK % int(lanes):
        blocked = strip_mine(pragma, lane_header, lane_body, flag)
        if blocked is None:
            return None
        return [header] + _indent(before + blocked + after, 1) + ["}"]
    base, stop = f"{variable}_vml", f"{variable}_vml_end"
    whole = f"({start}) + (({end}) - ({start})) / {lanes} * {lanes}"
    lane = f"{variable} - {base}"
    results = {name: f"jit_vml_buffer{number}" for number, (name, *_rest) in enumerate(calls)}
    lines = [f"for (int64_t {base} = {start}; {base} < {whole}; {base} += {BLOCK}) {{",
             f"  const int64_t {stop} = {base} + {BLOCK} < {whole} ? {base} + {BLOCK} : "
             f"{whole};"]
    loop = f"for (int64_t {variable} = {base}; {variable} < {stop}; ++{variable}) {{"
    for name, ctype, function, argument in calls:
        buffer = results[name]
        lines += [f"  {ctype} {buffer}[{BLOCK}] __attribute__((aligned(64)));",
                  "  #pragma omp simd", f"  {loop}"]
        lines += [f"    {_line(lane_body, position, definitions, results, lane)}"
                  for position in _needed(argument, definitions, results)]
        lines += [f"    {buffer}[{lane}] = {argument};", "  }",
                  f"  jit_vml_{function}_block({stop} - {base}, {buffer});"]
    lines.append(f"  for (int64_t {variable}_block = {base}; {variable}_block < {stop}; "
                 f"{variable}_block += {lanes}) {{")
    lines += _indent(before + [pragma, lane_header], 2)
    lines += _indent([_line(lane_body, position, definitions, results, lane)
                      for position in range(len(lane_body))], 3)
    lines += _indent(["}"] + after, 3) + ["  }", "}"]
    return lines


def _closing(body: list, opening: int) -> Optional[int]:
    """The position of the line closing the block `body[opening]` opens, or None."""
    depth = 0
    for position in range(opening, len(body)):
        depth += body[position].count("{") - body[position].count("}")
        if depth == 0:
            return position
    return None


def _indent(lines: list, depth: int) -> list:
    """`lines` (unindented) indented `depth` levels, plus one inside each open brace."""
    result = []
    for line in lines:
        if line.startswith("}"):
            depth -= 1
        result.append("  " * depth + line)
        depth += line.count("{") - line.count("}") + (1 if line.startswith("}") else 0)
    return result


def _pragmas(pragma: Optional[str], flagged: bool) -> tuple:
    """(the block loop's pragma or None, the pragma of each loop over a block or None)."""
    if pragma is None:
        return None, None
    inner = "#pragma omp simd" + (" reduction(|:jit_index_error)" if flagged else "")
    if "parallel for" not in pragma:
        return None, inner
    return pragma.replace("parallel for simd", "parallel for"), inner


def _needed(argument: str, definitions: dict, results: dict) -> list:
    """Positions of the body lines `argument` depends on, in order (calls already made are
    read from their buffers: their arguments are not needed again)."""
    seen, pending = set(), [argument]
    while pending:
        name = pending.pop()
        if name in seen or name not in definitions:
            continue
        seen.add(name)
        if name in results:
            continue
        pending += _NAME.findall(definitions[name][1])
    return sorted(definitions[name][0] for name in seen)


def _line(body: list, position: int, definitions: dict, results: dict, lane: str) -> str:
    line = body[position]
    found = _DEFINITION.match(line)
    if found is not None and found.group(2) in results:
        ctype, name = found.group(1), found.group(2)
        return f"const {ctype} {name} = {results[name]}[{lane}];"
    return line
