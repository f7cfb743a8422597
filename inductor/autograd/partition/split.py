"""Building the forward and backward graphs once the saved values are chosen.

Input: the joint graph and the saved nodes. Output: two FX graph modules whose nodes are copies
of the joint's (with their `meta`, fake values included). The forward keeps the joint's order.
The backward keeps the order of its gradient computation, and places each recomputed value
just before its first use (in the joint, every forward node precedes every backward node: kept
as is, the backward would rebuild all recomputed activations at its start and hold them all at
once, as much memory as saving them).
"""
from __future__ import annotations

import torch
import torch.fx

from inductor.autograd.joint import JointGraph


def _outputs(joint: JointGraph) -> tuple[list, list]:
    output_node = next(node for node in reversed(joint.module.graph.nodes)
                       if node.op == "output")
    outputs = list(output_node.args[0])
    return outputs[:joint.function_output_count], outputs[joint.function_output_count:]


def _copy_region(target: torch.fx.Graph, source: torch.fx.Graph, wanted: set,
                 environment: dict) -> None:
    for node in source.nodes:
        if node in wanted and node not in environment:
            environment[node] = target.node_copy(node, lambda n: environment[n])


def _lazy_order(source: torch.fx.Graph, region: set, early: set) -> list:
    """`region` in an order where the nodes of `early` keep their relative order and every
    other node comes right before its first user (depth first, iteratively)."""
    ordered: list = []
    placed: set = set()
    for anchor in source.nodes:
        if anchor not in early or anchor in placed:
            continue
        stack = [(anchor, False)]
        while stack:
            node, expanded = stack.pop()
            if node in placed:
                continue
            if expanded:
                placed.add(node)
                ordered.append(node)
                continue
            stack.append((node, True))
            for argument in reversed(node.all_input_nodes):
                if argument in region and argument not in placed:
                    stack.append((argument, False))
    return ordered


def _tangent_dependent(source: torch.fx.Graph, tangents: list) -> set:
    dependent = set(tangents)
    for node in source.nodes:
        if node.op == "call_function" and any(n in dependent for n in node.all_input_nodes):
            dependent.add(node)
    return dependent


def _region(roots, boundary: set) -> set:
    """Nodes needed to compute `roots`, stopping at (and excluding) `boundary` nodes."""
    seen: set = set()
    stack = [root for root in roots if isinstance(root, torch.fx.Node)]
    while stack:
        node = stack.pop()
        if node in seen or node in boundary:
            continue
        seen.add(node)
        stack.extend(node.all_input_nodes)
    return seen


def _finish(owner: torch.nn.Module, graph: torch.fx.Graph) -> torch.fx.GraphModule:
    graph.eliminate_dead_code()
    graph.lint()
    return torch.fx.GraphModule(owner, graph)


def build_forward(joint: JointGraph, saved: list) -> torch.fx.GraphModule:
    """primals -> (function outputs..., saved values...)."""
    source = joint.module.graph
    forward_outputs, _ = _outputs(joint)
    placeholders = [node for node in source.nodes if node.op == "placeholder"]
    graph = torch.fx.Graph()
    environment: dict = {}
    for node in placeholders[:joint.primal_count]:
        environment[node] = graph.node_copy(node)
    _copy_region(graph, source, _region(forward_outputs + saved, set()), environment)
    graph.output(tuple(environment[node] for node in forward_outputs + saved))
    return _finish(joint.module, graph)


def build_backward(joint: JointGraph, saved: list, saved_primals: list) -> torch.fx.GraphModule:
    """(saved values..., saved primals..., tangents...) -> gradients."""
    source = joint.module.graph
    _, gradient_outputs = _outputs(joint)
    placeholders = [node for node in source.nodes if node.op == "placeholder"]
    tangents = placeholders[joint.primal_count:]
    graph = torch.fx.Graph()
    environment: dict = {}
    for node in saved + saved_primals + tangents:
        environment[node] = graph.placeholder(node.name)
        environment[node].meta = dict(node.meta)
    boundary = set(environment)
    region = _region(gradient_outputs, boundary)
    missing = [node.name for node in region if node.op == "placeholder"]
    if missing:
        raise AssertionError(f"the backward needs inputs that were not saved: {missing}")
    early = (_tangent_dependent(source, tangents) & region) | {
        node for node in gradient_outputs if isinstance(node, torch.fx.Node) and node in region}
    for node in _lazy_order(source, region, early):
        environment[node] = graph.node_copy(node, lambda n: environment[n])
    graph.output(tuple(environment[node] for node in gradient_outputs))
    return _finish(joint.module, graph)
