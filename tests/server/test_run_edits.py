"""Run edits (``rankwise.edits``): name, tags, notes, group and job type after the fact.

The same story over a data directory (``Api(dir=)``, ``rankwise edit --dir``), SQLite
and PostgreSQL stores: edits are kept (history), the latest by time wins, the live run's
``RunEdit`` records merge with the API's by time, the stream files are never written,
editing needs a writer token, bulk tags change a selection.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import msgspec
import pytest

import rankwise
from rankwise import edits as E
from rankwise.cli import main as cli_main
from rankwise.errors import UsageError
from rankwise.server.app import create_app
from rankwise.server.config import ServerSettings
from rankwise.server.edit_files import EditFiles
from rankwise.server.indexer import DirectoryTailer
from rankwise.store.base import RunQuery
from rankwise.stream import records as R
from rankwise.stream.frames import MAGIC, encode_frame, scan
from rankwise.stream.identity import StreamId
from tests.helpers.servers import bearer, call, serve_in_thread
from tests.helpers.stores import open_sql_store
from tests.helpers.streams import records

FAST = {"flush_interval": 0.02, "heartbeat_interval": 0.2, "finish_timeout": 10.0}


def _write(root: Path, name: str, **kw: Any) -> str:
    run = rankwise.init(project="p", name=name, dir=root, settings=FAST, system=False, **kw)
    run.log({"loss": 1.0}, step=0)
    rid = run.id
    run.finish()
    return rid


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("streams/*"))
        if p.is_file()
    }


def test_local_edits_beside_the_streams_never_in_them(tmp_path: Path) -> None:
    root = tmp_path / "data"
    rid = _write(root, "orig", tags=["a"], group="g0")
    before = _digest(root)
    api = rankwise.Api(dir=root)
    run = api.edit_run(rid, "p", name="renamed", add_tags=["best", "a"], notes="# hi")
    assert (run.name, run.tags, run.notes, run.group) == ("renamed", ["a", "best"], "# hi", "g0")
    run = api.edit_run(f"p/{rid}", remove_tags=["a"], clear=["group"], job_type="eval")
    assert (run.tags, run.group, run.job_type) == (["best"], None, "eval")
    assert _digest(root) == before  # the streams are untouched
    assert (root / "p" / rid / "edits.jsonl").is_file()
    # RunInfo.update(): W&B's public-API spelling
    run = api.run(rid, "p")
    run.name, run.tags, run.notes = "via-update", [*run.tags, "u"], None
    kept = run.update()
    assert (kept.name, kept.tags, kept.notes) == ("via-update", ["best", "u"], None)
    assert rankwise.Api(dir=root).run(rid, "p").name == "via-update"
    fields = [e.field for e in api.run_edits(rid, "p")]
    assert fields.count("name") == 2 and "job_type" in fields and "notes" in fields
    assert all(e.source == "api" for e in api.run_edits(rid, "p"))
    # filters see the edited values
    assert [r.id for r in api.runs("p", filters={"tags": "u"})] == [rid]
    assert api.runs("p", filters={"display_name": "orig"}) == []


def test_cli_edit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "data"
    rid = _write(root, "cli-run", tags=["old"])
    argv = ["edit", f"p/{rid}", "--dir", str(root), "--tag", "x", "--tag", "y", "--untag", "old"]
    assert cli_main([*argv, "--name", "cli-named", "--notes", "n1", "--group", "g"]) == 0
    out = capsys.readouterr().out
    assert "cli-named" in out and "x, y" in out
    run = rankwise.Api(dir=root).run(rid, "p")
    assert (run.name, run.tags, run.notes, run.group) == ("cli-named", ["x", "y"], "n1", "g")
    assert cli_main(["edit", rid, "--dir", str(root), "--project", "p", "--group", ""]) == 0
    assert rankwise.Api(dir=root).run(rid, "p").group is None
    assert {e.source for e in rankwise.Api(dir=root).run_edits(rid, "p")} == {"cli"}
    # bad input: a clear message, exit 2, nothing kept
    assert cli_main(["edit", rid, "--dir", str(root), "--project", "p"]) == 2
    assert "nothing to change" in capsys.readouterr().err
    assert cli_main(["edit", rid, "--dir", str(root), "--project", "p", "--name", "a\nb"]) == 2
    assert cli_main(["edit", "nope", "--dir", str(root), "--project", "p", "--tag", "t"]) == 2


def test_edit_values_are_checked() -> None:
    for field, value, says in [
        ("tags", "solo", "list"),
        ("tags", ["ok", ""], "non-empty"),
        ("tags", ["x" * 200], "at most"),
        ("name", None, "cannot be cleared"),
        ("name", "  ", "empty"),
        ("group", "a\nb", "one line"),
        ("notes", 3, "string"),
        ("state", "x", "editable fields"),
    ]:
        with pytest.raises(UsageError, match=says):
            E.check_value(field, value)
    assert E.check_value("tags", ["a", "b", "a"]) == ["a", "b"]


def _ingest_run(store: Any, run: str, extra: list[R.AnyRecord] | None = None) -> None:
    recs = records(steps=3, project="p", run=run, label="rank-0")
    if extra:
        last = recs.pop()  # the Finish goes last
        for r in extra:
            recs.append(msgspec.structs.replace(r, seq=len(recs)))
        recs.append(msgspec.structs.replace(last, seq=len(recs)))
    store.ingest([(StreamId("p", run, "rank-0", 0), recs)])


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_store_edits_merge_by_time_with_the_live_run(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = open_sql_store(kind, tmp_path, request)
    store.migrate()
    # The live run renamed itself at t=1001.5 and tagged itself at t=1001.7.
    live = [R.RunEdit(0, 1001.5, "name", "live-name"), R.RunEdit(0, 1001.7, "tags", ["live"])]
    _ingest_run(store, "r", live)
    _ingest_run(store, "other")
    run = store.get_run("p", "r")
    assert run is not None and (run.name, run.tags) == ("live-name", ["live"])
    # An API edit made "before" the live one loses; one after wins.
    store.edit_run("p", "r", [E.Edit(field="name", value="older", at=1001.0, source="api")])
    assert store.get_run("p", "r").name == "live-name"
    store.edit_run("p", "r", [E.Edit(field="tags", value=["api"], at=2000.0, source="ui")])
    run = store.get_run("p", "r")
    assert run is not None and (run.name, run.tags) == ("live-name", ["api"])
    hist = store.run_edits("p", "r")
    assert hist is not None
    assert [(e.field, e.source) for e in hist] == [
        ("name", "api"),
        ("name", "run"),
        ("tags", "run"),
        ("tags", "ui"),
    ]
    # the same edit twice is kept once (a replayed file, a retried request)
    store.edit_run("p", "r", [E.Edit(field="tags", value=["api"], at=2000.0, source="ui")])
    assert len(store.run_edits("p", "r") or []) == 4
    # the runs list and the filters see the edits
    rows, _ = store.list_runs(RunQuery(project="p", tags=["api"]))
    assert [r.id for r in rows] == ["r"]
    rows, total = store.find_runs("p", {"tags": "api", "display_name": "live-name"})
    assert total == 1 and rows[0].id == "r"
    assert store.edit_run("p", "nope", [E.Edit(field="name", value="x", at=1.0)]) is False
    assert store.run_edits("p", "nope") is None
    store.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_edit_routes_need_a_writer(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = open_sql_store(kind, tmp_path, request)
    store.migrate()
    for rid in ("r1", "r2", "r3"):
        _ingest_run(store, rid)
    app = create_app(store, ServerSettings(static_dir=tmp_path / "none"))
    reader = bearer(store.create_token("read", ["p"], "reader").value)
    writer = bearer(store.create_token("ingest", ["p"], "trainer").value)
    elsewhere = bearer(store.create_token("ingest", ["q"], "other").value)
    url = "/api/v1/projects/p/runs/r1/edits"
    body = {"name": "n1", "tags": ["t"], "notes": "<script>alert(1)</script>"}
    assert call(app, "POST", url, headers=reader, json=body).status_code == 403
    assert call(app, "POST", url, headers=elsewhere, json=body).status_code == 403
    r = call(app, "POST", url, headers=writer, json=body)
    assert r.status_code == 200, r.text
    got = r.json()
    assert (got["name"], got["tags"], got["notes"]) == ("n1", ["t"], body["notes"])
    hist = call(app, "GET", url, headers=reader).json()["edits"]
    assert {(e["field"], e["who"], e["source"]) for e in hist} == {
        ("name", "trainer", "api"),
        ("tags", "trainer", "api"),
        ("notes", "trainer", "api"),
    }
    r = call(app, "POST", url, headers=writer, json={"name": "a\nb"})
    assert r.status_code == 422 and "one line" in r.json()["error"]["message"]
    r = call(app, "POST", url, headers=writer, json={})
    assert r.status_code == 422 and "nothing to change" in r.json()["error"]["message"]
    assert (
        call(app, "POST", url.replace("r1", "nope"), headers=writer, json=body).status_code == 404
    )
    # bulk tags on a selection
    bulk = "/api/v1/projects/p/runs/tags"
    sel = {"runs": ["r1", "r2", "r3"], "add": ["sweep"], "remove": ["t"]}
    assert call(app, "POST", bulk, headers=reader, json=sel).status_code == 403
    r = call(app, "POST", bulk, headers=writer, json=sel)
    assert r.status_code == 200 and r.json()["edited"] == ["r1", "r2", "r3"]
    r = call(app, "POST", bulk, headers=writer, json=sel)
    assert r.json()["edited"] == []  # nothing to change the second time
    r = call(app, "POST", bulk, headers=writer, json={"runs": ["r1", "zz"], "add": ["x"]})
    assert r.status_code == 404
    assert "x" not in store.get_run("p", "r1").tags  # all or none
    runs = call(app, "GET", "/api/v1/projects/p/runs", headers=reader, params={"tag": "sweep"})
    assert runs.json()["total"] == 3
    # Api(server=) edits with a writer token, and says what to do with a read token
    with serve_in_thread(app, token_env=False) as srv:
        api = rankwise.Api(server=srv, token=writer["Authorization"].split()[1])
        run = api.edit_run("r2", "p", add_tags=["remote"], group="gr")
        assert "remote" in run.tags and run.group == "gr"
        run.name = "updated-remotely"
        assert run.update().name == "updated-remotely"
        ro = rankwise.Api(server=srv, token=reader["Authorization"].split()[1])
        assert [e.field for e in ro.run_edits("r2", "p")][-1] == "name"
        assert ro.run("r2", "p").name == "updated-remotely"
        with pytest.raises(rankwise.errors.ServerError, match="writer"):
            ro.edit_run("r2", "p", name="no")
    store.close()


def test_rankwise_ui_edits_go_beside_the_run(tmp_path: Path) -> None:
    """Under ``rankwise ui`` (tails_dir): an edit is kept in the index and in the run's
    edits.jsonl; one written by ``rankwise edit --dir`` reaches the index."""
    from rankwise.store.sqlite import SQLiteStore

    root = tmp_path / "data"
    rid = _write(root, "ui-run")
    before = _digest(root)
    store = SQLiteStore(tmp_path / "index.db")
    store.migrate()
    DirectoryTailer(root, store, discover_interval=0).poll()
    settings = ServerSettings(static_dir=tmp_path / "none", auth=False, tails_dir=root)
    app = create_app(store, settings)
    r = call(app, "POST", f"/api/v1/projects/p/runs/{rid}/edits", json={"add_tags": ["ui"]})
    assert r.status_code == 200 and r.json()["tags"] == ["ui"]
    assert rankwise.Api(dir=root).run(rid, "p").tags == ["ui"]  # the file has it
    assert cli_main(["edit", f"p/{rid}", "--dir", str(root), "--name", "from-cli"]) == 0
    follower = EditFiles(root, store)
    assert follower.poll() == 1
    assert store.get_run("p", rid).name == "from-cli"
    assert follower.poll() == 0  # unchanged files are not read again
    assert _digest(root) == before
    # an index made from scratch gets the edits back from the files
    fresh = SQLiteStore(tmp_path / "fresh.db")
    fresh.migrate()
    DirectoryTailer(root, fresh, discover_interval=0).poll()
    EditFiles(root, fresh).poll()
    got = fresh.get_run("p", rid)
    assert got is not None and (got.name, got.tags) == ("from-cli", ["ui"])
    store.close()
    fresh.close()


def test_live_run_edits_in_process(tmp_path: Path) -> None:
    root = tmp_path / "data"
    run = rankwise.init(project="p", name="n0", tags=["a"], dir=root, settings=FAST, system=False)
    run.name = "n1"
    run.tags = ("a", "b")
    run.notes = "live notes"
    run.tags = "not a list"  # warned about and skipped, never raised
    assert (run.name, run.tags, run.notes) == ("n1", ("a", "b"), "live notes")
    rid = run.id
    run.finish()
    got = rankwise.Api(dir=root).run(rid, "p")
    assert (got.name, got.tags, got.notes) == ("n1", ["a", "b"], "live notes")
    assert {e.source for e in rankwise.Api(dir=root).run_edits(rid, "p")} == {"run"}


def test_a_record_of_an_unknown_tag_is_skipped() -> None:
    """A later schema's record decodes as nothing; the frame's other records stay; a
    known record that does not decode is still damage."""
    known: list[R.AnyRecord] = [R.Heartbeat(1, 1.0), R.RunEdit(2, 2.0, "name", "x")]
    version, recs = msgspec.msgpack.decode(R.encode_payload(known))
    recs.insert(1, [77, 5, 3.0, "a field of the future"])
    assert R.decode_payload(msgspec.msgpack.encode([version + 1, recs])) == known
    recs[0] = [5, "not a seq", 1.0]
    with pytest.raises(msgspec.DecodeError):
        R.decode_payload(msgspec.msgpack.encode([version, recs]))
    assert scan(MAGIC + encode_frame(known)).records == known


@pytest.mark.torchrun
def test_two_rank_torchrun_edits_its_run_live(tmp_path: Path) -> None:
    """A real 2-rank torchrun job sets run.name/tags (rank 0) and run.notes (rank 1)
    while it runs; the local reader and an index of the files agree; a later API edit
    wins over the live ones, and the history has both sources."""
    import subprocess
    import sys

    from rankwise.store.sqlite import SQLiteStore
    from tests.helpers.runs import FAST_ENV
    from tests.helpers.servers import subprocess_env

    root = tmp_path / "data"
    script = Path(__file__).parents[1] / "scripts" / "edit_live.py"
    env = subprocess_env(**FAST_ENV, RANKWISE_DIR=str(root), RANKWISE_RUN_ID="live-run",
                         OMP_NUM_THREADS="1")  # fmt: skip
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           "--nproc-per-node=2", str(script)]  # fmt: skip
    out = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    api = rankwise.Api(dir=root)
    run = api.run("live-run", "live")
    assert run.name == "renamed-live"
    assert run.tags == ["start", "live", "late"]
    assert run.notes == "set by **rank 1**"
    assert run.run_ranks == 2
    store = SQLiteStore(tmp_path / "index.db")
    store.migrate()
    DirectoryTailer(root, store, discover_interval=0).poll()
    indexed = store.get_run("live", "live-run")
    assert indexed is not None
    assert (indexed.name, indexed.tags, indexed.notes) == (run.name, run.tags, run.notes)
    assert [r.id for r in api.runs("live", filters={"tags": "late"})] == ["live-run"]
    assert store.find_runs("live", {"tags": "late"})[1] == 1
    api.edit_run("live-run", "live", name="after-the-fact")
    assert api.run("live-run", "live").name == "after-the-fact"
    hist = api.run_edits("live-run", "live")
    assert [e.source for e in hist].count("run") == 4 and hist[-1].source == "api"
    store.close()
