"""init / log / finish in one process: what lands, what is warned about, what is refused."""

from __future__ import annotations

import math
import os
import re
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

import rankwise
from rankwise.stream.files import list_streams
from tests.helpers.env import PYTHON, REPO
from tests.helpers.imports import HEAVY


def run_script(
    code: str, env: dict[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **env, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [PYTHON, "-c", textwrap.dedent(code)],
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_log_lands_exactly_once_with_steps_weights_and_nan(data_dir: Path, fast: dict) -> None:
    run = rankwise.init(project="p", config={"lr": 0.1}, settings=fast)
    assert run and run.rank == 0 and run.world_size == 1 and run.is_primary
    for i in range(500):
        run.log({"loss": 1.0 / (i + 1), "acc": np.float32(i / 500)}, weight=i + 1)
    run.log({"weird": math.nan, "big": math.inf})
    run.finish()
    info = rankwise.Api(data_dir).run(run.id, project="p")
    rows = info.history(keys=["loss"])
    assert [r["step"] for r in rows] == list(range(500))
    assert [r["loss"] for r in rows] == [1.0 / (i + 1) for i in range(500)]
    assert [r["weight"] for r in rows] == [float(i + 1) for i in range(500)]
    last = info.history(keys=["weird", "big"])
    assert len(last) == 1 and last[0]["step"] == 500
    assert math.isnan(last[0]["weird"]) and last[0]["big"] == math.inf
    assert info.state == "finished" and info.config == {"lr": 0.1}
    assert info.summary["loss"] == 1.0 / 500
    (stream,) = info.streams
    assert stream.label == "rank-0" and stream.last_step == 500 and stream.dropped == 0
    # What the read calls return is exported under the names their reprs use.
    assert isinstance(info, rankwise.RunInfo) and repr(info).startswith("<rankwise.RunInfo")
    assert isinstance(stream, rankwise.StreamInfo)
    assert all(isinstance(h, rankwise.RankHealth) for h in info.health())
    assert info.first_failure is None


def test_config_and_summary_updates_are_recorded(data_dir: Path, fast: dict) -> None:
    run = rankwise.init(config={"a": 1, "nested": {"b": [1, 2]}}, settings=fast)
    run.config["c"] = "x"
    run.config.update({"d": 2.5})
    assert run.config.a == 1 and run.config["nested"] == {"b": [1, 2]}
    run.log({"loss": 3.0})
    run.log({"loss": 2.0})
    assert run.summary["loss"] == 2.0
    run.summary["best"] = 0.9
    assert dict(run.summary) == {"loss": 2.0, "best": 0.9}
    run.finish()
    info = rankwise.Api().run(run.id)
    assert info.config == {"a": 1, "nested": {"b": [1, 2]}, "c": "x", "d": 2.5}
    assert info.summary == {"loss": 2.0, "best": 0.9}


def test_unstorable_config_and_summary_values_are_kept_as_text_with_one_warning(
    data_dir: Path, fast: dict, capfd: pytest.CaptureFixture[str]
) -> None:
    class Model:
        def __str__(self) -> str:
            return "Model(layers=2)"

    import dataclasses
    import threading

    @dataclasses.dataclass
    class Opt:
        lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    run = rankwise.init(config={"model": Model(), "ok": 1, "opt": Opt()}, settings=fast)
    run.config["fn"] = object()
    run.config["fn"] = object()  # the same key again: no second warning
    run.config[("a", 1)] = 2  # a tuple key
    run.summary["best"] = Model()
    run.finish()
    err = capfd.readouterr().err
    assert err.count("config value 'model' is a Model") == 1
    assert err.count("config value 'fn' is a object") == 1
    assert err.count("summary value 'best' is a Model") == 1
    assert err.count("config key ('a', 1)") == 1 and "config value 'best'" not in err
    info = rankwise.Api().run(run.id)
    assert info.config["model"] == "Model(layers=2)" and info.config["ok"] == 1
    assert info.config["opt"]["lock"].startswith("<unlocked _thread.lock")
    assert info.config["fn"].startswith("<object object at")
    assert info.config["('a', 1)"] == 2
    assert info.summary["best"] == "Model(layers=2)"


def test_one_rule_and_one_warning_for_empty_keys_bad_weights_and_late_summary(
    data_dir: Path, fast: dict, capfd: pytest.CaptureFixture[str]
) -> None:
    run = rankwise.init(settings=fast)
    run.log({"": 1.0, "a": 1.0}, step=0)
    run.log({"": 2.0, "a": 2.0}, step=1)
    run.log({"a": 3.0}, step=2, weight=[4])
    run.log({"a": 4.0}, step=3, weight=-1.0)
    run.log({"a": 5.0}, step=4, weight=float("nan"))
    run.log({"a": 6.0}, step=5, weight=2.0)
    run.finish()
    run.summary["late"] = 1.0
    run.summary["later"] = 2.0
    err = capfd.readouterr().err
    assert err.count("log() key '' is empty") == 1
    assert err.count("weight=[4] is not a number") == 1
    assert err.count("is not a finite number >= 0") == 1  # -1 and NaN: one rule, one warning
    assert err.count("run.summary['late'] was set after") == 1 and "'later'" not in err
    info = rankwise.Api().run(run.id)
    rows = info.history()
    assert all("" not in r for r in rows) and [r["a"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert [r.get("weight") for r in rows] == [None] * 5 + [2.0]
    assert "late" not in info.summary and info.metric_keys == ["a"]


def test_config_accepts_namespaces_dataclasses_paths(data_dir: Path) -> None:
    import argparse
    import dataclasses

    @dataclasses.dataclass
    class Opt:
        lr: float = 0.1
        path: Path = Path("/x")

    run = rankwise.init(config=Opt())
    assert dict(run.config) == {"lr": 0.1, "path": "/x"}
    run.config.update(argparse.Namespace(epochs=3))
    assert run.config["epochs"] == 3


def test_warnings_for_bad_data_lower_steps_and_log_after_finish(
    data_dir: Path, fast: dict, capfd: pytest.CaptureFixture[str]
) -> None:
    run = rankwise.init(settings=fast)
    run.log({"a": 1.0, 7: 2.0, "s": "text"}, step=10)
    run.log({"a": 2.0, "s": "again"}, step=5)
    run.log({"a": 3.0}, step=5)
    run.finish()
    run.log({"a": 4.0})
    run.log({"a": 5.0})
    err = capfd.readouterr().err
    assert err.count("key 7") == 1 and err.count("'s'") == 1
    assert err.count("lower than the last step 10") == 1
    assert err.count("log() ignored") == 1
    rows = rankwise.Api().run(run.id).history()
    assert [(r["step"], r["a"]) for r in rows] == [(5, 2.0), (5, 3.0), (10, 1.0)]


def test_commit_false_joins_the_next_calls_row(data_dir: Path, fast: dict) -> None:
    """W&B's ``commit=`` on the native run (the shim's full row rules are in test_wandb_*)."""
    run = rankwise.init(settings=fast)
    run.log({"a": 1.0}, commit=False)
    run.log({"b": 2.0})  # the held values join this row, at its step
    run.log({"c": 3.0}, step=5, commit=False)
    run.log({"d": 4.0}, step=5)
    run.log({"e": 5.0}, commit=False)
    run.log({"f": 6.0}, step=9)  # another step: the held row is recorded first, at 6
    rankwise.log({"g": 7.0}, commit=False)
    run.finish()  # ... and a held row at the end is not lost
    rows = rankwise.Api().run(run.id).history()
    got = [(r["step"], {k: v for k, v in r.items() if k in "abcdefg" and v == v}) for r in rows]
    assert got == [
        (0, {"a": 1.0, "b": 2.0}),
        (5, {"c": 3.0, "d": 4.0}),
        (6, {"e": 5.0}),
        (9, {"f": 6.0}),
        (10, {"g": 7.0}),
    ]


def test_auto_step_continues_after_explicit_steps(data_dir: Path, fast: dict) -> None:
    run = rankwise.init(settings=fast)
    run.log({"x": 0})
    run.log({"x": 1}, step=100)
    run.log({"x": 2})
    run.finish()
    assert [r["step"] for r in rankwise.Api().run(run.id).history()] == [0, 100, 101]


def test_context_manager_failure_records_the_exception(data_dir: Path, fast: dict) -> None:
    with pytest.raises(ZeroDivisionError), rankwise.init(settings=fast) as run:
        run.log({"x": 1})
        1 / 0  # noqa: B018
    info = rankwise.Api().run(run.id)
    assert info.state == "failed"
    (s,) = info.streams
    assert s.error_type == "ZeroDivisionError" and "division by zero" in (s.error_message or "")
    assert "1 / 0" in (s.traceback or "")


def test_finish_with_exit_code_is_failed(data_dir: Path) -> None:
    run = rankwise.init()
    run.finish(exit_code=2)
    info = rankwise.Api().run(run.id)
    assert info.state == "failed" and info.streams[0].exit_code == 2


def test_module_level_functions_use_the_current_run(data_dir: Path, fast: dict) -> None:
    assert rankwise.run is None
    run = rankwise.init(settings=fast)
    assert rankwise.run is run
    rankwise.log({"x": 1.0})
    rankwise.finish()
    assert rankwise.run is None
    assert rankwise.Api().run(run.id).history()[0]["x"] == 1.0


def test_second_init_finishes_the_first_and_says_so_once(
    data_dir: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("rankwise.sdk.session._said_reinit", False)  # once per process
    first = rankwise.init()
    second = rankwise.init()
    assert first.state == "finished" and second.state == "running"
    assert first.id != second.id
    err = capfd.readouterr().err
    assert f"finished the previous run default/{first.id}" in err
    third = rankwise.init()  # said once per process, not at every init()
    assert second.state == "finished" and "finished the previous run" not in capfd.readouterr().err
    third.finish()
    rankwise.init().finish()  # the previous run had ended: nothing to say
    assert "previous run" not in capfd.readouterr().err


def test_disabled_is_a_no_op(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANKWISE_DISABLED", "1")
    run = rankwise.init(config={"a": 1})
    assert not run
    run.log({"x": 1})
    run.config["b"] = 2
    run.finish()
    assert not data_dir.exists()


def test_env_project_and_run_id(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANKWISE_PROJECT", "envproj")
    monkeypatch.setenv("RANKWISE_RUN_ID", "my-run")
    run = rankwise.init()
    assert (run.project, run.id) == ("envproj", "my-run")
    assert run.dir == data_dir.absolute() / "envproj" / "my-run"
    run.finish()
    explicit = rankwise.init(project="other", id="given")
    assert (explicit.project, explicit.id) == ("other", "given")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"run_mode": "everyone"}, "run_mode='everyone' is not one of auto, shared, new"),
        ({"rank_scope": "node"}, "rank_scope='node'"),
        ({"id": "has space"}, "run id 'has space' cannot be used"),
        ({"project": "a/b"}, "project 'a/b' cannot be used"),
        ({"resume": "maybe"}, "resume='maybe'"),
        ({"settings": {"nope": 1}}, "unknown setting 'nope'"),
        ({"label": "x-{gpu}"}, "only {rank}, {local_rank} and {node}"),
    ],
)
def test_bad_arguments_name_the_fix(data_dir: Path, kwargs: dict, match: str) -> None:
    with pytest.raises(rankwise.UsageError, match=match.replace("{", r"\{").replace("}", r"\}")):
        rankwise.init(**kwargs)


def test_resume_allow_never_must(data_dir: Path, fast: dict) -> None:
    first = rankwise.init(id="r1", settings=fast)
    first.log({"x": 1})
    first.finish()
    with pytest.raises(rankwise.RunExistsError, match="resume='allow'"):
        rankwise.init(id="r1", resume="never")
    with pytest.raises(rankwise.UsageError, match="has no data"):
        rankwise.init(id="r2", resume="must")
    again = rankwise.init(id="r1", resume="must", settings=fast)
    assert again.incarnation == 1
    again.log({"x": 2})  # step=None continues after the last incarnation's last step
    again.finish()
    streams = list_streams(data_dir.absolute() / "default" / "r1" / "streams")
    assert [(label, inc) for label, inc, _ in streams] == [("rank-0", 0), ("rank-0", 1)]
    rows = rankwise.Api().run("r1").history()
    assert [(r["step"], r["x"]) for r in rows] == [(0, 1), (1, 2)]


def test_label_template(data_dir: Path) -> None:
    run = rankwise.init(label="trainer-{rank}")
    assert run.label == "trainer-0"


def test_non_recording_rank_is_falsy_and_silent(tmp_path: Path) -> None:
    proc = run_script(
        """
        import rankwise
        run = rankwise.init(project="p", id="base")
        print(bool(run), run.id, run.rank, run.world_size, run.is_primary)
        run.log({"x": 1}); run.config["a"] = 1; run.finish(); run.log({"x": 2})
        """,
        {"RANKWISE_DIR": str(tmp_path), "RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "base", "1", "2", "False"]
    assert proc.stderr == ""
    assert not (tmp_path / "p").exists()


def test_interpreter_exit_finishes_and_sys_exit_code_is_recorded(tmp_path: Path) -> None:
    code = """
        import sys, rankwise
        run = rankwise.init(project="p", id="{id}")
        run.log({{"x": 1}})
        {end}
        """
    cases = {
        "ok": ("pass", "finished", 0),
        "exit3": ("sys.exit(3)", "failed", 3),
        "exit0": ("sys.exit(0)", "finished", 0),
        "raise": ("raise ValueError('bad')", "failed", 1),
    }
    for run_id, (end, _, rc) in cases.items():
        proc = run_script(code.format(id=run_id, end=end), {"RANKWISE_DIR": str(tmp_path)})
        assert proc.returncode == rc, proc.stderr
    api = rankwise.Api(tmp_path)
    for run_id, (_, state, rc) in cases.items():
        info = api.run(run_id)
        assert info.state == state, run_id
        assert info.streams[0].exit_code == rc
        assert info.history()[0]["x"] == 1
    assert api.run("raise").streams[0].error_type == "ValueError"


def test_log_before_init_warns_once(capfd: pytest.CaptureFixture[str]) -> None:
    proc = run_script("import rankwise\nrankwise.log({'x': 1})\nrankwise.log({'x': 2})", {})
    assert proc.returncode == 0
    assert proc.stderr.count("before rankwise.init()") == 1


def test_log_never_raises_on_odd_input(data_dir: Path, fast: dict) -> None:
    run = rankwise.init(settings=fast)
    run.log(None)
    run.log({"x": 1}, step="seven")
    run.log({"x": 2}, weight="heavy")
    run.log([("y", 3.0)])
    # A step past 64 bits would make the frame undecodable (stream.records.Int): the
    # next step is used instead, and the frame's other records stay readable.
    run.log({"z": 4}, step=2**63)
    run.finish()
    rows = rankwise.Api().run(run.id).history()
    assert [(r["step"], r.get("x"), r.get("y"), r.get("z")) for r in rows] == [
        (0, 1, None, None),
        (1, 2, None, None),
        (2, None, 3.0, None),
        (3, None, None, 4),
    ]


def test_import_rankwise_stays_light() -> None:
    code = (
        "import sys, rankwise\n"
        f"heavy = {HEAVY!r}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy"
        " or m.startswith(('rankwise.store', 'rankwise.server'))))"
    )
    out = subprocess.run(
        [PYTHON, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=True,
    )
    assert out.stdout.strip() == "[]"


def test_public_api_is_pinned() -> None:
    assert sorted(rankwise.__all__) == sorted(
        [
            "Api",
            "ArgumentTypeError",
            "Artifact",
            "ArtifactError",
            "ArtifactNotFoundError",
            "Audio",
            "BadNameError",
            "ConfigError",
            "DeliveryError",
            "Failure",
            "Histogram",
            "Html",
            "Image",
            "KeyNotLoggedError",
            "MediaError",
            "RankHealth",
            "RankwiseError",
            "ReportNotFoundError",
            "Run",
            "RunExistsError",
            "RunInfo",
            "RunNotFoundError",
            "SchemaTooNewError",
            "ServerError",
            "Settings",
            "StreamInfo",
            "SyncError",
            "Table",
            "Text",
            "UsageError",
            "Video",
            "__version__",
            "define_metric",
            "finish",
            "get_run",
            "init",
            "log",
            "log_artifact",
            "run",
            "track",
            "use_artifact",
        ]
    )
    for name in rankwise.__all__:
        if name != "run":
            assert getattr(rankwise, name) is not None


def test_every_exception_is_in_the_drawn_tree_and_exported() -> None:
    import inspect

    from rankwise import errors

    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass)]
    classes = [c for c in classes if c.__module__ == "rankwise.errors"]
    assert len(classes) >= 9
    tree = errors.__doc__ or ""
    for cls in classes:
        assert issubclass(cls, rankwise.RankwiseError)
        assert re.search(rf"[─ ]{cls.__name__}\b", tree), f"{cls.__name__} is not drawn"
        assert getattr(rankwise, cls.__name__) is cls
    # Raised elsewhere, declared once: the names users catch are these classes.
    from rankwise import _http
    from rankwise.sdk import sync

    assert _http.ServerError is rankwise.ServerError  # type: ignore[attr-defined]
    assert sync.SyncError is rankwise.SyncError  # type: ignore[attr-defined]


def test_nth_init_of_every_rank_shares_a_run(tmp_path: Path) -> None:
    # Two ranks of one launch (same parent, as under mp.spawn or a single-node launcher):
    # each calls init() twice; the first calls share one run, the second calls another.
    code = """
        import rankwise
        a = rankwise.init(project="p", run_mode="shared")
        b = rankwise.init(project="p", run_mode="shared")
        print(a.id, b.id)
        """
    ids = []
    for rank in (0, 1):
        env = {
            "RANKWISE_DIR": str(tmp_path),
            "RANK": str(rank),
            "WORLD_SIZE": "2",
            "LOCAL_RANK": str(rank),
            "RANKWISE_SYSTEM": "0",
        }
        proc = run_script(code, env)
        assert proc.returncode == 0, proc.stderr
        ids.append(proc.stdout.split())
    assert ids[0] == ids[1]
    assert ids[0][0] != ids[0][1]


def test_log_in_a_forked_child_says_why_it_is_ignored(tmp_path: Path) -> None:
    proc = run_script(
        """
        import os, rankwise
        run = rankwise.init(project="p", id="forky")
        pid = os.fork()
        if pid == 0:
            rankwise.log({"x": 1})
            os._exit(0)
        os.waitpid(pid, 0)
        run.log({"x": 2})
        """,
        {"RANKWISE_DIR": str(tmp_path), "RANKWISE_SYSTEM": "0"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "forked child" in proc.stderr and "before rankwise.init()" not in proc.stderr
    assert [r["x"] for r in rankwise.Api(tmp_path).run("forky").history()] == [2]


def test_a_component_attaches_through_the_run_handle(data_dir: Path, fast: dict) -> None:
    from rankwise.sdk.handle import RunHandle
    from rankwise.stream import records as R
    from rankwise.stream.frames import scan

    run = rankwise.init(project="p", id="comp", settings=fast, console="off", system=False)
    handle = run.handle()
    assert isinstance(handle, RunHandle)
    assert (handle.project, handle.run_id, handle.label, handle.path) == (
        "p",
        "comp",
        "rank-0",
        run.path,
    )
    assert handle.who == "this process" and handle.dir == run.dir

    class Sampler:  # what a component needs: stop(deadline), records through the handle
        def __init__(self) -> None:
            self.stopped: list[float] = []

        def stop(self, deadline: float) -> None:
            assert handle is not None
            handle.put_control(lambda seq, t: R.System(seq, t, {"node/x": float(handle.step())}))
            self.stopped.append(deadline)

    sampler = Sampler()
    handle.add_component(sampler)
    run.log({"loss": 1.0})
    run.log({"loss": 0.5})
    assert handle.step() == 1 and not handle.behind()
    run._writer.sync()
    assert handle.metrics_records() == 2
    run.finish()
    assert len(sampler.stopped) == 1  # once, though finish() and the exit hooks both end it
    records = scan(run.path.read_bytes()).records
    (system,) = [r for r in records if isinstance(r, R.System)]
    assert system.values == {"node/x": 1.0}
    assert isinstance(records[-1], R.Finish)  # stopped before the Finish record


def test_end_takes_only_an_end_state_and_a_quiet_run_has_no_handle(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = rankwise.init(project="p", console="off", system=False)
    with pytest.raises(rankwise.UsageError, match="state='done'"):
        run.end("done")
    run.end("killed", exit_code=130, signal=2)
    assert run.state == "killed" and rankwise.Api(data_dir).run(run.id).state == "killed"
    monkeypatch.setenv("RANKWISE_DISABLED", "1")
    quiet = rankwise.init(project="p")
    assert not quiet and quiet.handle() is None
    quiet.end("failed")  # a no-op, as finish() is


def test_the_process_hooks_import_nothing_of_the_sdk() -> None:
    import ast

    from rankwise.sdk import hooks

    tree = ast.parse(Path(hooks.__file__).read_text())
    relative = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level > 0]
    assert relative == [], "hooks is a leaf: runs reach it through the Ending protocol"
