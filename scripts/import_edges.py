"""Import edges between the project's top-level packages: the distinct module -> module
imports whose packages differ, counted by pair (function-level imports count, as they do
for import-linter, whose grimp builds the graph). Run from the checkout to measure:

    PYTHONPATH=. python scripts/import_edges.py            # the table
    PYTHONPATH=. python scripts/import_edges.py --upward   # only edges against the layers
    PYTHONPATH=. python scripts/import_edges.py --no-migrations   # migrations left out

"Upward" means against the layers of pyproject.toml's contract (config at the top, then
demo, governance and accounts, scheduler, fleet, core and engine at the bottom): an
importer below what it imports. Prints one line per pair, then the total.
"""

from __future__ import annotations

import sys
from collections import Counter

import grimp

PACKAGES = ("accounts", "config", "core", "demo", "engine", "fleet", "governance", "scheduler")
# Higher is above. Packages on one level may not import each other either (the contract's
# `|`), which this script does not check: it only counts.
LEVEL = {
    "config": 5,
    "demo": 4,
    "governance": 3,
    "accounts": 3,
    "scheduler": 2,
    "fleet": 1,
    "core": 0,
    "engine": 0,
}


def edges_by_pair(*, migrations: bool = True) -> Counter[tuple[str, str]]:
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    pairs: Counter[tuple[str, str]] = Counter()
    for importer in graph.modules:
        if not migrations and "migrations" in importer.split("."):
            continue
        source = importer.split(".")[0]
        for imported in graph.find_modules_directly_imported_by(importer):
            target = imported.split(".")[0]
            if target in PACKAGES and target != source:
                pairs[source, target] += 1
    return pairs


def main(argv: list[str]) -> None:
    upward_only = "--upward" in argv
    pairs = edges_by_pair(migrations="--no-migrations" not in argv)
    total = 0
    for (source, target), count in sorted(pairs.items()):
        upward = LEVEL[source] < LEVEL[target]
        if upward_only and not upward:
            continue
        total += count
        print(f"{source:>10} -> {target:<10} {count:4d}{'  upward' if upward else ''}")
    print(f"{'total':>24} {total:4d}")


if __name__ == "__main__":
    main(sys.argv[1:])
