"""One-way layers: no import runs back up a layer, and no two files import each other in a circle.

The layers are docs/architecture.md's table. Every import counts, lazy ones inside functions and
type-only ones under TYPE_CHECKING included: a deferred import is still a dependency.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("footprint", "meters", "lca_data", "dashboard")

#: (layer, prefixes) bottom to top; a module may import only from its own layer or below.
LAYERS = (
    (0, ("meters", "lca_data")),
    (
        1,
        (
            "footprint.lca",
            "footprint.flops",
            "footprint.inputs",
            "footprint.errors",
            "footprint.outputs",
            "footprint.escaping",
            "footprint.bounds",
            "footprint.http",
        ),
    ),
    (2, ("footprint.tracking", "footprint.kernels", "footprint.fleet", "footprint.serving")),
    (3, ("footprint.reports", "footprint.integrations", "footprint.disclosures", "footprint.api", "footprint.builders")),
    (4, ("footprint.cli", "dashboard")),
)
NAMES = ("data and meters", "core", "producers", "consumers", "faces")

#: Upward edges tolerated for now, each with the reason; nothing else may be added here.
ALLOWED_UP: set[tuple[str, str]] = set()
#: Import edges left out of the circle check, each with the reason; nothing else may be added here.
ALLOWED_CIRCLE: set[tuple[str, str]] = set()


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def layer(module: str) -> int:
    """The layer of the prefix that names the module; `footprint` itself (the public API's lazy names) is a consumer."""
    if module == "footprint":
        return 3
    matches = [(len(p), level) for level, prefixes in LAYERS for p in prefixes if module == p or module.startswith(p + ".")]
    assert matches, f"{module} is in no layer: add it to LAYERS and docs/architecture.md"
    return max(matches)[1]


def imported(name: str, path: Path, mods: dict[str, Path]) -> Iterator[str]:
    """The modules of ours that `name` imports anywhere in its file (a package's own __init__ excluded)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            # `from pkg import sub` depends on pkg.sub, not on every module pkg's __init__ mentions.
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in mods:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                yield target


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: set(imported(name, path, mods)) for name, path in mods.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for succ in edges.get(node, ()):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_import_runs_up_a_layer() -> None:
    up = sorted((a, b) for a, targets in graph().items() for b in targets if layer(b) > layer(a) and (a, b) not in ALLOWED_UP)
    assert not up, "imports that run up a layer:\n" + "\n".join(
        f"  {a} ({NAMES[layer(a)]}) -> {b} ({NAMES[layer(b)]})" for a, b in up
    )


def test_flop_arithmetic_stays_below_the_lca_core() -> None:
    """footprint.flops is the core's lowest part: the LCA core builds on it, so it never looks a card up in it."""
    into_lca = sorted(
        (a, b)
        for a, targets in graph().items()
        if a.startswith("footprint.flops")
        for b in targets
        if b.startswith("footprint.lca")
    )
    assert not into_lca, f"footprint.flops imports the LCA core: {into_lca}"


def test_the_allow_list_names_only_live_edges() -> None:
    edges = graph()
    stale = sorted(edge for edge in ALLOWED_UP | ALLOWED_CIRCLE if edge[1] not in edges.get(edge[0], ()))
    assert not stale, f"ALLOWED_UP names edges that no longer exist, remove them: {stale}"


def test_no_import_circle() -> None:
    edges = {a: {b for b in targets if (a, b) not in ALLOWED_CIRCLE} for a, targets in graph().items()}
    circles = cycles(edges)

    def show(component: list[str]) -> str:
        """One shortest circle through the component's first file, then the size of the whole tangle."""
        inside, start = set(component), component[0]
        paths = {start: [start]}
        queue = [start]
        while queue:
            node = queue.pop(0)
            for succ in sorted(edges[node] & inside):
                if succ == start:
                    return f"  {' -> '.join([*paths[node], start])} ({len(component)} files in this tangle)"
                if succ not in paths:
                    paths[succ] = [*paths[node], succ]
                    queue.append(succ)
        return "  " + ", ".join(component)

    assert not circles, "files that import each other in a circle:\n" + "\n".join(show(c) for c in circles)


def test_the_checker_sees_lazy_and_relative_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from . import b\n")
    (pkg / "b.py").write_text("import pkg.a\n")
    mods = {"pkg": pkg / "__init__.py", "pkg.a": pkg / "a.py", "pkg.b": pkg / "b.py"}
    edges = {name: set(imported(name, path, mods)) for name, path in mods.items()}
    assert edges == {"pkg": set(), "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}}
    assert cycles(edges) == [["pkg.a", "pkg.b"]]
