"""Classification of one peer-suite test result: outcome + exception -> class and rule.

Input: the test's outcome, its exception (with the chain of causes), its source and the
snapshot file's path. Output: a `Verdict` (class, rule, where). Classes, worst first:

  wrong_value   a value comparison of the test failed (check_model/common's assertEqual,
                its dtype/type checks, or an assertEqual in the test body on values)
  crash         an exception raised inside framejit (inductor/, dynamo/, guards/, or code
                they generate: glue, wrappers, FX graphs of the capture)
  timeout       the per-test time limit ran out
  unsupported   framejit's capture refused the program under fullgraph (GraphBreakError)
  test_assert   another assertion of the test body failed (to be read one by one)
  excluded      the test asserts or drives the peer compiler's internals (rules below)
  harness       anything else failing (the snapshot's helpers, torch's capture, the adapter)
  skipped, passed

A wrong value outranks every rule: an excluded test whose values differ counts as wrong.
"""
import dataclasses
import linecache
import os
import re
import traceback
from typing import Optional

FRAMEJIT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FRAMEJIT_PACKAGES = tuple(os.path.join(FRAMEJIT_ROOT, name) + os.sep
                          for name in ("inductor", "dynamo", "guards"))

# (rule id, what it excludes, pattern over a test's source or its failing line)
EXCLUSION_RULES = (
    ("generated-code", "reads the peer's generated code (run_and_get_*code, FileCheck, "
     "indirect-indexing scans)",
     r"run_and_get_(cpp_|triton_)?code|run_fw_bw_and_get_code|FileCheck|"
     r"_run_and_assert_no_indirect_indexing|get_code\("),
    ("metrics", "asserts the peer's counters (kernel counts, IR node counts, fallbacks)",
     r"_inductor\.metrics|assertGeneratedKernelCountEqual|generated_kernel_count|"
     r"ir_nodes_pre_fusion|num_bytes_accessed|_inductor\.utils\.fresh|counters\["),
    ("aot-inductor", "drives torch's AOT compiler (aoti_*), not a backend",
     r"aoti_|AOTIRunner|aot_compile|_export"),
    ("peer-internals", "calls into torch._inductor's modules (graph lowering, scheduler, "
     "codegen, its compile_fx_inner) rather than through the backend interface",
     r"compile_fx_inner|add_scheduler_init_hook|DataTypePropagation|OptimizationContext|"
     r"\bV\.|pad_mm\.|torch\._inductor\.(ir|lowering|graph|scheduler|codegen|"
     r"select_algorithm|kernel|fx_passes|decomposition|runtime|cpp_builder|codecache)\b|"
     r"complex_memory_overlap|ComputedBuffer|make_fallback"),
    ("peer-config-semantics", "asserts an effect of a torch._inductor config option "
     "(its cpp_wrapper, halide, triton, max-autotune, fallback or profiler settings)",
     r"config\.(cpp_wrapper|triton\.|halide|max_autotune|implicit_fallbacks|fallback_random|"
     r"cpu_backend|cuda_backend|freezing|comprehensive_padding|"
     r"emulate_precision_casts)|profiler_mark_wrapper_call=True"),
    ("dynamo-counts", "asserts frame, op or recompile counts specific to torch._dynamo's design",
     r"frame_count|op_count|cnt\.|counter\.|counters\[|CompileCounter"),
    ("dynamo-internals", "reads torch._dynamo's internals (variable trackers, recorded graph "
     "strings, guard objects, explain(), its config)",
     r"torch\._dynamo\.(variables|symbolic_convert|bytecode|guards|source|output_graph|"
     r"eval_frame|convert_frame|config|utils\.(?!same))|ConstantVariable|RangeVariable|"
     r"normalize_gm|assertExpectedInline|EagerAndRecordGraphs|guard_fail_fn|\.explain\(|"
     r"graph_break_reasons|disable_translation_validation"),
)

# torch's capture reports an exception of the backend (ours) with these words
BACKEND_FAILED = r"Backend compiler exception|backend='[^']*' raised"
VALUE_FRAMES = ("check_model", "check_model_gpu", "standard_test")


@dataclasses.dataclass
class Verdict:
    cls: str
    rule: Optional[str] = None
    where: str = ""
    error: str = ""


def static_rules(source: str) -> list:
    """Rule ids whose pattern occurs in the test's source."""
    return [rule for rule, _, pattern in EXCLUSION_RULES if re.search(pattern, source)]


def _chain(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _frames(exc: BaseException):
    return traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []


def _in_framejit(frame) -> bool:
    return os.path.abspath(frame.filename).startswith(FRAMEJIT_PACKAGES)


def _raised_in_generated(frames) -> bool:
    """The innermost frame is code framejit generated (glue, wrappers, guards: `<framejit
    ...>`, or an FX graph's `<eval_with_key>` called from such code), not the test's own code
    that the generated code called."""
    return bool(frames) and frames[-1].filename.startswith(("<framejit", "<eval_with_key>")) \
        and any(frame.filename.startswith("<framejit") for frame in frames)


def _statement(frame) -> str:
    """The whole statement of a frame (FrameSummary.line is only its first line)."""
    last = getattr(frame, "end_lineno", None) or frame.lineno
    lines = [linecache.getline(frame.filename, number).strip()
             for number in range(frame.lineno, min(last, frame.lineno + 20) + 1)]
    return " ".join(lines) or (frame.line or "")


def _where(frame) -> str:
    return f"{os.path.basename(frame.filename)}:{frame.lineno} {frame.name}: {frame.line or ''}"


def classify(outcome: str, exc: Optional[BaseException], source: str, snapshot_file: str,
             timed_out: bool = False, adapter_file: str = "") -> Verdict:
    """Classify one result; `outcome` is 'passed', 'skipped' or 'failed'. Frames of
    `snapshot_file` and `adapter_file` (the adapter's stand-ins for the suite's helpers) are
    the test's own."""
    rules = static_rules(source)
    if outcome == "skipped":
        return Verdict("skipped", error=str(exc)[:200] if exc else "")
    if outcome == "passed":
        return Verdict("passed", rule=rules[0] if rules else None)
    if timed_out:
        return Verdict("timeout", rule=rules[0] if rules else None)
    first_line = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}" \
        if str(exc).strip() else type(exc).__name__
    own_files = {os.path.abspath(snapshot_file), os.path.abspath(adapter_file or snapshot_file)}
    if type(exc).__name__ == "GraphBreakError":
        return Verdict("unsupported", rule=rules[0] if rules else None,
                       error=f"GraphBreakError: {str(exc).strip()[:300]}")
    for link in _chain(exc):
        frames = _frames(link)
        ours = [frame for frame in frames if _in_framejit(frame)]
        if _raised_in_generated(frames):
            ours = frames[-1:]
        if ours:
            return Verdict("crash", where=_where(ours[-1]),
                           error=f"{type(link).__name__}: {str(link).strip()[:300]}")
    if any(re.search(BACKEND_FAILED, str(link)) for link in _chain(exc)):
        return Verdict("crash", where="(the backend, framejit's, raised; torch kept no cause)",
                       error=first_line)
    frames = _frames(exc)
    in_test_file = [frame for frame in frames
                    if os.path.abspath(frame.filename) in own_files]
    last = in_test_file[-1] if in_test_file else (frames[-1] if frames else None)
    where = _where(last) if last else ""
    if isinstance(exc, AssertionError) and last is not None:
        statement = _statement(last)
        line_rules = [rule for rule, _, pattern in EXCLUSION_RULES
                      if re.search(pattern, statement)]
        if line_rules:
            return Verdict("excluded", rule=line_rules[0], where=where, error=first_line)
        if last.name in VALUE_FRAMES:
            return Verdict("wrong_value", where=where, error=first_line)
        if re.search(r"assertEqual|same\(|allclose", statement):
            return Verdict("wrong_value", where=where, error=first_line)
        if rules:
            return Verdict("excluded", rule=rules[0], where=where, error=first_line)
        return Verdict("test_assert", where=where, error=first_line)
    if rules:
        return Verdict("excluded", rule=rules[0], where=where, error=first_line)
    return Verdict("harness", where=where, error=first_line)
