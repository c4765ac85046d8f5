"""Artifacts, remote: upload throughput of a big file, the client's memory, a re-publish.

    .venv/bin/python benchmarks/bench_artifacts_upload.py --mib 1024
    .venv/bin/python benchmarks/bench_artifacts_upload.py --mib 1024 --s3

A file of ``--mib`` MiB of random bytes is hashed into 32 MiB chunks (``hash_file``, as
the SDK stages it) and published with ``RemoteArtifacts.publish`` to a real ``rankwise
server`` in a subprocess (SQLite, authentication on) whose blob store is a local
directory, or with ``--s3`` moto's S3 server (another subprocess) through
``--blobs s3://...``. Printed: the upload's MB/s (10^6 bytes per second, chunks PUT and
the commit; hashing excluded, it happens when the artifact is staged), the client's
RSS growth during the upload and its peak RSS (sampled every 5 ms), and the bytes a second publish
of the same content sends (0: every chunk is on the server already). Each round uses a
fresh server.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from rankwise.artifacts.manifest import CHUNK_BYTES, Manifest, hash_file
from rankwise.artifacts.remote import RemoteArtifacts
from rankwise.store import open_store
from rankwise.wire.artifacts import CommitRequest

MiB = 1024 * 1024


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class Peak:
    """The highest RSS seen while running (sampled every 5 ms)."""

    def __init__(self) -> None:
        self.base = rss()
        self.peak = self.base
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, rss())

    def __enter__(self) -> Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def wait_up(url: str, token: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited:\n{log.read_text()}")
        try:
            r = httpx.get(url + "/api/v1/projects", headers={"Authorization": f"Bearer {token}"})
            if r.status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise SystemExit("server did not start")


def start_moto(tmp: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    cmd = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    with open(tmp / "moto.log", "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            httpx.get(endpoint)
            break
        except httpx.HTTPError:
            time.sleep(0.1)
    import s3fs  # type: ignore[import-untyped]

    fs = s3fs.S3FileSystem(endpoint_url=endpoint, key="testing", secret="testing")
    fs.mkdir("bench-artifacts")
    return proc, endpoint


def one_round(
    src: Path, entry_files: Path, req: CommitRequest, s3: bool, parallel: int
) -> dict[str, float]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-art-up-"))
    db = f"sqlite:///{tmp / 'server.db'}"
    with open_store(db) as store:
        store.migrate()
        token = store.create_token("admin", None, "bench").value
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKWISE_")}
    env.update(
        AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1"
    )
    moto = None
    blobs = ["--blobs", str(tmp / "blobs")]
    if s3:
        moto, endpoint = start_moto(tmp, env)
        blobs = ["--blobs", "s3://bench-artifacts/blobs", "--blobs-endpoint", endpoint]
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp / "server.log"
    cmd = [sys.executable, "-m", "rankwise.cli", "server", "--db", db, "--port", str(port)]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd + blobs, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        wait_up(url, token, proc, log)
        with RemoteArtifacts(url, "bench", token, timeout=120, parallel=parallel) as client:
            with Peak() as peak:
                t0 = time.perf_counter()
                info = client.publish("big", req, entry_files)
                took = time.perf_counter() - t0
            first = client.sent_bytes
            assert first == src.stat().st_size, (first, src.stat().st_size)
            req2 = CommitRequest(type="model", manifest=req.manifest, client_id=uuid.uuid4().hex)
            again = client.publish("big", req2, entry_files)
            second = client.sent_bytes - first
            assert again.version == info.version == "v0"
    finally:
        proc.terminate()
        proc.wait(30)
        if moto is not None:
            moto.terminate()
            moto.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "seconds": took,
        "mb_s": src.stat().st_size / took / 1e6,
        "rss_growth_mib": (peak.peak - peak.base) / MiB,
        "rss_peak_mib": peak.peak / MiB,
        "second_bytes": float(second),
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mib", type=int, default=1024)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--s3", action="store_true", help="moto's S3 server as the blob store")
    p.add_argument("--parallel", type=int, default=8, help="chunks uploaded at once")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-art-src-"))
    try:
        src = work / "model.bin"
        with open(src, "wb") as f:
            for _ in range(args.mib):
                f.write(os.urandom(MiB))
        entry = hash_file(src)
        entry.path = "model.bin"
        files = work / "files"  # staged as the SDK's local store keeps files
        (files / entry.digest[:2]).mkdir(parents=True)
        os.replace(src, files / entry.digest[:2] / entry.digest)
        src = files / entry.digest[:2] / entry.digest
        req = CommitRequest(
            type="model", manifest=Manifest(entries=[entry]), client_id=uuid.uuid4().hex
        )
        results = [one_round(src, files, req, args.s3, args.parallel) for _ in range(args.rounds)]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    where = "moto S3" if args.s3 else "local dir"
    print(
        f"{args.mib} MiB in {CHUNK_BYTES // MiB} MiB chunks to a local server ({where} blobs), "
        f"median of {args.rounds}:"
    )
    for key in ("seconds", "mb_s", "rss_growth_mib", "rss_peak_mib", "second_bytes"):
        vals = [r[key] for r in results]
        each = ", ".join(f"{v:.1f}" for v in vals)
        print(f"  {key:14s} {statistics.median(vals):10.1f}   ({each})")


if __name__ == "__main__":
    main()
