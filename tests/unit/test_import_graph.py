"""The package's import graph stays a DAG whose floors match the folders.

The graph is read from the source with ``ast``: every ``import`` counts, at the top of a
module, inside a function (a lazy import) or under ``if TYPE_CHECKING:`` alike, since each
is a dependency a reader has to follow. ``importlib.import_module`` with a string (the
``rankwise.wandb`` lazy attributes) is not seen.

Two checks on the package's own modules:

* no import circle: no strongly connected component of more than one module;
* the layering rules (``RULES``): ``stream/`` (the file format) imports only
  ``errors``, ``names`` and itself; ``store/`` never imports ``sdk/`` or ``server/``;
  ``sdk/`` never imports ``store/`` or ``server/``; ``media/`` (pure value types) never
  imports ``sdk/``.

The last tests run the same checks on a made-up graph and on a package written to a
temporary directory, so that a check that can no longer fail is seen.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Mapping
from pathlib import Path

import rankwise

PACKAGE = Path(rankwise.__file__).parent

# importer's folder -> (the folders it may import, or None for any; those it may not).
RULES: dict[str, tuple[frozenset[str] | None, frozenset[str]]] = {
    "stream": (frozenset({"stream", "errors", "names"}), frozenset()),
    "store": (None, frozenset({"sdk", "server"})),
    "sdk": (None, frozenset({"store", "server"})),
    "media": (None, frozenset({"sdk"})),
}

# Circles tolerated for now: each entry is exactly one strongly connected component.
# Empty since the five circles of code review 3 closed; a circle listed here that no
# longer exists fails the test too, so the list cannot go stale.
ALLOWED_CYCLES: list[frozenset[str]] = []

Graph = dict[str, dict[str, int]]  # module -> {imported module: first line}


def modules(root: Path) -> dict[str, Path]:
    """``{dotted name: file}`` of every module of the package at ``root``."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def import_graph(root: Path) -> Graph:
    """Which of the package's modules each of its modules imports, and where."""
    found = modules(root)
    top = root.name

    def known(name: str) -> str | None:
        """``name``, or the nearest enclosing module of the package that exists."""
        while name and name not in found:
            name = name.rpartition(".")[0]
        return name or None

    graph: Graph = {}
    for name, path in found.items():
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join(here[: len(here) - node.level + 1])
                    source = f"{base}.{node.module}" if node.module else base
                else:
                    source = node.module or ""
                # `from pkg import mod` imports the module; `from mod import name`, mod.
                targets = [
                    f"{source}.{a.name}" if f"{source}.{a.name}" in found else source
                    for a in node.names
                ]
            for target in targets:
                if target.split(".")[0] != top:
                    continue
                module = known(target)
                if module is not None and module != name:
                    line = getattr(node, "lineno", 0)
                    edges[module] = min(edges.get(module, line), line)
        graph[name] = edges
    return graph


def cycles(graph: Mapping[str, Iterable[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[frozenset[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph.get(start, ())))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph.get(child, ()))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(frozenset(component))
    return out


def folder(module: str) -> str:
    """``rankwise.sdk.run`` -> ``sdk``; ``rankwise.errors`` -> ``errors``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layering_violations(graph: Graph) -> list[str]:
    out = []
    for module, edges in sorted(graph.items()):
        rule = RULES.get(folder(module))
        if rule is None:
            continue
        only, never = rule
        for target, line in sorted(edges.items()):
            to = folder(target)
            if to in never or (only is not None and to not in only):
                out.append(f"{module}:{line} imports {target} ({folder(module)}/ -> {to or '?'})")
    return out


def describe(graph: Graph, cycle: frozenset[str]) -> str:
    edges = [
        f"  {m}:{line} -> {t}"
        for m in sorted(cycle)
        for t, line in sorted(graph[m].items())
        if t in cycle
    ]
    return "\n".join([", ".join(sorted(cycle)), *edges])


# -- the package ---------------------------------------------------------------------------


@functools.cache
def package_graph() -> Graph:
    return import_graph(PACKAGE)


def test_the_graph_sees_the_package() -> None:
    graph = package_graph()
    assert len(graph) > 100
    # a top-level, a function-local and a TYPE_CHECKING import are all edges
    assert "rankwise.wire.runs" in graph["rankwise.api"]  # top level
    assert "rankwise.read.remote" in graph["rankwise.api"]  # in __init__ and TYPE_CHECKING
    assert "rankwise.sdk.sync" in graph["rankwise.cli.sync"]  # function-local


def test_no_import_circles_between_the_package_modules() -> None:
    graph = package_graph()
    found = cycles(graph)
    new = [c for c in found if c not in ALLOWED_CYCLES]
    gone = [c for c in ALLOWED_CYCLES if c not in found]
    assert new == [], "import circles:\n" + "\n".join(describe(graph, c) for c in new)
    assert gone == [], "circles in ALLOWED_CYCLES that no longer exist (remove them): " + "; ".join(
        ", ".join(sorted(c)) for c in gone
    )


def test_the_layers_import_only_downwards() -> None:
    assert layering_violations(package_graph()) == []


# -- the checks can fail -------------------------------------------------------------------


def test_cycles_finds_every_circle_and_nothing_else() -> None:
    graph = {
        "a": ["b"],
        "b": ["c", "d"],
        "c": ["a"],  # a -> b -> c -> a
        "d": ["e"],
        "e": ["d", "f"],  # d <-> e
        "f": [],
        "g": ["a"],  # into a circle, not part of it
    }
    assert sorted(map(sorted, cycles(graph))) == [["a", "b", "c"], ["d", "e"]]
    assert cycles({"a": ["b"], "b": ["c"], "c": []}) == []


def test_the_rules_catch_an_arrow_back_up() -> None:
    graph: Graph = {
        "rankwise.stream.files": {"rankwise.errors": 1, "rankwise.sdk.run": 7},
        "rankwise.store.sqlite": {"rankwise.read.model": 2, "rankwise.server.app": 9},
        "rankwise.sdk.run": {"rankwise.stream.frames": 3, "rankwise.store.base": 4},
        "rankwise.media.image": {"rankwise.sdk.handle": 5},
        "rankwise.server.app": {"rankwise.store.sqlite": 6},  # downwards: fine
    }
    assert layering_violations(graph) == [
        "rankwise.media.image:5 imports rankwise.sdk.handle (media/ -> sdk)",
        "rankwise.sdk.run:4 imports rankwise.store.base (sdk/ -> store)",
        "rankwise.store.sqlite:9 imports rankwise.server.app (store/ -> server)",
        "rankwise.stream.files:7 imports rankwise.sdk.run (stream/ -> sdk)",
    ]


def test_a_lazy_or_typing_import_back_is_a_circle(tmp_path: Path) -> None:
    pkg = tmp_path / "rankwise"
    (pkg / "sdk").mkdir(parents=True)
    (pkg / "media").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "sdk" / "__init__.py").write_text("")
    (pkg / "media" / "__init__.py").write_text("")
    (pkg / "sdk" / "run.py").write_text("def encode():\n    from ..media import encoder\n")
    (pkg / "media" / "encoder.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from ..sdk.run import Run\n"
    )
    (pkg / "cli.py").write_text("import rankwise.sdk.run\nfrom rankwise import media\n")
    graph = import_graph(pkg)
    assert graph["rankwise.cli"] == {"rankwise.sdk.run": 1, "rankwise.media": 2}
    assert cycles(graph) == [frozenset({"rankwise.sdk.run", "rankwise.media.encoder"})]
    assert layering_violations(graph) == [
        "rankwise.media.encoder:4 imports rankwise.sdk.run (media/ -> sdk)"
    ]
