"""Load simulator: N simulated ranks uploading to one real ``rankwise server``.

Each simulated rank speaks the real upload protocol with real frames: it builds the SDK's
records (``rankwise.stream.records``), encodes them with the SDK's frame encoder, keeps
them as its "stream file" in memory, and posts ``MAGIC`` + the unacknowledged frames to
``POST /api/v1/ingest`` exactly as ``rankwise.sdk.uploader`` does (same parameters,
content type and compression), advancing only past what the server acknowledged,
rewinding on 409, waiting as advised on 429/503 (``Retry-After``, with jitter) and
backing off on transport errors. Cadence per rank, from a random phase: a metrics record
of 50 values every second, a heartbeat every 5 s, a console line every 2 s, a system
sample every 10 s; one upload a second carries what is new. At the end each rank
appends its finish record and drains.

The ranks run as asyncio tasks spread over a few client processes, each rank with its own
keep-alive connection (``rawhttp.py`` beside it: the same request bytes as the SDK's httpx client
for a fraction of the CPU), so the harness fits on a small machine next to the server.
With ``--replicas N`` (PostgreSQL), N server processes share one database and each rank
sends its uploads to them in turn, as a client behind a load balancer may; with
``--duplicate K`` every K-th upload of a rank goes to two replicas at once (a retry
crossing the request it repeats). ``verify`` then reads every rank's history back
through the store, counts each series' stored points in SQL and the band's values per
step, and so checks that every point is there exactly once.

    python -m tests.helpers.loadsim --ranks 300 --seconds 30 [--db sqlite:///x.db]
        [--workers 2] [--max-inflight 256] [--clients 4] [--kill-server-at 10]
        [--replicas 2 --duplicate 5]

Used as a library by ``benchmarks/bench_load.py`` and the load tests (``tests/load/``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import queue
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rankwise._http import advised_interval, compress, default_encoding
from rankwise.sdk.retry import retry_after
from rankwise.sdk.uploader import INGEST
from rankwise.stream import records as R
from rankwise.stream.frames import MAGIC, encode_frame
from rankwise.stream.wire import BATCH_CONTENT_TYPE, STREAM_CONTENT_TYPE, UPLOAD_INTERVAL_HEADER

from .rawhttp import Connection, HttpError

PROJECT = "load"
BATCH = "/api/v1/ingest/batch"
METRICS = 50
KEYS = [f"train/m{j:02d}" for j in range(METRICS)]


def value(rank: int, step: int, j: int) -> float:
    """The value rank ``rank`` logs for metric ``j`` at ``step``: what ``verify`` expects."""
    return rank + step * 1e-3 + j * 1e-6


@dataclass
class Config:
    url: str
    run_id: str
    ranks: list[int]
    seconds: float
    proxy: str | None = None  # post through this URL instead (a network-cut test)
    drain_timeout: float = 120.0
    token: str | None = None  # sent as the SDK sends it (Authorization: Bearer)
    replicas: list[str] = field(default_factory=list)  # more servers: uploads rotate over them
    duplicate: int = 0  # every n-th upload goes to two replicas at once (0: never)
    tick: float = 1.0  # seconds between a rank's training steps (its records of "a second")
    # >1: the ranks of each node of this many share one uploader, which posts all their
    # streams in one request (``POST /api/v1/ingest/batch``) as the SDK's node upload does
    per_node: int = 0


@dataclass
class Stats:
    latencies: list[float] = field(default_factory=list)  # seconds per acknowledged POST
    acked_at: list[float] = field(default_factory=list)  # when each of them was acked
    statuses: dict[str, int] = field(default_factory=dict)
    points: int = 0  # metric values acknowledged
    points_at: list[tuple[float, int]] = field(default_factory=list)  # (when, values) acked
    load_from: float = 0.0  # wall time the ranks' training began (the earliest client's)
    load_to: float = 0.0  # and ended (the latest client's): the load window
    steps: dict[int, int] = field(default_factory=dict)  # rank -> steps logged
    undrained: list[int] = field(default_factory=list)  # ranks not fully acknowledged
    served: dict[str, int] = field(default_factory=dict)  # server URL -> uploads it acked
    # Seconds from a metrics record's creation to the ack that covered it (data lag).
    lags: list[float] = field(default_factory=list)
    lag_made: list[float] = field(default_factory=list)  # each of those records' creation
    advised: list[float] = field(default_factory=list)  # upload intervals the server asked
    cpu_s: float = 0.0  # the client processes' own CPU seconds

    def count(self, what: str) -> None:
        self.statuses[what] = self.statuses.get(what, 0) + 1


class SimRank:
    """One rank: its frames ("the stream file") and what the server acknowledged."""

    def __init__(self, cfg: Config, rank: int) -> None:
        self.cfg, self.rank = cfg, rank
        self.label = f"rank-{rank}"
        # first seq, last seq, frame, points, creation time
        self.frames: list[tuple[int, int, bytes, int, float]] = []
        self.advised = 0.0  # the upload interval the server last asked for (0: none)
        self.seq = 0
        self.acked = -1
        self.step = 0
        self.encoding = default_encoding()
        self.posts = 0
        self.params = {"project": PROJECT, "run": cfg.run_id, "label": self.label,
                       "incarnation": "0"}  # fmt: skip
        start = R.StreamStart(0, time.time(), PROJECT, cfg.run_id, self.label, 0,
                              rank=rank, world_size=-1, run_mode="shared")  # fmt: skip
        self._append([start])

    def _append(self, recs: list[Any]) -> None:
        points = sum(len(r.values) for r in recs if type(r) is R.Metrics)
        self.frames.append((recs[0].seq, recs[-1].seq, encode_frame(recs), points, time.time()))

    def _take(self) -> int:
        self.seq += 1
        return self.seq

    def tick(self, n: int) -> None:
        """Second ``n`` of training: the records one second of a real rank writes."""
        now = time.time()
        values = {k: value(self.rank, self.step, j) for j, k in enumerate(KEYS)}
        recs: list[Any] = [R.Metrics(self._take(), now, self.step, values)]
        self.step += 1
        if n % 2 == 0:
            recs.append(R.Console(self._take(), now, "stdout", [f"step {self.step} ok"], [now]))
        if n % 5 == 0:
            recs.append(R.Heartbeat(self._take(), now, self.step - 1, 0))
        if n % 10 == 0:
            sample = {"node/cpu_percent": 50.0, "proc/rss_mb": 1000.0 + n}
            recs.append(R.System(self._take(), now, sample))
        self._append(recs)

    def finish(self) -> None:
        self._append([R.Finish(self._take(), time.time(), "finished", last_step=self.step - 1)])

    def body(self, limit: int = 4 * 1024 * 1024) -> tuple[bytes, int]:
        """MAGIC + the frames above the mark (at most ``limit`` bytes), and their points."""
        out: list[bytes] = []
        size, points = 0, 0
        for first, last, frame, pts, _ in self.frames:
            if last <= self.acked:
                continue
            if out and size + len(frame) > limit:
                break
            out.append(frame)
            size += len(frame)
            points += pts if first > self.acked else 0
        return (MAGIC + b"".join(out) if out else b""), points

    def acknowledged(self, mark: int, points: int, stats: Stats) -> None:
        """The server holds this stream up to ``mark``: count what was new, once."""
        if mark > self.acked:  # counted once, however many replicas acknowledged it
            stats.points += points
            now = time.time()
            stats.points_at.append((now, points))
            made = [t for f, last, _, p, t in self.frames
                    if p and f > self.acked and last <= mark]  # fmt: skip
            stats.lags += [now - t for t in made]
            stats.lag_made += made
        self.acked = max(self.acked, mark)
        self.drop_acked()

    def drop_acked(self) -> None:
        # Frames at or below the mark are kept only while a 409 could rewind to them.
        while len(self.frames) > 64 and self.frames[0][1] <= self.acked:
            self.frames.pop(0)

    def _targets(self) -> list[str]:
        """Where this upload goes: the one server, or the replicas in turn (two of them
        at once for every ``duplicate``-th upload)."""
        urls = self.cfg.replicas
        self.posts += 1
        if not urls:
            return [INGEST]
        first = (self.rank + self.posts) % len(urls)
        picked = [urls[first]]
        if self.cfg.duplicate and self.posts % self.cfg.duplicate == 0 and len(urls) > 1:
            picked.append(urls[(first + 1) % len(urls)])
        return [u + INGEST for u in picked]

    async def upload(self, client: Client, stats: Stats) -> float | None:
        """One POST of what is new; returns seconds to wait before the next, if advised."""
        body, points = self.body()
        if not body:
            return None
        headers = {"Accept": "application/json", "Content-Type": STREAM_CONTENT_TYPE}
        if self.cfg.token:  # as the SDK sends it
            headers["Authorization"] = f"Bearer {self.cfg.token}"
        if self.encoding != "identity":
            headers["Content-Encoding"] = self.encoding
        content = compress(body, self.encoding)
        waits = await asyncio.gather(
            *(self._post(client, url, content, headers, points, stats) for url in self._targets())
        )
        advised = [w for w in waits if w is not None]
        return max(advised) if len(advised) == len(waits) else None

    async def _post(
        self, client: Client, url: str, content: bytes, headers: dict[str, str], points: int,
        stats: Stats,
    ) -> float | None:  # fmt: skip
        t0 = time.perf_counter()
        try:
            r = await client.post(url, self.params, headers, content)
        except HttpError as exc:
            stats.count(str(exc))
            return random.uniform(0.5, 1.5)
        stats.count(str(r.status_code))
        if r.status_code == 200:
            stats.latencies.append(time.perf_counter() - t0)
            stats.acked_at.append(time.time())
            where = url.removesuffix(INGEST) or self.cfg.url
            stats.served[where] = stats.served.get(where, 0) + 1
            self.advised = advised_interval(r.headers.get(UPLOAD_INTERVAL_HEADER))
            if self.advised:
                stats.advised.append(self.advised)
            self.acknowledged(int(r.json()["acked_seq"]), points, stats)
            return None
        if r.status_code == 409:
            self.acked = int(r.json()["error"].get("acked_seq", -1))
            return None
        if r.status_code in (429, 503):
            advised = retry_after(r.headers.get("retry-after")) or 1.0
            return advised * random.uniform(1.0, 1.5)
        return random.uniform(0.5, 1.5)


class Client:
    """A rank's HTTP client: one keep-alive connection per server it posts to, as each SDK
    process has its own (``rawhttp``: the harness must cost less than the server)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self._conns: dict[str, Connection] = {}

    async def post(
        self, url: str, params: dict[str, str], headers: dict[str, str], body: bytes
    ) -> Any:
        base, path = (self.base, url) if url.startswith("/") else _split(url)
        conn = self._conns.get(base)
        if conn is None:
            conn = self._conns[base] = Connection(base)
        r = await conn.post(path, params, headers, body)
        return _Reply(r.status, r.headers, r.body)

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()


class _Headers(dict[str, str]):
    """Reply headers by lower-cased name, looked up case-insensitively."""

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key.lower(), default)


def _split(url: str) -> tuple[str, str]:
    scheme, _, rest = url.partition("://")
    host, _, path = rest.partition("/")
    return f"{scheme}://{host}", "/" + path


class _Reply:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status_code, self.headers, self.body = status, _Headers(headers), body

    def json(self) -> Any:
        return json.loads(self.body)


async def _train(sim: SimRank, stats: Stats, t_end: float, done: asyncio.Future[None]) -> None:
    """A rank's training: a tick every ``cfg.tick`` seconds until ``t_end``, then its
    finish record; ``done`` is set then."""
    n, next_tick = 0, time.monotonic()
    while time.monotonic() < t_end:
        sim.tick(n)
        n += 1
        next_tick += sim.cfg.tick
        await asyncio.sleep(max(0.0, next_tick - time.monotonic()))
    stats.steps[sim.rank] = sim.step
    sim.finish()
    done.set_result(None)


async def _rank_task(
    sim: SimRank, client: Client, stats: Stats, t_end: float, drain: float
) -> None:
    """A rank's training (a tick a second) and its uploader, as two tasks: as in the
    SDK, a slow server delays uploads, never the training loop."""
    await asyncio.sleep(random.uniform(0, 1.0))  # ranks do not start in lockstep
    training = asyncio.get_running_loop().create_future()

    async def train() -> None:
        await _train(sim, stats, t_end, training)

    async def upload() -> None:
        give_up = t_end + drain
        while time.monotonic() < give_up:
            done = training.done()
            if done and sim.acked >= sim.seq:
                return
            t0 = time.monotonic()
            wait = await sim.upload(client, stats)
            if wait is None:  # as the SDK: at most one upload a second while training,
                # or one per the interval the server asked for
                pace = sim.advised * random.uniform(0.8, 1.2) if sim.advised else 1.0
                wait = 0.05 if done else max(0.0, max(1.0, pace) - (time.monotonic() - t0))
            await asyncio.sleep(wait)
        stats.undrained.append(sim.rank)

    await asyncio.gather(train(), upload())


async def _node_task(
    sims: list[SimRank], client: Client, stats: Stats, t_end: float, drain: float
) -> None:
    """The ranks of one node, each training on its own, and the node's one uploader
    posting every stream's new frames in one request (``/ingest/batch``)."""
    loop = asyncio.get_running_loop()
    trained = [loop.create_future() for _ in sims]

    async def train(sim: SimRank, done: asyncio.Future[None]) -> None:
        await asyncio.sleep(random.uniform(0, 1.0))  # ranks do not start in lockstep
        await _train(sim, stats, t_end, done)

    async def upload() -> None:
        await asyncio.sleep(random.uniform(0, 1.0))
        give_up, advised = t_end + drain, 0.0
        while time.monotonic() < give_up:
            done = all(f.done() for f in trained)
            if done and all(s.acked >= s.seq for s in sims):
                return
            t0 = time.monotonic()
            wait, advised = await _post_batch(sims, client, stats, advised)
            if wait is None:
                pace = advised * random.uniform(0.8, 1.2) if advised else 1.0
                wait = 0.05 if done else max(0.0, max(1.0, pace) - (time.monotonic() - t0))
            await asyncio.sleep(wait)
        stats.undrained.extend(s.rank for s in sims if s.acked < s.seq)

    await asyncio.gather(upload(), *(train(s, d) for s, d in zip(sims, trained, strict=True)))


async def _post_batch(
    sims: list[SimRank], client: Client, stats: Stats, advised: float
) -> tuple[float | None, float]:
    """One ``/ingest/batch`` of what is new in each stream: (the wait a refusal asks,
    the interval the server advised)."""
    import msgspec

    share = 4 * 1024 * 1024 // len(sims)
    taken = [(sim, *sim.body(share)) for sim in sims]
    taken = [(sim, body, points) for sim, body, points in taken if body]
    if not taken:
        return None, advised
    cfg = sims[0].cfg
    parts = [{"project": PROJECT, "run": cfg.run_id, "label": sim.label, "incarnation": 0,
              "body": body} for sim, body, _ in taken]  # fmt: skip
    encoding = sims[0].encoding
    headers = {"Accept": "application/json", "Content-Type": BATCH_CONTENT_TYPE}
    if cfg.token:
        headers["Authorization"] = f"Bearer {cfg.token}"
    if encoding != "identity":
        headers["Content-Encoding"] = encoding
    content = compress(msgspec.msgpack.encode({"parts": parts}), encoding)
    where = sims[0]._targets()[0].removesuffix(INGEST)  # the replicas in turn, if any
    t0 = time.perf_counter()
    try:
        r = await client.post(where + BATCH, {}, headers, content)
    except HttpError as exc:
        stats.count(str(exc))
        return random.uniform(0.5, 1.5), advised
    stats.count(str(r.status_code))
    if r.status_code in (429, 503):
        wait = retry_after(r.headers.get("retry-after")) or 1.0
        return wait * random.uniform(1.0, 1.5), advised
    if r.status_code != 200:
        return random.uniform(0.5, 1.5), advised
    stats.latencies.append(time.perf_counter() - t0)
    stats.acked_at.append(time.time())
    stats.served[where or cfg.url] = stats.served.get(where or cfg.url, 0) + 1
    advised = advised_interval(r.headers.get(UPLOAD_INTERVAL_HEADER))
    if advised:
        stats.advised.append(advised)
    for (sim, _, points), answer in zip(taken, r.json()["parts"], strict=True):
        if "acked_seq" in answer:
            sim.acknowledged(int(answer["acked_seq"]), points, stats)
        else:
            stats.count(f"part {answer['error']['status']}")
            if answer["error"]["status"] == 409:
                sim.acked = int(answer["error"].get("acked_seq", -1))
    return None, advised


async def _client_main(cfg: Config) -> Stats:
    stats = Stats()
    t_end = time.monotonic() + cfg.seconds
    stats.load_from = time.time()
    stats.load_to = stats.load_from + cfg.seconds
    sims = [SimRank(cfg, r) for r in cfg.ranks]
    if cfg.per_node > 1:
        nodes = [sims[i : i + cfg.per_node] for i in range(0, len(sims), cfg.per_node)]
        await asyncio.gather(*(_node_client(n, cfg, stats, t_end) for n in nodes))
        return stats
    await asyncio.gather(*(_rank_client(s, cfg, stats, t_end) for s in sims))
    return stats


async def _node_client(sims: list[SimRank], cfg: Config, stats: Stats, t_end: float) -> None:
    client = Client(cfg.proxy or cfg.url)
    try:
        await _node_task(sims, client, stats, t_end, cfg.drain_timeout)
    finally:
        client.close()


async def _rank_client(sim: SimRank, cfg: Config, stats: Stats, t_end: float) -> None:
    client = Client(cfg.proxy or cfg.url)
    try:
        await _rank_task(sim, client, stats, t_end, cfg.drain_timeout)
    finally:
        client.close()


def _client_process(cfg: Config, out: Any) -> None:
    cpu = time.process_time()
    stats = asyncio.run(_client_main(cfg))
    stats.cpu_s = time.process_time() - cpu
    out.put(asdict(stats))


def run_clients(cfg: Config, clients: int) -> Stats:
    """The ranks of ``cfg`` over ``clients`` processes; their merged stats."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = []
    for i in range(clients):
        ranks = cfg.ranks[i::clients]
        if cfg.per_node > 1:  # whole nodes to each client process
            k = cfg.per_node
            nodes = [cfg.ranks[j : j + k] for j in range(0, len(cfg.ranks), k)]
            ranks = [r for node in nodes[i::clients] for r in node]
        part = Config(**{**asdict(cfg), "ranks": ranks})
        if part.ranks:
            p = ctx.Process(target=_client_process, args=(part, out), daemon=True)
            p.start()
            procs.append(p)
    merged = Stats()
    deadline = time.monotonic() + cfg.seconds + cfg.drain_timeout + 120
    for _ in procs:
        while True:  # a client process that died must fail the run, not hang it
            try:
                got = out.get(timeout=1.0)
                break
            except queue.Empty:
                dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
                if dead or time.monotonic() > deadline:
                    for p in procs:
                        p.kill()
                    raise RuntimeError(f"client processes failed (exit codes {dead})") from None
        merged.latencies += got["latencies"]
        merged.acked_at += got["acked_at"]
        for k, v in got["statuses"].items():
            merged.statuses[k] = merged.statuses.get(k, 0) + v
        merged.points += got["points"]
        merged.points_at += [tuple(x) for x in got["points_at"]]
        merged.load_from = min(merged.load_from or got["load_from"], got["load_from"])
        merged.load_to = max(merged.load_to, got["load_to"])
        merged.steps.update({int(k): v for k, v in got["steps"].items()})
        merged.undrained += got["undrained"]
        for k, v in got["served"].items():
            merged.served[k] = merged.served.get(k, 0) + v
        merged.lags += got["lags"]
        merged.lag_made += got["lag_made"]
        merged.advised += got["advised"]
        merged.cpu_s += got["cpu_s"]
    for p in procs:
        p.join(10)
    return merged


def verify(db_url: str, run_id: str, steps: dict[int, int]) -> list[str]:
    """Every point of every rank stored exactly once; the problems found (none: []).

    Three looks, since ``history`` merges rows by (stream, seq) and so shows a point
    stored twice once: the rows and values (``history_problems``), the points each
    series holds counted in SQL, and the band's count at each step, which must be the
    number of ranks that logged that step (``double_problems``)."""
    from rankwise.store import open_store

    store = open_store(db_url)
    try:
        return history_problems(store, run_id, steps) + double_problems(store, run_id, steps)
    finally:
        store.close()


def history_problems(store: Any, run_id: str, steps: dict[int, int]) -> list[str]:
    """Each rank's history rows are its steps 0..n-1 with the values it logged."""
    problems = []
    for rank, n in sorted(steps.items()):
        rows = store.history(PROJECT, run_id, keys=KEYS, label=f"rank-{rank}")
        got = [r["step"] for r in rows]
        if got != list(range(n)):
            problems.append(f"rank {rank}: steps {_summary(got)}, want 0..{n - 1}")
            continue
        for r in rows:
            want = [value(rank, r["step"], j) for j in range(METRICS)]
            if [r.get(k) for k in KEYS] != want:
                problems.append(f"rank {rank} step {r['step']}: wrong values")
                break
    return problems


def double_problems(store: Any, run_id: str, steps: dict[int, int]) -> list[str]:
    """Each series holds exactly its rank's steps (counted in SQL), and the band counts
    at each step as many values as ranks logged it: a point stored twice shows here."""
    problems = []
    stored = store.stored_points(PROJECT, run_id)
    for rank, n in sorted(steps.items()):
        wrong = {k: stored.get((f"rank-{rank}", k), 0) for k in KEYS}
        wrong = {k: c for k, c in wrong.items() if c != n}
        if wrong:
            k, c = next(iter(wrong.items()))
            problems.append(f"rank {rank}: {len(wrong)} series hold other than {n} points "
                            f"({k}: {c})")  # fmt: skip
    top = max(steps.values(), default=0)
    want = [sum(1 for n in steps.values() if n > s) for s in range(top)]
    for k in KEYS:
        band = store.band(PROJECT, run_id, k, max_points=10**9)
        got = dict(zip(band.step, band.n))
        bad = [s for s in range(top) if got.get(s, 0) != want[s]]
        if bad:
            s = bad[0]
            problems.append(f"band of {k}: {len(bad)} steps count other than the ranks that "
                            f"logged them (step {s}: {got.get(s, 0)}, want {want[s]})")  # fmt: skip
    return problems


def _summary(steps: list[int]) -> str:
    dup = len(steps) - len(set(steps))
    return f"{len(steps)} rows ({dup} doubled)"


class Server:
    """``rankwise server`` in a subprocess, with its CPU and RSS sampled by psutil."""

    def __init__(
        self, db: str, port: int, *extra: str, log: Path | None = None, token: str | None = None
    ) -> None:
        self.db, self.port, self.extra = db, port, extra
        self.url = f"http://127.0.0.1:{port}"
        self.log = log or Path(tempfile.mkstemp(prefix="rankwise-server-", suffix=".log")[1])
        self.proc: subprocess.Popen[bytes] | None = None
        self.samples: list[tuple[float, float]] = []  # (cpu seconds, rss bytes)
        self.token: str | None = token
        if token is None and "--insecure-no-auth" not in extra:  # as users run it: a token
            from rankwise.store import open_store

            store = open_store(db)
            try:
                store.migrate()
                self.token = store.create_token("admin", None, "loadsim").value
            finally:
                store.close()

    def start(self, timeout: float = 60.0) -> Server:
        import httpx

        cmd = [sys.executable, "-m", "rankwise.cli", "server", "--db", self.db,
               "--port", str(self.port), *self.extra]  # fmt: skip
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log.read_text()[-2000:]}")
            try:
                headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
                reply = httpx.get(self.url + "/api/v1/projects", timeout=1, headers=headers)
                if reply.status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"server did not start within {timeout}s")

    def sample(self) -> None:
        """CPU seconds and RSS of the server and its worker processes, now."""
        import psutil

        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            top = psutil.Process(self.proc.pid)
            procs = [top, *top.children(recursive=True)]
            cpu = sum(sum(p.cpu_times()[:2]) for p in procs)
            rss = sum(p.memory_info().rss for p in procs)
        except psutil.Error:
            return
        self.samples.append((cpu, rss))

    def kill(self) -> None:
        """SIGKILL the server and its workers: no shutdown code runs, as when a node dies."""
        import psutil

        if self.proc is not None and self.proc.poll() is None:
            try:
                children = psutil.Process(self.proc.pid).children(recursive=True)
            except psutil.Error:
                children = []
            self.proc.kill()
            for child in children:
                try:
                    child.kill()
                except psutil.Error:
                    pass
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def simulate(
    ranks: int,
    seconds: float,
    db: str,
    *,
    clients: int = 4,
    server_args: tuple[str, ...] = (),
    kill_server_at: float | None = None,
    down_for: float = 2.0,
    port: int | None = None,
    via: str | None = None,
    on_tick: Callable[[float, Server], None] | None = None,
    drain_timeout: float = 120.0,
    replicas: int = 1,
    duplicate: int = 0,
    warmup: float = 20.0,
    tick: float = 1.0,
    dashboard: float | None = None,
    per_node: int = 0,
) -> dict[str, Any]:
    """One load run against a fresh ``rankwise server``; the figures, verified.

    ``via``: the URL the ranks post to instead of the server's (a proxy a test cuts);
    ``on_tick(seconds, server)`` is called about once a second (faults are injected
    there); ``kill_server_at`` SIGKILLs the server then and restarts it ``down_for``
    seconds later. ``replicas``: that many server processes on the one database ``db``
    (PostgreSQL), the ranks' uploads rotating over them, every ``duplicate``-th upload
    of a rank sent to two at once; the CPU and RSS figures are their sum. ``tick``: the
    seconds between a rank's steps (each step writes what one second does by default:
    ``tick`` 4 is a quarter of the step rate, for rank counts whose clients the machine
    cannot drive at full rate). ``per_node``: ranks of a node sharing one uploader that
    posts their streams together (``/ingest/batch``). ``dashboard``: every that many
    seconds, read what a run page polls (the band of 4 metrics and the health strip) and
    time it."""
    import threading

    port = port or _free_port()
    server = Server(db, port, *server_args).start()
    servers = [server]
    for _ in range(replicas - 1):
        servers.append(Server(db, _free_port(), *server_args, token=server.token).start())
    run_id = f"load-{ranks}-{int(time.time())}"
    cfg = Config(server.url, run_id, list(range(ranks)), seconds, via, drain_timeout, server.token,
                 [s.url for s in servers] if replicas > 1 else [], duplicate, tick,
                 per_node)  # fmt: skip
    done = threading.Event()
    cpu_window: list[tuple[float, float, float]] = []  # (wall, cpu, rss)

    def watch() -> None:
        t0 = time.monotonic()
        killed = False
        while not done.wait(1.0):
            for s in servers:
                s.sample()
            if all(s.samples for s in servers):
                cpu = sum(s.samples[-1][0] for s in servers)
                rss = sum(s.samples[-1][1] for s in servers)
                cpu_window.append((time.monotonic() - t0, cpu, rss))
            if kill_server_at is not None and not killed and time.monotonic() - t0 > kill_server_at:
                killed = True
                for s in servers:
                    s.kill()
                time.sleep(down_for)
                for s in servers:
                    s.start()
            if on_tick is not None:
                on_tick(time.monotonic() - t0, server)

    page_reads: list[float] = []

    def read_page() -> None:
        """A dashboard open on the run: what its page polls, timed as a whole."""
        import httpx

        auth = {"Authorization": f"Bearer {server.token}"} if server.token else {}
        at = f"/projects/{PROJECT}/runs/{run_id}"
        with httpx.Client(base_url=server.url + "/api/v1", headers=auth, timeout=300) as c:
            while not done.wait(dashboard):
                t = time.monotonic()
                try:
                    for key in KEYS[:4]:
                        c.get(at + "/series", params={"key": key, "streams": "none"})
                    c.get(at + "/health")
                except httpx.HTTPError:
                    continue
                page_reads.append(time.monotonic() - t)

    watcher = threading.Thread(target=watch, daemon=True)
    reader = threading.Thread(target=read_page, daemon=True)
    t_start, t0_wall = time.monotonic(), time.time()
    watcher.start()
    if dashboard:
        reader.start()
    try:
        stats = run_clients(cfg, clients)
    finally:
        done.set()
        watcher.join(30)
        if dashboard:
            reader.join(300)
        wall = time.monotonic() - t_start
        for s in servers:
            s.stop()
    problems = verify(db, run_id, stats.steps)
    cpu_pct = rss_max = float("nan")
    if len(cpu_window) >= 2 and kill_server_at is None and on_tick is None:
        (w0, c0, _), (w1, c1, _) = cpu_window[0], cpu_window[-1]
        cpu_pct = 100.0 * (c1 - c0) / max(1e-9, w1 - w0)
    if cpu_window:
        rss_max = max(r for _, _, r in cpu_window) / 2**20
    lat = stats.latencies
    # Steady state: the acks from `warmup` s into the load until training ends (the start,
    # when every rank creates its stream and series at once, and the final drain apart).
    steady = [x for x, at in zip(lat, stats.acked_at) if warmup <= at - t0_wall <= seconds]
    # The data lag of the records made in the same window (whenever they were acked).
    lag_steady = [
        x for x, made in zip(stats.lags, stats.lag_made) if warmup <= made - t0_wall <= seconds
    ]
    expected = sum(stats.steps.values()) * METRICS
    thru, drain = throughput(stats)
    return {
        "ranks": ranks,
        "replicas": replicas,
        "seconds": seconds,
        "wall_s": round(wall, 1),
        "requests_ok": len(lat),
        "ack_p50_s": round(pct(lat, 0.5), 4),
        "ack_p99_s": round(pct(lat, 0.99), 4),
        "ack_max_s": round(max(lat), 4) if lat else None,
        "ack_p50_steady_s": round(pct(steady, 0.5), 4),
        "ack_p99_steady_s": round(pct(steady, 0.99), 4),
        "steady_from_s": warmup,
        "statuses": stats.statuses,
        # Offered: every value acknowledged (drain included) over the nominal seconds,
        # 50 x ranks whenever all drained. Throughput: the values acknowledged while the
        # load ran, over its real duration; a server that cannot keep up shows it here,
        # and in the drain (from the load's end to the last ack).
        "points_per_s": round(stats.points / max(1e-9, seconds)),
        "points_offered_per_s": round(METRICS * ranks / tick),
        "throughput_per_s": round(thru),
        "drain_s": round(drain, 1),
        "points_expected": expected,
        "points_acked": stats.points,
        "server_cpu_pct": round(cpu_pct, 1),
        "server_rss_max_mb": round(rss_max, 1),
        "undrained_ranks": len(stats.undrained),
        "served": [stats.served.get(s.url, 0) for s in servers],  # acks per server
        "steps_min": min(stats.steps.values(), default=0),  # the slowest rank's training
        "verified": not problems and not stats.undrained,
        "problems": problems[:10],
        "latency_mean_s": round(statistics.fmean(lat), 4) if lat else None,
        "lag_p50_s": round(pct(stats.lags, 0.5), 3),
        "lag_p99_s": round(pct(stats.lags, 0.99), 3),
        "lag_p50_steady_s": round(pct(lag_steady, 0.5), 3),
        "lag_p99_steady_s": round(pct(lag_steady, 0.99), 3),
        "advised_max_s": max(stats.advised, default=0.0),
        "advised_p50_s": round(pct(stats.advised, 0.5), 2) if stats.advised else 0.0,
        "clients_cpu_pct": round(100.0 * stats.cpu_s / max(1e-9, wall), 1),
        "page_reads": len(page_reads),
        "page_p50_s": round(pct(page_reads, 0.5), 3) if page_reads else None,
        "page_p99_s": round(pct(page_reads, 0.99), 3) if page_reads else None,
    }


def throughput(stats: Stats) -> tuple[float, float]:
    """(Values acknowledged within the load window per second of it, seconds from the
    window's end to the last acknowledgement: 0 when everything was acked in it)."""
    window = max(1e-9, stats.load_to - stats.load_from)
    inside = sum(p for t, p in stats.points_at if stats.load_from <= t <= stats.load_to)
    last = max((t for t, _ in stats.points_at), default=stats.load_to)
    return inside / window, max(0.0, last - stats.load_to)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--clients", type=int, default=4, help="client processes")
    ap.add_argument("--db", default=None, help="store URL (default: a fresh SQLite file)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--max-inflight", type=int, default=None)
    ap.add_argument("--kill-server-at", type=float, default=None, help="SIGKILL it at T s")
    ap.add_argument("--replicas", type=int, default=1, help="server processes on --db")
    ap.add_argument("--duplicate", type=int, default=0, help="every n-th upload to two replicas")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or f"sqlite:///{tmp}/load.db"
        extra = ["--workers", str(args.workers)]
        if args.max_inflight is not None:
            extra += ["--max-inflight", str(args.max_inflight)]
        got = simulate(args.ranks, args.seconds, db, clients=args.clients,
                       server_args=tuple(extra), kill_server_at=args.kill_server_at,
                       replicas=args.replicas, duplicate=args.duplicate)  # fmt: skip
    print(json.dumps(got, indent=1))


if __name__ == "__main__":
    main()
