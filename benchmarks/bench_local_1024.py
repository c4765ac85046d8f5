"""Local mode at 1,024 ranks: ``rankwise show`` and ``rankwise ui`` over a data directory.

Writes a run of ``--ranks`` stream files (``<dir>/scale/local-1024/streams/rank-N.0.rwlog``)
as ``rankwise.init`` in local mode leaves them: the SDK's record types and frames
(``rankwise.stream.records``, ``frames.encode_frame``), a ``StreamStart`` with the rank's
identity (128 nodes of 8), one ``Metrics`` record per step holding every metric (one
``run.log()`` call a step), ``--per-frame`` records a frame (the writer appends a frame
each ``flush_interval``, 0.25 s: 4 a frame is a 16 steps/s loop) and a ``Finish``. The
metrics' names and curves are ``bench_dashboard_bigrun``'s. Then it times, in fresh
processes:

* ``rankwise show scale/local-1024 --dir DIR``: ``--rounds`` times (the first right after
  the files were written, so they are in the page cache either way). ``show`` reads the
  stream files themselves (``rankwise.read.local``; it keeps no index): the first round
  every file, keeping each finished stream's fold checkpoint, the later rounds those
  (``--whole``: every round reads every file, as before checkpoints), a big run's in
  a worker process a CPU (``rankwise.read.parallel``; ``--workers N`` passes
  ``show --workers N``, 1: in its own process); its CPU time counts its workers';
* ``rankwise ui --dir DIR``: start to serving (it indexes into ``DIR/.rankwise/index.db``
  for at most ``--first-index-seconds`` before it serves) and start to the whole run
  indexed (the rest is indexed while it serves), then the run page in headless
  Chromium at 1280x800 (``bench_dashboard_1024.measure``: first charts mark, heatmap
  click to drawn, the ``GET .../heatmap`` reply alone), then a second start over the
  index already built.

    .venv/bin/python benchmarks/bench_local_1024.py [--ranks 1024] [--metrics 50]
        [--steps 10000] [--per-frame 4] [--jobs 2] [--rounds 3] [--keep DIR]
        [--workers N] [--no-ui] [--whole] [--build-only]

``--keep DIR`` keeps the data directory and reuses it when the sizes match; without it
it goes to a temporary directory, removed afterwards. Needs the dashboard built
(``make setup``) for the ``ui`` part.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_dashboard_1024 import measure
from bench_dashboard_bigrun import STEP_SECONDS, T0, metric_names, values

from rankwise.read import checkpoint
from rankwise.stream import records as R
from rankwise.stream.files import stream_filename, streams_dir
from rankwise.stream.frames import MAGIC, encode_frame
from tests.helpers.browser import CHROMIUM, STATIC
from tests.helpers.env import free_port
from tests.helpers.servers import subprocess_env

PROJECT, RUN = "scale", "local-1024"


def _start(rank: int, ranks: int, metrics: int, steps: int) -> R.StreamStart:
    return R.StreamStart(
        seq=0, time=T0, project=PROJECT, run_id=RUN, label=f"rank-{rank}", incarnation=0,
        name=f"{ranks} ranks x {metrics} metrics x {steps} steps, local", run_mode="shared",
        is_primary=rank == 0, rank=rank, world_size=ranks, local_rank=rank % 8,
        local_world_size=min(8, ranks), node_rank=rank // 8, num_nodes=max(1, ranks // 8),
        launcher="torchrun", host=f"node-{rank // 8:03d}", pid=10_000 + rank, tags=["scale"],
        config={"ranks": ranks, "note": "synthetic, for the local-mode speed test"},
    )  # fmt: skip


def write_rank(root: str, rank: int, ranks: int, metrics: int, steps: int, per_frame: int) -> int:
    """One rank's stream file, frame by frame; its size in bytes."""
    names = metric_names(metrics)
    rng = np.random.default_rng(rank)
    s = np.arange(steps, dtype=np.int64)
    cols = np.stack([values(m, rank, s, rng) for m in range(metrics)], axis=1).tolist()
    path = streams_dir(root, PROJECT, RUN) / stream_filename(f"rank-{rank}", 0)
    size = 0
    with open(path, "xb") as f:
        f.write(MAGIC + encode_frame([_start(rank, ranks, metrics, steps)]))
        seq = 1
        for lo in range(0, steps, per_frame):
            batch: list[R.AnyRecord] = []
            for step in range(lo, min(steps, lo + per_frame)):
                t = T0 + 1 + step * STEP_SECONDS
                batch.append(R.Metrics(seq, t, step, dict(zip(names, cols[step], strict=True))))
                seq += 1
            f.write(encode_frame(batch))
        end = T0 + 2 + steps * STEP_SECONDS
        f.write(encode_frame([R.Finish(seq, end, "finished", last_step=steps - 1)]))
        size = f.tell()
    return size


def build(root: Path, ranks: int, metrics: int, steps: int, per_frame: int, jobs: int) -> dict:
    streams_dir(root, PROJECT, RUN).mkdir(parents=True)
    t0 = time.perf_counter()
    with ProcessPoolExecutor(jobs) as pool:
        futs = [
            pool.submit(write_rank, str(root), r, ranks, metrics, steps, per_frame)
            for r in range(ranks)
        ]
        size = sum(f.result() for f in futs)
    return {"seconds": time.perf_counter() - t0, "bytes": size}


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "rankwise.cli", *args]


def _reap_orphans() -> bool:
    """Adopt this process's orphaned descendants (Linux ``PR_SET_CHILD_SUBREAPER``): the
    forkserver that ``rankwise show``'s worker pool starts outlives ``show`` by a moment
    and is then this process's to wait for, with its workers' CPU time."""
    try:
        import ctypes

        return int(ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def time_show(
    root: Path, rounds: int, workers: int | None, whole: bool = False
) -> tuple[list[float], list[float], list[float], list[float], list[float], str]:
    """Seconds (wall, CPU with its worker processes' and CPU of its own process) and
    peak memory (GB) of each ``rankwise show`` (a fresh process each; ``workers``: its
    ``--workers``), the peak of its workers (the largest one's, 0 without), and the last
    one's output. The run's fold checkpoints (``rankwise.read.checkpoint``) are removed
    before the first round, and with ``whole`` before every round (each reads every
    file); else the first round keeps them and the later ones read them."""
    secs, cpus, own, peaks, worker_peaks, text = [], [], [], [], [], ""
    env = subprocess_env()
    adopted = _reap_orphans()
    more = ["--workers", str(workers)] if workers is not None else []
    folds = root / PROJECT / RUN / checkpoint.FOLDER
    for i in range(rounds):
        if whole or i == 0:
            shutil.rmtree(folds, ignore_errors=True)
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            _cli("show", f"{PROJECT}/{RUN}", "--dir", str(root), *more),
            stdout=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        assert proc.stdout is not None
        text = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        secs.append(time.perf_counter() - t0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            sys.exit(f"rankwise show exited with {proc.returncode}")
        peaks.append(usage.ru_maxrss / 1e6)  # KB on Linux
        cpu, worker_peak = usage.ru_utime + usage.ru_stime, 0.0
        while adopted:  # the forkserver and the resource tracker, once they exit
            try:
                _, _, orphan = os.wait4(-1, 0)
            except ChildProcessError:
                break
            cpu += orphan.ru_utime + orphan.ru_stime  # its workers' too (it reaps them)
            worker_peak = max(worker_peak, orphan.ru_maxrss / 1e6)
        cpus.append(cpu)
        own.append(usage.ru_utime + usage.ru_stime)
        worker_peaks.append(worker_peak)
    return secs, cpus, own, peaks, worker_peaks, text


def time_python(rounds: int) -> list[float]:
    """Seconds of ``rankwise --help`` (interpreter and CLI import): what every command pays."""
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        subprocess.run(_cli("--help"), capture_output=True, env=subprocess_env(), check=True)
        out.append(time.perf_counter() - t0)
    return out


class Ui:
    """``rankwise ui --dir ROOT`` in a subprocess; ``seconds``: start to serving."""

    def __init__(self, root: Path, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.t0 = t0 = time.perf_counter()
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                _cli("ui", "--dir", str(root), "--port", str(self.port)),
                stdout=out, stderr=subprocess.STDOUT, env=subprocess_env(), cwd=log.parent,
            )  # fmt: skip
        while True:
            if self.proc.poll() is not None:
                sys.exit(f"rankwise ui exited with {self.proc.returncode}:\n{log.read_text()}")
            try:
                if httpx.get(self.url + "/api/v1/projects", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.seconds = time.perf_counter() - t0

    def run_ready(self, ranks: int, steps: int, timeout: float = 3600) -> dict[str, Any]:
        """The run once the index holds all of it (``rankwise ui`` serves after its first
        ``--first-index-seconds`` of indexing and indexes the rest while it serves);
        ``whole``: seconds from the start to then."""
        end = time.monotonic() + timeout
        while True:
            got = httpx.get(f"{self.url}/api/v1/projects/{PROJECT}/runs/{RUN}", timeout=60)
            run = dict(got.json()) if got.status_code == 200 else {}
            done = run.get("n_streams") == ranks and run.get("steps") == steps
            if (done and run.get("state") == "finished") or time.monotonic() > end:
                self.whole = time.perf_counter() - self.t0
                return run
            time.sleep(0.5)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _ms(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1000:.0f} ms [{', '.join(f'{x * 1000:.0f}' for x in xs)}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--metrics", type=int, default=50)
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--per-frame", type=int, default=4, help="Metrics records a frame")
    ap.add_argument("--jobs", type=int, default=2, help="processes writing the files")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keep", type=Path, default=None, help="keep (and reuse) the directory")
    ap.add_argument(
        "--workers", type=int, default=None, help="`rankwise show --workers` (default: its own)"
    )
    ap.add_argument("--no-ui", action="store_true", help="time `rankwise show` only")
    ap.add_argument(
        "--whole", action="store_true", help="every `show` reads every file (no fold checkpoints)"
    )
    ap.add_argument("--build-only", action="store_true", help="write the files, time nothing")
    a = ap.parse_args()
    if not a.no_ui and not a.build_only:
        if not CHROMIUM.exists():
            sys.exit(f"no Chromium at {CHROMIUM}: apt-get install -y chromium")
        if not (STATIC / "index.html").is_file():
            sys.exit(f"the dashboard is not built into {STATIC}: run `make setup`")
    work = a.keep or Path(tempfile.mkdtemp(prefix="bench-local-1024-"))
    work.mkdir(parents=True, exist_ok=True)
    root, made = work / "runs", work / "made.json"
    sizes = {"ranks": a.ranks, "metrics": a.metrics, "steps": a.steps, "per_frame": a.per_frame}
    try:
        if not (made.exists() and json.loads(made.read_text()) == sizes and root.exists()):
            made.unlink(missing_ok=True)
            shutil.rmtree(root, ignore_errors=True)
            info = build(root, a.ranks, a.metrics, a.steps, a.per_frame, a.jobs)
            made.write_text(json.dumps(sizes))
            print(f"written in {info['seconds']:.1f} s")
        size = sum(p.stat().st_size for p in streams_dir(root, PROJECT, RUN).iterdir())
        points = a.ranks * a.metrics * a.steps
        print(
            f"run: {a.ranks} ranks x {a.metrics} metrics x {a.steps:,} steps = {points:,} "
            f"points, {a.per_frame} records a frame, {size / 1e9:.2f} GB of stream files"
        )
        print(f"load average before timing: {os.getloadavg()}")
        if a.build_only:
            return
        print(f"rankwise --help (interpreter + CLI import): {_ms(time_python(a.rounds))}")
        shows, cpus, own, peaks, wpeaks, text = time_show(root, a.rounds, a.workers, a.whole)
        again = "each reading every file" if a.whole else "first, then again over its checkpoints"
        print(f"rankwise show: {_ms(shows)} ({again}); CPU {_ms(cpus)}, of which "
              f"its own process {_ms(own)}; peak "
              f"memory {', '.join(f'{g:.2f}' for g in peaks)} GB; its largest worker's "
              f"{', '.join(f'{g:.2f}' for g in wpeaks)} GB")  # fmt: skip
        print("  " + "\n  ".join(text.splitlines()[:6]))
        if a.no_ui:
            return
        index = root / ".rankwise" / "index.db"
        shutil.rmtree(root / ".rankwise", ignore_errors=True)  # a kept one's: index afresh
        ui = Ui(root, work / "ui.log")
        try:
            got = ui.run_ready(a.ranks, a.steps)
            print(f"rankwise ui, first start to serving: {ui.seconds:.1f} s; to the whole run "
                  f"indexed (while serving): {ui.whole:.1f} s; index "
                  f"{index.stat().st_size / 1e9:.2f} GB; run {got.get('state')}, "
                  f"{got.get('n_streams')} streams, {got.get('steps')} steps")  # fmt: skip
            print(f"load average: {os.getloadavg()}")
            figures = measure(ui.url, None, a.rounds, PROJECT, RUN)
        finally:
            ui.stop()
        print(f"rankwise ui run page, Chromium 1280x800, ms ({a.rounds} rounds; median [all]):")
        for what, ms in figures.items():
            print(f"  {what}: {statistics.median(ms):.0f} [{', '.join(f'{m:.0f}' for m in ms)}]")
        ui = Ui(root, work / "ui.log")
        ui.stop()
        print(f"rankwise ui, second start (index built) to serving: {ui.seconds:.1f} s")
        print(f"load average after: {os.getloadavg()}")
    finally:
        if a.keep is None:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}")


if __name__ == "__main__":
    main()
