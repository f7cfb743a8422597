"""The dynamic-shapes benchmarks (`benchmarks/dynamic`): a smoke run writes a complete JSON
whose calls matched eager, and the pieces that judge results (eager comparison, ratios,
criteria) can fail."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks.dynamic import report, sizes, sweep
from benchmarks.dynamic.subjects import Subject
from benchmarks.dynamic.variants import Variant

ROOT = str(Path(__file__).resolve().parents[2])


def test_smoke_run_writes_every_field_and_matches_eager(tmp_path):
    command = [sys.executable, "-m", "benchmarks.dynamic", "--quick", "--parts", "sweep,decode",
               "--subjects", "function", "--sizes", "2,5",
               "--variants", "eager,framejit-static,framejit-auto",
               "--decode-variants", "eager,framejit-auto", "--tokens", "4", "--repeats", "1",
               "--trials", "2", "--out-dir", str(tmp_path), "--name", "smoke"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": ROOT})
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "smoke.json").read_text())
    assert (tmp_path / "smoke.md").read_text().startswith("# Dynamic shapes, cpu (quick)")
    assert result["env"]["torch"] == torch.__version__ and result["seconds"] > 0
    [part] = result["sweep"]
    assert part["subject"] == "function" and part["sizes"] == [2, 5]
    for name in ("eager", "framejit-static", "framejit-auto"):
        row = part["variants"][name]
        assert row["status"] == "pass" and row["matched_eager"], (name, row)
        assert row["calls_checked"] == 2 and set(row["per_call_ms"]) == {"2", "5"}
        assert all(value > 0 for value in row["per_call_ms"].values())
        assert row["compile_seconds"] >= 0 and row["compiles_while_timing"] == 0
        assert row["second_call_compiles"] == 0  # the same call again reuses its code
    # dynamic=False specialises: one entry per size, whatever dynamic shapes support exists
    assert part["variants"]["framejit-static"]["compiles"] == 2
    assert part["variants"]["framejit-static"]["source"] == "dynamo driver records"
    assert 1 <= part["variants"]["framejit-auto"]["compiles"] <= 2
    assert set(part["ratios"]["framejit-auto"]["vs_static"]["per_size"]) == {"2", "5"}
    [generation] = result["decode"]
    assert generation["decoder"] == "minimal-gpt2" and generation["new_tokens"] == 4
    for name in ("eager", "framejit-auto"):
        row = generation["variants"][name]
        assert row["tokens_match"] and row["tokens_per_second"] > 0, (name, row)
    assert generation["variants"]["framejit-auto"]["compiles"] >= 1
    assert result["criteria"]["sweep: every call matches eager"]["met"] is True
    assert result["criteria"]["decode: token ids equal eager's"]["met"] is True


def test_compare_flags_values_shapes_and_requires_grad():
    expected = torch.arange(6.0).reshape(2, 3)
    assert sizes.compare(expected, expected.clone()) is None
    assert sizes.compare(expected, expected + 1e-2) is not None
    assert sizes.compare(expected, expected.reshape(3, 2)) is not None
    assert sizes.compare(expected, expected.double()) is not None
    assert "requires_grad" in sizes.compare(expected, expected.clone().requires_grad_())
    assert sizes.compare((expected, [expected]), (expected, [expected * 2])) is not None


class _WrongVariant(Variant):
    """A 'compiled' variant that is off by one and compiles nothing."""

    def _build(self, subject, size_count):
        return lambda *args: subject(*args) + 1

    def compiles(self):
        return 0

    def counts(self):
        return {"compiles": 0}


def test_measure_sizes_reports_a_variant_that_differs_from_eager(monkeypatch):
    monkeypatch.setattr(sizes, "Variant", lambda name, *args: (
        _WrongVariant if name != "eager" else Variant)(name, *args))
    subject = Subject("double", lambda x: x * 2, lambda size: (torch.ones(size, 3),), "x*2")
    result = sizes.measure_sizes(subject, ["eager", "framejit-static"], [2, 3], trials=2,
                                 progress=lambda line: None)
    assert result["eager"]["matched_eager"] and result["eager"]["status"] == "pass"
    wrong = result["framejit-static"]
    assert not wrong["matched_eager"] and wrong["status"] == "mismatch"
    assert len(wrong["mismatches"]) == 2 and wrong["mismatches"][0].startswith("size 2:")


def _sweep_part(compiles: int, dynamic_ms: float) -> dict:
    variants = {"eager": {"per_call_ms": {"2": 2.0, "4": 4.0}, "matched_eager": True},
                "framejit-static": {"per_call_ms": {"2": 1.0, "4": 2.0}, "matched_eager": True,
                                    "compiles": 2},
                "framejit-auto": {"per_call_ms": {"2": dynamic_ms, "4": 2 * dynamic_ms},
                                  "matched_eager": True, "compiles": compiles}}
    return {"subject": "function", "sizes": [2, 4], "variants": variants,
            "ratios": sweep.ratios(variants)}


COMPILES = "sweep: at most 2 compiles, no per-size code (framejit dynamic=None/True)"


def test_ratios_and_criteria_judge_compiles_and_speed():
    good = _sweep_part(compiles=2, dynamic_ms=1.05)
    assert good["ratios"]["framejit-auto"]["vs_static"]["geomean"] == pytest.approx(1.05)
    assert good["ratios"]["framejit-static"]["vs_eager"]["median"] == pytest.approx(0.5)
    found = report.criteria({"sweep": [good]})
    assert all(found[name]["met"] for name in found if name.startswith("sweep")), found
    found = report.criteria({"sweep": [_sweep_part(compiles=3, dynamic_ms=1.2)]})
    assert found[COMPILES]["met"] is False
    assert found["sweep: dynamic per-call within 10% of static (geomean over sizes)"][
        "met"] is False
    per_size = _sweep_part(compiles=1, dynamic_ms=1.0)
    per_size["variants"]["framejit-auto"]["fallbacks"] = {"per_size: symbolic sizes": 2}
    found = report.criteria({"sweep": [per_size]})
    assert found[COMPILES]["met"] is False and "+2 per-size" in found[COMPILES]["detail"]
    decode = {"decoder": "minimal-gpt2", "new_tokens": 256, "variants": {
        "framejit-auto": {"compiles": 4, "tokens_per_second": 10.0, "tokens_match": True},
        "torch.compile-auto": {"compiles": 3, "tokens_per_second": 12.0,
                               "tokens_match": False}}}
    found = report.criteria({"decode": [decode]})
    assert [found[name]["met"] for name in found if name.startswith("decode")] == [False] * 3
    assert found["sweep: every call matches eager"]["met"] is None  # not measured
