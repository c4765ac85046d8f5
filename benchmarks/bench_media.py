"""What logging rich values costs the training thread, against the array copy alone.

For each case the training thread builds the value(s) and calls ``run.log()``; that time
(p50, p99 over the iterations) is set against the time of copying the same arrays
(``np.array(x, copy=True)``), the floor a value that must survive the program changing
its array cannot go under. Encoding (PNG, Parquet), hashing and the blob writes happen on
the encoder thread: between iterations the benchmark waits (untimed) until the encoder
has drained, so the figures are the training thread's own cost, not backpressure; the
encoder's own time per value is printed beside them.

    python benchmarks/bench_media.py [--scale 1.0]

Cases: one 28x28 float image, one 512x512x3 uint8 image, a gallery of 64 28x28 images,
and a 1,000-row table (id, image, guess, truth, 10 scores) with 1,000 28x28 images.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import rankwise


def quantiles(xs: list[float]) -> tuple[float, float]:
    xs = sorted(xs)
    return statistics.median(xs), xs[min(len(xs) - 1, int(len(xs) * 0.99))]


def drain(run: Any) -> float:
    """Wait until the encoder has encoded everything; returns the seconds waited."""
    t0 = time.perf_counter()
    enc = run._media
    while enc is not None and (enc.queue or enc.pending_bytes() > 0):
        time.sleep(0.0005)
    return time.perf_counter() - t0


STEP = [0]


def case(
    run: Any, name: str, arrays: list[Any], log: Callable[[int], None], iters: int
) -> tuple[str, tuple[float, float], tuple[float, float], float]:
    copies, logs, encoder = [], [], []
    for _ in range(iters):
        STEP[0] += 1
        i = STEP[0]
        t0 = time.perf_counter()
        for a in arrays:
            np.array(a, copy=True)
        copies.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        log(i)
        logs.append(time.perf_counter() - t0)
        encoder.append(drain(run) + logs[-1])
    return name, quantiles(logs), quantiles(copies), statistics.median(encoder)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--scale", type=float, default=1.0, help="multiply the iteration counts")
    args = p.parse_args()
    rng = np.random.default_rng(0)
    small = rng.random((28, 28), dtype=np.float32)
    big = rng.integers(0, 256, (512, 512, 3), dtype=np.uint8)
    gallery = [rng.random((28, 28), dtype=np.float32) for _ in range(64)]
    digits = [rng.random((28, 28), dtype=np.float32) for _ in range(1000)]
    scores = rng.random((1000, 10)).tolist()
    cols = ["id", "image", "guess", "truth", *[f"score_{d}" for d in range(10)]]

    def n(k: int) -> int:
        return max(3, int(k * args.scale))

    with tempfile.TemporaryDirectory() as tmp:
        run = rankwise.init(project="bench", dir=tmp, settings={"system": False, "console": "off"})

        def log_small(i: int) -> None:
            run.log({"digit": rankwise.Image(small)}, step=i)

        def log_big(i: int) -> None:
            run.log({"photo": rankwise.Image(big)}, step=i)

        def log_gallery(i: int) -> None:
            run.log({"batch": [rankwise.Image(x) for x in gallery]}, step=i)

        def log_table(i: int) -> None:
            t = rankwise.Table(columns=cols)
            for j, x in enumerate(digits):
                t.add_data(j, rankwise.Image(x), j % 10, (j * 7) % 10, *scores[j])
            run.log({"predictions": t}, step=i)

        rows = [
            case(run, "one 28x28 image", [small], log_small, n(2000)),
            case(run, "one 512x512x3 image", [big], log_big, n(200)),
            case(run, "gallery of 64 28x28", gallery, log_gallery, n(100)),
            case(run, "table 1,000 rows + 1,000 images", digits, log_table, n(10)),
        ]
        run.finish()
    load = os.getloadavg()
    print(
        f"rankwise {rankwise.__version__}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    print(
        f"{'case':<34} {'log() p50':>11} {'log() p99':>11} {'copy p50':>10} {'copy p99':>10}"
        f" {'ratio p50':>9} {'encoder':>10}"
    )
    for name, (lp50, lp99), (cp50, cp99), enc in rows:
        print(
            f"{name:<34} {lp50 * 1e6:>9.1f}us {lp99 * 1e6:>9.1f}us {cp50 * 1e6:>8.1f}us "
            f"{cp99 * 1e6:>8.1f}us {lp50 / max(cp50, 1e-9):>8.1f}x {enc * 1e3:>8.2f}ms"
        )
    print("log(): the training thread building the value(s) and calling run.log();")
    print("copy: np.array(x, copy=True) of the same arrays; encoder: PNG/Parquet + sha256 +")
    print("blob writes per logged value, on the encoder thread (median).")


if __name__ == "__main__":
    main()
