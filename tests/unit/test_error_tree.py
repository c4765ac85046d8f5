"""Argument and lookup errors come from rankwise's tree (``rankwise.errors``) and remain
the builtins callers caught before: a bad value is a ``UsageError`` (a ValueError), a
wrong type an ``ArgumentTypeError`` (a TypeError), a missing key a KeyError. The store
is one protocol made of parts, and both stores are each part."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rankwise
from rankwise.integrations import _common
from rankwise.store import base, open_store
from tests.helpers.env import need


def test_the_new_classes_keep_the_builtins_callers_catch() -> None:
    assert issubclass(rankwise.ArgumentTypeError, rankwise.UsageError)
    assert issubclass(rankwise.ArgumentTypeError, TypeError)
    assert issubclass(rankwise.ArgumentTypeError, ValueError)  # through UsageError
    assert issubclass(rankwise.KeyNotLoggedError, rankwise.RankwiseError)
    assert issubclass(rankwise.KeyNotLoggedError, KeyError)
    assert str(rankwise.KeyNotLoggedError("no table 'x'")) == "no table 'x'"  # not repr'd


@pytest.mark.torch
def test_watch_argument_errors_are_usage_errors(tmp_path: Path) -> None:
    torch = need("torch")
    run = rankwise.init(project="errors", dir=tmp_path, system=False, console="off")
    try:
        with pytest.raises(rankwise.ArgumentTypeError, match=r"torch\.nn\.Module"):
            run.watch("model")
        with pytest.raises(rankwise.UsageError, match="'gradients', 'parameters', 'all'"):
            run.watch(torch.nn.Linear(2, 2), log="weights")
        with pytest.raises(rankwise.UsageError, match="log_freq"):
            run.watch(torch.nn.Linear(2, 2), log_freq=0)
        with pytest.raises(rankwise.UsageError, match="'primary' or 'all'"):
            run.watch(torch.nn.Linear(2, 2), ranks="some")
    finally:
        run.finish()


def test_integration_argument_errors_are_usage_errors() -> None:
    with pytest.raises(rankwise.ArgumentTypeError, match=r"'entity'.*rankwise\.init\(\)"):
        _common.check_init_kwargs({"entity": "me"}, "RankwiseLogger")
    pixels = np.zeros((2, 3, 3), dtype=np.uint8)
    with pytest.raises(rankwise.UsageError, match="expected 2 items but found 1"):
        _common.images([pixels, pixels], {"caption": ["a"]}, "log_image")
    with pytest.raises(rankwise.ArgumentTypeError, match="expected a list"):
        _common.images(pixels, {}, "log_image")


def test_lookups_of_what_was_not_logged_name_where_to_look(tmp_path: Path) -> None:
    run = rankwise.init(project="errors", dir=tmp_path, system=False, console="off")
    run.log({"t": rankwise.Table(data=[[1]], columns=["n"])}, step=0)
    run.log({"h": rankwise.Histogram(np.arange(10.0))}, step=0)
    run.finish()
    info = rankwise.Api(dir=tmp_path).run(run.id)
    with pytest.raises(rankwise.KeyNotLoggedError, match=r"no table 't' at step 7.*media_keys"):
        info.table("t", step=7)
    with pytest.raises(rankwise.KeyNotLoggedError, match=r"logged no histogram 'h': pass one"):
        info.histograms("h", label="rank-9")

    art = rankwise.Artifact("data", "dataset")
    (tmp_path / "a.txt").write_text("a")
    art.add_file(tmp_path / "a.txt")
    with pytest.raises(rankwise.ArtifactNotFoundError, match=r"no file 'b\.txt'.*files\(\)"):
        art.get_entry("b.txt")
    with pytest.raises(KeyError):  # still what callers caught before
        art.get_entry("b.txt")


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_each_store_is_every_part_of_the_protocol(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    parts = [
        base.RunStore,
        base.ChartStore,
        base.ViewStore,
        base.HealthStore,
        base.MediaStore,
        base.ArtifactStore,
        base.TokenStore,
        base.AlertStore,
    ]
    assert set(base.Store.__mro__) >= set(parts)
    names: set[str] = set()
    for part in [*parts, base.Store]:
        names |= {n for n in vars(part) if not n.startswith("_") or n in ("__enter__",)}
        names |= set(getattr(part, "__annotations__", {}))
    assert {"ingest", "series", "console", "media", "commit_artifact", "create_token"} <= names
    url = tmp_path / "db.sqlite" if kind == "sqlite" else request.getfixturevalue("pg_dsn")
    store: Any = open_store(url)
    try:
        store.migrate()
        missing = sorted(n for n in names if not hasattr(store, n))
        assert missing == []
    finally:
        store.close()
