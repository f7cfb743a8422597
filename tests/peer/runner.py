"""Run loop of the peer suites: unittest test methods -> one JSON line per test + a summary.

Input: a list of (test id, bound test callable, source) and the snapshot file; output: the
JSONL file (`--out`) and a summary table on stdout. Every test runs in this process under a
SIGALRM time limit (`--timeout`); `--only`/`--skip-until`/`--limit` select chunks, and
`--resume` skips ids already in the output file, so a long run proceeds in chunks.
"""
import argparse
import collections
import json
import os
import re
import signal
import time
import unittest

from tests.peer.classify import EXCLUSION_RULES, classify


class TestTimeout(Exception):
    """The per-test time limit ran out."""


def _on_alarm(signum, frame):
    raise TestTimeout("per-test time limit")


def parse_args(description: str, argv=None):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--snapshot", default=os.environ.get("PEER_PYTORCH_DIR"),
                        help="root of the PyTorch snapshot (default: $PEER_PYTORCH_DIR)")
    parser.add_argument("--out", required=True, help="JSONL results (appended)")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per test")
    parser.add_argument("--only", default=None, help="regex over test ids")
    parser.add_argument("--limit", type=int, default=0, help="run at most N tests")
    parser.add_argument("--start", type=int, default=0, help="skip the first N selected tests")
    parser.add_argument("--resume", action="store_true", help="skip ids already in --out")
    parser.add_argument("--summary-only", action="store_true",
                        help="print the summary of --out without running")
    args = parser.parse_args(argv)
    if not args.summary_only and not args.snapshot:
        parser.error("no snapshot: pass --snapshot or set PEER_PYTORCH_DIR")
    return args


class PeerResult(unittest.TestResult):
    """Keeps the exception objects (unittest keeps only formatted tracebacks)."""

    def __init__(self):
        super().__init__()
        self.exception = None
        self.skip_reason = None

    def addError(self, test, err):
        super().addError(test, err)
        self.exception = self.exception or err[1]

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.exception = self.exception or err[1]

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            self.exception = self.exception or err[1]

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.skip_reason = reason

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self.skip_reason = "expected failure in the snapshot"

    def outcome(self):
        if self.exception is not None:
            return "failed"
        if self.unexpectedSuccesses:
            self.exception = AssertionError("unexpected success of an expected failure")
            return "failed"
        if self.skip_reason is not None:
            return "skipped"
        return "passed"


def _timed_out(exc) -> bool:
    """The time limit ran out, also where a library wrapped the signal's exception (the
    Triton interpreter re-raises it as InterpreterError(repr(...)))."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, TestTimeout) or "TestTimeout(" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def run_one(test_id, method, source, snapshot_file, timeout, stats_hook, adapter_file=""):
    """Run one bound unittest method (setUp/tearDown included); return its record."""
    case = method.__self__
    result = PeerResult()
    started = time.perf_counter()
    stats_hook.begin()
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(timeout)
    try:
        case.run(result)
    except TestTimeout as exc:  # raised outside the test's own try blocks
        result.exception = exc
    finally:
        signal.alarm(0)
    stats = stats_hook.end()
    outcome = result.outcome()
    exc = result.exception if outcome == "failed" else (
        Exception(result.skip_reason) if outcome == "skipped" else None)
    verdict = classify(outcome, exc, source, snapshot_file, _timed_out(exc), adapter_file)
    if verdict.cls == "crash" and stats.get("backend_where") and \
            verdict.where.startswith("(the backend"):
        # torch's capture wrapped the backend's exception and dropped its frames
        verdict.where, verdict.error = stats["backend_where"], stats["backend_error"]
    return {"id": test_id, "outcome": outcome, "class": verdict.cls, "rule": verdict.rule,
            "where": verdict.where, "error": verdict.error,
            "seconds": round(time.perf_counter() - started, 2), "graphs": stats}


def run_all(tests, snapshot_file, args, stats_hook, adapter_file=""):
    """Run the selected tests, appending one JSON line each to args.out."""
    done = set()
    if args.resume and os.path.exists(args.out):
        with open(args.out) as lines:
            done = {json.loads(line)["id"] for line in lines if line.strip()}
    selected = [test for test in tests if not args.only or re.search(args.only, test[0])]
    selected = selected[args.start:]
    if args.limit:
        selected = selected[:args.limit]
    with open(args.out, "a") as out:
        for count, (test_id, method, source) in enumerate(selected, 1):
            if test_id in done:
                continue
            record = run_one(test_id, method, source, snapshot_file, args.timeout, stats_hook,
                             adapter_file)
            out.write(json.dumps(record) + "\n")
            out.flush()
            print(f"[{count}/{len(selected)}] {record['class']:12} {record['seconds']:7.1f}s "
                  f"{test_id} {record['error'][:120]}", flush=True)


def summary(path) -> str:
    """Markdown table of the classes in a JSONL file, the rules, and the failures."""
    with open(path) as lines:
        records = {}
        for line in lines:
            if line.strip():
                record = json.loads(line)
                records[record["id"]] = record
    counts = collections.Counter(record["class"] for record in records.values())
    rules = collections.Counter(record["rule"] for record in records.values()
                                if record["class"] == "excluded")
    as_is = sum(1 for record in records.values() if record["class"] == "passed"
                and record.get("graphs", {}).get("compiled", 0) == 0
                and record.get("graphs", {}).get("as_is", 0) > 0)
    lines = [f"{len(records)} tests", "", "| class | tests |", "|---|---:|"]
    for name in ("passed", "wrong_value", "crash", "timeout", "unsupported", "test_assert",
                 "harness", "excluded", "skipped"):
        lines.append(f"| {name} | {counts.get(name, 0)} |")
    lines.append(f"\npassed with every graph run as is (nothing compiled): {as_is}")
    lines += ["", "| exclusion rule | tests | what it excludes |", "|---|---:|---|"]
    for rule, text, _ in EXCLUSION_RULES:
        lines.append(f"| {rule} | {rules.get(rule, 0)} | {text} |")
    return "\n".join(lines)
