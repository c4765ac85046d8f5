"""Deleting runs of a data directory through ``Api`` and W&B's ``Api().run(path).delete()``
(``rankwise.deletion``): the folder moves to ``<dir>/.trash``, the readers stop seeing
it, a restore brings it back, a purge removes it, and the audit log says who did what."""

from __future__ import annotations

from pathlib import Path

import pytest

import rankwise
from rankwise.errors import RunNotFoundError, UsageError

FAST = {"flush_interval": 0.02}


def _runs(tags: list[str]) -> list[str]:
    ids = []
    for tag in tags:
        run = rankwise.init(project="p", tags=[tag], settings=FAST, system=False)
        run.log({"loss": 1.0})
        ids.append(run.id)
        run.finish()
    return ids


def test_api_and_wandb_delete_in_a_data_directory(data_dir: Path) -> None:
    import rankwise.wandb as wandb

    a, b, c = _runs(["x", "x", "y"])
    api = rankwise.Api(dir=data_dir)
    wandb.Api().run(f"p/{a}").delete()  # W&B's
    assert sorted(r.id for r in api.runs("p")) == sorted([b, c])
    assert (data_dir / ".trash" / "p" / a / "streams").is_dir()
    with pytest.raises(RunNotFoundError):
        api.run(a, "p")
    assert [t.id for t in api.trash("p")] == [a]
    assert api.delete_runs(project="p", filters={"tags": "x"}, dry_run=True) == [b]
    assert api.delete_runs(project="p", filters={"tags": "x"}) == [b]
    assert sorted(t.id for t in api.trash("p")) == sorted([a, b])
    assert api.restore_runs([a], project="p") == [a]
    assert sorted(r.id for r in api.runs("p")) == sorted([a, c])
    api.run(a, "p").delete(purge=True)
    assert not (data_dir / "p" / a).exists() and not (data_dir / ".trash" / "p" / a).exists()
    with pytest.raises(UsageError):
        api.delete_runs()  # neither ids nor a filter
    with pytest.raises(RunNotFoundError):
        api.delete_runs(["nope"], project="p")
    log = [(e.action, e.count) for e in api.audit_log()]
    assert log == [("purge", 1), ("restore", 1), ("delete", 1), ("delete", 1)]
