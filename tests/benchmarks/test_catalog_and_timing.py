"""The one model catalog (stage benchmarks' entries outside the zoo's suites) and the one
timing module (its loops: synchronization, rotating order, clocks)."""
import pytest
import torch

from benchmarks import timing
from benchmarks.zoo import catalog

pytest.importorskip("torchvision")
pytest.importorskip("transformers")

GROUPS = ("tiny", "default", "training", "soundness")


def test_stage_benchmark_entries_are_in_the_catalog_and_in_no_suite():
    zoo = set(catalog.names())
    for group in GROUPS:
        entries = catalog.names(group)
        assert entries and all(name.startswith(f"{group}/") for name in entries)
        assert not zoo & set(entries)
    for suite in catalog.SUITES:
        assert {model for model, _ in catalog.suite(suite)} <= zoo
    assert len(catalog.names("tiny")) == 11  # the capture benchmark's eleven models


def test_a_tiny_entry_builds_in_eval_mode_with_fixed_inputs():
    first = catalog.build_workload("tiny/BertModel")
    second = catalog.build_workload("tiny/BertModel")
    assert not first.model.training
    assert torch.equal(first.kwargs["input_ids"], second.kwargs["input_ids"])
    with torch.no_grad():
        output = first.model(*first.args, **first.kwargs)
    assert output.last_hidden_state.shape == (2, 16, 64)


def test_a_training_entry_takes_its_size_and_computes_its_loss():
    workload = catalog.build_workload("training/gpt2-small", batch=1, size=8)
    assert workload.kwargs["input_ids"].shape == (1, 8)
    loss = workload.loss(workload.model(**workload.kwargs), workload.targets)
    assert loss.dim() == 0 and torch.isfinite(loss)


def test_interleaved_samples_rotate_the_order_and_synchronize_around_each_batch():
    events = []
    variants = {"a": lambda: events.append("a"), "b": lambda: events.append("b")}
    samples = timing.interleaved_samples(variants, trials=2, counts={"a": 2, "b": 1},
                                         synchronize=lambda: events.append("|"))
    assert events == ["|", "a", "a", "|", "|", "b", "|",      # trial 0: a then b
                      "|", "b", "|", "|", "a", "a", "|"]      # trial 1: b then a (ABBA)
    assert {name: len(values) for name, values in samples.items()} == {"a": 2, "b": 2}


def test_seconds_per_call_uses_the_given_clock():
    ticks = iter([10.0, 16.0])
    assert timing.seconds_per_call(lambda: None, 3, clock=lambda: next(ticks)) == 2.0
    result, seconds = timing.timed(lambda: 42)
    assert result == 42 and seconds >= 0
