"""A real 3-rank torchrun job (gloo on CPU) uploading with an ingest token.

With a good token every point reaches the server exactly once. With a wrong or revoked
one, every rank keeps training, warns once naming the fix, keeps its records on disk,
and ``rankwise sync --token GOOD`` later uploads all of them exactly once; nothing of the
refused token or the good one lands in a stream file or a message.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import rankwise
from rankwise import tokens as T
from rankwise.store import open_store
from tests.helpers.runs import FAST_ENV, SCRIPT, assert_same_history, sync_cli
from tests.helpers.servers import ServerProcess, subprocess_env

pytestmark = pytest.mark.torchrun

STEPS = 15
WORLD = 3
REFUSED = "refused the upload"


def _torchrun(
    data: Path, run_id: str, url: str, token: str, cwd: Path, **extra: str
) -> tuple[str, str]:
    env = subprocess_env(
        **FAST_ENV,
        **extra,
        RANKWISE_DIR=str(data),
        RANKWISE_SERVER=url,
        RANKWISE_TOKEN=token,
        RANKWISE_RUN_ID=run_id,
        OMP_NUM_THREADS="1",
    )
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone",
        f"--nproc-per-node={WORLD}", str(SCRIPT), "--torch", "--steps", str(STEPS),
    ]  # fmt: skip
    out = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr  # training never fails for tracking
    return out.stdout, out.stderr


def _secret(token: str) -> str:
    return T.parse(token)[2]


@pytest.mark.parametrize("shared", [False, True], ids=["alone", "node upload"])
def test_torchrun_with_ingest_token_uploads_exactly_once(tmp_path: Path, shared: bool) -> None:
    extra = {"RANKWISE_NODE_UPLOAD": "1", "TMPDIR": str(tmp_path)} if shared else {}
    db = f"sqlite:///{tmp_path / 'db.sqlite'}"
    with ServerProcess.db(db, tmp_path / "server.log") as srv:
        with open_store(db) as store:
            ingest = store.create_token("ingest", ["up"], "ranks").value
        data = tmp_path / "data"
        _, err = _torchrun(data, "good", srv.url, ingest, tmp_path, **extra)
        assert REFUSED not in err and "not uploaded" not in err, err
        local = rankwise.Api(dir=data).run("good", project="up")
        remote = rankwise.Api(server=srv.url, token=srv.token).run("good", project="up")
        assert len(remote.streams) == WORLD and remote.state == "finished"
        assert_same_history(local, remote, db)
        assert len(remote.history()) == WORLD * STEPS * 2  # loss and acc per step
    for f in data.rglob("*.rwlog"):
        assert _secret(ingest).encode() not in f.read_bytes()


@pytest.mark.parametrize(
    "how", ["wrong", "revoked", "other project", "wrong, node upload", "other project, node upload"]
)
def test_refused_token_keeps_training_warns_once_then_sync_uploads(
    tmp_path: Path, how: str
) -> None:
    # With node upload one process posts for the node: a wrong token is refused for the
    # whole request, another project's part by part; each rank still says so itself.
    shared = how.endswith("node upload")
    extra = {"RANKWISE_NODE_UPLOAD": "1", "TMPDIR": str(tmp_path)} if shared else {}
    how = how.removesuffix(", node upload")
    db = f"sqlite:///{tmp_path / 'db.sqlite'}"
    with ServerProcess.db(db, tmp_path / "server.log") as srv:
        with open_store(db) as store:
            good = store.create_token("ingest", ["up"], "ranks").value
            if how == "wrong":
                bad = T.generate("ingest")[0]
            elif how == "revoked":
                bad = store.create_token("ingest", ["up"], "old").value
                store.revoke_token(T.parse(bad)[1])
            else:
                bad = store.create_token("ingest", ["elsewhere"], "other").value
        data = tmp_path / "data"
        _, err = _torchrun(data, "refused", srv.url, bad, tmp_path, **extra)
        assert err.count(REFUSED) == WORLD, err  # once per rank
        refusals = [line for line in err.splitlines() if REFUSED in line]
        for line in refusals:  # one short line per rank, naming the one fix
            assert "RANKWISE_TOKEN" in line and "rankwise sync" in line, line
            assert "--role ingest" in line and "--role read" not in line, line
            assert len(line.replace(str(data), "DIR")) < 360, line  # was ~700
        assert {line.split(": ")[2] for line in refusals} == {f"rank-{r}" for r in range(WORLD)}
        # init printed no link to a run page the server will never have
        assert "see it at" not in err and "/#/p/up/r/refused" not in err, err
        assert "rankwise: run up/refused in" in err  # the local line instead
        assert _secret(bad) not in err and _secret(good) not in err
        assert "not uploaded" not in err  # no second warning at finish
        assert rankwise.Api(server=srv.url, token=srv.token).projects() == []
        local = rankwise.Api(dir=data).run("refused", project="up")
        assert len(local.history()) == WORLD * STEPS * 2  # all kept on disk

        first = sync_cli(data, srv.url, "--token", good)
        assert f"synced {WORLD} stream(s)" in first
        remote = rankwise.Api(server=srv.url, token=srv.token).run("refused", project="up")
        assert_same_history(local, remote, db)
        assert "0 new bytes" in sync_cli(data, srv.url, "--token", good)
        again = rankwise.Api(server=srv.url, token=srv.token).run("refused", project="up")
        assert_same_history(local, again, db)  # still exactly once
    for f in data.rglob("*.rwlog"):
        assert _secret(bad).encode() not in f.read_bytes()
