"""The SQLite writer's time per stream-upload, alone and beside busy Python threads.

In a server under load the store's writer shares the GIL with the event loop, the
checks' worker threads and the compactor. Every SQLite statement releases the GIL, and
getting it back may wait a switch interval, so the number of statements per upload
shows in the writer's time only when other threads are busy. This script applies
``loadsim``'s records (one second of a rank: 50 metrics, console lines, heartbeats,
system samples) of ``--ranks`` streams, ``--batch`` streams per ``Store.ingest`` call
(as the group commit does), for ``--rounds`` seconds of records, with ``--busy`` threads
spinning in Python beside it, and prints the writer's wall time per stream-upload (and,
alone, the process's CPU: beside busy threads it would count theirs). The switch
interval is the server's (``serve.GIL_SWITCH_INTERVAL``).

    .venv/bin/python benchmarks/bench_writer_gil.py [--ranks 64] [--batch 32]
        [--rounds 40] [--busy 0 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rankwise.server.serve import GIL_SWITCH_INTERVAL
from rankwise.server.upload import decode_records
from rankwise.store import open_store
from rankwise.stream.frames import MAGIC
from rankwise.stream.identity import StreamId
from tests.helpers import loadsim


def measure(ranks: int, batch: int, rounds: int, busy: int) -> tuple[float, float]:
    """(writer wall ms, process CPU ms) per stream-upload."""
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{tmp}/bench.db")
        try:
            store.migrate()
            cfg = loadsim.Config(url="-", run_id="gil", ranks=list(range(ranks)), seconds=0)
            sims = [loadsim.SimRank(cfg, r) for r in range(ranks)]
            second = 0

            def one_second() -> float:
                nonlocal second
                for s in sims:
                    s.tick(second)
                second += 1
                wall = 0.0
                for a in range(0, ranks, batch):
                    part = sims[a : a + batch]
                    items = []
                    for s in part:
                        body = MAGIC + b"".join(f[2] for f in s.frames if f[1] > s.acked)
                        items.append((StreamId(loadsim.PROJECT, "gil", s.label, 0), body))
                    decoded = [(k, decode_records(b)) for k, b in items]
                    t = time.perf_counter()
                    got = store.ingest(decoded)
                    wall += time.perf_counter() - t
                    for s, (k, _) in zip(part, items, strict=True):
                        s.acked = got[k]
                        s.frames = [f for f in s.frames if f[1] > s.acked]
                return wall

            for _ in range(3):  # the streams' rows and series made, off the clock
                one_second()
            stop = threading.Event()

            def spin() -> None:
                x = 0
                while not stop.is_set():
                    for i in range(1000):
                        x += i * i
                    time.sleep(0)

            threads = [threading.Thread(target=spin) for _ in range(busy)]
            for t in threads:
                t.start()
            cpu0 = time.process_time()
            wall = sum(one_second() for _ in range(rounds))
            cpu = time.process_time() - cpu0
            stop.set()
            for t in threads:
                t.join()
        finally:
            store.close()
    n = rounds * ranks
    return wall / n * 1000, cpu / n * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32, help="streams per ingest call")
    ap.add_argument("--rounds", type=int, default=40, help="seconds of records applied")
    ap.add_argument("--busy", type=int, nargs="+", default=[0, 2], help="busy threads")
    args = ap.parse_args()
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    print(f"{args.ranks} ranks, {args.batch} streams a call, {args.rounds} s of records")
    for busy in args.busy:
        wall, cpu = measure(args.ranks, args.batch, args.rounds, busy)
        alone = f" (process CPU {cpu:.3f} ms)" if busy == 0 else ""  # else: the spinners'
        print(f"busy threads {busy}: writer {wall:.3f} ms a stream-upload{alone}")


if __name__ == "__main__":
    main()
