"""Reports: the store (versions, conflicts, checks) over SQLite and PostgreSQL, the HTTP
endpoints and who may use them, and ``rankwise.Api``'s reads from a server and from a
data directory's index."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import rankwise
from rankwise.errors import ReportNotFoundError, UsageError
from rankwise.server import ServerSettings, create_app
from rankwise.server.serve import index_url
from rankwise.store import migrations as M
from rankwise.store import open_store
from rankwise.store.base import Store
from rankwise.store.reports import ReportConflictError
from tests.helpers.servers import bearer, call, serve_in_thread

URL = "/api/v1/projects/p/reports"
TEXT = {"id": "t1", "type": "text", "text": "# Results\n\nThe **loss** fell."}
CHART = {
    "id": "c1",
    "type": "chart",
    "runs": [{"project": "p", "run": "a"}, {"project": "p", "run": "b"}],
    "metrics": ["loss"],
    "mode": "band",
    "x": "step",
    "caption": "two runs",
}
MEDIA = {"id": "m1", "type": "media", "run": {"project": "p", "run": "a"}, "key": "examples"}
TABLE = {"id": "tb", "type": "table", "run": {"project": "p", "run": "a"}, "key": "preds"}
BLOCKS: list[dict[str, Any]] = [TEXT, CHART, MEDIA, TABLE]


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s: Store
    if request.param == "sqlite":
        s = open_store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    else:
        from rankwise.store.postgres import PostgresStore

        s = PostgresStore(request.getfixturevalue("pg_dsn"))
    s.migrate()
    yield s
    s.close()


@pytest.fixture
def app(store: Store, tmp_path: Path) -> Any:
    return create_app(store, ServerSettings(static_dir=tmp_path / "no-static"))


def test_reports_table_is_a_numbered_migration(store: Store) -> None:
    assert store.schema_version() == M.LATEST >= 13
    assert M.MIGRATIONS[12].version == 13 and "reports" in M.MIGRATIONS[12].name


def test_each_save_is_a_version_and_older_ones_stay_readable(store: Store) -> None:
    assert store.list_reports("p") == [] and store.get_report("p", "r") is None
    first = store.save_report("p", "r", "Week 1", [TEXT])
    assert (first.version, first.latest, first.title, first.blocks) == (1, 1, "Week 1", [TEXT])
    second = store.save_report("p", "r", "Week 1, again", BLOCKS, base=1, author="ana")
    assert (second.version, second.latest) == (2, 2)
    store.save_report("other", "r", "elsewhere", [])
    latest = store.get_report("p", "r")
    assert latest is not None
    assert (latest.version, latest.title, latest.blocks, latest.author) == (
        2,
        "Week 1, again",
        BLOCKS,
        "ana",
    )
    old = store.get_report("p", "r", 1)
    assert old is not None and (old.version, old.latest, old.blocks) == (1, 2, [TEXT])
    assert store.get_report("p", "r", 3) is None
    listed = store.list_reports("p")
    assert [(s.name, s.title, s.version, s.blocks) for s in listed] == [
        ("r", "Week 1, again", 2, 4)
    ]
    versions = store.report_versions("p", "r")
    assert versions is not None
    assert [(v.version, v.title, v.blocks) for v in versions] == [
        (2, "Week 1, again", 4),
        (1, "Week 1", 1),
    ]
    assert store.report_versions("p", "nope") is None
    assert store.delete_report("p", "r") is True
    assert store.delete_report("p", "r") is False
    assert store.get_report("p", "r") is None
    assert [s.name for s in store.list_reports("other")] == ["r"]


def test_a_save_from_an_old_version_is_refused(store: Store) -> None:
    store.save_report("p", "r", "t", [TEXT])
    store.save_report("p", "r", "t", [TEXT, CHART], base=1)
    with pytest.raises(ReportConflictError, match="version 2"):
        store.save_report("p", "r", "mine", [], base=1)
    report = store.get_report("p", "r")
    assert report is not None and report.version == 2 and report.blocks == [TEXT, CHART]


def test_racing_saves_each_get_their_own_version(store: Store) -> None:
    errors: list[BaseException] = []

    def save(i: int) -> None:
        for j in range(5):
            try:
                store.save_report("p", "race", f"{i}-{j}", [])
            except BaseException as exc:
                errors.append(exc)

    threads = [threading.Thread(target=save, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    versions = store.report_versions("p", "race") or []
    # each save is its own version: none lost, none stored twice
    assert errors == []
    assert len(versions) == 15
    assert sorted(v.version for v in versions) == list(range(1, len(versions) + 1))


@pytest.mark.parametrize(
    ("blocks", "message"),
    [
        ({"type": "text"}, "JSON list"),
        ([{"type": "video"}], "'type' must be one of"),
        ([{"type": "text", "text": 3}], "Markdown string"),
        ([{"type": "chart", "runs": [], "metrics": ["loss"]}], "1 to 20 runs"),
        ([{"type": "chart", "runs": ["p/a"], "metrics": ["loss"]}], "a run is"),
        ([{**CHART, "metrics": []}], "metric keys"),
        ([{**CHART, "mode": "all"}], "'mode'"),
        ([{**CHART, "smoothing": 1.5}], "smoothing"),
        ([{**MEDIA, "key": ""}], "'key' must be"),
        ([{**MEDIA, "step": "3"}], "'step' is an integer"),
        ([{"type": "lineage"}], "'artifact' must be"),
        ([{**TEXT, "caption": "x" * 1001}], "at most 1000"),
    ],
)
def test_malformed_blocks_are_refused_naming_the_fix(
    store: Store, blocks: Any, message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        store.save_report("p", "r", "t", blocks)
    assert store.get_report("p", "r") is None


def test_endpoints_save_read_versions_and_delete(app: Any) -> None:
    assert call(app, "GET", URL).json() == {"reports": []}
    r = call(app, "POST", URL + "/weekly", json={"title": "<b>Weekly</b>", "blocks": BLOCKS})
    assert r.status_code == 200, r.text
    saved = r.json()
    assert (saved["name"], saved["title"], saved["version"], saved["blocks"]) == (
        "weekly",
        "<b>Weekly</b>",
        1,
        BLOCKS,
    )
    assert saved["author"] == "tests"  # the admin token's name
    r = call(app, "POST", URL + "/weekly", json={"title": "v2", "blocks": [TEXT], "base": 1})
    assert r.json()["version"] == 2
    r = call(app, "POST", URL + "/weekly", json={"title": "late", "blocks": [], "base": 1})
    assert r.status_code == 409 and "reload it" in r.json()["error"]["message"]
    assert call(app, "GET", URL + "/weekly").json()["title"] == "v2"
    old = call(app, "GET", URL + "/weekly", params={"version": 1}).json()
    assert (old["version"], old["latest"], old["blocks"]) == (1, 2, BLOCKS)
    versions = call(app, "GET", URL + "/weekly/versions").json()["versions"]
    assert [v["version"] for v in versions] == [2, 1]
    listed = call(app, "GET", URL).json()["reports"]
    assert [(s["name"], s["version"], s["blocks"]) for s in listed] == [("weekly", 2, 1)]
    bad = call(app, "POST", URL + "/weekly", json={"title": "t", "blocks": [{"type": "x"}]})
    assert bad.status_code == 422 and "expected tags: 'text'" in bad.json()["error"]["message"]
    assert call(app, "GET", URL + "/nope").status_code == 404
    assert call(app, "GET", URL + "/weekly", params={"version": 9}).status_code == 404
    assert call(app, "GET", URL + "/nope/versions").status_code == 404
    assert call(app, "DELETE", URL + "/weekly").status_code == 204
    assert call(app, "DELETE", URL + "/weekly").status_code == 404
    assert call(app, "GET", URL).json() == {"reports": []}


def test_readers_open_reports_and_only_the_projects_writers_edit_them(app: Any) -> None:
    store = app.state.store
    call(app, "POST", URL + "/weekly", json={"title": "t", "blocks": [TEXT]})
    reader = bearer(store.create_token("read", ["p"], "reader").value)
    other = bearer(store.create_token("read", ["q"], "elsewhere").value)
    ingest = bearer(store.create_token("ingest", ["p"], "job").value)
    assert call(app, "GET", URL + "/weekly", headers=reader).json()["title"] == "t"
    assert call(app, "GET", URL, headers=reader).status_code == 200
    for who in (reader, other, ingest):
        r = call(app, "POST", URL + "/weekly", headers=who, json={"title": "x", "blocks": []})
        assert r.status_code == 403, r.text
        assert call(app, "DELETE", URL + "/weekly", headers=who).status_code == 403
    assert (
        "only a writer of project 'p'"
        in call(
            app, "POST", URL + "/weekly", headers=reader, json={"title": "x", "blocks": []}
        ).json()["error"]["message"]
    )
    assert call(app, "GET", URL + "/weekly", headers=other).status_code == 403
    assert call(app, "GET", URL + "/weekly", headers=ingest).status_code == 403
    assert call(app, "GET", URL + "/weekly", as_admin=False).status_code == 401
    report = store.get_report("p", "weekly")
    assert report.version == 1 and report.title == "t"  # nothing a refusal wrote


def test_a_name_is_checked_never_stripped(app: Any) -> None:
    r = call(app, "POST", URL + "/%20weekly", json={"title": "t", "blocks": []})
    assert r.status_code in (400, 422), r.text  # refused, never saved as "weekly"
    r = call(app, "POST", URL + "/" + "n" * 101, json={"title": "t", "blocks": []})
    assert r.status_code == 422 and "at most 100 characters" in r.json()["error"]["message"]
    assert app.state.store.list_reports("p") == []


def test_api_reads_reports_from_a_server(store: Store, tmp_path: Path) -> None:
    store.save_report("p", "weekly", "Weekly", BLOCKS)
    store.save_report("p", "weekly", "Weekly 2", [TEXT])
    app = create_app(store, ServerSettings(static_dir=tmp_path / "no-static"))
    with serve_in_thread(app) as url:
        api = rankwise.Api(dir=tmp_path / "empty", server=url)
        assert [(s.name, s.version) for s in api.reports("p")] == [("weekly", 2)]
        assert api.report("p/weekly").blocks == [TEXT]
        assert api.report("weekly", project="p", version=1).blocks == BLOCKS
        with pytest.raises(ReportNotFoundError, match="no report 'nope'"):
            api.report("p/nope")
        with pytest.raises(ReportNotFoundError, match="no version 5"):
            api.report("p/weekly", version=5)


def test_api_reads_reports_from_a_data_directory(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    api = rankwise.Api(dir=root)
    assert api.reports("p") == []  # no dashboard has served the directory yet
    with pytest.raises(ReportNotFoundError):
        api.report("p/weekly")
    store = open_store(index_url(root))  # what `rankwise ui` keeps in the data directory
    store.migrate()
    store.save_report("p", "weekly", "Weekly", BLOCKS)
    store.close()
    assert [(s.name, s.title, s.blocks) for s in api.reports("p")] == [("weekly", "Weekly", 4)]
    report = api.report("p/weekly")
    assert (report.project, report.name, report.version, report.blocks) == (
        "p",
        "weekly",
        1,
        BLOCKS,
    )


def test_rankwise_ui_keeps_reports_in_the_data_directory(tmp_path: Path) -> None:
    """The local dashboard saves a report (no login) and it is in the data directory:
    ``Api(dir=...)`` reads it with the server stopped, and a restarted ``rankwise ui``
    still serves it."""
    import httpx

    from tests.helpers.servers import ServerProcess

    root = tmp_path / "runs"
    body = {"title": "Local", "blocks": [TEXT, CHART], "base": 0}
    headers = {"X-Rankwise-CSRF": "1"}  # as the dashboard sends it
    with ServerProcess.ui(root, tmp_path / "ui.log") as ui:
        r = httpx.post(ui.url + URL + "/local", json=body, headers=headers)
        assert r.status_code == 200, r.text
        again = httpx.post(ui.url + URL + "/local", json=body, headers=headers)
        assert again.status_code == 409  # base 0: someone made it since
    report = rankwise.Api(dir=root).report("p/local")
    assert (report.title, report.version, report.blocks) == ("Local", 1, [TEXT, CHART])
    with ServerProcess.ui(root, tmp_path / "ui2.log") as ui:
        assert ui.get(URL + "/local").json()["blocks"] == [TEXT, CHART]
