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
"""
from __future__ import annotations

import re
from typing import Optional

BLOCK = 512
_HEADER = re.compile(r"^for \(int64_t (\w+) = (.+); \1 < (.+); \+\+\1\) \{$")
_DEFINITION = re.compile(r"^const ([\w:]+) (\w+) = (.*);$")
_CALL = re.compile(r"^jit_vml_(\w+)\((\w+)\)$")
_NAME = re.compile(r"\b[A-Za-z_]\w*\b")


def strip_mine(pragma: Optional[str], header: str, body: list, flag: str) -> Optional[list]:
    """The blocked loop's lines (unindented; the caller indents), or None (see the module
    docstring). `pragma` is the loop's `#pragma omp ...` line or None."""
    match = _HEADER.match(header)
    if match is None or any(line.startswith(("for ", "#pragma", "{", "}")) for line in body):
        return None
    variable, start, end = match.groups()
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
