"""`python -m dynamo minify SCRIPT.py [options] [-- ARGS...]`: the minifier's driver.

Input: the command line. Output: a repro file and an exit status. The stages run in order:
record (run the script with every `dynamo.jit` recording its graphs and checking them against
eager: `record.py`), pick the first failing graph (frame level), shrink it (graph level, then
op level: `shrink.py`), write the repro (`repro.py`) and run it in a new process to confirm
it shows the failure. Exit status 0: a repro that reproduces was written, or nothing failed
("nothing to minify"); 1: a failure was found that could not be made into a working repro
(the reason is printed); 2: a bad command line (or a `--graph` no failing graph has).
"""
from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
from typing import Optional

from dynamo.minify.compare import CHECKS, check_graph
from dynamo.minify.record import GraphRecord, Recording, record_script, script_fails_eagerly
from dynamo.minify.repro import ReproError, render
from dynamo.minify.shrink import Case, minimize

PREFIX = "framejit minify:"


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(
        prog="python -m dynamo minify", usage="%(prog)s SCRIPT.py [options] [-- ARGS...]",
        description="Shrink a program whose jitted run fails or differs from eager to a "
                    "standalone repro file.")
    parse.add_argument("script", help="the Python script to run (it uses dynamo.jit)")
    parse.add_argument("--backend", default=None,
                       help="compile with this backend (inductor, eager, aot_eager or any "
                            "registered name) instead of each jit call's own")
    parse.add_argument("--out", default="repro.py", help="where to write the repro")
    parse.add_argument("--check", choices=CHECKS, default="any",
                       help="error: the jitted run raises or inductor records a compiler "
                            "error; mismatch: results differ from eager; any: either")
    parse.add_argument("--graph", default=None, metavar="LABEL",
                       help="minimize this failing graph (as the output names it: "
                            "'FUNCTION graph N') instead of the first")
    parse.add_argument("--budget", type=int, default=300,
                       help="at most this many candidate graphs are checked")
    parse.add_argument("--no-verify", action="store_true",
                       help="do not run the repro in a new process to confirm it")
    return parse


def say(text: str) -> None:
    print(f"{PREFIX} {text}", flush=True)


def main(argv: list) -> int:
    """Run the minifier; returns the exit status."""
    split = argv.index("--") if "--" in argv else len(argv)
    options = parser().parse_args(argv[:split])  # the script's own arguments follow "--"
    arguments = argv[split + 1:]
    if not os.path.isfile(options.script):
        say(f"no such script: {options.script}")
        return 2
    say(f"running {options.script} with every jitted graph checked against eager")
    recording = record_script(options.script, arguments, options.backend, options.check)
    failing = recording.failing_graphs(options.check)
    say(f"{len(recording.graphs)} graph(s) compiled, {len(failing)} failing")
    if not failing:
        return _no_failing_graph(recording, options, arguments)
    if recording.script_error is not None:
        error = recording.script_error
        say(f"the jitted run ended with {type(error).__name__}: {error}")
    chosen = [record for record in failing if options.graph in (None, record.label)]
    if not chosen:
        say(f"no failing graph is labelled {options.graph!r}; failing: "
            + ", ".join(record.label for record in failing))
        return 2
    for record in failing:
        if record is not chosen[0]:
            say(f"also failing (not minimized): {record.label}: {record.failure.detail}")
    return _minify_graph(chosen[0], options)


def _no_failing_graph(recording: Recording, options, arguments: list) -> int:
    error = recording.script_error
    calls = [call for call in recording.calls if call.failure.wanted(options.check)]
    if error is not None:
        eager_error = script_fails_eagerly(options.script, arguments)
        if eager_error is not None and type(eager_error) is type(error):
            say(f"the script raises {type(error).__name__} without jit too: "
                "nothing to minify")
            return 0
        if options.check in ("error", "any"):
            say(f"the jitted run raised {type(error).__name__}: {error}, eager did not, and "
                "no graph fails on its own: the failure is in capture, not in a backend "
                "(try --backend eager, and dynamo.explain)")
            return 1
    if recording.internal_errors and options.check in ("error", "any"):
        for text in recording.internal_errors:
            say(text)
        say("framejit's capture failed on a frame (which then ran eagerly) before any backend "
            "saw a graph: not shrunk; please report it with the script")
        return 1
    if calls:
        for call in calls:
            say(f"{call.label}: {call.failure.detail}")
        say("no graph fails on its own: the difference is in capture, not in a backend "
            "(try --backend eager, and dynamo.explain), unless the function changes Python "
            "state (globals, counters) that its eager rerun then changed a second time")
        return 1
    say(f"no jitted graph or call failed ({options.check}): nothing to minify")
    return 0


def _minify_graph(record: GraphRecord, options) -> int:
    say(f"{record.label} fails: {record.failure.detail}")
    case = Case.from_module(record.gm, record.inputs)
    backend, wanted = record.backend, options.check

    def check(candidate: Case) -> Optional[str]:
        failure = check_graph(candidate.module(), candidate.input_list(), backend)
        return failure.signature if failure is not None and failure.wanted(wanted) else None

    first = check_graph(case.module(), case.input_list(), backend)
    if first is None or not first.wanted(wanted):
        say(f"{record.label} does not fail when compiled on its own (outside the program): "
            "no repro written")
        return 1
    say(f"shrinking {record.label}: {case.node_count()} node(s)")
    inductor_log = logging.getLogger("framejit.inductor")  # one warning per candidate else
    saved_level = inductor_log.level
    inductor_log.setLevel(logging.ERROR)
    try:
        smaller = minimize(case, first.signature, check, options.budget, progress=say)
    finally:
        inductor_log.setLevel(saved_level)
    final = check_graph(smaller.module(), smaller.input_list(), backend) or first
    say(f"minimized to {smaller.node_count()} node(s):\n{smaller.module().code.strip()}")
    try:
        text = render(smaller, backend, final, record.label, options.script, options.out)
    except ReproError as error:
        say(f"cannot write a repro: {error}")
        return 1
    with open(options.out, "w") as file:
        file.write(text)
    say(f"wrote {options.out}")
    return 0 if options.no_verify else _verify(options.out)


def _verify(path: str) -> int:
    """Run the repro in a new process: it must exit with status 1 (the failure shows)."""
    result = subprocess.run([sys.executable, path], capture_output=True, text=True,
                            timeout=600)
    lines = (result.stdout + result.stderr).strip().splitlines()
    if result.returncode == 1 and any(line.startswith("reproduced") for line in lines):
        say(f"{path} reproduces the failure in a new process")
        return 0
    say(f"{path} did not reproduce the failure in a new process (exit status "
        f"{result.returncode}): " + " | ".join(lines[-5:]))
    return 1
