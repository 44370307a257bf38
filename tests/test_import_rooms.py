"""No import cycle between the rooms of chatforge, orchestration and tools,
where a package's loose top-level modules count as one room
(docs/architecture.md, "Layers").

import-linter's acyclic contract (pyproject.toml) compares sibling modules
one by one, so two top-level modules importing a sub-package that imports
back the other would pass it. Imports inside functions count; imports under
``TYPE_CHECKING`` do not, as in the contracts.
"""

from __future__ import annotations

import grimp
import pytest

PACKAGES = ("chatforge", "orchestration", "tools")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True)


def room_of(graph: grimp.ImportGraph, module: str, package: str) -> str:
    """The sub-package ``module`` is in, or ``<package>.(top)`` for the
    package itself and its loose modules."""
    child = ".".join(module.split(".")[:2])
    if module == package or not graph.find_children(child):
        return f"{package}.(top)"
    return child


def room_imports(graph: grimp.ImportGraph, package: str) -> dict[tuple[str, str], list[str]]:
    """Room → room edges inside ``package``, each with the imports behind it."""
    edges: dict[tuple[str, str], list[str]] = {}
    for module in graph.find_descendants(package) | {package}:
        if ".migrations" in module:
            continue  # generated; they import nothing of ours that matters here
        source = room_of(graph, module, package)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported != package and not imported.startswith(package + "."):
                continue
            target = room_of(graph, imported, package)
            if target != source:
                edges.setdefault((source, target), []).append(f"{module} -> {imported}")
    return edges


def cycles(edges: dict[tuple[str, str], list[str]]) -> list[set[str]]:
    """The groups of rooms that reach each other (strongly connected, > 1)."""
    rooms = {room for edge in edges for room in edge}
    reach = {room: {b for a, b in edges if a == room} for room in rooms}
    changed = True
    while changed:
        changed = False
        for room in rooms:
            wider = reach[room].union(*(reach[other] for other in reach[room]))
            if wider != reach[room]:
                reach[room], changed = wider, True
    groups: list[set[str]] = []
    for room in sorted(rooms):
        group = {room} | {other for other in rooms if other in reach[room] and room in reach[other]}
        if len(group) > 1 and group not in groups:
            groups.append(group)
    return groups


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycle_between_rooms(graph: grimp.ImportGraph, package: str) -> None:
    edges = room_imports(graph, package)
    found = cycles(edges)
    report = [
        f"{sorted(group)}: " + "; ".join(
            why[0] for (a, b), why in sorted(edges.items()) if a in group and b in group
        )
        for group in found
    ]
    assert not found, "\n".join(report)


def test_the_check_sees_a_cycle() -> None:
    """The checker itself: two rooms importing each other are one cycle."""
    edges = {("p.a", "p.b"): ["p.a.x -> p.b.y"], ("p.b", "p.(top)"): ["p.b.y -> p.z"],
             ("p.(top)", "p.a"): ["p.z -> p.a.x"], ("p.c", "p.a"): ["p.c.w -> p.a.x"]}
    assert cycles(edges) == [{"p.a", "p.b", "p.(top)"}]
