"""mode="reduce-overhead" on graphs that compute gradients: the compiled forward and backward
each replay as CUDA graphs (`runtime/cudagraphs.py`, `recording_training`). The forward hands
out its saved values uncopied, the backward reads them in place, and a forward replays only
while nothing is left of its last call's saved values; everything else is handed out as
copies. Training matches eager over several iterations: an MLP, a CNN with BatchNorm (running
statistics), a second forward before the first backward, `retain_graph`, gradients
accumulating over two backwards, saved values a caller keeps, and a whole step with an
optimizer.

The first tests run on CPU: which buffers are copied, the signature, which graphs are not
recorded, and the runner end to end under simulated CUDA graphs (a replay overwrites the
recorded outputs: each liveness test fails where the check is taken out); the others need a
GPU."""
import copy
import logging

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dynamo
import inductor
from inductor.runtime import cudagraphs
from inductor.runtime.cudagraphs import (NotRecordable, OutputPlan, TrainingGraphRunner,
                                         off_gpu_reason, recording_training)
from inductor.runtime.compiled_graph import CompiledGraph, GraphReport

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}


# ---------------------------------------------------------------- CPU: the logic alone

def test_output_plan_copies_pool_memory_and_rebuilds_input_views():
    static_input = torch.arange(12.0)
    parameter = nn.Parameter(torch.arange(6.0))
    pool = torch.arange(100.0)
    fresh = torch.randn(3, 4).t()                   # alone in its storage, dense
    first, second = pool[10:20].view(2, 5), pool[15:30]   # two outputs sharing a storage
    expanded = torch.randn(3, 1).expand(3, 4)       # not dense: copied with its storage
    of_input, of_parameter = static_input[2:8].view(2, 3), parameter[1:]
    outputs = [fresh, first, second, expanded, of_input, torch.empty(0, 3), of_parameter, 7]
    plan = OutputPlan(outputs, [static_input, parameter])
    caller_input = torch.arange(100.0, 120.0)[4:16]   # the caller's tensor, at an offset
    results = plan.hand_out([caller_input, parameter])
    recorded = {output.untyped_storage().data_ptr() for output in outputs[:4]}
    for result, output in zip(results[:4], outputs[:4]):
        assert result.untyped_storage().data_ptr() not in recorded
        assert result.stride() == output.stride() and torch.equal(result, output)
    assert results[1].untyped_storage().data_ptr() == results[2].untyped_storage().data_ptr()
    assert results[2].storage_offset() - results[1].storage_offset() == 5
    assert results[4].untyped_storage().data_ptr() == caller_input.untyped_storage().data_ptr()
    assert torch.equal(results[4], caller_input[2:8].view(2, 3))
    assert results[5].shape == (0, 3) and results[7] == 7
    assert results[6].data_ptr() == of_parameter.data_ptr()
    pool.zero_()          # a later replay overwrites the recording: the copies keep values
    assert torch.equal(results[1], torch.arange(10.0, 20.0).view(2, 5))


def test_output_plan_refuses_an_input_viewed_as_another_dtype():
    buffer = torch.zeros(8)
    with pytest.raises(NotRecordable):
        OutputPlan([buffer.view(torch.int32)], [buffer])


def test_signature_holds_parameter_addresses_only():
    graph = torch.fx.symbolic_trace(lambda x, w: x * w)
    runner = TrainingGraphRunner(lambda *inputs: None, graph)
    parameter, saved = nn.Parameter(torch.ones(3)), torch.ones(3)
    signature = runner._signature([saved, parameter, 2])
    assert signature[0][-1] is None and signature[1][-1] == parameter.data_ptr()
    assert signature[2] == ("value", 2)


def _traced(function, *inputs):
    from torch.fx.experimental.proxy_tensor import make_fx
    return make_fx(function)(*inputs)


def test_graphs_off_the_gpu_are_not_recorded(caplog):
    graph = _traced(lambda x: x * 2, torch.ones(3))
    assert "cpu" in off_gpu_reason(graph, [torch.ones(3)])
    compiled = CompiledGraph(lambda x: [x * 2], GraphReport())
    before = cudagraphs.counts().get("training not_recorded", 0)
    with caplog.at_level(logging.WARNING, logger="framejit.inductor"):
        result = recording_training(lambda gm, inputs, output_strides=None: compiled)(
            graph, [torch.ones(3)], output_strides=[(1,)])
    assert result is compiled
    assert cudagraphs.counts()["training not_recorded"] == before + 1
    as_is = CompiledGraph(lambda x: [x], GraphReport(reason="ran as is"))
    assert recording_training(lambda gm, inputs, output_strides=None: as_is)(
        graph, [torch.ones(3)]) is as_is


def test_cpu_training_in_reduce_overhead_compiles_without_recording(caplog):
    model = nn.Linear(4, 2)
    reference = copy.deepcopy(model)
    jitted = dynamo.jit(model, mode="reduce-overhead")
    x = torch.randn(3, 4)
    with caplog.at_level(logging.WARNING):
        jitted(x).sum().backward()
    reference(x).sum().backward()
    torch.testing.assert_close(model.weight.grad, reference.weight.grad)
    assert not [record for record in caplog.records if "CUDA graphs" in record.getMessage()]


# ------------------------------------- CPU: the runner under simulated CUDA graphs
# A simulated recording keeps the call made during capture; a replay runs it again on the
# recording's static inputs and writes the results into the recorded outputs, as a CUDA
# graph's replay overwrites its buffers. Handing those buffers out would fail these tests.

class _SimulatedGraph:
    capturing = None

    def __init__(self):
        self.call = None

    def replay(self):
        run, inputs, outputs = self.call
        for output, value in zip(outputs, run(list(inputs))):
            if isinstance(output, torch.Tensor):
                output.copy_(value)


class _Simulated:
    """A compiled graph (a list callable) that registers itself with a capture."""

    def __init__(self, run):
        self.run = run

    def __call__(self, *values):
        outputs = self.run(list(values))
        if _SimulatedGraph.capturing is not None:
            _SimulatedGraph.capturing.call = (self.run, values, outputs)
        return outputs


class _Capture:
    def __init__(self, graph, **options):
        self.graph = graph

    def __enter__(self):
        _SimulatedGraph.capturing = self.graph

    def __exit__(self, *exception):
        _SimulatedGraph.capturing = None


def _simulated_inner(graph, example_inputs, output_strides=None):
    from inductor.autograd.boxed import StridedGraphRunner
    strides = output_strides or [None] * len(list(graph.graph.nodes)[-1].args[0])
    report = GraphReport()
    return CompiledGraph(_Simulated(StridedGraphRunner(graph, example_inputs, strides, report)),
                         report)


@pytest.fixture
def simulated(monkeypatch):
    """`recording_training` over eager ATen graphs on CPU, with simulated CUDA graphs."""
    monkeypatch.setattr(cudagraphs, "RECORDED_DEVICES", ("cuda", "cpu"))
    monkeypatch.setattr(torch.cuda, "CUDAGraph", _SimulatedGraph)
    monkeypatch.setattr(torch.cuda, "graph", _Capture)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    # (CPU graphs would keep activations channels-last, saved values with other strides)
    monkeypatch.setattr(inductor.config, "channels_last", False)
    from inductor.autograd import compile_training

    def compile_model(model, example):
        graph = torch.fx.symbolic_trace(model)
        compiled = compile_training(graph, [example], recording_training(_simulated_inner))
        return lambda x: compiled(x)
    return compile_model


def _cpu_cnn():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, bias=False), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.Flatten(), nn.Linear(4 * 6 * 6, 5))


class _Returning(nn.Module):
    """Returns a hidden activation that its next layer also saves for its backward."""

    def __init__(self):
        super().__init__()
        self.first, self.second = nn.Linear(32, 64), nn.Linear(64, 8)

    def forward(self, x):
        hidden = torch.relu(self.first(x))
        return hidden, self.second(hidden)


def test_simulated_replays_match_eager(simulated):
    model = _cpu_cnn()
    reference = copy.deepcopy(model)
    compiled = simulated(model, torch.randn(2, 3, 8, 8))
    replays, in_use = _replays(), _count("saved_in_use_calls")
    for _ in range(3):
        first, second = torch.randn(2, 3, 8, 8), torch.randn(2, 3, 8, 8)
        out1, out2 = compiled(first), compiled(second)   # replay 2 before backward 1
        ref1, ref2 = reference(first), reference(second)
        torch.testing.assert_close(out1, ref1, **TOLERANCE)
        (out1 * torch.arange(5.0)).sum().backward(retain_graph=True)
        (ref1 * torch.arange(5.0)).sum().backward(retain_graph=True)
        _same_state(model, reference)
        out1.sum().backward()                            # the saved values again
        ref1.sum().backward()
        out2.square().sum().backward()                   # and accumulating
        ref2.square().sum().backward()
        _same_state(model, reference)                    # running statistics included
        torch.testing.assert_close(out2, ref2, **TOLERANCE)
        model.zero_grad()
        reference.zero_grad()
    # per iteration: the first forward (then its backward twice) and the second one's
    # backward replay; the second forward runs kernel by kernel (the first one's saved
    # values are alive), from the second iteration on
    assert _replays() >= replays + 8
    assert _count("saved_in_use_calls") == in_use + 3


def _count(name: str) -> int:
    return cudagraphs.counts().get("training " + name, 0)


def _train(compiled, model, reference, iterations=3, x=None):
    for _ in range(iterations):
        x = torch.randn(2, 3, 8, 8) if x is None else x
        compiled(x).square().sum().backward()
        reference(x).square().sum().backward()
        _same_state(model, reference)


def test_simulated_saved_values_handed_out_uncopied_and_read_in_place(simulated):
    model = _cpu_cnn()
    reference = copy.deepcopy(model)
    before = cudagraphs.counts()
    compiled = simulated(model, torch.randn(2, 3, 8, 8))
    _train(compiled, model, reference, 4)
    counts = cudagraphs.counts()

    def added(name):
        return counts.get("training " + name, 0) - before.get("training " + name, 0)
    # the saved values: the convolution's output, BatchNorm's mean and inverse deviation,
    # the ReLU's mask (or output); read in place with the weights of the backward
    assert added("outputs_uncopied") >= 3
    assert added("inputs_read_in_place") >= added("outputs_uncopied") + 2
    assert added("saved_in_use_calls") == 0
    assert added("replayed") == 6 and added("recorded") == 2


def _without_liveness_check(monkeypatch):
    monkeypatch.setattr(OutputPlan, "in_use", lambda plan: False)


@pytest.mark.parametrize("check", [True, False])
def test_simulated_replay_while_saved_values_alive(simulated, monkeypatch, check):
    # a second forward before the first backward: its replay would overwrite the saved
    # values the first backward reads in place
    if not check:
        _without_liveness_check(monkeypatch)
    model = _cpu_cnn()
    reference = copy.deepcopy(model)
    compiled = simulated(model, torch.randn(2, 3, 8, 8))
    _train(compiled, model, reference, 1)
    in_use = _count("saved_in_use_calls")

    def interleaved():
        for _ in range(2):
            first, second = torch.randn(2, 3, 8, 8), torch.randn(2, 3, 8, 8)
            out1, out2 = compiled(first), compiled(second)
            ref1, ref2 = reference(first), reference(second)
            out1.sum().backward()
            ref1.sum().backward()
            _same_state(model, reference)
            out2.sum().backward()
            ref2.sum().backward()
            _same_state(model, reference)
    if not check:
        with pytest.raises(AssertionError):
            interleaved()
        return
    interleaved()
    assert _count("saved_in_use_calls") == in_use + 2
    _train(compiled, model, reference, 2)   # and replays again once they are gone
    assert _count("saved_in_use_calls") == in_use + 2


@pytest.mark.parametrize("check", [True, False])
def test_simulated_saved_value_kept_by_the_caller(simulated, monkeypatch, check):
    # a saved-tensors hook keeping what autograd saves: those tensors outlive the backward,
    # and a later forward must not overwrite them
    if not check:
        _without_liveness_check(monkeypatch)
    model = _cpu_cnn()
    reference = copy.deepcopy(model)
    compiled = simulated(model, torch.randn(2, 3, 8, 8))
    _train(compiled, model, reference, 1)
    kept, values = [], []
    state = {tensor.untyped_storage().data_ptr() for tensor in model.state_dict().values()}

    def pack(tensor):   # (not the running statistics, which the next forward updates)
        if tensor.untyped_storage().data_ptr() not in state:
            kept.append(tensor)
            values.append(tensor.clone())
        return tensor
    x = torch.randn(2, 3, 8, 8)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        compiled(x).sum().backward()
    reference(x).sum().backward()
    in_use = _count("saved_in_use_calls")
    _train(compiled, model, reference, 2)
    intact = all(torch.equal(tensor, value) for tensor, value in zip(kept, values))
    assert intact == check and len(kept) >= 4
    if check:
        assert _count("saved_in_use_calls") == in_use + 2   # while they are kept
        del kept[:], values[:]
        _train(compiled, model, reference, 1)
        assert _count("saved_in_use_calls") == in_use + 2


def test_simulated_returned_outputs_read_version_0(simulated):
    # a returned activation that eager's ReLU saves: its backward checks that the output was
    # not written since (version 0); the copies handed out after a replay read 1 (the copy
    # into them), and the backward raised "modified by an inplace operation"
    torch.manual_seed(0)
    model = _Returning()
    reference = copy.deepcopy(model)
    graph = torch.fx.symbolic_trace(model)
    from inductor.autograd import compile_training
    compiled = compile_training(graph, [torch.randn(16, 32)],
                                recording_training(_simulated_inner))
    replays = _replays()
    for _ in range(3):
        x = torch.randn(16, 32)
        (hidden, out), (hidden_ref, out_ref) = compiled(x), reference(x)
        assert hidden._version == 0 and out._version == 0
        out.square().sum().backward()
        out_ref.square().sum().backward()
        _same_state(model, reference)
        torch.testing.assert_close(hidden, hidden_ref, **TOLERANCE)
        del hidden, out, hidden_ref, out_ref
    assert _replays() >= replays + 4


def test_simulated_output_in_memory_read_in_place_is_copied(simulated):
    # a graph reading another recording's memory in place (a backward reading a forward's
    # saved value) and returning a view of it: the caller gets a copy (a gradient that is
    # a view of recording memory would be `.grad` and keep the forward from replaying)
    saved = torch.arange(8.0)
    cudagraphs._remember(cudagraphs._saved_buffers, saved.data_ptr(), saved)
    graph = torch.fx.symbolic_trace(lambda x: x)
    runner = TrainingGraphRunner(_Simulated(lambda values: [values[0][2:]]), graph)
    counted = _count("inputs_read_in_place")
    runner.with_argument_list([saved.data])   # (runs the graph as is, then records)
    for _ in range(3):
        result = runner.with_argument_list([saved.data])[0]
        assert result.untyped_storage().data_ptr() != saved.untyped_storage().data_ptr()
        assert torch.equal(result, saved[2:])
        saved.add_(1)   # read at each replay
    assert _count("inputs_read_in_place") == counted + 1


def test_simulated_handing_out_recording_memory_would_be_caught(simulated, monkeypatch):
    # the check above is a real one: without copies the second forward's replay overwrites
    # the activations the first backward reads
    monkeypatch.setattr(OutputPlan, "hand_out", lambda plan, inputs: list(plan.values))
    model = _cpu_cnn()
    reference = copy.deepcopy(model)
    compiled = simulated(model, torch.randn(2, 3, 8, 8))
    for _ in range(3):
        first, second = torch.randn(2, 3, 8, 8), torch.randn(2, 3, 8, 8)
        out1, _ = compiled(first), compiled(second)
        out1.sum().backward()
        reference(first).sum().backward()
    with pytest.raises(AssertionError):
        _same_state(model, reference)


@pytest.mark.parametrize("check", [True, False])
def test_simulated_new_input_values_handed_out_uncopied(simulated, monkeypatch, check):
    # BatchNorm's new running statistics (and counter): the epilogue copies them into the
    # buffers and drops them, so they are handed out uncopied; something holding one (here
    # a spy on the epilogue) keeps the next forward from replaying over it
    from inductor.autograd.runtime import Epilogue
    if not check:
        _without_liveness_check(monkeypatch)
    model = _cpu_cnn()
    reference = copy.deepcopy(model)
    transient = _count("transient_uncopied")
    compiled = simulated(model, torch.randn(2, 3, 8, 8))
    _train(compiled, model, reference, 2)
    assert _count("transient_uncopied") == transient + 3
    kept, values, original = [], [], Epilogue.__call__

    def spy(self, arguments, function_outputs):
        if not kept:
            kept.extend(value for value in function_outputs[1:])
            values.extend(value.clone() for value in kept)
        return original(self, arguments, function_outputs)
    monkeypatch.setattr(Epilogue, "__call__", spy)
    in_use = _count("saved_in_use_calls")
    _train(compiled, model, reference, 2)
    assert len(kept) == 3
    intact = all(torch.equal(tensor, value) for tensor, value in zip(kept, values))
    assert intact == check
    if check:
        assert _count("saved_in_use_calls") == in_use + 1   # the second call, kept ones
        del kept[:]
        _train(compiled, model, reference, 1)
        assert _count("saved_in_use_calls") == in_use + 1


def test_simulated_failed_recording_runs_kernel_by_kernel(simulated, monkeypatch, caplog):
    class Synchronising(_Capture):   # what a CPU synchronisation inside the graph raises
        def __exit__(self, *exception):
            super().__exit__(*exception)
            raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(torch.cuda, "graph", Synchronising)
    model = _cpu_cnn()
    reference = copy.deepcopy(model)
    before = cudagraphs.counts().get("training not_recorded", 0)
    with caplog.at_level(logging.WARNING, logger="framejit.inductor"):
        compiled = simulated(model, torch.randn(2, 3, 8, 8))
        for _ in range(3):
            x = torch.randn(2, 3, 8, 8)
            compiled(x).sum().backward()
            reference(x).sum().backward()
            _same_state(model, reference)
    assert cudagraphs.counts()["training not_recorded"] == before + 2   # forward, backward
    assert any("recording failed: RuntimeError" in record.getMessage()
               for record in caplog.records)


# ---------------------------------------------------------------- GPU: against eager

@pytest.fixture
def strict(monkeypatch):
    monkeypatch.setattr(inductor.config, "fallback_on_error", False)
    monkeypatch.setattr(inductor.config, "channels_last", False)


def mlp():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8)).cuda()
    return model, lambda: torch.randn(16, 32, device="cuda")


def cnn():
    torch.manual_seed(0)
    # (no bias before a BatchNorm: its gradient is rounding noise, which Adam amplifies)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.Conv2d(8, 8, 3, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.Flatten(), nn.Linear(8 * 4 * 4, 5)).cuda()
    return model, lambda: torch.randn(4, 3, 8, 8, device="cuda")


def _pair(build):
    model, inputs = build()
    return model, copy.deepcopy(model), dynamo.jit(model, mode="reduce-overhead"), inputs


def _same_state(model, reference):
    for (name, actual), (_, expected) in zip(model.named_parameters(),
                                            reference.named_parameters()):
        torch.testing.assert_close(actual, expected, **TOLERANCE, msg=name)
        torch.testing.assert_close(actual.grad, expected.grad, **TOLERANCE, msg=name)
    for (name, actual), (_, expected) in zip(model.named_buffers(), reference.named_buffers()):
        torch.testing.assert_close(actual, expected, **TOLERANCE, msg=name)


def _replays() -> int:
    return cudagraphs.counts().get("training replayed", 0)


@cuda
@pytest.mark.parametrize("build", [mlp, cnn])
def test_iterations_match_eager(build, strict):
    model, reference, jitted, inputs = _pair(build)
    replays, in_use = _replays(), _count("saved_in_use_calls")
    uncopied, read = _count("outputs_uncopied"), _count("inputs_read_in_place")
    results = []
    for _ in range(5):
        x = inputs()
        out, expected = jitted(x), reference(x)
        torch.testing.assert_close(out, expected, **TOLERANCE)
        out.square().mean().backward()
        expected.square().mean().backward()
        _same_state(model, reference)   # BatchNorm's running statistics included
        results.append((out.detach(), expected.detach()))
        model.zero_grad()
        reference.zero_grad()
    for out, expected in results:   # not overwritten by later replays
        torch.testing.assert_close(out, expected, **TOLERANCE)
    assert _replays() >= replays + 8   # forward and backward, from the second iteration on
    assert _count("saved_in_use_calls") == in_use
    assert _count("outputs_uncopied") > uncopied and _count("inputs_read_in_place") > read


@cuda
def test_second_forward_before_first_backward(strict):
    model, reference, jitted, inputs = _pair(cnn)
    in_use = _count("saved_in_use_calls")
    for _ in range(3):
        first, second = inputs(), inputs()
        out1, out2 = jitted(first), jitted(second)   # replay 2 before backward 1
        ref1, ref2 = reference(first), reference(second)
        (out1 * torch.arange(5.0, device="cuda")).sum().backward()
        (ref1 * torch.arange(5.0, device="cuda")).sum().backward()
        _same_state(model, reference)
        out2.square().sum().backward()
        ref2.square().sum().backward()
        _same_state(model, reference)
        model.zero_grad()
        reference.zero_grad()
    # the second forward does not replay over the first one's saved values: kernel by kernel
    assert _count("saved_in_use_calls") >= in_use + 2


@cuda
@pytest.mark.parametrize("build", [mlp, cnn])
def test_retain_graph_and_accumulation(build, strict):
    model, reference, jitted, inputs = _pair(build)
    replays = _replays()
    for _ in range(3):
        x = inputs()
        loss, expected = jitted(x).square().mean(), reference(x).square().mean()
        loss.backward(retain_graph=True)
        expected.backward(retain_graph=True)
        loss.backward()                      # the same saved values, replayed again
        expected.backward()
        _same_state(model, reference)
        y = inputs()                         # and a second backward accumulates
        jitted(y).sum().backward()
        reference(y).sum().backward()
        _same_state(model, reference)
        model.zero_grad()
        reference.zero_grad()
    assert _replays() > replays


@cuda
def test_saved_values_kept_by_the_caller(strict):
    model, reference, jitted, inputs = _pair(cnn)
    for _ in range(2):
        x = inputs()
        jitted(x).sum().backward()
        reference(x).sum().backward()
    state = {tensor.untyped_storage().data_ptr() for tensor in model.state_dict().values()}
    kept, values = [], []

    def pack(tensor):   # (not the running statistics, which the next forward updates)
        if tensor.untyped_storage().data_ptr() not in state:
            kept.append(tensor)
            values.append(tensor.clone())
        return tensor
    x = inputs()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        jitted(x).sum().backward()
    reference(x).sum().backward()
    in_use = _count("saved_in_use_calls")
    for _ in range(2):
        x = inputs()
        jitted(x).sum().backward()
        reference(x).sum().backward()
        _same_state(model, reference)
    assert len(kept) >= 4
    for tensor, value in zip(kept, values):
        assert torch.equal(tensor, value)
    assert _count("saved_in_use_calls") == in_use + 2


@cuda
def test_an_output_also_saved_stays_the_callers(strict):
    torch.manual_seed(0)
    model = _Returning().cuda()
    reference = copy.deepcopy(model)
    jitted = dynamo.jit(model, mode="reduce-overhead")
    results, in_use = [], _count("saved_in_use_calls")
    for _ in range(4):
        x = torch.randn(16, 32, device="cuda")
        (hidden, out), (hidden_ref, out_ref) = jitted(x), reference(x)
        out.square().sum().backward()
        out_ref.square().sum().backward()
        _same_state(model, reference)
        results.append((hidden, hidden_ref))   # kept across later replays
    for hidden, expected in results:
        torch.testing.assert_close(hidden, expected, **TOLERANCE)
    # `hidden` is a copy, but its autograd node (no gradient reached it) keeps the values
    # it saved, as eager's ReLU node does: the forwards ran kernel by kernel; once the
    # caller lets go, they replay again
    assert _count("saved_in_use_calls") >= in_use + 2
    del results, hidden, out, hidden_ref, out_ref
    in_use, replays = _count("saved_in_use_calls"), _replays()
    for _ in range(2):
        x = torch.randn(16, 32, device="cuda")
        jitted(x)[1].sum().backward()
        reference(x)[1].sum().backward()
        _same_state(model, reference)
    assert _count("saved_in_use_calls") == in_use and _replays() >= replays + 3


def _step(model, optimizer, x, target):
    optimizer.zero_grad()
    loss = F.mse_loss(model(x), target)
    loss.backward()
    optimizer.step()
    return loss


@cuda
@pytest.mark.parametrize("build", [mlp, cnn])
@pytest.mark.parametrize("make", [lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
                                  lambda p: torch.optim.Adam(p, lr=0.01)])
def test_whole_step_with_an_optimizer(build, make, strict):
    model, inputs = build()
    reference = copy.deepcopy(model)
    optimizer, reference_optimizer = make(model.parameters()), make(reference.parameters())
    step = dynamo.jit(_step, mode="reduce-overhead")
    replays = _replays()
    for _ in range(4):
        x = inputs()
        target = torch.randn(x.shape[0], model[-1].out_features, device="cuda")
        loss = step(model, optimizer, x, target)
        expected = _step(reference, reference_optimizer, x, target)
        torch.testing.assert_close(loss, expected, **TOLERANCE)
        _same_state(model, reference)
    for state, expected in zip(optimizer.state.values(), reference_optimizer.state.values()):
        for key in expected:
            torch.testing.assert_close(state[key], expected[key], **TOLERANCE)
    assert _replays() > replays


@cuda
def test_sizes_past_the_record_limit_run_kernel_by_kernel(strict, monkeypatch, caplog):
    monkeypatch.setattr(inductor.config, "cudagraph_max_records", 2)
    model, reference, _, _ = _pair(mlp)
    jitted = dynamo.jit(model, mode="reduce-overhead", dynamic=True)
    before = cudagraphs.counts().get("training unrecorded_calls", 0)
    with caplog.at_level(logging.WARNING, logger="framejit.inductor"):
        for rows in (3, 5, 7, 9, 11, 5):
            x = torch.randn(rows, 32, device="cuda")
            jitted(x).sum().backward()
            reference(x).sum().backward()
            _same_state(model, reference)
    assert cudagraphs.counts().get("training unrecorded_calls", 0) > before
    assert any("cudagraph_max_records" in record.getMessage() for record in caplog.records)


@cuda
def test_cpu_scalar_inputs_are_not_recorded():
    # a 0-d CPU tensor beside GPU tensors is read by value: a recording would keep the
    # first call's value
    from tests.triton.conftest import compile_function
    graphs = compile_function(lambda x, scale: x * scale, torch.ones(4, device="cuda"),
                              torch.tensor(2.0), mode="reduce-overhead")
    for value in (2.0, 3.0, 4.0):
        torch.testing.assert_close(graphs(torch.ones(4, device="cuda"), torch.tensor(value)),
                                   torch.full((4,), value, device="cuda"))
