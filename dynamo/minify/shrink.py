"""Stage "shrink" of the minifier: delta debugging of one failing FX graph.

Input: a `Case` (an FX graph, the values of its placeholders) whose `check(case)` reports a
failure signature. Output: a smaller `Case` whose check still reports that signature.
Candidates, biggest cuts first (graph level): one value alone as the output (the graph up to
it), fewer outputs, a value cut loose into a new input holding what eager computed for it
(everything only it needed goes), a node bypassed (its uses read one of its tensor operands
of the same shape and dtype); then op level: a keyword argument dropped, the inputs' sizes
shrunk (every dimension of one size at once, so broadcasting stays consistent). Dead nodes and
unused inputs go after each step. A candidate must still run eagerly before it is checked;
each accepted candidate starts the search again, until none is accepted or the budget of
checks is spent.
"""
from __future__ import annotations

import copy
import dataclasses
from typing import Callable, Iterator, Optional

import torch

from dynamo.minify.compare import clone_inputs, clone_value

COMPUTE = ("call_function", "call_method", "call_module")


@dataclasses.dataclass
class Case:
    """An FX graph and the values of its placeholders (by placeholder name)."""

    graph: torch.fx.Graph
    inputs: dict
    root: torch.nn.Module = dataclasses.field(default_factory=torch.nn.Module)

    @classmethod
    def from_module(cls, gm: torch.fx.GraphModule, inputs: list) -> "Case":
        graph = copy.deepcopy(gm.graph)
        names = [node.name for node in graph.nodes if node.op == "placeholder"]
        case = cls(graph, dict(zip(names, inputs)), gm)
        _prune(case)
        return case

    def module(self) -> torch.fx.GraphModule:
        """A fresh GraphModule of the case (backends may change the one they are given)."""
        return torch.fx.GraphModule(self.root, copy.deepcopy(self.graph))

    def input_list(self) -> list:
        return [self.inputs[node.name] for node in self.graph.nodes if node.op == "placeholder"]

    def size(self) -> tuple:
        """What shrinking lowers, most important first: nodes, outputs, inputs, input
        elements, keyword arguments."""
        keywords = sum(len(node.kwargs) for node in self.graph.nodes if node.op in COMPUTE)
        return (self.node_count(), len(_output_names(self)), len(self.inputs),
                self.input_elements(), keywords)

    def input_elements(self) -> int:
        return sum(value.numel() for value in self.inputs.values()
                   if isinstance(value, torch.Tensor))

    def node_count(self) -> int:
        return sum(1 for node in self.graph.nodes if node.op in COMPUTE)

    def copy(self) -> "Case":
        return Case(copy.deepcopy(self.graph), dict(self.inputs), self.root)


def minimize(case: Case, signature: str, check: Callable[[Case], Optional[str]],
             budget: int = 300, progress: Callable[[str], None] = lambda text: None) -> Case:
    """Shrink `case` while `check` keeps reporting `signature` (at most `budget` checks)."""
    current, checks, improved = case, 0, True
    while improved and checks < budget:
        improved = False
        for step, candidate in candidates(current):
            if candidate.size() >= current.size() or not _runs_eagerly(candidate):
                continue  # only strictly smaller candidates: the search cannot cycle
            checks += 1
            if check(candidate) == signature:
                current, improved = candidate, True
                progress(f"{step}: {candidate.node_count()} node(s), "
                         f"{candidate.input_elements()} input element(s) left")
                break
            if checks >= budget:
                break
    return current


def candidates(case: Case) -> Iterator[tuple]:
    """(step name, smaller case) pairs, biggest cuts first."""
    values = node_values(case)
    yield from (("one output", item) for item in _single_outputs(case, values))
    yield from (("fewer outputs", item) for item in _fewer_outputs(case))
    yield from (("value cut into an input", item) for item in _cuts(case, values))
    yield from (("node bypassed", item) for item in _bypasses(case, values))
    yield from (("keyword dropped", item) for item in _fewer_keywords(case))
    yield from (("smaller sizes", item) for item in _smaller_sizes(case))


def node_values(case: Case) -> dict:
    """Eager values of the graph's nodes (by name) on the case's inputs; tensors copied when
    produced, so later in-place writes do not change them."""
    found = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, node):
            value = super().run_node(node)
            found[node.name] = clone_value(value) if isinstance(value, torch.Tensor) else value
            return value
    try:
        Recorder(case.module()).run(*clone_inputs(case.input_list()))
    except Exception:  # noqa: BLE001  (values after a failing node are unknown)
        pass
    return found


def _runs_eagerly(case: Case) -> bool:
    try:
        case.module()(*clone_inputs(case.input_list()))
    except Exception:  # noqa: BLE001  (a candidate that broke the program)
        return False
    return True


def _output_node(graph: torch.fx.Graph) -> torch.fx.Node:
    return next(node for node in reversed(graph.nodes) if node.op == "output")


def _with_outputs(case: Case, names: list) -> Case:
    candidate = case.copy()
    by_name = {node.name: node for node in candidate.graph.nodes}
    output = _output_node(candidate.graph)
    output.args = (tuple(by_name[name] for name in names),)
    _prune(candidate)
    return candidate


def _output_names(case: Case) -> list:
    leaves = torch.utils._pytree.tree_leaves(_output_node(case.graph).args)
    return [leaf.name for leaf in leaves if isinstance(leaf, torch.fx.Node)]


def _tensor_nodes(case: Case, values: dict) -> list:
    return [node for node in case.graph.nodes
            if node.op in COMPUTE and isinstance(values.get(node.name), torch.Tensor)]


def _single_outputs(case: Case, values: dict) -> Iterator[Case]:
    outputs = _output_names(case)
    for node in _tensor_nodes(case, values):
        if outputs != [node.name]:
            yield _with_outputs(case, [node.name])


def _fewer_outputs(case: Case) -> Iterator[Case]:
    outputs = _output_names(case)
    if len(outputs) > 1:
        for position in range(len(outputs)):
            yield _with_outputs(case, outputs[:position] + outputs[position + 1:])


def _cuts(case: Case, values: dict) -> Iterator[Case]:
    for node in reversed(_tensor_nodes(case, values)):
        candidate = case.copy()
        target = next(item for item in candidate.graph.nodes if item.name == node.name)
        first = next(item for item in candidate.graph.nodes if item.op != "placeholder")
        with candidate.graph.inserting_before(first):
            placeholder = candidate.graph.placeholder(f"cut_{node.name}")
        target.replace_all_uses_with(placeholder)
        candidate.graph.erase_node(target)
        candidate.inputs[placeholder.name] = values[node.name]
        _prune(candidate)
        yield candidate


def _bypasses(case: Case, values: dict) -> Iterator[Case]:
    for node in _tensor_nodes(case, values):
        value = values[node.name]
        for operand in node.all_input_nodes:
            same = values.get(operand.name)
            if isinstance(same, torch.Tensor) and same.shape == value.shape \
                    and same.dtype == value.dtype:
                candidate = case.copy()
                by_name = {item.name: item for item in candidate.graph.nodes}
                by_name[node.name].replace_all_uses_with(by_name[operand.name])
                _prune(candidate)
                yield candidate
                break


def _fewer_keywords(case: Case) -> Iterator[Case]:
    for node in case.graph.nodes:
        for key in node.kwargs if node.op in COMPUTE else ():
            candidate = case.copy()
            target = next(item for item in candidate.graph.nodes if item.name == node.name)
            target.kwargs = {name: value for name, value in target.kwargs.items()
                             if name != key}
            yield candidate


def _smaller_sizes(case: Case) -> Iterator[Case]:
    sizes = sorted({size for value in case.inputs.values() if isinstance(value, torch.Tensor)
                    for size in value.shape if size > 1}, reverse=True)
    for size in sizes:
        for smaller in sorted({1, 2, size // 2} - {size}):
            if smaller < size:
                candidate = case.copy()
                candidate.inputs = {name: _narrowed(value, size, smaller)
                                    for name, value in case.inputs.items()}
                yield candidate


def _narrowed(value, size: int, smaller: int):
    if not isinstance(value, torch.Tensor):
        return value
    result = value.detach()
    for dimension, extent in enumerate(value.shape):
        if extent == size:
            result = result.narrow(dimension, 0, smaller)
    result = result.clone()
    return result.requires_grad_(True) if value.requires_grad else result


def mutates(node: torch.fx.Node) -> bool:
    """Whether the node writes into a value (kept even when its result is unused)."""
    if node.meta.get("mutates"):
        return True
    name = node.target if isinstance(node.target, str) else \
        getattr(node.target, "__name__", "")
    if name.endswith("_") and not name.endswith("__"):
        return True
    return node.op == "call_function" and name in ("setitem", "iadd", "isub", "imul")


def _prune(case: Case) -> None:
    """Drop nodes whose results are unused and that write nowhere, then unused inputs."""
    changed = True
    while changed:
        changed = False
        for node in reversed(list(case.graph.nodes)):
            if node.op in COMPUTE + ("get_attr",) and not node.users and not mutates(node):
                case.graph.erase_node(node)
                changed = True
    for node in list(case.graph.nodes):
        if node.op == "placeholder" and not node.users:
            case.graph.erase_node(node)
            case.inputs.pop(node.name, None)
