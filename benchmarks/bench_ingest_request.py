"""The CPU one ``POST /api/v1/ingest`` costs a server process, HTTP parsing aside.

``--ranks`` simulated ranks each post one second of records at a time (a ``Metrics``
record of 50 values, the load harness's shape), compressed as the SDK sends them
(``_http.default_encoding``) with an ingest token (``--no-auth``: none, as
``rankwise ui``), straight into the app's ASGI callable: no socket, no h11, so what is
left is the app's own work (middleware, routing, dependencies, authentication, the
checks, the group commit, the store, and the compactor thread folding what they store).
``--concurrency`` requests are in flight at a time (the group commit batches them). The
figure is the process's CPU (``time.process_time``, every thread) per request, which
does not grow when other work shares the machine; wall time per request is printed
beside it.

``--per-node K``: the ranks of a node post together, K streams in one ``POST
/api/v1/ingest/batch`` (the SDK's ``node_upload``); the figure is then the CPU per
stream's upload, so the two modes compare directly.

    python benchmarks/bench_ingest_request.py [--ranks 200] [--requests 4000]
        [--concurrency 16] [--rounds 3] [--no-auth] [--per-node 8]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rankwise._http import compress, default_encoding
from rankwise.server import ServerSettings, create_app
from rankwise.store import open_store
from rankwise.stream import records as R
from rankwise.stream.frames import MAGIC, encode_frame
from rankwise.stream.wire import BATCH_CONTENT_TYPE, STREAM_CONTENT_TYPE

KEYS = [f"train/m{j:02d}" for j in range(50)]


class Rank:
    """One rank's stream: the frames written since its last post."""

    def __init__(self, rank: int) -> None:
        self.rank, self.seq, self.step = rank, 0, 0
        start = R.StreamStart(0, time.time(), "p", "run", f"rank-{rank}", 0, rank=rank,
                              world_size=-1, run_mode="shared")  # fmt: skip
        self.pending = [encode_frame([start])]

    def tick(self) -> None:
        self.seq += 1
        values = {k: self.rank + self.step * 1e-3 + j for j, k in enumerate(KEYS)}
        self.pending.append(encode_frame([R.Metrics(self.seq, time.time(), self.step, values)]))
        self.step += 1

    def take(self) -> bytes:
        data, self.pending = MAGIC + b"".join(self.pending), []
        return data


async def post(app: Any, rank: Rank, encoding: str, token: str | None) -> int:
    query = {"project": "p", "run": "run", "label": f"rank-{rank.rank}", "incarnation": 0}
    return await _post(
        app, "/api/v1/ingest", urlencode(query), compress(rank.take(), encoding),
        STREAM_CONTENT_TYPE, encoding, token, rank.rank,
    )  # fmt: skip


async def post_node(app: Any, node: list[Rank], encoding: str, token: str | None) -> int:
    """One ``/ingest/batch`` of every rank of ``node``."""
    import msgspec

    parts = [{"project": "p", "run": "run", "label": f"rank-{r.rank}", "incarnation": 0,
              "body": r.take()} for r in node]  # fmt: skip
    body = compress(msgspec.msgpack.encode({"parts": parts}), encoding)
    return await _post(
        app, "/api/v1/ingest/batch", "", body, BATCH_CONTENT_TYPE, encoding, token, node[0].rank
    )


async def _post(
    app: Any, path: str, query: str, body: bytes, content_type: str, encoding: str,
    token: str | None, client: int,
) -> int:  # fmt: skip
    headers = [
        (b"host", b"127.0.0.1"),
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(body)).encode()),
        (b"accept", b"application/json"),
    ]
    if encoding != "identity":
        headers.append((b"content-encoding", encoding.encode()))
    if token is not None:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": path, "raw_path": path.encode(),
        "query_string": query.encode(), "root_path": "", "headers": headers,
        "client": ("127.0.0.1", 10_000 + client), "server": ("127.0.0.1", 80),
    }  # fmt: skip
    sent = False
    status: list[int] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)  # the client never disconnects
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    await app(scope, receive, send)
    return status[0]


async def one_round(args: argparse.Namespace) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{tmp}/bench.db")
        store.migrate()
        token = None if args.no_auth else store.create_token("ingest", ["p"], "bench").value
        settings = ServerSettings(
            auth=not args.no_auth, static_dir=Path(tmp) / "none", token_touch_interval=60.0
        )
        app = create_app(store, settings)
        encoding = default_encoding()
        ranks = [Rank(r) for r in range(args.ranks)]
        for rank in ranks:  # every stream and series made before the clock starts
            rank.tick()
            if await post(app, rank, encoding, token) != 200:
                raise SystemExit("the first upload was refused")
        k = max(1, args.per_node)
        nodes = [ranks[j : j + k] for j in range(0, len(ranks), k)]
        t0, c0, i, n = time.perf_counter(), time.process_time(), 0, 0
        codes: dict[int, int] = {}
        while i < args.requests:
            batch = []
            for _ in range(args.concurrency):
                if k > 1:
                    node = nodes[n % len(nodes)]
                    n += 1
                    for rank in node:
                        rank.tick()
                    batch.append(post_node(app, node, encoding, token))
                    i += len(node)
                    continue
                rank = ranks[i % len(ranks)]
                rank.tick()
                batch.append(post(app, rank, encoding, token))
                i += 1
            for code in await asyncio.gather(*batch):
                codes[code] = codes.get(code, 0) + 1
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        store.close()
    if set(codes) != {200}:
        raise SystemExit(f"replies other than 200: {codes}")
    return cpu / i * 1e6, wall / i * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=200)
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-auth", action="store_true")
    ap.add_argument("--per-node", type=int, default=0, help="streams per /ingest/batch request")
    args = ap.parse_args()
    got = [asyncio.run(one_round(args)) for _ in range(args.rounds)]
    cpu = statistics.median(c for c, _ in got)
    wall = statistics.median(w for _, w in got)
    rounds = ", ".join(f"{c:.0f}" for c, _ in got)
    how = f", {args.per_node} a request" if args.per_node > 1 else ""
    print(
        f"{args.requests} uploads of {args.ranks} ranks{how}, {args.concurrency} at a time, "
        f"auth {'off' if args.no_auth else 'on'}: {cpu:.0f} µs CPU per upload (median of "
        f"[{rounds}]), {wall:.0f} µs wall"
    )


if __name__ == "__main__":
    main()
