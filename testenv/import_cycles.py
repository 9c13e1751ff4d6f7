"""Find every import cycle in the given packages (lazy imports inside functions included, TYPE_CHECKING ones not).

    python testenv/import_cycles.py evr1_cache evr1_rewards evr1_eval evr1_train

Exits 1 and prints each cycle as a chain (`a -> b -> a`, with the line of each import) when any exists. Why beside
import-linter's contracts: a contract checks a rule someone wrote down (layers, forbidden pairs); this finds the
cycles nobody wrote a rule for. The graph is grimp's, the library import-linter itself runs on, so both see the same
imports. Run by `nox -s imports`; tests/test_import_cycles.py plants a cycle to prove it fails.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Mapping, Sequence


def strongly_connected(graph: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """The groups of two or more modules that import each other, directly or through others (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(graph.get(root, ())))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(graph.get(step, ()))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups)


def shortest_cycle(graph: Mapping[str, Sequence[str]], group: Sequence[str]) -> list[str]:
    """One shortest cycle through the group's first module, as [a, b, ..., a] (breadth-first inside the group)."""
    start, members = group[0], set(group)
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in graph.get(node, ()):
                if nxt == start:
                    chain = [node]
                    while chain[-1] != start:
                        chain.append(parent[chain[-1]])
                    return [*reversed(chain), start]
                if nxt in members and nxt not in parent:
                    parent[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"{start} is in a strongly connected group but on no cycle")  # unreachable by construction


def import_graph(packages: Sequence[str]) -> tuple[dict[str, list[str]], dict[tuple[str, str], int]]:
    """{module: modules it imports} inside `packages`, and the line of one import statement for each edge."""
    import grimp

    built = grimp.build_graph(*packages, exclude_type_checking_imports=True)
    graph: dict[str, list[str]] = {}
    lines: dict[tuple[str, str], int] = {}
    for module in built.modules:
        targets = sorted(built.find_modules_directly_imported_by(module) & built.modules)
        graph[module] = targets
        for target in targets:
            details = built.get_import_details(importer=module, imported=target)
            lines[(module, target)] = min((d["line_number"] for d in details), default=0)
    return graph, lines


def report(packages: Sequence[str]) -> list[str]:
    """One line per cycle found (empty: none)."""
    graph, lines = import_graph(packages)
    out = []
    for group in strongly_connected(graph):
        cycle = shortest_cycle(graph, group)
        hops = " -> ".join(f"{a} (line {lines[(a, b)]})" for a, b in itertools.pairwise(cycle)) + f" -> {cycle[-1]}"
        others = f"; {len(group)} modules in this knot: {', '.join(group)}" if len(group) > len(cycle) - 1 else ""
        out.append(f"import cycle: {hops}{others}")
    return out


def main(argv: Sequence[str]) -> int:
    if not argv:
        print("usage: import_cycles.py PACKAGE [PACKAGE ...]", file=sys.stderr)
        return 2
    found = report(argv)
    for line in found:
        print(line)
    print(f"{len(found)} import cycle(s) in {', '.join(argv)} (lazy imports included, TYPE_CHECKING excluded)")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
