"""The generated direct-launch function of a GPU kernel (inductor/runtime/triton_launch.py):
checked on the CPU with a recording stand-in for Triton's compiled-kernel launcher."""
import types

import torch

from inductor.runtime import triton_launch
from inductor.runtime.triton_launch import Launcher


class Pointer:
    """A tensor stand-in with a chosen data pointer."""

    def __init__(self, address: int):
        self.address = address

    def data_ptr(self) -> int:
        return self.address


def direct_launcher(monkeypatch, alignment, scratch=False):
    launched, general = [], []
    monkeypatch.setattr(triton_launch, "_stream_function", lambda: (lambda index: 1000 + index))
    launcher = Launcher.__new__(Launcher)
    launcher.name = "kernel0"
    launcher.device = torch.device("cuda", 1)
    launcher.spec = types.SimpleNamespace(workspaces=[torch.float32] if scratch else [],
                                          xnumel=4096, status=False)
    launcher.argument_dtypes = [torch.float32] * 3 + list(launcher.spec.workspaces)
    launcher.outside = [0, 1]
    launcher.alignment = alignment
    launcher.needs_scratch = scratch
    launcher._scratch = lambda: ["scratch"]
    launcher._scratches = {}
    launcher._general = lambda *tensors: general.append(tensors)
    run = lambda *arguments: launched.append(arguments)  # noqa: E731
    launcher.fast = [((run, "function0", "metadata0"), (32, 1, 1), [128]),
                     ((run, "function1", "metadata1"), (4, 1, 1), [64, 16])]
    return launcher._direct_function(), launched, general


def test_direct_function_launches_every_function_with_its_constants(monkeypatch):
    direct, launched, general = direct_launcher(monkeypatch, (True, True))
    a, b, c = Pointer(4096), Pointer(8192), Pointer(3)      # c is the kernel's own buffer
    direct(a, b, c)
    assert launched == [(32, 1, 1, 1001, "function0", "metadata0", None, None, None, a, b, c, 128),
                        (4, 1, 1, 1001, "function1", "metadata1", None, None, None, a, b, c, 64,
                         16)]
    assert general == []


def test_a_misaligned_input_takes_the_general_path(monkeypatch):
    direct, launched, general = direct_launcher(monkeypatch, (True, True))
    a, b, c = Pointer(4096), Pointer(8194), Pointer(0)
    direct(a, b, c)
    assert launched == [] and general == [(a, b, c)]


def test_an_input_recorded_misaligned_is_not_checked(monkeypatch):
    direct, launched, general = direct_launcher(monkeypatch, (False, True))
    direct(Pointer(4096), Pointer(8192), Pointer(0))
    direct(Pointer(4098), Pointer(8192), Pointer(0))
    assert len(launched) == 4 and general == []
    direct(Pointer(4096), Pointer(8200), Pointer(0))
    assert len(launched) == 4 and len(general) == 1


def test_scratch_memory_is_made_once_per_stream(monkeypatch):
    monkeypatch.setattr(triton_launch, "_capturing", lambda: False)    # (no GPU here)
    direct, launched, _ = direct_launcher(monkeypatch, (True, True), scratch=True)
    direct(Pointer(0), Pointer(16), Pointer(32))
    assert launched[0][-2:] == ("scratch", 128)
    launcher = direct.__globals__["stream_scratch"].__self__
    made = []
    launcher._scratch = lambda: made.append(1) or [f"scratch{len(made)}"]
    launcher._scratches.clear()
    stream = [1001]
    direct.__globals__["current_stream"] = lambda index: stream[0]
    for _ in range(3):                          # launches on one stream run in order
        direct(Pointer(0), Pointer(16), Pointer(32))
    assert len(made) == 1 and launched[-1][-3] == "scratch1"
    stream[0] = 2002                            # another stream: its own workspaces
    direct(Pointer(0), Pointer(16), Pointer(32))
    assert len(made) == 2 and launched[-1][-3] == "scratch2"
    stream[0] = 1001
    direct(Pointer(0), Pointer(16), Pointer(32))
    assert len(made) == 2 and launched[-1][-3] == "scratch1"
    monkeypatch.setattr(triton_launch, "_capturing", lambda: True)
    stream[0] = 3003                            # capturing a CUDA graph: never kept
    direct(Pointer(0), Pointer(16), Pointer(32))
    direct(Pointer(0), Pointer(16), Pointer(32))
    assert len(made) == 4 and 3003 not in launcher._scratches
    monkeypatch.setattr(triton_launch, "_capturing", lambda: False)
    for handle in range(4000, 4000 + 2 * triton_launch._SCRATCH_STREAMS):
        stream[0] = handle
        direct(Pointer(0), Pointer(16), Pointer(32))
    assert len(launcher._scratches) <= triton_launch._SCRATCH_STREAMS


class KnownLauncher:
    """A stand-in with the Python `__call__` of Triton 3.6's CUDA launcher object."""

    global_scratch_size = profile_scratch_size = 0
    launch_cooperative_grid, launch_pdl = False, True

    def __init__(self):
        self.calls = []
        self.launch = lambda *arguments: self.calls.append(arguments)

    def __call__(self, gridX, gridY, gridZ, stream, function, *args):
        global_scratch = profile_scratch = None
        self.launch(gridX, gridY, gridZ, stream, function, self.launch_cooperative_grid,
                    self.launch_pdl, global_scratch, profile_scratch, *args)


def test_the_known_launcher_object_is_skipped_for_its_c_function(monkeypatch):
    monkeypatch.setattr(triton_launch, "_stream_function", lambda: (lambda index: 1000 + index))
    launcher = Launcher.__new__(Launcher)
    launcher.name, launcher.device = "kernel0", torch.device("cuda", 0)
    launcher.spec = types.SimpleNamespace(workspaces=[], xnumel=64, status=False)
    launcher.argument_dtypes, launcher.outside, launcher.alignment = [torch.float32], [0], (True,)
    launcher.needs_scratch = False
    known = KnownLauncher()
    launcher.fast = [((known, "function0", "metadata0"), (2, 1, 1), [32])]
    a = Pointer(4096)
    launcher._direct_function()(a)
    through_call = KnownLauncher()
    through_call(2, 1, 1, 1000, "function0", "metadata0", None, None, None, a, 32)
    assert known.calls == through_call.calls == [
        (2, 1, 1, 1000, "function0", False, True, None, None, "metadata0", None, None, None, a, 32)]
    # with scratch memory to allocate, the object itself is called
    known.global_scratch_size = 128
    assert triton_launch._bare_launch(known) is None
