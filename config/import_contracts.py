"""An import-linter contract of our own: no import cycles between the project's modules.

import-linter's `acyclic_siblings` forbids cycles between sibling packages, which
would forbid two features from knowing each other at all (knowledge links articles to
exceptions; exceptions show articles). What we forbid is narrower and what hurts: a
module that, through any chain of imports, imports itself (function-level imports
count: a lazy import is a dependency that only hides). Used by `lint-imports` in
`make test` (pyproject.toml, [tool.importlinter]); the application never imports it.
"""

from __future__ import annotations

from importlinter import Contract, ContractCheck, fields, output


class NoModuleCycles(Contract):
    """No module of `packages` is in an import cycle with another of them."""

    packages = fields.ListField(subfield=fields.StringField())
    skip = fields.ListField(subfield=fields.StringField(), required=False)

    def check(self, graph, verbose: bool) -> ContractCheck:
        skip = tuple(self.skip or ())
        modules = {
            module
            for package in self.packages
            for module in {package, *graph.find_descendants(package)}
            if not any(part in module.split(".") for part in skip)
        }
        edges = {
            module: sorted(graph.find_modules_directly_imported_by(module) & modules)
            for module in modules
        }
        cycles = [sorted(group) for group in _strongly_connected(edges) if len(group) > 1]
        loops = [_loop(edges, group) for group in cycles]
        return ContractCheck(kept=not cycles, metadata={"loops": sorted(loops)})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for loop in check.metadata["loops"]:
            output.print_error(" -> ".join(loop), bold=False)
            output.new_line()


def _strongly_connected(edges: dict[str, list[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (a deep import chain must not hit the recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    groups: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(edges[successor])))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                groups.append(group)
    return groups


def _loop(edges: dict[str, list[str]], group: list[str]) -> list[str]:
    """One concrete chain of imports from the group's first module back to itself."""
    members = set(group)
    start = group[0]
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for successor in edges[node]:
                if successor == start:
                    return [*paths[node], start]
                if successor in members and successor not in paths:
                    paths[successor] = [*paths[node], successor]
                    following.append(successor)
        frontier = following
    return group
