"""The cost of checking a token per ingest request: uncached, cached, and in context.

    .venv/bin/python benchmarks/bench_auth.py --calls 20000 --rounds 5

Measures, over a SQLite store, in interleaved rounds (medians printed):

* ``Verifier.verify`` with ``token_cache_ttl=0``: a read of the token row per request,
  plus the SHA-256 and the constant-time comparison;
* the same with the default cache (10 s): the row comes from memory;
* one whole small ingest request (``POST /api/v1/ingest``, 3 frames) through the ASGI
  app in-process, with authentication off, on and cached, and on and uncached; so the
  verifier's share of a real request shows.

Writes of ``last_used`` are batched (one per ``token_touch_interval``) in every setting.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from rankwise.server import ServerSettings, create_app
from rankwise.server.auth import Verifier
from rankwise.store import open_store
from tests.helpers.streams import body, records


def time_verify(verifier: Verifier, token: str, calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        if verifier.verify(token) is None:
            raise SystemExit("the token did not verify")
    return (time.perf_counter() - t0) / calls * 1e6


async def time_requests(app: Any, token: str | None, calls: int) -> float:
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = body(records(steps=3))
    params = {"project": "p", "run": "r", "label": "rank-0", "incarnation": 0}
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
        for _ in range(20):  # warm up: first-request setup is not the cost per request
            await client.post("/api/v1/ingest", params=params, content=data, headers=headers)
        t0 = time.perf_counter()
        for _ in range(calls):
            r = await client.post("/api/v1/ingest", params=params, content=data, headers=headers)
            if r.status_code != 200:
                raise SystemExit(f"ingest answered {r.status_code}: {r.text}")
        return (time.perf_counter() - t0) / calls * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20000, help="verify() calls per round")
    ap.add_argument("--requests", type=int, default=500, help="ingest requests per round")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{tmp}/bench.db")
        store.migrate()
        for i in range(200):  # a store with a realistic number of tokens
            store.create_token("ingest", [f"p{i}"], f"t{i}")
        token = store.create_token("ingest", ["p"], "bench").value
        uncached = Verifier(store, ttl=0, touch_every=60)
        cached = Verifier(store, ttl=10, touch_every=60)
        base = {"static_dir": Path(tmp) / "none", "token_touch_interval": 60.0}
        apps = {
            "auth off": (create_app(store, ServerSettings(auth=False, **base)), None),
            "auth on, cached": (
                create_app(store, ServerSettings(token_cache_ttl=10, **base)),
                token,
            ),
            "auth on, uncached": (
                create_app(store, ServerSettings(token_cache_ttl=0, **base)),
                token,
            ),
        }
        figures: dict[str, list[float]] = {}
        order = list(apps.items())
        for round_ in range(args.rounds):
            figures.setdefault("verify uncached", []).append(
                time_verify(uncached, token, args.calls // 10)
            )
            figures.setdefault("verify cached", []).append(time_verify(cached, token, args.calls))
            shift = round_ % len(order)  # rotate, so no setting always runs first
            for name, (app, tok) in order[shift:] + order[:shift]:
                us = asyncio.run(time_requests(app, tok, args.requests))
                figures.setdefault(f"ingest request, {name}", []).append(us)
        store.close()
    print(f"{'setting':<34} {'median µs':>10}  {'rounds':>8}")
    for name, values in figures.items():
        print(f"{name:<34} {statistics.median(values):>10.1f}  {len(values):>8}")
    off = statistics.median(figures["ingest request, auth off"])
    for name in ("auth on, cached", "auth on, uncached"):
        on = statistics.median(figures[f"ingest request, {name}"])
        print(f"ingest request overhead, {name}: {on - off:+.1f} µs ({on / off:.2f}x)")


if __name__ == "__main__":
    main()
