"""Autotuning: candidate sets per kernel kind and mode, timing on the first call (with
in-place buffers restored), the winner remembered on disk and reused, and the tiling
decisions the candidates follow."""
import json
import os

import pytest
import torch

import inductor
from inductor.codegen.triton.kernel import LaunchSpec
from inductor.runtime import triton_autotune as autotune
from inductor.runtime.triton_launch import Launcher
from tests.triton.conftest import compile_function, launchers


def test_candidate_sets_grow_with_max_autotune():
    spec = LaunchSpec("pointwise", 1 << 20)
    default = autotune.candidates(spec, ["main"], exhaustive=False, interpret=False)
    exhaustive = autotune.candidates(spec, ["main"], exhaustive=True, interpret=False)
    assert 2 <= len(default) < len(exhaustive)
    assert len(autotune.candidates(spec, ["main"], False, interpret=True)) == 1
    blocks = {candidate.arguments[0]["XBLOCK"] for candidate in exhaustive}
    assert blocks >= {512, 1024, 2048}


def test_reduction_candidates_follow_the_strategy():
    rows = LaunchSpec("reduction", 4096, rnumel=32768, strategy="persistent")
    options = autotune.candidates(rows, ["main", "looped"], False, False)
    persistent = [option for option in options if option.variant == 0]
    looped = [option for option in options if option.variant == 1]
    assert persistent and looped
    assert all(option.arguments[0]["RBLOCK"] == 32768 for option in persistent)
    assert all(option.arguments[0]["RBLOCK"] < 32768 for option in looped)
    columns = LaunchSpec("reduction", 4096, rnumel=4096, strategy="looped",
                         outer_contiguous=True)
    assert all(option.arguments[0]["XBLOCK"] >= 32 for option in
               autotune.candidates(columns, ["main"], False, False))
    split = LaunchSpec("split", 1, rnumel=1 << 24, split=264, chunk=(1 << 24) // 264 + 1)
    for option in autotune.candidates(split, ["partial", "combine"], False, False):
        assert option.arguments[1]["SBLOCK"] == 512


def test_small_sizes_clamp_blocks():
    spec = LaunchSpec("tiled", 20, ynumel=3)
    for option in autotune.candidates(spec, ["main"], True, False):
        assert option.arguments[0]["YBLOCK"] <= 4 and option.arguments[0]["XBLOCK"] <= 32


def _launcher_of(compiled) -> Launcher:
    (launcher,) = launchers(compiled)
    return launcher


def test_tuning_restores_updated_buffers_and_remembers_the_winner(monkeypatch):
    x = torch.arange(1000, dtype=torch.float32)
    compiled = compile_function(lambda t: t * 2, x)
    launcher = _launcher_of(compiled)
    launcher.candidates = [autotune.Candidate(0, [{"XBLOCK": block}]) for block in (64, 256)]
    launcher.choice = None
    launcher.in_place = [0]   # as if the kernel updated its input: timing runs must not show
    times = iter([2.0, 1.0])

    def fake_time(launch):
        launch()
        x.add_(5)             # what a repeated in-place update would leave behind
        return next(times)

    monkeypatch.setattr(autotune, "time_launch", fake_time)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "test device")
    result = compiled(x)
    assert torch.equal(x, torch.arange(1000, dtype=torch.float32))
    assert launcher.choice.arguments == [{"XBLOCK": 256}]
    key = autotune.record_key(launcher.source_text, launcher.spec, "test device", False)
    path = autotune._record_path(key)
    with open(path) as handle:
        assert json.load(handle)["arguments"] == [{"XBLOCK": 256}]
    assert autotune.recorded(key, launcher.candidates) is launcher.candidates[1]
    os.remove(path)
    assert autotune.recorded(key, launcher.candidates) is None
    assert torch.equal(result, x * 2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_max_autotune_on_gpu_times_more_configs():
    x = torch.randn(1 << 20, device="cuda")
    graph = torch.fx.symbolic_trace(lambda t: torch.relu(t) * 3)
    compiled = inductor.compile_fx(graph, [x], mode="max-autotune-no-cudagraphs")
    torch.testing.assert_close(compiled(x), torch.relu(x) * 3)
    launcher = _launcher_of(compiled)
    assert len(launcher.candidates) > 3 and launcher.choice is not None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_timing_measures_the_device_not_the_host():
    """A launch whose host side takes 300 us around a kernel of a few microseconds: the
    timer queues its batches behind a GPU spin, so the host's time stays out of the result
    (timed the plain way, every call would take at least the 300 us)."""
    import time
    x = torch.randn(1024, device="cuda")

    def launch():
        deadline = time.perf_counter() + 300e-6
        while time.perf_counter() < deadline:
            pass
        x.add_(1)
    assert autotune.time_launch(launch) < 0.1     # milliseconds


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_tuning_times_candidates_through_the_direct_launch(monkeypatch):
    """Candidates are timed through the compiled kernels' own launchers (a few us of host
    time), not the `@triton.jit` path."""
    x = torch.randn(1 << 20, device="cuda")
    compiled = compile_function(lambda t: t * 2, x)
    launcher = _launcher_of(compiled)
    launcher.choice, launcher.fast = None, None
    timed = []
    real_time = autotune.time_launch

    def spy(launch):
        timed.append(launch)
        return real_time(launch)
    monkeypatch.setattr(autotune, "time_launch", spy)
    monkeypatch.setattr(autotune, "recorded", lambda key, options: None)  # no earlier winner
    monkeypatch.setattr(autotune, "remember", lambda key, winner, timings: None)
    launch_calls = []
    real_launch = launcher._launch
    monkeypatch.setattr(launcher, "_launch", lambda *a, **k: launch_calls.append(1) or
                        real_launch(*a, **k))
    torch.testing.assert_close(compiled(x), x * 2)
    assert len(timed) == len(launcher.candidates) >= 2
    # one jit launch per candidate (compiling it), then the chosen one's first real call
    assert len(launch_calls) == len(launcher.candidates) + 1


def test_blocks_of_an_axis_printed_without_its_mask_divide_its_extent():
    """A kernel printed without an axis's mask (`LaunchSpec.even`) is only ever launched with
    blocks that divide that axis: each candidate's block is cut to a divisor."""
    pointwise = LaunchSpec("pointwise", 3 * 1024, even=("XBLOCK",))
    for interpret in (False, True):
        for candidate in autotune.candidates(pointwise, ["main"], exhaustive=True, interpret=interpret):
            assert 3072 % candidate.arguments[0]["XBLOCK"] == 0, candidate
    looped = LaunchSpec("reduction", 24, rnumel=3072, strategy="looped", even=("RBLOCK",))
    blocks = {candidate.arguments[0]["RBLOCK"]
              for candidate in autotune.candidates(looped, ["main"], exhaustive=True, interpret=False)}
    assert blocks and all(3072 % block == 0 for block in blocks) and 1024 in blocks
    split = LaunchSpec("split", 4096, rnumel=16384, split=8, chunk=2048,
                       even=("XBLOCK", "RBLOCK"))
    for candidate in autotune.candidates(split, ["partial", "combine"], exhaustive=True,
                                interpret=False):
        partial, combine = candidate.arguments
        assert 2048 % partial["RBLOCK"] == 0 and 4096 % partial["XBLOCK"] == 0
        assert 4096 % combine["XBLOCK"] == 0
    uneven = LaunchSpec("pointwise", 3000)
    assert any(3000 % candidate.arguments[0]["XBLOCK"]
               for candidate in autotune.candidates(uneven, ["main"], exhaustive=True, interpret=False))
