"""The artifacts behind the golden replies in ``tests/data/golden/artifacts/``.

The dashboard's Vitest tests (``ui/test/artifacts.test.js``) read those JSON files as the
server's replies; ``tests/server/test_artifacts_golden.py`` publishes the same artifacts to a
real server (``publish_golden``) and checks its replies equal the files, so the UI is
tested against what the server really sends. ``tests/browser/test_artifacts_browser.py`` shows
them in Chromium. Markup in the ``accuracies`` artifact's description, a metadata value
and a file name checks that the dashboard renders them as text.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

from rankwise.artifacts.manifest import Entry, Manifest, hash_file
from rankwise.artifacts.remote import RemoteArtifacts
from rankwise.wire.artifacts import CommitRequest

from .env import REPO

GOLDEN = REPO / "tests" / "data" / "golden" / "artifacts"
PROJECT = "mnist"
XSS_META = '<img src=x onerror="window.__xss=21">'
XSS_DESC = "<script>window.__xss=22</script>accuracy per epoch"
XSS_FILE = "<img src=x onerror=window.__xss=23>.txt"
REFERENCE = "https://ossci-datasets.s3.amazonaws.com/mnist/train-images-idx3-ubyte.gz"
ACCURACIES = b'{"epoch": [1, 2], "accuracy": [0.95, 0.98]}\n'
MODEL_V0 = b"\x00" * 1000
MODEL_V1 = b"\x01" * 2_500_000

# Replies carry times the server chose (updated_at, the time of a use): a reply matches
# a golden file when everything else is equal and these are numbers.
SERVER_TIMES = frozenset({"updated_at", "time"})


def golden(name: str) -> Any:
    return json.loads((GOLDEN / f"{name}.json").read_text(encoding="utf-8"))


def _stage(root: Path, path: str, data: bytes) -> Entry:
    """A file as the SDK's local store keeps it (``<root>/<sha[:2]>/<sha>``), its entry."""
    src = root / "src" / uuid.uuid4().hex
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_bytes(data)
    entry = hash_file(src)
    entry.path = path
    dest = root / entry.digest[:2] / entry.digest
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(src, dest)
    return entry


def _commit(
    client: RemoteArtifacts,
    root: Path,
    name: str,
    type: str,
    files: dict[str, bytes | None],
    **kw: Any,
) -> None:
    entries = [
        Entry(path=p, ref=REFERENCE) if data is None else _stage(root, p, data)
        for p, data in files.items()
    ]
    req = CommitRequest(
        type=type,
        manifest=Manifest(entries=sorted(entries, key=lambda e: e.path)),
        client_id=uuid.uuid4().hex,
        **kw,
    )
    client.publish(name, req, root)


def publish_golden(server: str, token: str, root: Path) -> None:
    """Log the golden artifacts to ``server`` (project ``mnist``) and record their uses:
    run ``train-1`` logs ``mnist-cnn`` v0 and v1 (alias ``best``, a reference) and
    ``accuracies`` (markup in its description, metadata and a file name), and uses
    ``mnist-train`` (logged by ``prep-1``); ``eval-1`` (rank-0) and ``eval-2`` use
    ``mnist-cnn:best``."""
    with RemoteArtifacts(server, PROJECT, token) as client:
        _commit(
            client,
            root,
            "mnist-train",
            "dataset",
            {"train.bin": b"data" * 100},
            created_at=1794999000.0,
            run_id="prep-1",
        )
        _commit(
            client,
            root,
            "mnist-cnn",
            "model",
            {"model.pt": MODEL_V0},
            metadata={"epochs": 1},
            created_at=1795000100.5,
            run_id="train-1",
            label="rank-0",
        )
        _commit(
            client,
            root,
            "mnist-cnn",
            "model",
            {"model.pt": MODEL_V1, "eval/acc per epoch?.json": ACCURACIES, "source": None},
            aliases=["best"],
            description="the CNN after 2 epochs",
            metadata={
                "epochs": 2,
                "accuracy": 0.98,
                "layers": [32, 64],
                "opt": {"name": "sgd", "lr": 0.01},
            },
            created_at=1795000200.25,
            run_id="train-1",
            label="rank-0",
        )
        _commit(
            client,
            root,
            "accuracies",
            "result",
            {"accuracies.json": ACCURACIES, XSS_FILE: b"<b>not bold</b>\n"},
            description=XSS_DESC,
            metadata={"note": XSS_META, "epochs": [1, 2]},
            created_at=1795000201.0,
            run_id="train-1",
            label="rank-1",
        )
        client.use("mnist-train", "latest", run_id="train-1", label="rank-0")
        client.use("mnist-cnn", "best", run_id="eval-1", label="rank-0")
        client.use("mnist-cnn", "best", run_id="eval-2")


def without_times(value: Any) -> Any:
    """``value`` with the server-chosen times (``SERVER_TIMES``) checked to be positive
    numbers and replaced by 0, everywhere in it."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in SERVER_TIMES:
                assert isinstance(v, float | int) and v > 0, f"{k}: {v!r}"
                out[k] = 0
            else:
                out[k] = without_times(v)
        return out
    if isinstance(value, list):
        return [without_times(v) for v in value]
    return value
