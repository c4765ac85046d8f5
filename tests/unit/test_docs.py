"""The docs stay true: ``docs/http-api.md`` lists exactly the routes the server has, and
every repository path the docs and the README name exists."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import APIRoute

from rankwise.server import ServerSettings, create_app
from rankwise.store import open_store

REPO = Path(__file__).resolve().parents[2]
DOCS = [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]

# A route line of http-api.md's tables: "| GET | `/api/v1/projects/{project}/runs` | ...".
ROUTE_LINE = re.compile(r"^\|\s*(GET|POST|PUT|PATCH|DELETE)\s*\|\s*`(/api/[^`?\s]*)")
# A file in backticks: "`rankwise/store/runs.py`", "`server/indexer.py`", "`blocks.py`";
# or a folder of the repository: "`rankwise/server/routes/`".
FILE = re.compile(r"`((?:[\w.-]+/)*[\w.-]+\.(?:py|md|js|jsx|json|toml|cfg|sh|css|html|yml))`")
FOLDER = re.compile(r"`((?:rankwise|tests|docs|ui|benchmarks|scripts)/(?:[\w.-]+/)*)`")
# Where a path the docs name may be relative to: the repository, the package, the UI.
ROOTS = [REPO, REPO / "rankwise", REPO / "ui", REPO / "ui" / "src", REPO / "tests"]
SKIP = {".venv", "node_modules", ".git", "dist", "static"}


def _exists(path: str) -> bool:
    if any((root / path).exists() for root in ROOTS):
        return True
    if "/" in path:
        return False
    # A bare file name ("`blocks.py`" in a paragraph about store/): somewhere in the tree.
    return any(not SKIP & set(p.parts) for p in REPO.rglob(path))


def _shape(path: str) -> str:
    return re.sub(r"\{[^}]*\}", "{}", path)


def documented_routes() -> set[tuple[str, str]]:
    text = (REPO / "docs" / "http-api.md").read_text(encoding="utf-8")
    return {
        (m.group(1), _shape(m.group(2)))
        for line in text.splitlines()
        if (m := ROUTE_LINE.match(line.strip()))
    }


def api_routes(routes: Any) -> Iterator[Any]:
    """Every route, through FastAPI's included-router wrappers (0.16x builds them lazily)."""
    for route in routes:
        if hasattr(route, "effective_route_contexts"):
            yield from route.effective_route_contexts()
        elif isinstance(route, APIRoute):
            yield route


def served_routes(tmp_path: Path) -> set[tuple[str, str]]:
    store = open_store(tmp_path / "db.sqlite")
    try:
        app = create_app(store, ServerSettings(static_dir=tmp_path / "no-static"))
        return {
            (method, _shape(route.path))
            for route in api_routes(app.routes)
            if route.path.startswith("/api/v1/") and getattr(route, "include_in_schema", True)
            for method in route.methods
        }
    finally:
        store.close()


def test_http_api_doc_lists_every_route_and_no_other(tmp_path: Path) -> None:
    documented, served = documented_routes(), served_routes(tmp_path)
    assert len(served) >= 20  # the walk found the API
    assert documented - served == set(), "docs/http-api.md names routes the server lacks"
    assert served - documented == set(), "routes missing from docs/http-api.md"


def named_paths(doc: Path) -> list[str]:
    text = doc.read_text(encoding="utf-8")
    return sorted({m.group(1) for rx in (FILE, FOLDER) for m in rx.finditer(text)})


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_paths_the_docs_name_exist(doc: Path) -> None:
    named = named_paths(doc)
    missing = [p for p in named if not _exists(p)]
    assert missing == [], f"{doc.name} names paths that do not exist"
