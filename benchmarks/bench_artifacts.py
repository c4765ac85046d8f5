"""Artifacts: ``log_artifact`` of a large file, local staging, re-logging identical content.

Each round, in a fresh process (so peak RSS is this round's):

* the time ``run.log_artifact`` takes to return on the training thread (target <= 50 ms
  for a 1 GiB file: it records paths only; hashing and copying are the worker's);
* the local stage: hash + copy into the store's ``files/``, as MB/s of the file;
* the process's peak RSS above what it was before logging (bounded: a 4 MiB read buffer,
  never the file);
* re-logging identical content: bytes copied (target 0) and whether a version was made.

``--server URL`` also publishes the staged file to that rankwise server
(``measure_server_upload``). The upload benchmark with its own server, local or moto S3
blob store, is ``bench_artifacts_upload.py``.

    .venv/bin/python benchmarks/bench_artifacts.py --size-mib 1024 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

ROUND = textwrap.dedent(
    """
    import json, resource, sys, time
    import rankwise
    path, data = sys.argv[1], sys.argv[2]
    run = rankwise.init(project="bench", dir=data, system=False, console="off",
                        settings={"finish_timeout": 600})
    small = data + "/warm.txt"
    open(small, "w").write("warm")
    run.log_artifact(small, name="warm", type="t").wait()  # imports + worker thread
    art = rankwise.Artifact("big", "model")
    art.add_file(path)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    t0 = time.perf_counter()
    run.log_artifact(art)
    returned = time.perf_counter() - t0
    art.wait()
    staged = time.perf_counter() - t0
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    again = rankwise.Artifact("big", "model")
    again.add_file(path)
    t1 = time.perf_counter()
    run.log_artifact(again).wait()
    relog = time.perf_counter() - t1
    run.finish()
    print(json.dumps({
        "returned_s": returned, "stage_s": staged, "size": art.size,
        "rss_before": rss0, "rss_growth": rss1 - rss0, "copied": art.bytes_copied,
        "relog_copied": again.bytes_copied, "relog_version": again.version,
        "version": art.version, "relog_s": relog,
    }))
    """
)


def make_file(path: Path, size_mib: int) -> None:
    """Random bytes, every MiB its own (no two chunks alike, so none is deduplicated)."""
    with open(path, "wb") as f:
        for _ in range(size_mib):
            f.write(os.urandom(1 << 20))


def one_round(path: Path, work: Path) -> dict[str, Any]:
    data = Path(tempfile.mkdtemp(dir=work))
    out = subprocess.run(
        [sys.executable, "-c", ROUND, str(path), str(data)],
        capture_output=True,
        text=True,
        check=True,
    )
    subprocess.run(["rm", "-rf", str(data)], check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


UPLOAD = textwrap.dedent(
    """
    import json, resource, sys, time, uuid
    from pathlib import Path
    from rankwise.artifacts.local import LocalArtifacts
    from rankwise.wire.artifacts import CommitRequest
    from rankwise.artifacts.remote import RemoteArtifacts
    from rankwise.artifacts.worker import stage
    path, data, url = sys.argv[1], sys.argv[2], sys.argv[3]
    store = LocalArtifacts(data, "bench")
    files = [("big.bin", path, None)]
    manifest, _ = stage(files, store)
    name = "upload-" + uuid.uuid4().hex[:8]
    client = RemoteArtifacts(server=url, project="bench")
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    t = time.perf_counter()
    req = CommitRequest(type="model", manifest=manifest, client_id=uuid.uuid4().hex)
    info = client.publish(name, req, store.files_root)
    took = time.perf_counter() - t
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    sent = client.sent_bytes
    again = CommitRequest(type="model", manifest=manifest, client_id=uuid.uuid4().hex)
    info2 = client.publish(name, again, store.files_root)
    client.close()
    print(json.dumps({"seconds": took, "sent": sent, "rss_growth": rss1 - rss0,
                      "version": info.version, "relog_sent": client.sent_bytes - sent,
                      "relog_version": info2.version}))
    """
)


def measure_server_upload(url: str, path: Path) -> dict[str, Any] | None:
    """Upload of ``path`` (staged first, off the clock) to the server at ``url`` through
    ``RemoteArtifacts`` (token: ``RANKWISE_TOKEN``): MB/s, peak RSS growth, and bytes
    sent by a re-log of the same content (target 0). None without the remote client."""
    try:
        import rankwise.artifacts.remote  # noqa: F401
    except ImportError:
        return None
    data = tempfile.mkdtemp(dir=path.parent)
    out = subprocess.run(
        [sys.executable, "-c", UPLOAD, str(path), data, url],
        capture_output=True,
        text=True,
        check=True,
    )
    subprocess.run(["rm", "-rf", data], check=True)
    got = dict(json.loads(out.stdout.strip().splitlines()[-1]))
    got["MB/s"] = round(got["sent"] / 1e6 / got["seconds"], 1)
    got["rss_growth_MiB"] = round(got.pop("rss_growth") / 2**20, 1)
    return got


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size-mib", type=int, default=1024)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--dir", default=None, help="where the file and stores go (a temp dir)")
    p.add_argument("--server", default=None, help="also measure upload to this server")
    a = p.parse_args()
    work = Path(a.dir or tempfile.mkdtemp(prefix="rankwise-bench-artifacts-"))
    work.mkdir(parents=True, exist_ok=True)
    path = work / "big.bin"
    make_file(path, a.size_mib)
    rounds = [one_round(path, work) for _ in range(a.rounds)]
    mb = a.size_mib * 2**20 / 1e6
    ms = [r["returned_s"] * 1e3 for r in rounds]
    rate = [mb / r["stage_s"] for r in rounds]
    growth = [r["rss_growth"] / 2**20 for r in rounds]
    print(f"file: {a.size_mib} MiB, {a.rounds} rounds (fresh process each)")
    print(f"log_artifact returned in: {', '.join(f'{x:.2f}' for x in ms)} ms "
          f"(median {statistics.median(ms):.2f} ms; target <= 50)")  # fmt: skip
    print(f"local stage (hash + copy): {', '.join(f'{x:.0f}' for x in rate)} MB/s "
          f"(median {statistics.median(rate):.0f})")  # fmt: skip
    print(f"peak RSS growth while staging: {', '.join(f'{x:.1f}' for x in growth)} MiB "
          f"(process before: {rounds[0]['rss_before'] / 2**20:.0f} MiB)")  # fmt: skip
    print(
        "re-log of identical content: "
        + ", ".join(f"{r['relog_copied']} bytes copied, {r['relog_version']}" for r in rounds)
        + f" (in {statistics.median(r['relog_s'] for r in rounds):.2f} s: re-hashing)"
    )
    if a.server:
        print(f"server upload: {measure_server_upload(a.server, path) or 'not measured yet'}")
    path.unlink()


if __name__ == "__main__":
    main()
