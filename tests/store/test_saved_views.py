"""Saved views of the dashboard's runs table: the store methods and the HTTP endpoints,
over SQLite and PostgreSQL (the latter with ``RANKWISE_TEST_POSTGRES``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rankwise.server import ServerSettings, create_app
from rankwise.store import migrations as M
from rankwise.store.base import Store
from tests.helpers.servers import call

URL = "/api/v1/projects/p/views"


@pytest.fixture
def app(store: Store, tmp_path: Path) -> Any:
    return create_app(store, ServerSettings(static_dir=tmp_path / "no-static"))


def test_views_table_is_a_numbered_migration(store: Store) -> None:
    assert store.schema_version() == M.LATEST >= 3
    assert any(m.name == "saved views of the runs table" for m in M.MIGRATIONS)


def test_store_saves_replaces_lists_and_deletes(store: Store) -> None:
    assert store.list_views("p") == []
    store.save_view("p", "crashed runs", {"state": ["crashed"]}, [])
    store.save_view("p", "a view", {"tag": ["ddp"], "q": "x"}, ["val/acc"])
    store.save_view("other", "crashed runs", {"state": ["failed"]}, [])
    store.save_view("p", "crashed runs", {"state": ["crashed", "killed"]}, ["loss"])
    views = store.list_views("p")
    assert [(v.name, v.filters, v.columns) for v in views] == [
        ("a view", {"tag": ["ddp"], "q": "x"}, ["val/acc"]),
        ("crashed runs", {"state": ["crashed", "killed"]}, ["loss"]),
    ]
    assert store.list_views("other")[0].filters == {"state": ["failed"]}
    assert store.delete_view("p", "a view") is True
    assert store.delete_view("p", "a view") is False
    assert [v.name for v in store.list_views("p")] == ["crashed runs"]
    with pytest.raises(ValueError, match="needs a name"):
        store.save_view("p", "  ", {}, [])


def test_endpoints(app: Any) -> None:
    assert call(app, "GET", URL).json() == {"views": []}
    body = {"name": "<b>workers only</b>", "filters": {"q": "worker", "state": ["running"]},
            "columns": ["val/loss"]}  # fmt: skip
    r = call(app, "POST", URL, json=body)
    assert r.status_code == 200, r.text
    saved = r.json()
    assert {k: saved[k] for k in ("name", "filters", "columns")} == body
    assert saved["updated"] > 0
    # Saving under the same name replaces the view.
    call(app, "POST", URL, json={**body, "filters": {"q": "w"}})
    views = call(app, "GET", URL).json()["views"]
    assert [(v["name"], v["filters"]) for v in views] == [("<b>workers only</b>", {"q": "w"})]
    # Another project does not see it.
    assert call(app, "GET", "/api/v1/projects/q/views").json() == {"views": []}

    r = call(app, "DELETE", URL, params={"name": "<b>workers only</b>"})
    assert r.status_code == 204
    r = call(app, "DELETE", URL, params={"name": "<b>workers only</b>"})
    assert r.status_code == 404
    assert r.json()["error"]["message"] == "no saved view of that name in project 'p'"


@pytest.mark.parametrize(
    "body, says",
    [
        ({"name": "   "}, "needs a name"),
        ({"name": "x" * 101}, "name"),
        ({"name": "v", "filters": ["state"]}, "filters"),
        ({"name": "v", "columns": "loss"}, "columns"),
        ({"name": "v", "filters": {"q": "x" * 70_000}}, "at most"),
    ],
)
def test_bad_views_are_422_with_the_fix(app: Any, body: dict[str, Any], says: str) -> None:
    r = call(app, "POST", URL, json=body)
    assert r.status_code == 422, r.text
    assert says in r.json()["error"]["message"]
    assert call(app, "GET", URL).json() == {"views": []}
