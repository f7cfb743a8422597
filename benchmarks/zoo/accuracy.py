"""Stage "accuracy": is a compiled result as close to the truth as eager's?

Input: the compiled result, the eager result in the same dtype, and an eager float64 reference
computed from the same weights and inputs (any nesting of tuples, lists, dicts and
`ModelOutput`s). Output: an `Accuracy` verdict with the numbers behind it.

Method (the PT2 paper's, as used by its benchmark harness): an output passes when it is close
to eager within the dtype's tolerance, or when its root-mean-square error against the float64
reference is at most `MULTIPLIER` times eager's own error plus a tenth of the tolerance. So a
compiler may differ from eager by rounding, but never be meaningfully less accurate. Integer
and boolean outputs must match exactly. The cosine similarity against the reference is
recorded as well (the paper's other measure), not used for the verdict.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Optional

import torch

TOLERANCE = {
    torch.float64: 1e-7,
    torch.float32: 1e-4,
    torch.float16: 1e-3,
    torch.bfloat16: 1e-2,
}
MULTIPLIER = 2.0


@dataclasses.dataclass
class Accuracy:
    """The verdict for one result: `passed`, why not, and the measured errors."""

    passed: bool
    reason: Optional[str] = None
    cosine: Optional[float] = None  # lowest over outputs, against the float64 reference
    max_abs_vs_eager: Optional[float] = None
    rmse: Optional[float] = None  # largest over outputs, against the float64 reference
    eager_rmse: Optional[float] = None  # eager's, same output
    outputs: int = 0

    def as_row(self) -> dict:
        """JSON-ready fields (floats rounded to 4 significant digits)."""
        row = dataclasses.asdict(self)
        return {key: _round(value) for key, value in row.items()}


def leaves(value) -> list:
    """Tensors of `value` in a stable order, through tuples, lists, dicts and dataclasses."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):  # transformers' ModelOutput is an OrderedDict
        return [leaf for key in value for leaf in leaves(value[key])]
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in leaves(item)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [leaf for field in dataclasses.fields(value)
                for leaf in leaves(getattr(value, field.name))]
    return []


def compare(result, eager, reference, dtype: torch.dtype) -> Accuracy:
    """Judge `result` against `eager` and the float64 `reference` (see the module docstring)."""
    results, eagers, references = leaves(result), leaves(eager), leaves(reference)
    if not (len(results) == len(eagers) == len(references)):
        return Accuracy(False, f"output count differs: compiled {len(results)}, eager "
                               f"{len(eagers)}, reference {len(references)}")
    tolerance = TOLERANCE.get(dtype, 1e-4)
    verdict = Accuracy(True, outputs=len(results))
    for index, (got, expected, truth) in enumerate(zip(results, eagers, references)):
        problem = _compare_one(got.detach(), expected.detach(), truth.detach(), tolerance,
                               verdict)
        if problem is not None and verdict.passed:
            verdict.passed = False
            verdict.reason = f"output {index}: {problem}"
    return verdict


def _compare_one(got, expected, truth, tolerance: float, verdict: Accuracy) -> Optional[str]:
    if got.shape != expected.shape:
        return f"shape {tuple(got.shape)} differs from eager's {tuple(expected.shape)}"
    if not got.is_floating_point() and not got.is_complex():
        return None if torch.equal(got, expected) else "integer/boolean values differ from eager"
    got64, expected64, truth64 = (t.to(torch.float64) for t in (got, expected, truth))
    if got64.numel() == 0:
        return None
    gap = (got64 - expected64).abs().nan_to_num(nan=math.inf).max().item()
    verdict.max_abs_vs_eager = max(verdict.max_abs_vs_eager or 0.0, gap)
    error, eager_error = _rmse(got64, truth64), _rmse(expected64, truth64)
    verdict.rmse = max(verdict.rmse or 0.0, error)
    verdict.eager_rmse = max(verdict.eager_rmse or 0.0, eager_error)
    cosine = _cosine(got64, truth64)
    verdict.cosine = cosine if verdict.cosine is None else min(verdict.cosine, cosine)
    if torch.isnan(got64).any() and not torch.isnan(expected64).any():
        return "NaN where eager has none"
    if torch.allclose(got64, expected64, rtol=tolerance, atol=tolerance, equal_nan=True):
        return None
    if error <= MULTIPLIER * eager_error + tolerance / 10:
        return None
    return (f"rmse vs float64 {error:.3g} exceeds {MULTIPLIER} x eager's {eager_error:.3g} "
            f"+ {tolerance / 10:.0e} (max |compiled - eager| {gap:.3g})")


def _rmse(values: torch.Tensor, truth: torch.Tensor) -> float:
    finite = torch.isfinite(truth)
    difference = (values - truth)[finite]
    return math.sqrt(difference.pow(2).mean().item()) if difference.numel() else 0.0


def _cosine(values: torch.Tensor, truth: torch.Tensor) -> float:
    a, b = values.flatten().nan_to_num(), truth.flatten().nan_to_num()
    norms = a.norm() * b.norm()
    if norms == 0:
        return 1.0 if torch.equal(a, b) else 0.0
    return (a @ b / norms).item()


def _round(value):
    if isinstance(value, float) and math.isfinite(value) and value != 0:
        return float(f"{value:.4g}")
    return value
