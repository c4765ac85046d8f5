"""``rankwise.wandb`` in one process: W&B's semantics, read back through ``rankwise.Api``.

The §1.4 row table of the W&B reference (every call and the rows it must give), config,
summary, ``define_metric`` globs, ``Settings``, the ``WANDB_*`` variables and the module
globals' lifecycle, plus the deliberate differences (a lower step kept; ``log`` before
``init`` a no-op on a process that never called it).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rankwise
import rankwise.wandb as wandb
from rankwise.stream import records as R
from rankwise.stream.frames import scan
from rankwise.wandb import _state
from rankwise.wandb._history import History
from tests.helpers.env import clean_env, need
from tests.helpers.imports import HEAVY


@pytest.fixture
def wb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A clean environment for one test's runs; returns the data directory they use."""
    for name in list(os.environ):
        if name.startswith(("WANDB_", "RANKWISE_")) and not name.startswith("RANKWISE_TEST_"):
            monkeypatch.delenv(name)
    data = tmp_path / "data"
    monkeypatch.setenv("RANKWISE_DIR", str(data))
    monkeypatch.setenv("RANKWISE_FLUSH_INTERVAL", "0.02")
    monkeypatch.setenv("RANKWISE_SILENT", "1")
    monkeypatch.chdir(tmp_path)
    yield data
    for run in list(_state.opened):
        run.finish()
    _state.opened.clear()
    _state.current = _state.adopted = _state.setup_settings = None
    wandb._reset_globals()
    wandb._ever_initialized[0] = False
    rankwise.finish()


def rows(data: Path, run: Any, project: str | None = None) -> list[tuple[int, dict[str, Any]]]:
    info = rankwise.Api(dir=data).run(run.id, project or run.project)
    out = []
    for row in info.history():
        values = {k: v for k, v in row.items() if k not in ("step", "time", "label")}
        out.append((row["step"], values))
    return out


# -- §1.4: log(data, step=None, commit=None) ------------------------------------------------
def test_the_row_table_of_the_reference_holds(wb: Path) -> None:
    run = wandb.init(project="rows")
    wandb.log({"a": 1})
    wandb.log({"b": 2}, commit=False)
    wandb.log({"c": 3})
    wandb.log({"d": 4}, step=5)
    assert run.step == 5
    wandb.log({"e": 5}, step=5)
    wandb.log({"g": 7})
    wandb.log({"h": 8}, step=10, commit=True)
    wandb.log({"i": 9}, commit=False)
    wandb.log({"j": 10}, step=12)
    wandb.log({"k": 11})
    wandb.finish()
    assert rows(wb, run) == [
        (0, {"a": 1}),
        (1, {"b": 2, "c": 3}),
        (5, {"d": 4, "e": 5, "g": 7}),
        (10, {"h": 8}),
        (11, {"i": 9}),
        (12, {"j": 10, "k": 11}),
    ]


def test_a_lower_step_is_kept_as_its_own_row_with_one_warning(
    wb: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = wandb.init(project="rows")
    run.log({"d": 4}, step=5)
    run.log({"f": 6}, step=3)  # W&B drops it; rankwise keeps it at step 3
    run.log({"f2": 7}, step=2)
    run.log({"g": 7})
    run.finish()
    assert rows(wb, run) == [(2, {"f2": 7}), (3, {"f": 6}), (5, {"d": 4, "g": 7})]
    err = capsys.readouterr().err
    assert err.count("less than the current step") == 1


def test_a_stepped_row_waits_for_finish_and_nested_dicts_merge_with_dots(wb: Path) -> None:
    run = wandb.init(project="rows")
    run.log({"a": {"b": 1, "c": {"d": 2}}}, step=3)
    run.log({"a": {"c": {"e": 3}}, "_step": 99}, step=3)  # a user _step is dropped
    run.log({"a": {"b": 4}}, step=3)  # last write wins
    run.finish()
    assert rows(wb, run) == [(3, {"a.b": 4, "a.c.d": 2, "a.c.e": 3})]


def test_log_checks_its_arguments_like_wandb(wb: Path) -> None:
    run = wandb.init(project="rows")
    with pytest.raises(TypeError):
        run.log([("a", 1)])
    with pytest.raises(TypeError):
        run.log({1: 2})
    run.finish()
    with pytest.raises(wandb.UsageError, match="is finished"):
        run.log({"a": 1})
    with pytest.raises(wandb.Error, match=r"before wandb\.log"):
        wandb.log({"a": 1})


def test_tensors_and_arrays_convert_as_json_friendly(wb: Path) -> None:
    torch = need("torch")
    run = wandb.init(project="values")
    run.log(
        {
            "t": torch.tensor(2.5, requires_grad=True) * 2,
            "one": np.array([7.0]),
            "scalar": np.float32(1.5),
            "big": np.arange(40.0),
            "tbig": torch.arange(64.0),
        }
    )
    run.finish()
    info = rankwise.Api(dir=wb).run(run.id, "values")
    (_step, values), = rows(wb, run)  # fmt: skip
    assert values == {"t": 5.0, "one": 7.0, "scalar": 1.5}
    for key, n in (("big", 40), ("tbig", 64)):
        series = info.histograms(key)["rank-0"]
        assert series.counts.shape == (1, 32) and series.counts.sum() == n  # Histogram(32 bins)


def test_history_unit_rules_without_a_run() -> None:
    got: list[tuple[int, dict[str, Any]]] = []
    h = History(lambda step, row: got.append((step, row)))
    h.log({"x": 1}, commit=False)
    h.log({"y": 2}, commit=False)
    assert got == [] and h.step == 0
    h.log({}, commit=True)
    h.log({"z": 1}, step=4, commit=False)
    h.log({"w": 1}, step=4, commit=True)
    assert got == [(0, {"x": 1, "y": 2}), (4, {"z": 1, "w": 1})] and h.step == 5
    with pytest.raises(TypeError):
        h.log({"a": 1}, step=1.5)


# -- config ------------------------------------------------------------------------------
def test_config_follows_wandb(wb: Path, tmp_path: Path) -> None:
    ns = argparse.Namespace(lr=0.1, **{"--batch": 8})
    run = wandb.init(project="cfg", config=ns)
    config = wandb.config
    assert config.lr == 0.1 and config["batch"] == 8  # "--batch" stripped
    with pytest.raises(AttributeError):
        config.missing  # noqa: B018
    with pytest.raises(KeyError):
        config["missing"]
    config.update({"lr": 0.1})  # the same value: fine
    with pytest.raises(wandb.sdk.lib.config_util.ConfigError, match="allow_val_change"):
        config.update({"lr": 0.2})
    with pytest.raises(wandb.errors.ConfigError):
        config.lr = 0.3
    config.update({"lr": 0.2}, allow_val_change=True)
    config.setdefaults({"lr": 9, "new": 1})
    config["_hidden"] = 1
    config.layers = [1, 2]

    class Obj:
        def __init__(self) -> None:
            self.width = 3

    config.update(Obj())
    (tmp_path / "c.yaml").write_text("depth:\n  value: 4\nact: relu\n")
    config.update(str(tmp_path / "c.yaml"))
    assert config.lr == 0.2 and config.new == 1 and config.get("nope", 5) == 5
    assert "_hidden" in config and "_hidden" not in list(config.keys())
    assert dict(config.items()) == {
        "lr": 0.2, "batch": 8, "new": 1, "layers": [1, 2], "width": 3, "depth": 4, "act": "relu"
    }  # fmt: skip
    with pytest.raises(TypeError):
        config.update({"img": wandb.Image(np.zeros((4, 4)))})
    run.finish()
    stored = rankwise.Api(dir=wb).run(run.id, "cfg").config
    assert {k: stored[k] for k in ("lr", "batch", "new", "layers", "width", "depth", "act")} == {
        "lr": 0.2, "batch": 8, "new": 1, "layers": [1, 2], "width": 3, "depth": 4, "act": "relu"
    }  # fmt: skip


# -- summary -----------------------------------------------------------------------------
def test_summary_last_values_pinning_and_missing_keys(wb: Path) -> None:
    run = wandb.init(project="sum")
    run.log({"loss": 3.0, "acc": 0.1})
    run.log({"loss": 1.0})
    assert run.summary["loss"] == 1.0 and wandb.summary.acc == 0.1
    with pytest.raises(KeyError):
        run.summary.missing  # noqa: B018  W&B's quirk: KeyError, not AttributeError
    run.summary["best"] = 0.5
    run.summary["acc"] = 0.9  # pinned: later logs do not move it
    run.log({"acc": 0.2, "loss": 0.5})
    assert dict(run.summary) == {"loss": 0.5, "acc": 0.9, "best": 0.5}
    assert run.summary.get("nope", 1) == 1
    run.finish()
    summary = rankwise.Api(dir=wb).run(run.id, "sum").summary
    assert summary["acc"] == 0.9 and summary["best"] == 0.5 and summary["loss"] == 0.5


# -- define_metric ------------------------------------------------------------------------
def test_define_metric_globs_step_sync_and_summaries(wb: Path) -> None:
    run = wandb.init(project="dm")
    with pytest.raises(wandb.Error, match="trailing"):
        run.define_metric("train/*/loss")
    with pytest.raises(wandb.Error):
        run.define_metric("*loss")
    run.define_metric("trainer/global_step")
    run.define_metric("*", step_metric="trainer/global_step")  # step_sync defaults on
    run.define_metric("val/acc", summary="max,min,mean,last")
    run.define_metric("val/loss", summary="none")
    run.log({"trainer/global_step": 10, "train/loss": 2.0})
    run.log({"train/loss": 1.0, "_private": 1})  # gets global_step 10 inserted
    run.log({"val/acc": 0.5, "val/loss": 3.0, "trainer/global_step": 20})
    run.log({"val/acc": 0.7})  # defined exactly: the "*" glob does not match it
    run.log({"train/acc": 0.9})  # matched by "*": the last global_step (20) inserted
    assert run.summary["val/acc"] == {"max": 0.7, "min": 0.5, "mean": 0.6, "last": 0.7}
    assert "val/loss" not in run.summary
    run.finish()
    got = rows(wb, run)
    assert got[1] == (1, {"train/loss": 1.0, "_private": 1, "trainer/global_step": 10})
    assert got[3] == (3, {"val/acc": 0.7})
    assert got[4] == (4, {"train/acc": 0.9, "trainer/global_step": 20})
    info = rankwise.Api(dir=wb).run(run.id, "dm")
    assert info.summary["val/acc"] == {"max": 0.7, "min": 0.5, "mean": 0.6, "last": 0.7}
    assert info.config["_wandb"]["m"][1] == {
        "name": "*", "step_metric": "trainer/global_step", "step_sync": True
    }  # fmt: skip


def test_define_metric_reduce_reaches_the_run(wb: Path) -> None:
    """``reduce=`` (rankwise's, not W&B's) chooses the metric's cross-rank line: it is
    kept with the run, and a bad one raises as rankwise's own call does."""
    run = wandb.init(project="dm", id="reduce")
    run.define_metric("train/samples_per_s", reduce="sum")
    wandb.define_metric("val/*", reduce="max", summary="max")
    with pytest.raises(rankwise.UsageError, match="reduce"):
        run.define_metric("train/loss", reduce="median")
    run.log({"train/samples_per_s": 100.0, "val/acc": 0.5})
    run.finish()
    info = rankwise.Api(dir=wb).run("reduce", "dm")
    assert info.reduce_of("train/samples_per_s") == "sum"
    assert info.reduce_of("val/acc") == "max"
    assert info.reduce_of("train/loss") == "mean"
    assert info.summary_cross_rank["train/samples_per_s"].value == 100.0


# -- Settings and environment -------------------------------------------------------------
def test_settings_are_mutable_strict_and_read_the_environment() -> None:
    s = wandb.Settings(mode="shared", x_label="rank_0")
    s.x_primary = False
    s.x_primary_node = True  # W&B's alias
    assert s.x_primary is True and s.mode == "shared"
    with pytest.raises(wandb.errors.ValidationError, match="Extra inputs"):
        wandb.Settings(no_such_field=1)
    with pytest.raises(ValueError):
        s.no_such_field = 1
    with pytest.raises(ValueError):
        wandb.Settings(mode="sideways")
    env = {
        "WANDB_DIR": "/d", "WANDB_NAME": "n", "WANDB_TAGS": "a, b", "WANDB_JOB_TYPE": "j",
        "WANDB_RUN_GROUP": "g", "WANDB_RUN_ID": "i", "WANDB_PROJECT": "p", "WANDB_MODE": "offline",
        "WANDB_SILENT": "true", "WANDB__STATS_GPU_DEVICE_IDS": "0,1", "WANDB_API_KEY": "k",
    }  # fmt: skip
    e = wandb.Settings.from_env(env)
    assert (e.root_dir, e.run_name, e.run_tags, e.run_job_type, e.run_group, e.run_id) == (
        "/d", "n", ("a", "b"), "j", "g", "i"
    )  # fmt: skip
    assert (e.project, e.mode, e.silent, e.x_stats_gpu_device_ids) == ("p", "offline", True, [0, 1])
    assert wandb.Settings.from_env({"WANDB_DISABLED": "true"}).mode == "disabled"


def test_the_wandb_variables_reach_the_run(
    wb: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RANKWISE_DIR")
    for key, value in {
        "WANDB_PROJECT": "envp", "WANDB_DIR": str(tmp_path / "w"), "WANDB_RUN_ID": "envrun",
        "WANDB_RUN_GROUP": "grp", "WANDB_JOB_TYPE": "eval", "WANDB_TAGS": "x,y",
        "WANDB_NAME": "pretty", "WANDB_MODE": "offline", "WANDB_SILENT": "true",
    }.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    run = wandb.init()
    assert (run.project, run.id, run.group, run.job_type, run.tags, run.name) == (
        "envp", "envrun", "grp", "eval", ("x", "y"), "pretty"
    )  # fmt: skip
    assert run.offline and run.url is None
    run.log({"a": 1})
    run.finish()
    info = rankwise.Api(dir=tmp_path / "w" / "rankwise-runs").run("envrun", "envp")
    assert (info.group, info.job_type, info.tags, info.name) == (
        "grp",
        "eval",
        ["x", "y"],
        "pretty",
    )
    assert run.dir == str(tmp_path / "w" / "rankwise-runs" / "envp" / "envrun" / "files")
    monkeypatch.setenv("WANDB_DISABLED", "true")
    off = wandb.init(project="other")
    assert isinstance(off, wandb.RunDisabled) and off.disabled and wandb.run is off
    off.log({"a": 1})
    off.finish()
    assert not (tmp_path / "w" / "rankwise-runs" / "other").exists()


# -- module globals, reinit, context manager ---------------------------------------------
def test_module_globals_follow_the_run_lifecycle(wb: Path) -> None:
    assert wandb.run is None
    wandb.log({"a": 1})  # never initialised here: a no-op (a deliberate difference)
    with pytest.raises(wandb.Error, match=r"before wandb\.config\.lr"):
        wandb.config.lr  # noqa: B018
    with pytest.raises(wandb.Error):
        wandb.summary["x"] = 1
    with pytest.raises(wandb.Error, match=r"before wandb\.watch"):
        wandb.watch(None)
    wandb.finish()  # no run: nothing
    run = wandb.init(project="glob", entity="team", anonymous="allow", tags=["t"])
    assert wandb.run is run and wandb.config is run.config and wandb.summary is run.summary
    assert wandb.init(project="glob") is run  # a second init returns the active run
    assert (run.entity, run.path, run.group, run.job_type, run.notes) == (
        "team", f"team/glob/{run.id}", "", "", None
    )  # fmt: skip
    run.tags += ("u",)
    assert run.tags == ("t", "u")
    wandb.finish(exit_code=3)
    assert wandb.run is None
    with pytest.raises(wandb.Error):
        wandb.log({"a": 1})
    assert rankwise.Api(dir=wb).run(run.id, "glob").state == "failed"

    first = wandb.init(project="glob")
    second = wandb.init(project="glob", reinit="finish_previous")
    assert second is not first and wandb.run is second
    third = wandb.init(project="glob", reinit="create_new")
    assert wandb.run is second  # create_new leaves the globals alone
    third.log({"x": 1})
    second.log({"y": 1})
    third.finish()
    second.finish()
    api = rankwise.Api(dir=wb)
    assert api.run(first.id, "glob").state == "finished"
    assert [r for _, r in rows(wb, third)] == [{"x": 1}]
    assert [r for _, r in rows(wb, second)] == [{"y": 1}]


def test_the_context_manager_fails_the_run_and_propagates(wb: Path) -> None:
    with pytest.raises(RuntimeError, match="boom"), wandb.init(project="ctx") as run:
        run.log({"a": 1})
        raise RuntimeError("boom")
    info = rankwise.Api(dir=wb).run(run.id, "ctx")
    assert info.state == "failed" and info.streams[0].exit_code == 1
    assert wandb.run is None
    with wandb.init(project="ctx") as ok:
        ok.log({"a": 1})
    assert rankwise.Api(dir=wb).run(ok.id, "ctx").state == "finished"


# -- alert, save, unsupported names, Api -------------------------------------------------
def test_alert_save_and_unsupported_names(
    wb: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = wandb.init(project="misc")
    run.alert("diverged", "loss is NaN", level=wandb.AlertLevel.ERROR)
    run.alert("diverged", "again")  # within wait_duration: dropped
    run.alert("other", "fine", wait_duration=0)
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "a.txt").write_text("A")
    (tmp_path / "ckpt" / "b.txt").write_text("B")
    saved = wandb.save(str(tmp_path / "ckpt" / "*.txt"), policy="end")
    assert sorted(Path(p).name for p in saved) == ["a.txt", "b.txt"]
    assert Path(run.dir, "a.txt").read_text() == "A"
    assert wandb.save("s3://bucket/x") == []
    (tmp_path / "ckpt" / "a.txt").write_text("A2")  # policy "end": copied again at finish
    assert wandb.sweep({"method": "grid"}) is None and wandb.agent("x") is None
    assert wandb.login() is True and wandb.require("service") is None  # type: ignore[func-returns-value]
    assert wandb.init(project="misc", sync_tensorboard=True) is run
    run.log({"loss": 1.0})
    run.finish()
    assert Path(run.dir, "a.txt").read_text() == "A2"
    err = capsys.readouterr().err
    assert err.count("ALERT [ERROR] diverged: loss is NaN") == 1 and "again" not in err
    assert "ALERT [INFO] other: fine" in err
    # Each alert is also an Alert record the server delivers (docs/alerts.md).
    (stream,) = Path(run.dir).parent.joinpath("streams").glob("*.rwlog")
    alerts = [r for r in scan(stream.read_bytes()).records if type(r) is R.Alert]
    assert [(a.title, a.text, a.level) for a in alerts] == [
        ("diverged", "loss is NaN", "ERROR"),
        ("other", "fine", "INFO"),
    ]
    assert err.count("wandb.sweep() is not supported") == 1
    assert (
        "sync_tensorboard" not in err
    )  # supported now (tests/integrations/test_tensorboard_wandb.py)
    api_run = wandb.Api().run(f"team/misc/{run.id}")
    assert api_run.summary == {"loss": 1.0} and api_run.state == "finished"
    history = api_run.history(pandas=False)
    assert [(r["_step"], r["loss"]) for r in history] == [(0, 1.0)]
    assert sorted(f.name for f in api_run.files()) == ["a.txt", "b.txt"]


def test_media_types_take_wandb_arguments(wb: Path) -> None:
    table = wandb.Table(columns=["id", "image"])
    table.add_data("a", wandb.Image(np.random.default_rng(0).random((1, 28, 28))))
    table.add_data("b", wandb.Image(np.zeros((28, 28, 3), dtype=np.uint8), caption="c"))
    table.add_column("score", [np.float32(0.5), np.float32(0.25)])
    assert table.columns == ["id", "image", "score"] and table.get_column("score") == [0.5, 0.25]
    with pytest.raises(ValueError):
        table.add_data("too", "few")
    hist = wandb.Histogram(np.arange(10.0), num_bins=5)
    html = wandb.Html("<b>x</b>")
    run = wandb.init(project="media")
    run.log({"preds": table, "h": hist, "page": html, "imgs": [wandb.Image(np.ones((8, 8)))] * 3})
    run.finish()
    info = rankwise.Api(dir=wb).run(run.id, "media")
    back = info.table("preds")
    assert back.columns == ["id", "image", "score"] and back.get_column("id") == ["a", "b"]
    assert info.histograms("h")["rank-0"].counts.tolist() == [[2, 2, 2, 2, 2]]
    assert sorted(k.key for k in info.media_keys()) == ["h", "imgs", "page", "preds"]


def test_artifacts_through_rankwise(wb: Path, tmp_path: Path) -> None:
    (tmp_path / "m.ckpt").write_text("weights")
    run = wandb.init(project="art")
    art = wandb.Artifact(name=f"model-{run.id}", type="model", metadata={"score": 1})
    art.add_file(str(tmp_path / "m.ckpt"), name="model.ckpt", policy="immutable")
    with art.new_file("notes.txt", mode="w") as f:
        f.write("hi")
    wandb.log_artifact(art, aliases=["best"])
    art.wait()
    used = run.use_artifact(f"model-{run.id}:best", type="model")
    root = Path(used.download(root=str(tmp_path / "dl")))
    assert (root / "model.ckpt").read_text() == "weights" and (root / "notes.txt").exists()
    run.log_model(str(tmp_path / "m.ckpt"), name="plain").wait()
    assert Path(run.use_model("plain:latest")).read_text() == "weights"
    run.finish()
    back = wandb.Api().artifact(f"team/art/model-{run.id}:latest", type="model")
    assert back.version == "v0" and sorted(back.aliases) == ["best", "latest"]
    assert back.metadata == {"score": 1}


def test_online_uploads_to_a_rankwise_server_and_offline_does_not(
    wb: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rankwise.errors import RunNotFoundError
    from rankwise.server import create_app
    from rankwise.store import open_store
    from tests.helpers.servers import serve_in_thread

    store = open_store(f"sqlite:///{tmp_path / 'server.db'}")
    store.migrate()
    with serve_in_thread(create_app(store)) as url:
        monkeypatch.setenv("RANKWISE_SERVER", url)
        monkeypatch.setenv("RANKWISE_UPLOAD_INTERVAL", "0.05")
        online = wandb.init(project="remote")  # mode "online" is the default
        online.log({"loss": 0.5})
        assert online.url is not None and online.url.startswith(url)
        online.finish()
        offline = wandb.init(project="remote", mode="offline")
        offline.log({"loss": 0.25})
        offline.finish()
        remote = rankwise.Api(server=url)
        assert [r["loss"] for r in remote.run(online.id, "remote").history()] == [0.5]
        with pytest.raises(RunNotFoundError):
            remote.run(offline.id, "remote")
    store.close()
    assert rankwise.Api(dir=wb).run(offline.id, "remote").summary == {"loss": 0.25}


def test_import_is_light_and_the_shim_is_off_unless_asked(tmp_path: Path) -> None:
    code = (
        "import sys, importlib.util, importlib.metadata as md\n"
        "import rankwise.wandb as wandb\n"
        f"heavy = [m for m in sys.modules if m.split('.')[0] in {HEAVY!r}]\n"
        "assert not heavy, heavy\n"
        "assert 'wandb' not in sys.modules and importlib.util.find_spec('wandb') is None\n"
        "wandb.install()\n"
        "spec = importlib.util.find_spec('wandb'); assert spec is not None\n"
        "assert md.version('wandb') == wandb.__version__ == '0.31.0'\n"
        "from wandb.sdk.lib import RunDisabled\n"
        "from wandb.wandb_run import Run\n"
        "from wandb.sdk.lib.config_util import ConfigError\n"
        "import wandb.errors, wandb.plot\n"
        "assert issubclass(RunDisabled, Run) and wandb.errors.CommError\n"
        "import wandb as w2; assert w2 is wandb\n"
        "print('OK')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=clean_env(), cwd=tmp_path, capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0 and out.stdout.strip() == "OK", out.stdout + out.stderr
