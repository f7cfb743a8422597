"""The zoo's accuracy verdict: tolerance to eager, the 2x-of-eager-error rule, exact integers."""
import torch

from benchmarks.zoo.accuracy import compare, leaves


def _trio(noise_eager: float, noise_compiled: float, dtype=torch.float32):
    torch.manual_seed(0)
    truth = torch.randn(1000, dtype=torch.float64)
    eager = (truth + noise_eager * torch.randn(1000, dtype=torch.float64)).to(dtype)
    compiled = (truth + noise_compiled * torch.randn(1000, dtype=torch.float64)).to(dtype)
    return compiled, eager, truth


def test_identical_results_pass_with_cosine_one():
    compiled, eager, truth = _trio(1e-6, 1e-6)
    verdict = compare(eager.clone(), eager, truth, torch.float32)
    assert verdict.passed and verdict.reason is None
    assert verdict.cosine > 0.999999 and verdict.max_abs_vs_eager == 0.0


def test_error_within_twice_eager_passes_even_beyond_tolerance():
    compiled, eager, truth = _trio(1e-2, 1.5e-2)  # far beyond 1e-4 of eager, but 1.5x its error
    assert compare(compiled, eager, truth, torch.float32).passed


def test_error_far_beyond_eager_fails_with_a_reason():
    compiled, eager, truth = _trio(1e-5, 1e-1)
    verdict = compare(compiled, eager, truth, torch.float32)
    assert not verdict.passed
    assert "rmse" in verdict.reason and verdict.rmse > verdict.eager_rmse


def test_bfloat16_uses_its_looser_tolerance():
    compiled, eager, truth = _trio(0.0, 0.0, torch.bfloat16)
    shifted = compiled + 0.004  # within bf16's 1e-2, far outside fp32's 1e-4
    assert compare(shifted, eager, truth, torch.bfloat16).passed
    assert not compare(shifted.float(), eager.float(), truth, torch.float32).passed


def test_integers_must_match_exactly_and_nested_outputs_are_walked():
    ids = torch.arange(5)
    result = {"logits": torch.ones(3), "ids": (ids + 1,)}
    expected = {"logits": torch.ones(3), "ids": (ids,)}
    reference = {"logits": torch.ones(3, dtype=torch.float64), "ids": (ids,)}
    assert len(leaves(result)) == 2
    verdict = compare(result, expected, reference, torch.float32)
    assert not verdict.passed and "output 1" in verdict.reason


def test_nan_where_eager_has_none_fails():
    compiled, eager, truth = _trio(1e-6, 1e-6)
    compiled[3] = float("nan")
    assert not compare(compiled, eager, truth, torch.float32).passed
