"""What alert detection costs ingest: ``alert_ingest.found`` against ``ingest.extract``.

Every batch an ingester applies is searched for the events its records show (the first
non-finite value of each metric, ``run.alert()`` records). This times that search on a
batch of ``--records`` ``log()`` calls of ``--metrics`` float metrics, all finite (the
usual case: nothing found), next to the column extraction every batch pays anyway, both
in-process, best of ``--repeat`` rounds.

    python benchmarks/bench_alerts.py [--records 1000] [--metrics 10] [--repeat 5]
"""

from __future__ import annotations

import argparse
import timeit

from rankwise.store.alert_ingest import found
from rankwise.store.ingest import extract
from rankwise.stream import records as R


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1000)
    ap.add_argument("--metrics", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    start = R.StreamStart(0, 1.0, "p", "r", "rank-0", 0)
    recs: list[R.AnyRecord] = [
        R.Metrics(i + 1, 1.0 + i, i, {f"m{j}": float(i * j) for j in range(args.metrics)})
        for i in range(args.records)
    ]
    points = extract(recs)

    def best(fn: object, number: int) -> float:
        return min(timeit.repeat(fn, number=number, repeat=args.repeat)) / number  # type: ignore[arg-type]

    t_found = best(lambda: found(start, recs, points), 200)
    t_extract = best(lambda: extract(recs), 20)
    print(
        f"batch of {args.records} records x {args.metrics} metrics: "
        f"found() {t_found * 1e6:.0f} us, extract() {t_extract * 1e6:.0f} us "
        f"({100 * t_found / t_extract:.1f} % of extract)"
    )


if __name__ == "__main__":
    main()
