"""The partitioner: the minimum cut itself (against brute force), what it may and may not
recompute, and that it saves no more than eager autograd keeps alive."""
import itertools
import random

import pytest
import torch
import torch.nn as nn

from inductor.autograd import compile_training, run_graph
from inductor.autograd.decompositions import decomposition_table
from inductor.autograd.global_state import GlobalState
from inductor.autograd.joint import trace_joint
from inductor.autograd.partition import PartitionPolicy, partition
from inductor.autograd.partition.mincut import FlowNetwork
from inductor.autograd.partition.policy import is_random
from inductor.autograd.signature import analyze, lift_attributes


def brute_force_cut(vertices, edges, source, sink):
    best = None
    inner = [v for v in vertices if v not in (source, sink)]
    for size in range(len(inner) + 1):
        for chosen in itertools.combinations(inner, size):
            side = {source, *chosen}
            value = sum(c for (a, b, c) in edges if a in side and b not in side)
            best = value if best is None else min(best, value)
    return best


@pytest.mark.parametrize("seed", range(40))
def test_minimum_cut_matches_brute_force(seed):
    generator = random.Random(seed)
    vertices = list(range(7))
    edges = [(a, b, generator.randint(0, 9)) for a in vertices for b in vertices
             if a != b and generator.random() < 0.4]
    network = FlowNetwork()
    for a, b, capacity in edges:
        network.add_edge(a, b, capacity)
    network.vertex(0)
    network.vertex(6)
    value, side = network.minimum_cut(0, 6)
    assert value == brute_force_cut(vertices, edges, 0, 6)
    assert 0 in side and 6 not in side
    assert value == sum(c for (a, b, c) in edges if a in side and b not in side)


def partition_of(fn, *inputs, settings=None):
    traced = torch.fx.symbolic_trace(fn)
    graph = lift_attributes(traced)
    arguments = list(inputs) + graph.fetch(traced)
    state = GlobalState.current()
    signature = analyze(graph.module, arguments, state.autocast_context)
    joint = trace_joint(graph.module, signature, arguments, state, decomposition_table())
    return partition(joint, signature.mutated_inputs, settings or PartitionPolicy())


def targets(module):
    return [node.target for node in module.graph.nodes if node.op == "call_function"]


def backward_nodes_without_tangents(module):
    """Backward nodes computed from saved values only (recomputation)."""
    tangent_dependent = set()
    recomputed = []
    for node in module.graph.nodes:
        if node.op == "placeholder":
            if node.name.startswith("tangents"):
                tangent_dependent.add(node)
        elif node.op == "call_function":
            if any(n in tangent_dependent for n in node.all_input_nodes):
                tangent_dependent.add(node)
            else:
                recomputed.append(node)
    return recomputed


aten = torch.ops.aten


def test_pointwise_chain_is_recomputed_not_saved():
    parts = partition_of(lambda x: x.sin().cos().tanh().sum(), torch.randn(64, 64,
                                                                            requires_grad=True))
    assert parts.saved_computed_count == 0 and parts.saved_primals == [0]
    # sin is the user's: eager's MKL VML sin, `framejit.vml(x, "sin")` (inductor/vml.py)
    assert any(node.target is aten.sin.default or node.args[1:] == ("sin",)
               for node in parts.backward.graph.nodes if node.op == "call_function")


def test_matmul_and_convolution_are_never_recomputed():
    def fn(x, w, k):
        h = torch.sin(x @ w)
        return torch.nn.functional.conv2d(h.view(1, 1, 8, 8), k).cos().sum()
    parts = partition_of(fn, torch.randn(8, 8, requires_grad=True),
                         torch.randn(8, 8, requires_grad=True),
                         torch.randn(1, 1, 3, 3, requires_grad=True))
    recomputed = {node.target for node in backward_nodes_without_tangents(parts.backward)}
    assert not recomputed & {aten.mm.default, aten.convolution.default}


def test_random_ops_run_once_in_the_forward():
    def fn(x):
        return torch.nn.functional.dropout(x.sin(), 0.5, True).cos().sum()
    parts = partition_of(fn, torch.randn(32, 32, requires_grad=True))
    assert not any(is_random(node) for node in parts.backward.graph.nodes)
    assert any(is_random(node) for node in parts.forward.graph.nodes)


def test_large_reductions_are_saved_not_recomputed():
    layer = nn.LayerNorm(256)
    parts = partition_of(layer, torch.randn(8, 256, requires_grad=True))
    recomputed = backward_nodes_without_tangents(parts.backward)
    assert not any(isinstance(n.target, torch._ops.OpOverload)
                   and torch.Tag.reduction in n.target.tags for n in recomputed)


def test_recomputation_saves_less_than_saving_everything():
    block = nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.GELU())
    images = torch.randn(4, 4, 16, 16)
    recomputing = partition_of(block, images)
    saving = partition_of(block, images, settings=PartitionPolicy(recompute=False))
    assert recomputing.saved_bytes < saving.saved_bytes


def eager_saved_bytes(fn, *inputs):
    """Bytes of distinct non-input storages eager autograd saves for the backward."""
    storages = {}
    input_pointers = {t.untyped_storage().data_ptr() for t in inputs}
    input_pointers |= {p.untyped_storage().data_ptr() for p in getattr(fn, "parameters",
                                                                       lambda: [])()}

    def pack(tensor):
        pointer = tensor.untyped_storage().data_ptr()
        if pointer not in input_pointers:
            storages[pointer] = tensor.untyped_storage().nbytes()
        return tensor
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        output = fn(*inputs)
    return sum(storages.values()), output


@pytest.mark.parametrize("name", ["resnet_stem", "mlp_gelu", "transformer_block"])
def test_saved_bytes_at_most_eager(name):
    torch.manual_seed(0)
    if name == "resnet_stem":
        model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8),
                              nn.ReLU())
        inputs = (torch.randn(4, 3, 16, 16),)
    elif name == "mlp_gelu":
        model = nn.Sequential(nn.Linear(32, 128), nn.GELU(), nn.Linear(128, 32), nn.LayerNorm(32))
        inputs = (torch.randn(16, 32),)
    else:
        from tests.training.test_modules import SdpaAttention
        model = nn.Sequential(nn.LayerNorm(32), SdpaAttention(32, 2), nn.LayerNorm(32),
                              nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32))
        inputs = (torch.randn(2, 8, 32),)
    expected, _ = eager_saved_bytes(model, *inputs)
    parts = partition_of(model, *inputs)
    assert parts.saved_bytes <= expected, (parts.saved_bytes, expected)


def test_input_updated_after_use_is_not_saved():
    def fn(x, buffer):
        y = x * (buffer * 1)     # eager saves the product's operand, a fresh tensor
        buffer.add_(1)
        return y.sum()
    compiled = compile_training(torch.fx.symbolic_trace(fn),
                                [torch.randn(4, requires_grad=True), torch.ones(4)], run_graph)
    x, buffer = torch.randn(4, requires_grad=True), torch.ones(4)
    compiled(x, buffer).backward()      # would fail if the updated buffer had been saved
    torch.testing.assert_close(x.grad, torch.ones(4))
    torch.testing.assert_close(buffer, torch.full((4,), 2.0))
