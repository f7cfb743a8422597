"""A minimum s-t cut on a capacity network (Dinic's maximum-flow algorithm).

Input: a `FlowNetwork` built by the partitioner (vertices are hashable keys, edges carry integer
capacities). Output: the set of vertices on the source side of a minimum cut, and its value.
Written out here (about 100 lines) rather than taken from a graph library, so that the
partitioner's cost stays predictable on graphs of tens of thousands of edges.
"""
from __future__ import annotations

from collections import deque
from typing import Hashable


class FlowNetwork:
    """A directed graph with integer edge capacities, stored as paired residual arcs."""

    def __init__(self) -> None:
        self._index: dict[Hashable, int] = {}
        self._keys: list[Hashable] = []
        self._heads: list[int] = []        # arc -> target vertex
        self._residual: list[int] = []     # arc -> remaining capacity
        self._arcs: list[list[int]] = []   # vertex -> outgoing arcs (arc ^ 1 is the reverse)

    def vertex(self, key: Hashable) -> int:
        """The vertex for `key`, created on first use."""
        index = self._index.get(key)
        if index is None:
            index = self._index[key] = len(self._keys)
            self._keys.append(key)
            self._arcs.append([])
        return index

    def add_edge(self, source: Hashable, target: Hashable, capacity: int) -> None:
        """Add an edge `source -> target` of `capacity` (parallel edges add up)."""
        tail, head = self.vertex(source), self.vertex(target)
        self._arcs[tail].append(len(self._heads))
        self._heads.append(head)
        self._residual.append(capacity)
        self._arcs[head].append(len(self._heads))
        self._heads.append(tail)
        self._residual.append(0)

    def _levels(self, source: int, sink: int) -> list[int] | None:
        level = [-1] * len(self._keys)
        level[source] = 0
        queue = deque([source])
        while queue:
            vertex = queue.popleft()
            for arc in self._arcs[vertex]:
                head = self._heads[arc]
                if self._residual[arc] > 0 and level[head] < 0:
                    level[head] = level[vertex] + 1
                    queue.append(head)
        return level if level[sink] >= 0 else None

    def _augment(self, source: int, sink: int, level: list[int], next_arc: list[int]) -> int:
        """Find one augmenting path in the level graph (iteratively) and push flow along it."""
        path: list[int] = []
        vertex = source
        while True:
            if vertex == sink:
                pushed = min(self._residual[arc] for arc in path)
                for arc in path:
                    self._residual[arc] -= pushed
                    self._residual[arc ^ 1] += pushed
                return pushed
            arcs = self._arcs[vertex]
            while next_arc[vertex] < len(arcs):
                arc = arcs[next_arc[vertex]]
                head = self._heads[arc]
                if self._residual[arc] > 0 and level[head] == level[vertex] + 1:
                    break
                next_arc[vertex] += 1
            else:
                if vertex == source:
                    return 0
                level[vertex] = -1           # dead end: never visit again in this phase
                arc = path.pop()
                vertex = self._heads[arc ^ 1]
                next_arc[vertex] += 1
                continue
            path.append(arc)
            vertex = head

    def minimum_cut(self, source: Hashable, sink: Hashable) -> tuple[int, set[Hashable]]:
        """Run max flow; return (cut value, keys reachable from `source` in the residual)."""
        source_index, sink_index = self.vertex(source), self.vertex(sink)
        total = 0
        while (level := self._levels(source_index, sink_index)) is not None:
            next_arc = [0] * len(self._keys)
            while pushed := self._augment(source_index, sink_index, level, next_arc):
                total += pushed
        reachable = {source_index}
        queue = deque([source_index])
        while queue:
            vertex = queue.popleft()
            for arc in self._arcs[vertex]:
                head = self._heads[arc]
                if self._residual[arc] > 0 and head not in reachable:
                    reachable.add(head)
                    queue.append(head)
        return total, {self._keys[index] for index in reachable}
