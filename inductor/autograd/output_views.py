"""Stage "run" of training compilation: outputs that are views, returned as their bases.

Input: a partitioned ATen graph (a forward whose saved values, or a backward whose gradients,
may be views: `permute(mm)` for a linear layer's weight gradient, `view(sum)` for a bias) and
which output positions may be handled so. Output: the graph with each such output replaced by
the tensor it views (`OutputViews.graph`), and `OutputViews.rebuild`, which turns the compiled
graph's results back into the views, with `as_strided` over the returned base.

Why: a code generator returns fresh memory for every output, so an output that is a view of an
intermediate is copied, while both stay alive until the graph returns. For a backward that is
every weight gradient once more (BERT small: 12 MB copied at the very end of the backward, at
its peak). Returning the base and rebuilding the view costs one `as_strided` per output.

Rules: the base must come back with its traced strides (the `output_strides` contract of
`compile_inner`), so this applies only when the inner compiler takes them. A base that is a
graph input is fetched from the arguments before the call (the list convention empties them),
unless the graph writes into that input. A base that some other output also returns or views
is left alone: two gradients sharing memory would both be adopted as `.grad` and accumulate
into each other on the next step.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable, Optional

import torch
import torch.fx

from inductor.autograd.symbols import is_symbolic, known_ints


@dataclasses.dataclass(frozen=True)
class RebuiltView:
    """One output rebuilt after the call: from the result at `position` (its base), or from
    the graph input at `input_index`; `None` geometry means the base itself is the output."""

    position: int
    input_index: Optional[int]
    size: Optional[tuple]
    stride: Optional[tuple]
    offset: int                 # storage offset relative to the base's


def is_view_node(node: torch.fx.Node) -> bool:
    """Whether `node` returns a view of its first argument (an aliasing, non-writing op)."""
    schema = getattr(node.target, "_schema", None) if node.op == "call_function" else None
    if schema is None or len(schema.returns) != 1:
        return False
    alias = schema.returns[0].alias_info
    return alias is not None and not alias.is_write


def _view_base(node: torch.fx.Node) -> torch.fx.Node:
    while is_view_node(node) and isinstance(node.args[0], torch.fx.Node):
        node = node.args[0]
    return node


def _mutated_inputs(graph: torch.fx.Graph) -> set:
    """Placeholders that an in-place node of the graph writes into."""
    mutated = set()
    for node in graph.nodes:
        schema = getattr(node.target, "_schema", None) if node.op == "call_function" else None
        if schema is None:
            continue
        for argument, value in zip(schema.arguments, node.args):
            if argument.alias_info is not None and argument.alias_info.is_write and \
                    isinstance(value, torch.fx.Node):
                mutated.add(_view_base(value))
    return mutated


def _fake(node) -> Optional[torch.Tensor]:
    value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return value if isinstance(value, torch.Tensor) else None


def _same_storage(view: Optional[torch.Tensor], base: Optional[torch.Tensor]) -> bool:
    """Whether the traced view really shares the base's memory (with its dtype): ops such as
    `reshape` are annotated as views but may copy."""
    if view is None or base is None or view.dtype != base.dtype:
        return False
    try:
        return view.untyped_storage()._cdata == base.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):
        return False


class OutputViews:
    """The rewritten graph and how to rebuild its view outputs (see the module docstring)."""

    def __init__(self, graph: torch.fx.GraphModule, positions: Iterable[int]):
        self.views: list[RebuiltView] = []
        self.input_indices: list[int] = []
        self.graph = self._rewrite(graph, set(positions))

    def _candidates(self, graph: torch.fx.GraphModule, outputs: list, positions: set) -> dict:
        """Output position -> base node, for views whose base no other output shares."""
        bases: dict = {}
        for position, value in enumerate(outputs):
            if isinstance(value, torch.fx.Node):
                bases.setdefault(_view_base(value), []).append(position)
        mutated = _mutated_inputs(graph.graph)
        chosen = {}
        for position in positions:
            value = outputs[position]
            if not isinstance(value, torch.fx.Node) or not is_view_node(value):
                continue
            base = _view_base(value)
            view, fake_base = _fake(value), _fake(base)
            if (len(bases[base]) != 1 or base in mutated or base.op not in
                    ("placeholder", "call_function") or not _same_storage(view, fake_base)
                    or is_symbolic(view) or is_symbolic(fake_base)):
                continue   # (symbolic geometry: left to the compiled graph)
            chosen[position] = base
        return chosen

    def _rewrite(self, graph: torch.fx.GraphModule, positions: set) -> torch.fx.GraphModule:
        output_node = next(node for node in reversed(graph.graph.nodes) if node.op == "output")
        outputs = list(output_node.args[0])
        chosen = self._candidates(graph, outputs, positions)
        if not chosen:
            return graph
        placeholders = [node for node in graph.graph.nodes if node.op == "placeholder"]
        new_graph = torch.fx.Graph()
        mapping: dict = {}
        new_output = new_graph.graph_copy(graph.graph, mapping)
        new_values = list(new_output)
        for position, base in sorted(chosen.items()):
            view, fake_base = _fake(outputs[position]), _fake(base)
            # (SymInts of known value, `is_symbolic` says no, held as ints: see known_ints)
            offset = known_ints(view.storage_offset() - fake_base.storage_offset())
            same = (tuple(view.size()) == tuple(fake_base.size()) and offset == 0
                    and tuple(view.stride()) == tuple(fake_base.stride()))
            geometry = (None, None) if same else (known_ints(tuple(view.size())),
                                                  known_ints(tuple(view.stride())))
            input_index = placeholders.index(base) if base.op == "placeholder" else None
            if input_index is not None:
                self.input_indices.append(input_index)
                new_values[position] = None
            else:
                new_values[position] = mapping[base]
            self.views.append(RebuiltView(position, input_index, *geometry, offset))
        new_graph.output(type(new_output)(new_values) if isinstance(new_output, (tuple, list))
                         else new_values)
        new_graph.eliminate_dead_code()
        module = torch.fx.GraphModule(graph, new_graph)
        # notes for compilers on output positions, which the rewrite keeps
        # (`cudagraphs.COPIED_INTO_INPUTS`)
        module.meta.update(graph.meta)
        return module

    def rebuild(self, results: Any, inputs: dict) -> list:
        """The graph's outputs from the compiled graph's `results` (bases at the view
        positions) and `inputs` (input index -> tensor, fetched before the call)."""
        results = list(results)
        for view in self.views:
            base = results[view.position] if view.input_index is None \
                else inputs[view.input_index]
            if view.size is None:
                results[view.position] = base
            else:
                results[view.position] = base.as_strided(
                    view.size, view.stride, base.storage_offset() + view.offset)
        return results


class WithRebuiltViews:
    """A compiled graph whose view outputs are rebuilt after each call. Called with one list
    of inputs (`takes_argument_list`), which the inner compiled graph may empty."""

    takes_argument_list = True

    def __init__(self, compiled: Callable, views: OutputViews, run: Callable):
        self.compiled = compiled
        self.views = views
        self.run = run                  # `compiled` as a callable taking the argument list
        self.input_indices = list(dict.fromkeys(views.input_indices))

    @property
    def report(self):
        """The inner compiled graph's report (inductor's `GraphReport`), if it has one."""
        return getattr(self.compiled, "report", None)

    def __call__(self, arguments: list) -> list:
        inputs = {index: arguments[index] for index in self.input_indices}
        return self.views.rebuild(self.run(arguments), inputs)
