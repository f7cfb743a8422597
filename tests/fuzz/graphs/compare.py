"""The graph fuzzer's comparison of one call: compiled against eager.

Input: what eager and the compiled graph returned (or raised) for copies of the same inputs,
the inputs after each call, and on request a float64 reference of the same program. Output:
a list of `Failure`s: values (with dtype-appropriate tolerances; a float result outside them
still passes when it is no further from the float64 reference than twice eager's error, or
is the reference's own NaN or infinity),
dtypes, shapes, strides (dimensions longer than one), which outputs share memory with which
inputs and outputs, inputs returned as the very object, which outputs are views (`_base`) and
of what (an input, an earlier or later output, or a tensor neither returns: its shape and
strides), mutated inputs, and exceptions.
Where eager's strides differ from those torch's own fake (meta) kernels predict for the
torch-level graph, a stride difference is a note (what a compiler working from fake tensors
cannot know), not a failure.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Callable, Optional

import torch

TOLERANCES = {torch.float64: (1e-7, 1e-7), torch.float32: (1e-4, 1e-5),
              torch.float16: (1e-2, 1e-3), torch.bfloat16: (2e-2, 1e-2)}


@dataclasses.dataclass
class Failure:
    """One way the compiled graph differed from eager."""

    kind: str       # "value mismatch", "compile error", "alias mismatch", ...
    detail: str
    call: str = ""  # "call 1", "call 2 (fresh inputs)", "aliasing variant"

    @property
    def is_note(self) -> bool:
        """Recorded and counted, but not a failure of the compiler."""
        return self.kind.startswith("note:")

    def signature(self) -> str:
        """What the minimizer keeps while shrinking: the kind, and for errors the type, the
        start of the message (digits as #) and the innermost function of `inductor`; marked
        when seen in the aliasing-variant call."""
        if self.kind in ("compile error", "runtime error", "exception mismatch",
                         "unexpected fallback"):
            where = self.detail.rsplit(" @ ", 1)[1] if " @ " in self.detail else ""
            kind, _, message = self.detail.partition(": ")
            message = re.sub(r"\d+", "#", message.split(" @ ")[0].split(" | ")[0])[:60]
            text = f"{self.kind}: {kind}: {message}" + (f" @ {where}" if where else "")
        else:
            text = self.kind
        return text + (" [aliasing variant]" if self.call == "aliasing variant" else "")

    def __str__(self) -> str:
        where = f" [{self.call}]" if self.call else ""
        return f"{self.kind}{where}: {self.detail}"


@dataclasses.dataclass
class Outcome:
    """What one run of a graph gave: flat outputs and inputs afterwards, or an exception."""

    outputs: Optional[list]
    inputs: list
    error: Optional[BaseException] = None


def run(function: Callable, inputs: list) -> Outcome:
    try:
        result = function(*inputs)
    except Exception as error:  # noqa: BLE001 (compared with the other side's exception)
        return Outcome(None, inputs, error)
    outputs = list(result) if isinstance(result, (tuple, list)) else [result]
    return Outcome(outputs, inputs)


def compare(expected: Outcome, actual: Outcome, call: str,
            reference: Callable[[], Optional[Outcome]],
            predicted_strides: Optional[list] = None,
            low_precision: Optional[torch.dtype] = None) -> list:
    """Failures of `actual` (compiled) against `expected` (eager); `reference()` gives the
    float64 run (or None), computed only when a float comparison needs it;
    `predicted_strides`: per output, the strides torch's fake tensors predict (or None);
    `low_precision`: a type below float64 the program computes in somewhere (float outputs
    then get its tolerances: float16 intermediates round differently once fused or
    decomposed, and a float64 result of float32 values carries float32 rounding)."""
    if expected.error is not None or actual.error is not None:
        return _compare_errors(expected.error, actual.error, call)
    failures = []
    if len(expected.outputs) != len(actual.outputs):
        return [Failure("output structure", f"{len(actual.outputs)} outputs, eager has "
                        f"{len(expected.outputs)}", call)]
    cache: list = []

    def lazy_reference():
        if not cache:
            cache.append(reference())
        return cache[0]

    for position, (want, got) in enumerate(zip(expected.outputs, actual.outputs)):
        def ref_value(position=position):
            outcome = lazy_reference()
            return None if outcome is None or outcome.outputs is None else \
                outcome.outputs[position]
        predicted = predicted_strides[position] if predicted_strides and \
            position < len(predicted_strides) else None
        failures += _compare_tensor(want, got, f"output {position}", call, ref_value,
                                    predicted=predicted, low_precision=low_precision)
    for position, (want, got) in enumerate(zip(expected.inputs, actual.inputs)):
        def ref_input(position=position):
            outcome = lazy_reference()
            return None if outcome is None or outcome.outputs is None else \
                outcome.inputs[position]
        for failure in _compare_tensor(want, got, f"input {position} after the call", call,
                                       ref_input, strides=False, low_precision=low_precision):
            failure.kind = "input mutation" if failure.kind == "value mismatch" \
                else failure.kind
            failures.append(failure)
    failures += _compare_aliasing(expected, actual, call)
    failures += _compare_views(expected, actual, call)
    return failures


def _compare_errors(expected, actual, call: str) -> list:
    if expected is None:
        return [Failure("runtime error", f"{type(actual).__name__}: "
                        f"{_first_line(actual)}", call)]
    if actual is None:
        return [Failure("exception mismatch", f"eager raised {type(expected).__name__}: "
                        f"{_first_line(expected)}; compiled returned", call)]
    if type(expected) is not type(actual) and not (
            isinstance(actual, type(expected)) or isinstance(expected, type(actual))):
        return [Failure("exception mismatch", f"{type(actual).__name__}: "
                        f"{_first_line(actual)} (eager: {type(expected).__name__}: "
                        f"{_first_line(expected)})", call)]
    return []


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return (text[0][:300] if text else "") + where_raised(error)


def where_raised(error: BaseException) -> str:
    """" @ inductor/<file>:<function>" for the innermost frame of `inductor` in the
    traceback ("" when none)."""
    import traceback
    frames = [frame for frame in traceback.extract_tb(error.__traceback__)
              if "/inductor/" in frame.filename]
    if not frames:
        return ""
    frame = frames[-1]
    return f" @ inductor/{frame.filename.rsplit('/inductor/', 1)[1]}:{frame.name}"


def _compare_tensor(want, got, what: str, call: str, ref_value, strides: bool = True,
                    predicted: Optional[tuple] = None,
                    low_precision: Optional[torch.dtype] = None) -> list:
    if not isinstance(want, torch.Tensor) or not isinstance(got, torch.Tensor):
        if type(want) is not type(got) or (not isinstance(want, torch.Tensor) and want != got):
            return [Failure("output structure", f"{what}: {type(got).__name__} "
                            f"{got!r:.80}, eager {type(want).__name__} {want!r:.80}", call)]
        return []
    if want.dtype != got.dtype:
        return [Failure("dtype mismatch", f"{what}: {got.dtype}, eager {want.dtype}", call)]
    if want.shape != got.shape:
        return [Failure("shape mismatch", f"{what}: {tuple(got.shape)}, eager "
                        f"{tuple(want.shape)}", call)]
    if want.device != got.device:
        return [Failure("device mismatch", f"{what}: {got.device}, eager {want.device}", call)]
    failures = []
    problem = value_problem(want, got, ref_value, low_precision)
    if problem is not None:
        failures.append(Failure("value mismatch", f"{what}: {problem}", call))
    if strides and want.numel() > 0:
        differing = [dim for dim, extent in enumerate(want.shape)
                     if extent > 1 and want.stride(dim) != got.stride(dim)]
        if differing:
            unpredictable = predicted is not None and any(
                want.stride(dim) != predicted[dim] for dim in differing)
            kind = "note: eager strides unlike torch's meta strides" if unpredictable \
                else "stride mismatch"
            failures.append(Failure(kind, f"{what}: {got.stride()}, eager {want.stride()}, "
                                    f"fake {predicted} (shape {tuple(want.shape)})", call))
    return failures


def value_problem(want: torch.Tensor, got: torch.Tensor, ref_value,
                  low_precision: Optional[torch.dtype] = None) -> Optional[str]:
    """None when `got` matches `want` (see the module docstring), else a description."""
    if want.numel() == 0:
        return None
    want_cpu, got_cpu = want.detach().cpu(), got.detach().cpu()
    if not want.is_floating_point():
        wrong = want_cpu != got_cpu
        if not bool(wrong.any()):
            return None
        return _describe(wrong, want_cpu, got_cpu)
    expected, actual = want_cpu.double(), got_cpu.double()
    rtol, atol = TOLERANCES.get(want.dtype, (1e-4, 1e-5))
    if low_precision in TOLERANCES:
        rtol, atol = (max(a, b) for a, b in zip((rtol, atol), TOLERANCES[low_precision]))
    close = torch.isclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
    if bool(close.all()):
        return None
    reference = ref_value()
    if isinstance(reference, torch.Tensor) and reference.shape == want.shape:
        truth = reference.detach().cpu().double()
        eager_error = (expected - truth).abs()
        allowed = 2 * eager_error + atol + rtol * truth.abs()
        near_truth = (actual - truth).abs() <= allowed
        # A non-finite result equal to the reference's: eager's rounding made the value a
        # division meets tiny instead of 0 (seed 4399: eager's float16 layer_norm of a row of
        # equal values is 1e-7, the float64 run's and the compiled graph's 0, and `a / it`
        # is finite in eager only), where the distance arithmetic above gives NaN.
        same_special = (actual.isnan() & truth.isnan()) | (actual.isinf() & (actual == truth))
        close = close | near_truth.nan_to_num(False) | same_special
        if bool(close.all()):
            return None
    return _describe(~close, expected, actual)


def _describe(wrong: torch.Tensor, want: torch.Tensor, got: torch.Tensor) -> str:
    positions = wrong.nonzero()
    first = tuple(int(value) for value in positions[0]) if len(positions) else ()
    return (f"{len(positions)} of {want.numel()} elements differ; first at {first}: "
            f"{got[first].item()!r} vs eager {want[first].item()!r}")


def storage_key(tensor: torch.Tensor):
    """An id of a tensor's memory, or None for tensors without any (zero size)."""
    storage = tensor.untyped_storage()
    return storage.data_ptr() if storage.nbytes() > 0 else None


def aliasing(outcome: Outcome) -> list:
    """Per output: the inputs it is (`is`), the inputs and earlier outputs it shares memory
    with. Tensors without memory share nothing."""
    result = []
    inputs = outcome.inputs
    for position, value in enumerate(outcome.outputs):
        if not isinstance(value, torch.Tensor):
            result.append(None)
            continue
        key = storage_key(value)
        same = tuple(index for index, item in enumerate(inputs) if item is value)
        shared_inputs = tuple(index for index, item in enumerate(inputs)
                              if key is not None and storage_key(item) == key)
        shared_outputs = tuple(index for index, item in enumerate(outcome.outputs[:position])
                               if isinstance(item, torch.Tensor) and key is not None
                               and storage_key(item) == key)
        result.append((same, shared_inputs, shared_outputs))
    return result


def _compare_aliasing(expected: Outcome, actual: Outcome, call: str) -> list:
    failures = []
    for position, (want, got) in enumerate(zip(aliasing(expected), aliasing(actual))):
        if want == got or want is None:
            continue
        names = ("is input", "shares memory with inputs", "shares memory with outputs")
        details = [f"{name} {got_part or '()'} (eager {want_part or '()'})"
                   for name, want_part, got_part in zip(names, want, got)
                   if want_part != got_part]
        failures.append(Failure("alias mismatch", f"output {position}: " +
                                "; ".join(details), call))
    return failures


def views(outcome: Outcome) -> list:
    """Per tensor output: None where it is no view (`_base` None), else what it views: `("input",
    i)`, `("output", j)`, or `("other", shape, strides)` for a base neither side returns (issue
    21: an output eager allocates came back viewing a hidden buffer of another layout)."""
    result = []
    for value in outcome.outputs:
        base = value._base if isinstance(value, torch.Tensor) else None
        if base is None:
            result.append(None)
            continue
        found = [("input", index) for index, item in enumerate(outcome.inputs) if item is base]
        found += [("output", index) for index, item in enumerate(outcome.outputs)
                  if item is base]
        # strides address nothing on dimensions of extent one, or in a base without elements
        strides = tuple(stride for stride, extent in zip(base.stride(), base.shape)
                        if extent > 1) if base.numel() else ()
        result.append(found[0] if found else ("other", tuple(base.shape), strides))
    return result


def _compare_views(expected: Outcome, actual: Outcome, call: str) -> list:
    return [Failure("view mismatch", f"output {position}: views {got} (eager {want})", call)
            for position, (want, got) in enumerate(zip(views(expected), views(actual)))
            if want != got]
