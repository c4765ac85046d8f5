"""What ran (``rankwise.sdk.provenance``): a 2-rank torchrun job (gloo) in a git
repository the test made, with a dirty tracked file, records its commit, branch, remote
(credentials stripped), dirty flag and diff, its program and packages, and its node; the
local reader and servers (SQLite, PostgreSQL) say the same. Each switch turns its part
off; a hung ``git`` does not delay ``init()``; secrets are never recorded."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

import rankwise
from rankwise.sdk import provenance as P
from rankwise.stream import records as R
from tests.helpers.gitrepo import SECRET_TOKEN, make_repo
from tests.helpers.runs import FAST_ENV
from tests.helpers.servers import ServerProcess, postgres_dsn, subprocess_env

SECRET_ARG = "hunter2-argv-secret"
SECRET_ENV = "nccl-env-secret-value"


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    tmp = tmp_path_factory.mktemp("prov")
    repo = tmp / "repo"
    commit = make_repo(repo)
    data = tmp / "data"
    env = subprocess_env(**FAST_ENV, RANKWISE_DIR=str(data), RANKWISE_RUN_ID="pv",
                         OMP_NUM_THREADS="1", NCCL_DEBUG="WARN",
                         NCCL_FAKE_TOKEN=SECRET_ENV)  # fmt: skip
    env.pop("RANKWISE_SERVER", None)
    script = Path(__file__).parents[1] / "scripts" / "provenance_job.py"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
           str(script), "--api-key", SECRET_ARG]  # fmt: skip
    out = subprocess.run(cmd, env=env, cwd=repo, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    yield data, commit


def _check(run: rankwise.RunInfo, commit: str) -> None:
    git = run.git
    assert git is not None, run.code
    assert git.commit == commit
    assert git.branch == "main"
    assert git.remote == "https://git.example.com/team/repo.git"
    assert git.dirty is True
    diff = run.diff()
    assert diff is not None and "+LR = 0.3  # tuned" in diff and "-LR = 0.1" in diff
    assert "untracked" not in diff
    assert run.code is not None
    assert run.code.program is not None and run.code.program.endswith("provenance_job.py")
    assert run.code.argv[-2:] == ["--api-key", P.MASK]
    assert run.packages.get("msgspec") == msgspec.__version__
    assert "torch" in run.packages
    assert len(run.nodes) == 1
    node = run.nodes[0]
    assert node.host and node.python and node.torch
    meta = run.metadata
    assert meta["code"]["git"]["commit"] == commit
    # run.log_code()'s artifact: a file of it restored (rankwise.wandb.restore's path)
    from rankwise.sdk import code

    with tempfile.TemporaryDirectory() as out:
        f = code.restore(run, "model.py", out)
        assert f is not None
        with f:
            assert f.read() == "LR = 0.3  # tuned\n"
    text = msgspec.json.encode(meta).decode()
    for secret in (SECRET_TOKEN, SECRET_ARG, SECRET_ENV):
        assert secret not in text


def test_torchrun_job_in_a_git_repo_records_what_ran_locally(job: tuple[Path, str]) -> None:
    data, commit = job
    run = rankwise.Api(dir=data).run("pv", project="prov")
    assert run.state == "finished" and run.n_streams == 2
    _check(run, commit)
    # Nothing secret anywhere in the files the job wrote.
    for path in data.rglob("*"):
        if path.is_file():
            blob = path.read_bytes()
            for secret in (SECRET_TOKEN, SECRET_ARG, SECRET_ENV):
                assert secret.encode() not in blob, path


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'db.sqlite'}"
    else:
        yield from postgres_dsn()


def test_servers_show_what_ran(job: tuple[Path, str], db_url: str, tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    data, commit = job
    data = Path(shutil.copytree(data, tmp_path / "data"))  # each server syncs it afresh
    with ServerProcess.db(db_url, tmp_path / "server.log") as srv:
        monkeypatch.setenv("RANKWISE_TOKEN", srv.token or "")
        out = subprocess.run(  # rankwise sync: the streams, the diff blob and the artifacts
            [sys.executable, "-m", "rankwise.cli", "sync", str(data), "--no-progress"],
            env=srv.env(), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert out.returncode == 0, out.stdout + out.stderr
        run = rankwise.Api(server=srv.url).run("pv", project="prov")
        _check(run, commit)
        reply = srv.get("/api/v1/projects/prov/runs/pv").json()
        assert reply["code"]["git"]["commit"] == commit
        assert reply["code"]["git"]["dirty"] is True
        assert reply["nodes"][0]["host"]
        digest = reply["code"]["git"]["diff_digest"]
        got = srv.get(f"/api/v1/blobs/prov/{digest}")
        assert got.status_code == 200 and b"LR = 0.3" in got.content


def _local_run(tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch,
               **settings: object) -> rankwise.RunInfo:  # fmt: skip
    monkeypatch.chdir(repo)
    # the program as a launcher names it (under pytest-xdist a worker's argv is ["-c"])
    monkeypatch.setattr(sys, "argv", [str(repo / "train.py"), "--lr", "0.3"])
    run = rankwise.init(project="sw", dir=tmp_path / "data", system=False, console="off",
                        stall_timeout=0, settings=dict(settings))  # fmt: skip
    run.log({"x": 1})
    run.finish()
    return rankwise.Api(dir=tmp_path / "data").run(run.id, project="sw")


def test_each_switch_turns_its_part_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "repo"
    commit = make_repo(repo)
    full = _local_run(tmp_path, repo, monkeypatch)
    assert full.git is not None and full.git.commit == commit and full.git.diff_digest
    assert full.packages

    no_git = _local_run(tmp_path, repo, monkeypatch, git=False)
    assert no_git.code is not None and no_git.code.git is None and no_git.packages
    assert no_git.code.program is not None

    no_code = _local_run(tmp_path, repo, monkeypatch, save_code=False)
    assert no_code.git is not None and no_code.git.commit == commit
    assert no_code.git.dirty is True and no_code.git.diff_digest is None
    assert no_code.diff() is None

    no_pkgs = _local_run(tmp_path, repo, monkeypatch, packages=False)
    assert no_pkgs.code is not None and no_pkgs.code.packages is None
    assert no_pkgs.git is not None

    monkeypatch.setenv("RANKWISE_GIT", "0")
    monkeypatch.setenv("RANKWISE_PACKAGES", "0")
    by_env = _local_run(tmp_path, repo, monkeypatch)
    assert by_env.code is not None and by_env.git is None and by_env.code.packages is None


def test_outside_a_repository_there_is_no_git(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    run = _local_run(tmp_path, plain, monkeypatch)
    assert run.code is not None and run.git is None and run.code.note is None


def test_a_hung_git_does_not_delay_init(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "repo"
    make_repo(repo)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "git"
    fake.write_text("#!/bin/sh\nsleep 120\n")  # a git that hangs (a credential prompt, NFS)
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(repo)
    monkeypatch.setattr(sys, "argv", [str(repo / "train.py")])
    t0 = time.monotonic()
    run = rankwise.init(project="hang", dir=tmp_path / "data", system=False, console="off",
                        stall_timeout=0, settings={"provenance_timeout": 5.0})  # fmt: skip
    took_init = time.monotonic() - t0
    run.log({"x": 1})
    t1 = time.monotonic()
    run.finish()
    took_finish = time.monotonic() - t1
    assert took_init < 1.0, took_init
    assert took_finish < 8.0, took_finish  # the capture's own bound (5 s), not git's 120 s
    got = rankwise.Api(dir=tmp_path / "data").run(run.id, project="hang")
    assert got.code is not None and got.code.note is not None and "timed out" in got.code.note
    assert got.code.program is not None and got.packages  # what did not need git


def test_credentials_are_stripped_from_remote_urls() -> None:
    strip = P.strip_credentials
    assert strip("https://user:token@host/x") == "https://host/x"
    assert strip("https://ghp_abc@github.com/o/r.git") == "https://github.com/o/r.git"
    assert strip("ssh://git:pw@host:22/o/r") == "ssh://host:22/o/r"
    assert strip("git@github.com:o/r.git") == "git@github.com:o/r.git"
    assert strip("https://github.com/o/r.git") == "https://github.com/o/r.git"


def test_secret_env_vars_and_flags_are_never_recorded() -> None:
    env = {
        "NCCL_DEBUG": "INFO",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "NCCL_IB_TOKEN": "x",
        "TORCH_API_KEY": "x",
        "CUDA_PASSWORD": "x",
        "SLURM_JOB_SECRET": "x",
        "TORCH_CREDENTIALS_FILE": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "HOME": "/root",
    }
    assert P.recorded_env(env) == {"CUDA_VISIBLE_DEVICES": "0,1", "NCCL_DEBUG": "INFO"}
    argv = ["train.py", "--lr", "0.1", "--api-key", "k1", "--hf-token=k2", "--password", "k3"]
    assert P.mask_argv(argv) == ["train.py", "--lr", "0.1", "--api-key", P.MASK,
                                 f"--hf-token={P.MASK}", "--password", P.MASK]  # fmt: skip


def test_a_reader_skips_a_record_of_a_tag_it_does_not_know() -> None:
    enc = msgspec.msgpack.Encoder()
    known = R.Metrics(1, 1.0, 0, {"x": 1.0})
    payload = enc.encode((R.SCHEMA_VERSION, [[99, 0, 0.0, "future"], known, [98, 2, 0.0]]))
    assert R.decode_payload(payload) == [known]
    bad = enc.encode((R.SCHEMA_VERSION, [[2, 0, 0.0, "not a step", {}]]))
    with pytest.raises(msgspec.ValidationError):
        R.decode_payload(bad)


def _sources(root: Path) -> None:
    (root / "pkg").mkdir(parents=True)
    (root / "train.py").write_text("import pkg.model\n")
    (root / "pkg" / "model.py").write_text("LAYERS = 12\n")
    (root / "notes.txt").write_text("not python\n")
    (root / ".venv" / "lib").mkdir(parents=True)
    (root / ".venv" / "lib" / "site.py").write_text("# an environment's file\n")


def test_log_code_saves_a_code_artifact_and_restore_reads_it_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rankwise import wandb

    for name in list(os.environ):
        if name.startswith(("WANDB_", "RANKWISE_")) and not name.startswith("RANKWISE_TEST_"):
            monkeypatch.delenv(name)
    data = tmp_path / "data"
    monkeypatch.setenv("RANKWISE_DIR", str(data))
    monkeypatch.setenv("RANKWISE_SILENT", "1")
    src = tmp_path / "src"
    _sources(src)
    monkeypatch.chdir(src)

    # rankwise's own: run.log_code (W&B's defaults: *.py, environments left out)
    run = rankwise.init(project="lc", system=False, console="off", stall_timeout=0)
    art = run.log_code()
    art.wait(60)
    assert art.type == "code" and art.name == f"source-lc-{run.id}"
    assert sorted(e.path for e in art.files()) == ["pkg/model.py", "train.py"]
    only_model = run.log_code(
        ".", name="model-only", include_fn=lambda p, r: p.endswith("model.py")
    )
    assert [e.path for e in only_model.wait(60).files()] == ["pkg/model.py"]
    run.finish()
    got = rankwise.Api(dir=data).run(run.id, project="lc")
    assert {a.type for a in got.logged_artifacts()} == {"code"}

    # rankwise.wandb: log_code, save, then restore from another process's point of view
    wrun = wandb.init(project="lc")
    assert wandb.log_code(".") is not None
    wandb.save(str(src / "notes.txt"), base_path=str(src), policy="now")
    wid = wrun.id
    wandb.finish()
    out = tmp_path / "out"
    f = wandb.restore("pkg/model.py", run_path=f"me/lc/{wid}", root=str(out))
    assert f is not None
    with f:
        assert f.read() == "LAYERS = 12\n"
    assert (out / "pkg" / "model.py").read_text() == "LAYERS = 12\n"
    g = wandb.restore("notes.txt", run_path=f"lc/{wid}", root=str(out))  # a save()d file
    assert g is not None
    with g:
        assert g.read() == "not python\n"
    assert wandb.restore("missing.py", run_path=f"lc/{wid}", root=str(out)) is None
    # An existing file is kept unless replace=True.
    (out / "pkg" / "model.py").write_text("changed\n")
    with wandb.restore("pkg/model.py", run_path=f"lc/{wid}", root=str(out)) as h:
        assert h.read() == "changed\n"
    with wandb.restore("pkg/model.py", run_path=f"lc/{wid}", root=str(out), replace=True) as h:
        assert h.read() == "LAYERS = 12\n"
    wandb._reset_globals()
    wandb._ever_initialized[0] = False


def test_a_live_upload_carries_the_diff_blob(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    commit = make_repo(repo)
    with ServerProcess.db(f"sqlite:///{tmp_path / 'db.sqlite'}", tmp_path / "server.log") as srv:
        monkeypatch.setenv("RANKWISE_TOKEN", srv.token or "")
        monkeypatch.chdir(repo)
        run = rankwise.init(project="live", dir=tmp_path / "data", server=srv.url, system=False,
                            console="off", stall_timeout=0,
                            settings={"upload_interval": 0.05, "flush_interval": 0.02})  # fmt: skip
        run.log({"x": 1})
        run.finish()
        got = rankwise.Api(server=srv.url).run(run.id, project="live")
        assert got.git is not None and got.git.commit == commit and got.git.dirty is True
        diff = got.diff()
        assert diff is not None and "+LR = 0.3  # tuned" in diff


def test_rankwise_show_names_the_commit(job: tuple[Path, str]) -> None:
    data, commit = job
    out = subprocess.run(
        [sys.executable, "-m", "rankwise.cli", "show", "pv", "--project", "prov",
         "--dir", str(data)],
        env=subprocess_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if x.startswith("git "))
    assert commit[:12] in line and "main" in line and "(dirty)" in line
    assert "https://git.example.com/team/repo.git" in line and SECRET_TOKEN not in out.stdout
