"""Reading history back with the local reader, against trackio's reader on the same data.

Writes the data with the real SDK: one process logs a 1,000,000-point series (step i,
a deterministic value, with NaN and ±Inf sprinkled in); eight processes (RANK 0..7 of
WORLD_SIZE 8, as a launcher sets them; ``run_mode="shared"``) each log 100,000 steps of
10 keys. Then each read runs in a fresh Python process, three times; the figures are
the median wall time (from before ``import rankwise`` to the last row read) and the
child's peak RSS (``ru_maxrss``):

* (a) ``Api(dir).run(id).history(keys=["series"])``: rows, the old path;
* (b) ``Api(dir).run(id).scan(["series"])``: numpy columns;
* (c) ``Api(dir).run(id).history_df(keys=["series"])``: a pandas DataFrame;
* (d) 8 ranks x 100k steps x 10 keys into one DataFrame (``history_df()``).

Before timing, (b) is checked to give back exactly the logged values (NaN and ±Inf
included). With ``--trackio-python`` (the Python of a scratch venv with ``trackio``
installed, never a dependency of rankwise) the same values are logged with trackio's
``init``/``log`` and read back with its storage reader (``SQLiteStorage.get_logs``), into
a DataFrame for (c) and (d), also in fresh processes.

    python -m venv /tmp/trackio-venv && /tmp/trackio-venv/bin/pip install trackio
    python benchmarks/bench_read.py --trackio-python /tmp/trackio-venv/bin/python
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# The values, shared by the rankwise and trackio writers (and the exactness check).
VALUES = """
import math
SPECIAL = [float("nan"), float("inf"), float("-inf")]
def value(i, k=0):
    if i % 99_991 == 17 + k:
        return SPECIAL[(i // 99_991 + k) % 3]
    return math.sin(i * 1e-3 + k) * ((i + 7 * k) % 977)
KEYS = [f"m/key_{k}" for k in range(10)]
"""

WRITE_ONE = (
    VALUES
    + """
import sys, rankwise
run = rankwise.init(project="bench", id="one", dir=sys.argv[1])
for i in range(int(sys.argv[2])):
    run.log({"series": value(i)}, step=i)
run.finish()
"""
)

WRITE_RANK = (
    VALUES
    + """
import sys, rankwise
run = rankwise.init(project="bench", id="eight", dir=sys.argv[1], run_mode="shared")
for i in range(int(sys.argv[2])):
    run.log({key: value(i, k) for k, key in enumerate(KEYS)}, step=i)
run.finish()
"""
)

# One process per trackio run: runs logged one after another in one process lost rows
# (the first rank's run kept 1,333 of its 100,000 in a trial), so each gets its own, as
# each rank of a job would, and every count is checked before timing.
TRACKIO_WRITE = (
    VALUES
    + """
import sys, trackio
name, n, keys = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
trackio.init(project="bench", name=name)
for i in range(n):
    if keys:
        trackio.log({key: value(i, k) for k, key in enumerate(KEYS)}, step=i)
    else:
        trackio.log({"series": value(i)}, step=i)
trackio.finish()
"""
)

TRACKIO_COUNT = """
import json
from trackio.sqlite_storage import SQLiteStorage
runs = SQLiteStorage.get_runs("bench")
print(json.dumps({r: len(SQLiteStorage.get_logs("bench", r)) for r in runs}))
"""

TRACKIO_DELETE = """
import sys
from trackio.sqlite_storage import SQLiteStorage
SQLiteStorage.delete_run("bench", sys.argv[1])
"""


def write_trackio(python: str, env: dict[str, str], points: int, ranks: int, steps: int) -> None:
    want = {"one": (points, 0), **{f"eight-rank-{r}": (steps, 10) for r in range(ranks)}}
    have = json.loads(run([python, "-c", TRACKIO_COUNT], env=env))
    for name, (n, keys) in want.items():
        if have.get(name) == n:
            continue
        if name in have:
            run([python, "-c", TRACKIO_DELETE, name], env=env)
        run([python, "-c", TRACKIO_WRITE, name, str(n), str(keys)], env=env)
    have = json.loads(run([python, "-c", TRACKIO_COUNT], env=env))
    short = {k: (have.get(k), n) for k, (n, _) in want.items() if have.get(k) != n}
    if short:
        raise SystemExit(f"trackio kept fewer rows than were logged (got, logged): {short}")


# Each read: the timer starts before the library is imported.
READ = """
import time
t0 = time.perf_counter()
import json, resource, sys
{body}
wall = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({{"wall": wall, "rss_mb": rss, "rows": rows}}))
"""

RANKWISE_READS = {
    "a": """import rankwise
rows = len(rankwise.Api(dir=sys.argv[1]).run("one").history(keys=["series"]))""",
    "b": """import rankwise
rows = len(rankwise.Api(dir=sys.argv[1]).run("one").scan(["series"])["rank-0"])""",
    "c": """import rankwise
rows = len(rankwise.Api(dir=sys.argv[1]).run("one").history_df(keys=["series"]))""",
    "d": """import rankwise
rows = len(rankwise.Api(dir=sys.argv[1]).run("eight").history_df())""",
}

TRACKIO_READS = {
    "a": """from trackio.sqlite_storage import SQLiteStorage
rows = len(SQLiteStorage.get_logs("bench", "one"))""",
    "c": """import pandas as pd
from trackio.sqlite_storage import SQLiteStorage
rows = len(pd.DataFrame(SQLiteStorage.get_logs("bench", "one")))""",
    "d": """import pandas as pd
from trackio.sqlite_storage import SQLiteStorage
runs = [r for r in SQLiteStorage.get_runs("bench") if r.startswith("eight-rank-")]
frames = []
for r in sorted(runs):
    df = pd.DataFrame(SQLiteStorage.get_logs("bench", r))
    df["label"] = r
    frames.append(df)
rows = len(pd.concat(frames, ignore_index=True))""",
}

NAMES = {
    "a": "(a) history(keys=['series']), 1M rows",
    "b": "(b) scan(['series']), 1M points",
    "c": "(c) history_df(keys=['series']), 1M points",
    "d": "(d) 8 ranks x 100k steps x 10 keys, one DataFrame",
}


def run(cmd: list[str], env: dict[str, str] | None = None) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{cmd[:3]} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def write_rankwise(data: Path, points: int, ranks: int, steps: int) -> None:
    py = sys.executable
    run([py, "-c", WRITE_ONE, str(data), str(points)])
    procs = []
    for r in range(ranks):
        env = {**os.environ, "RANK": str(r), "WORLD_SIZE": str(ranks)}
        env.update(LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(ranks))
        procs.append(subprocess.Popen([py, "-c", WRITE_RANK, str(data), str(steps)], env=env))
    if any(p.wait() != 0 for p in procs):
        raise SystemExit("a rank failed to write")


def check_exact(data: Path, points: int) -> None:
    """(b) gives back every logged value bit for bit, NaN and ±Inf included."""
    import numpy as np

    import rankwise

    scope: dict[str, object] = {}
    exec(VALUES, scope)
    value = scope["value"]
    want = np.array([value(i) for i in range(points)])  # type: ignore[operator]
    got = rankwise.Api(dir=data).run("one").scan(["series"])["rank-0"]
    assert got.step.tolist() == list(range(points))
    assert got["series"].tobytes() == want.tobytes(), "scan() is not exact"
    print(
        f"exact: {points} points, {int(np.isnan(want).sum())} NaN, "
        f"{int(np.isinf(want).sum())} ±Inf, read back bit for bit"
    )


def measure(
    python: str, body: str, arg: str, repeat: int, env: dict[str, str] | None
) -> dict[str, float]:
    code = READ.format(body=textwrap.indent(body, ""))
    runs = [json.loads(run([python, "-c", code, arg], env=env)) for _ in range(repeat)]
    return {
        "wall": statistics.median(r["wall"] for r in runs),
        "rss_mb": statistics.median(r["rss_mb"] for r in runs),
        "rows": runs[0]["rows"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--dir", type=Path, help="keep the data here (default: a temp dir)")
    ap.add_argument("--points", type=int, default=1_000_000)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--trackio-python", help="Python of a venv with trackio installed")
    args = ap.parse_args()

    root = args.dir or Path(tempfile.mkdtemp(prefix="rankwise-bench-read-"))
    data = root / "rankwise-runs"
    if not (data / "bench" / "one").exists():
        print(f"writing {args.points} points and {args.ranks} x {args.steps} x 10 with rankwise")
        write_rankwise(data, args.points, args.ranks, args.steps)
    check_exact(data, args.points)

    tenv = None
    if args.trackio_python:
        tenv = {**os.environ, "TRACKIO_DIR": str(root / "trackio")}
        print("checking (and writing where missing) the same values with trackio")
        write_trackio(args.trackio_python, tenv, args.points, args.ranks, args.steps)
    else:
        print("trackio: skipped (pass --trackio-python PATH to measure its reader beside)")

    # A fresh process imports rankwise as an installed package would: from its bytecode
    # (pip compiles a wheel at install; an editable checkout run with
    # PYTHONDONTWRITEBYTECODE=1 would otherwise compile every module in every child).
    compileall.compile_dir(REPO / "rankwise", quiet=1)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'read':52} {'rankwise s':>10} {'MB':>6} | {'trackio s':>10} {'MB':>6}")
    for key, name in NAMES.items():
        ours = measure(sys.executable, RANKWISE_READS[key], str(data), args.repeat, None)
        theirs = None
        if tenv is not None and key in TRACKIO_READS:
            theirs = measure(args.trackio_python, TRACKIO_READS[key], "", args.repeat, tenv)
        line = f"{name:52} {ours['wall']:10.3f} {ours['rss_mb']:6.0f} |"
        line += (
            f" {theirs['wall']:10.3f} {theirs['rss_mb']:6.0f}" if theirs else f" {'-':>10} {'-':>6}"
        )
        print(line, f"rows={ours['rows']}" + (f"/{theirs['rows']}" if theirs else ""), flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.dir is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
