"""The heatmap's first read from a cold disk: block sums against the points, one index.

Takes a data directory ``rankwise ui`` has indexed (``bench_local_1024.py --keep DIR``
leaves ``DIR/runs/.rankwise/index.db``) and, alternating the two ways ``--rounds``
times, each in a fresh process: empties the OS page cache (``sync``, then
``/proc/sys/vm/drop_caches``: needs root; without it the figures are warm and say so),
opens the index as ``rankwise ui`` does (``SQLiteStore``) and times ``Store.heatmap`` of
``--key`` at ``--buckets`` three times:

* ``sums``: as shipped (closed chunks' ``chunk_sums`` rows where the buckets allow,
  ``rankwise.store.step_sums``);
* ``points``: the same code told the schema has no ``chunk_sums``, so every chunk is
  read as points: what a first view cost before the rows existed.

Both replies are checked to agree (the cells as float32, the medians to 1e-9).

    .venv/bin/python benchmarks/bench_heatmap_first.py DIR/runs [--key train/loss]
        [--buckets 500] [--rounds 2] [--project scale] [--run local-1024]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

_CHILD = """
import base64, json, sys, time
from pathlib import Path
from typing import Any

import numpy as np
import numpy as np
import rankwise.store.heatmap_steps as hs
way, index, project, run, key, buckets = sys.argv[1:7]
if way == "points":
    hs.has_sums = lambda tx: False
from rankwise.store.sqlite import SQLiteStore
st = SQLiteStore(Path(index))
ms = []
for _ in range(3):
    t = time.perf_counter()
    got = st.heatmap(project, run, key, buckets=int(buckets))
    ms.append((time.perf_counter() - t) * 1000)
cells = np.frombuffer(base64.b64decode(got.values), "<f4")
print(json.dumps({"ms": ms, "buckets": got.buckets, "lo": got.lo, "hi": got.hi,
                  "rows": len(got.rows), "median": got.median,
                  "cells": cells.tolist()[:: max(1, cells.size // 20000)]}))
"""


def drop_caches() -> bool:
    try:
        subprocess.run(["sync"], check=True)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def one(way: str, index: Path, a: argparse.Namespace) -> dict[str, Any]:
    cold = drop_caches()
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, way, str(index), a.project, a.run, a.key, str(a.buckets)],
        capture_output=True, text=True, check=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    got: dict[str, Any] = json.loads(out.stdout)
    got["cold"] = cold
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", type=Path, help="the data directory rankwise ui indexed")
    ap.add_argument("--key", default="train/loss")
    ap.add_argument("--buckets", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--project", default="scale")
    ap.add_argument("--run", default="local-1024")
    a = ap.parse_args()
    index = a.runs / ".rankwise" / "index.db"
    if not index.is_file():
        sys.exit(f"no index at {index}: run `rankwise ui --dir {a.runs}` until it has indexed")
    print(f"index {index.stat().st_size / 1e9:.2f} GB; load average {os.getloadavg()}")
    figures: dict[str, list[list[float]]] = {"sums": [], "points": []}
    replies: dict[str, dict[str, Any]] = {}
    for _ in range(a.rounds):
        for way in ("points", "sums"):
            got = one(way, index, a)
            figures[way].append(got["ms"])
            replies[way] = got
            state = "page cache emptied first" if got["cold"] else "WARM: not root"
            print(f"  {way}: {', '.join(f'{m:.0f}' for m in got['ms'])} ms ({state}; "
                  f"{got['rows']} ranks x {got['buckets']} buckets)")  # fmt: skip
    s, p = replies["sums"], replies["points"]
    assert (s["lo"], s["hi"], s["buckets"]) == (p["lo"], p["hi"], p["buckets"])
    np.testing.assert_allclose(s["cells"], p["cells"], rtol=1e-6)
    np.testing.assert_allclose(np.array(s["median"], float), np.array(p["median"], float),
                               rtol=1e-9)  # fmt: skip
    print("replies agree")
    for way, runs in figures.items():
        first = [r[0] for r in runs]
        later = [m for r in runs for m in r[1:]]
        print(f"{way}: first read {statistics.median(first):.0f} ms "
              f"[{', '.join(f'{m:.0f}' for m in first)}], again "
              f"{statistics.median(later):.0f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
