"""Stage "rewrite": the glue function a rewritten frame calls.

Input: what a trace produced (graph input sources, the returned variable, pending side
effects). Output: Python source for `glue(<frame locals>)`, which fetches the graph's inputs
from the frame, calls the compiled graph, replays side effects on pre-existing objects, and
rebuilds the returned value — readable code, logged on the `bytecode` channel (a graph that
may raise sits in a `try`: see `raising`):

    def glue(x, self):
        out = compiled(x, self._modules['lin']._parameters['weight'])
        self.calls = 1
        return (out[0], x)

Planning (`GluePlan.reconstruct`) runs before the graph is finished: it decides which tensors
the graph must output.

A source denotes a value as it was when the frame (or region) started. The glue reads every
source it needs right after the graph call, into `r<n>` temporaries, before any replayed
mutation: `lst.reverse(); return lst[1]` must return the old `lst[0]`, which `lst[0]` read
after the list's replay would not be.
"""
from __future__ import annotations

import itertools
import keyword
import linecache
import re
from typing import Any, Optional

from dynamo.breaks import UNSUPPORTED_OBJECT, Unsupported
from dynamo.rewrite.raising import GLUE_NAMES, glue_lines
from guards.sources import ConstantSource, GlobalSource, LocalSource, ObjectSource, Source

_LITERALS = (int, str, bool, type(None), bytes)
_counter = itertools.count()


class GluePlan:
    """Accumulates the glue's statements, graph outputs and bound constants."""

    def __init__(self, frame_globals: dict):
        self.frame_globals = frame_globals
        self.parameters: list[str] = []  # frame locals the glue takes, in order
        self.cell_parameters: list[str] = []  # frame cells the glue needs as cell objects
        self.constants: dict[str, Any] = {}
        self._constant_ids: dict[int, str] = {}
        self.outputs: list[Any] = []  # TensorVariables the graph returns
        self._output_index: dict[int, int] = {}
        self.statements: list[str] = []
        self._rebuilt: dict[int, str] = {}
        self._names = itertools.count()
        self.frame_cells: dict[int, str] = {}  # id(cell box) -> name, for the frame's own cells
        self._parameter_names: dict[tuple, str] = {}
        self.reads: list[str] = []  # `r<n> = <source>`: entry values, read before any replay
        self.early: list[str] = []  # calls made before the graph (SideEffects.early_calls)
        self._read_names: dict[Source, str] = {}
        self.error_path = None  # raising.ErrorPath: what the glue does if the graph raises

    # -- names ------------------------------------------------------------------------------
    def parameter(self, local: str) -> str:
        if local not in self.parameters:
            self.parameters.append(local)
        return self._name_of("L_", local)

    def cell(self, local: str) -> str:
        if local not in self.cell_parameters:
            self.cell_parameters.append(local)
        return self._name_of("C_", local)

    def _name_of(self, prefix: str, local: str) -> str:
        """A glue parameter's name: distinct for distinct locals (`_` and `__` both make
        the identifier `v`, and a glue with two parameters `L_v` did not compile)."""
        key = (prefix, local)
        name = self._parameter_names.get(key)
        if name is None:
            name = base = prefix + _identifier(local)
            taken = set(self._parameter_names.values())
            counter = 1
            while name in taken:
                counter += 1
                name = f"{base}_{counter}"
            self._parameter_names[key] = name
        return name

    def bind(self, value: Any, hint: str = "const") -> str:
        name = self._constant_ids.get(id(value))
        if name is None:
            name = f"K_{_identifier(hint)}_{len(self.constants)}"
            self.constants[name] = value
            self._constant_ids[id(value)] = name
        return name

    def temporary(self) -> str:
        return f"t{next(self._names)}"

    # -- sources ----------------------------------------------------------------------------
    def source(self, source: Source) -> str:
        """A name for the value `source` had when the frame started: a parameter, a bound
        constant, or a temporary read before any mutation is replayed."""
        if isinstance(source, LocalSource):
            return self.parameter(source.local)
        if isinstance(source, (ConstantSource, ObjectSource)):
            return self._expression(source)
        name = self._read_names.get(source)
        if name is None:
            name = self._read_names[source] = f"r{len(self._read_names)}"
            self.reads.append(f"{name} = {self._expression(source)}")
        return name

    def _expression(self, source: Source) -> str:
        if isinstance(source, LocalSource):
            return self.parameter(source.local)
        if isinstance(source, GlobalSource):
            return f"G[{source.global_name!r}]"
        if isinstance(source, ConstantSource):
            return self.bind(source.value, source.constant_name)
        if isinstance(source, ObjectSource):  # held weakly: the entry dies with the object
            if not source.held.weak:
                return self.bind(source.held.reference, source.object_name)
            return f"{self.bind(source.held.reference, source.object_name)}()"
        if source.base is None:
            raise Unsupported(UNSUPPORTED_OBJECT, f"no run-time expression for {source.name()}")
        return source.apply(self._expression(source.base))

    # -- values -----------------------------------------------------------------------------
    def output(self, tensor) -> str:
        index = self._output_index.get(id(tensor.node))
        if index is None:
            index = len(self.outputs)
            self.outputs.append(tensor)
            self._output_index[id(tensor.node)] = index
        return f"out[{index}]"

    def constant(self, value: Any) -> str:
        if type(value) in _LITERALS or (type(value) is float and value == value and
                                        abs(value) != float("inf")):
            return repr(value)
        return self.bind(value, type(value).__name__)

    def reconstruct(self, value) -> str:
        """An expression rebuilding `value` (a variable) after the graph has run."""
        from dynamo.rewrite.rebuild import rebuild
        return rebuild(self, value)

    def remember(self, key: int, expression: str) -> str:
        """Evaluate `expression` once into a temporary (keeps identity of rebuilt objects)."""
        name = self.temporary()
        self.statements.append(f"{name} = {expression}")
        self._rebuilt[key] = name
        return name

    def rebuilt(self, key: int) -> Optional[str]:
        return self._rebuilt.get(key)

    # -- the function -----------------------------------------------------------------------
    def input_fetches(self, input_sources: list[Source]) -> tuple[list[str], list[str]]:
        """(statements, expressions) fetching the graph's inputs: a step that several inputs
        pass through (`L_self._modules['encoder']`) is read once into a temporary, so a model's
        200 parameters cost one dictionary lookup each rather than one per level of nesting."""
        shared = _shared_steps(input_sources)
        statements: list[str] = []
        names: dict[Source, str] = {}

        def fetch(source: Source) -> str:
            if source in names:
                return names[source]
            if source.base is None or isinstance(source, (LocalSource, GlobalSource,
                                                          ConstantSource, ObjectSource)):
                return self._expression(source)
            expression = source.apply(fetch(source.base))
            if source not in shared:
                return expression
            names[source] = name = f"i{len(names)}"
            statements.append(f"{name} = {expression}")
            return name
        return statements, [fetch(source) for source in input_sources]

    def build(self, compiled, input_sources: list[Source], returned: str, name: str):
        """The glue function (its globals are the frame's), plus its source text."""
        fetches, inputs = self.input_fetches(input_sources)
        before, reads = [], self.reads
        if self.early:  # after the graph's inputs and the entry values are read, as in eager
            if compiled is not None:
                fetches.append(f"e = ({''.join(f'{value}, ' for value in inputs)})")
                inputs = ["*e"]
            before, reads = reads + self.early, []
        call = before if compiled is None else \
            [*fetches, *before, *glue_lines(self.error_path, inputs, name)]
        parameters = [self._name_of("L_", local) for local in self.parameters] + \
                     [self._name_of("C_", local) for local in self.cell_parameters]
        body = call + reads + self.statements + [f"return {returned}"]
        free = ["compiled", "G", *self.constants]
        text = (f"def make({', '.join(free)}):\n"
                f"    def {name}({', '.join(parameters)}):\n"
                + "".join(f"        {line}\n" for line in body)
                + f"    return {name}\n")
        filename = f"<framejit glue {next(_counter)}>"
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
        namespace: dict = dict(GLUE_NAMES)
        exec(compile(text, filename, "exec"), namespace)
        function = namespace["make"](compiled, self.frame_globals, *self.constants.values())
        return function, text


def _shared_steps(sources: list[Source]) -> set:
    """The non-root steps of `sources`' chains that two or more inputs pass through."""
    passes: dict[Source, int] = {}
    for source in dict.fromkeys(sources):
        for step in source.chain()[1:-1]:
            passes[step] = passes.get(step, 0) + 1
    return {step for step, count in passes.items() if count > 1}


def _identifier(text: str) -> str:
    name = re.sub(r"\W+", "_", str(text)).strip("_") or "v"
    if name[0].isdigit() or keyword.iskeyword(name):
        name = "_" + name
    return name
