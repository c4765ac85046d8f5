"""What rankwise does on a real GPU: NVML sampling, CUDA values in ``log()``, and PyTorch's
flight recorder on NCCL. Needs a CUDA device (none on the development machine).

Sections (each prints a short table; ``--only`` picks some):

* ``nvml`` — ``rankwise.sdk.gpu.Gpus``, the system sampler's GPU probe, against NVML
  itself: the time of one ``sample()`` and one ``process_memory()`` (median and p99 of
  ``--samples`` calls, idle); then the values it reads while bf16 matrix products keep the
  device busy (utilisation, power, SM clock, memory used against ``torch.cuda``'s
  ``mem_get_info``, this process's own memory against what torch reserved).
* ``tracked`` — a real run: ``rankwise.init()`` in local mode with system metrics every
  0.5 s, a 10M-parameter MLP training on the GPU for ``--seconds``, ``run.watch(model,
  log="all", log_freq=50)``, the loss logged as a CUDA tensor each step and a CUDA image
  every 100 steps; then the stream file is read back: every step's loss, the GPU series
  the sampler recorded (``gpu/<i>/...``, ``proc/gpu_index``, ``proc/gpu/<i>/...``), the
  images and the watch's histograms.
* ``media`` — the training thread's cost of ``run.log()`` with CUDA values (a
  3x512x512 float image, a 1M-value histogram's counts) against NumPy ones of the same
  shape (p50, p99), and whether ``log()`` waits for the device: an image computed by
  matrix products still queued (``--queued-ms`` of work) is logged, and the call's time
  is set against that work's.
* ``flight`` — PyTorch's flight recorder under NCCL (one process: one GPU cannot hold
  two NCCL ranks): ``rankwise.init()`` before ``init_process_group("nccl")`` turns the
  recorder on, and ``rankwise.sdk.flight.entries()`` (what the watchdog records on a
  stall) is read after 200 all_reduces and again while an all_reduce waits behind queued
  work; then a stall: the training thread blocks on the device with an all_reduce queued,
  and the watchdog's Stall record is read back from the stream file. Last, the
  recorder's cost per all_reduce, buffer 2000 (what rankwise sets) against 0, one fresh
  process each, ``--rounds`` alternating rounds. ``--backend gloo --device cpu`` runs the
  same on a CPU.

    python benchmarks/bench_gpu.py [--only nvml tracked media flight] [--seconds 10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def q(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def stream_records(data: Path) -> list[Any]:
    from rankwise.stream.frames import scan

    out: list[Any] = []
    for path in sorted(data.glob("*/*/streams/*.rwlog")):
        out.extend(scan(path.read_bytes()).records)
    return out


# --- nvml -----------------------------------------------------------------------------


def busy(stop: threading.Event, device: str) -> None:
    import torch

    a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    while not stop.is_set():
        for _ in range(20):
            a = (a @ a).clamp_(-1, 1)
        torch.cuda.synchronize()


def nvml(args: argparse.Namespace) -> None:
    import torch

    from rankwise.sdk.gpu import Gpus

    torch.zeros(1, device="cuda")  # a CUDA context, so this process is on the device
    hold = torch.empty(2 * 2**30, dtype=torch.uint8, device="cuda")  # 2 GiB held
    gpus = Gpus.open(None)
    if gpus is None:
        print("nvml: Gpus.open() found no NVML")
        return
    print(f"nvml: {gpus.count} device(s), sampled {gpus.indices}")
    sample_us, proc_us = [], []
    last: dict[str, Any] = {}
    for _ in range(args.samples):
        out: dict[str, Any] = {}
        t = time.perf_counter()
        gpus.sample(out, time.time())
        sample_us.append((time.perf_counter() - t) * 1e6)
        t = time.perf_counter()
        gpus.process_memory(os.getpid(), out)
        proc_us.append((time.perf_counter() - t) * 1e6)
        last = out
    print(
        f"  sample(): p50 {q(sample_us, 0.5):,.0f} µs, p99 {q(sample_us, 0.99):,.0f} µs; "
        f"process_memory(): p50 {q(proc_us, 0.5):,.0f} µs, p99 {q(proc_us, 0.99):,.0f} µs "
        f"({args.samples} calls, idle)"
    )
    print(f"  series read: {len(last)}: {', '.join(sorted(last))}")
    free, total = torch.cuda.mem_get_info()
    i = gpus.indices[0]
    print(
        f"  idle: util {last.get(f'gpu/{i}/util_percent')} %, power "
        f"{last.get(f'gpu/{i}/power_w', 0):.0f} W, SM clock {last.get(f'gpu/{i}/sm_clock_mhz')} "
        f"MHz, temp {last.get(f'gpu/{i}/temp_c')} C"
    )
    used = last.get(f"gpu/{i}/mem_used_bytes", 0)
    print(
        f"  memory used: NVML {used / 2**30:.2f} GiB, torch.cuda.mem_get_info "
        f"{(total - free) / 2**30:.2f} GiB; total NVML "
        f"{last.get(f'gpu/{i}/mem_total_bytes', 0) / 2**30:.1f} GiB, torch {total / 2**30:.1f} GiB"
    )
    mine = last.get(f"proc/gpu/{i}/mem_used_bytes")
    print(
        f"  this process: NVML {'not listed' if mine is None else f'{mine / 2**30:.2f} GiB'}, "
        f"torch reserved {torch.cuda.memory_reserved() / 2**30:.2f} GiB"
    )
    stop = threading.Event()
    worker = threading.Thread(target=busy, args=(stop, "cuda"), daemon=True)
    worker.start()
    time.sleep(1.0)
    seen: list[dict[str, Any]] = []
    end = time.monotonic() + args.busy_seconds
    while time.monotonic() < end:
        out = {}
        gpus.sample(out, time.time())
        seen.append(out)
        time.sleep(0.25)
    stop.set()
    worker.join()
    for key in ("util_percent", "power_w", "sm_clock_mhz", "temp_c", "mem_used_bytes"):
        vals = [s[f"gpu/{i}/{key}"] for s in seen if f"gpu/{i}/{key}" in s]
        if vals:
            print(f"  busy {key}: min {min(vals):,.0f}, median {statistics.median(vals):,.0f}, "
                  f"max {max(vals):,.0f} ({len(vals)} samples)")  # fmt: skip
    gpus.close()
    del hold


# --- tracked --------------------------------------------------------------------------


def tracked(args: argparse.Namespace) -> None:
    import torch

    import rankwise
    from rankwise.stream import records as R

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        torch.manual_seed(0)
        model = torch.nn.Sequential(
            torch.nn.Linear(1024, 2560), torch.nn.ReLU(), torch.nn.Linear(2560, 2560),
            torch.nn.ReLU(), torch.nn.Linear(2560, 512),
        ).to(args.device)  # fmt: skip
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        x = torch.randn(256, 1024, device=args.device)
        run = rankwise.init(project="gpu", dir=str(data), system_interval=0.5, console="off")
        run.watch(model, log="all", log_freq=50)
        step, images = 0, 0
        log_s: list[float] = []
        end = time.monotonic() + args.seconds
        t0 = time.perf_counter()
        while time.monotonic() < end:
            opt.zero_grad()
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            vals: dict[str, Any] = {"loss": loss.detach()}
            if step % 100 == 0:
                vals["sample"] = rankwise.Image(torch.sigmoid(model[0].weight[:64, :64]))
                images += 1
            t = time.perf_counter()
            run.log(vals, step=step)
            log_s.append(time.perf_counter() - t)
            step += 1
        sync(args.device)
        wall = time.perf_counter() - t0
        t = time.perf_counter()
        run.finish()
        fin = time.perf_counter() - t
        recs = stream_records(data)
        hists = [r for r in recs if type(r) is R.HistogramRec]
        systems = [r.values for r in recs if type(r) is R.System]
        keys = sorted({k for v in systems for k in v if "gpu" in k})
        info = rankwise.Api(str(data)).run(run.id, project="gpu")
        hist = info.history()
        got_loss = [h["loss"] for h in hist if h.get("loss") is not None]
        media = info.media("sample")
        print(
            f"tracked: {step} steps in {wall:.1f} s on {args.device}; "
            f"log() p50 {q(log_s, 0.5) * 1e6:,.0f} µs, p99 {q(log_s, 0.99) * 1e6:,.0f} µs; "
            f"finish() {fin:.2f} s"
        )
        print(
            f"  read back: {len(got_loss)} of {step} losses, "
            f"{len(media)} of {images} images, {len(systems)} system samples"
        )
        print(f"  GPU series: {', '.join(keys)}")
        if systems:
            last = systems[-1]
            print("  last sample: " + ", ".join(f"{k}={last[k]}" for k in keys if k in last))
        hkeys = sorted({getattr(r, "key", "") for r in hists})
        print(f"  watch: {len(hists)} histogram records, {len(hkeys)} keys (e.g. {hkeys[:2]})")


# --- watch ----------------------------------------------------------------------------


def watch(args: argparse.Namespace) -> None:
    """A recorded pass's cost on the training thread, per step: a 48-tensor MLP (24
    Linear 1024x1024), ``log_freq=10``, each step timed alone (synchronised before and
    after), and the backward call's own return time (what the CPU spends launching)."""
    import torch

    import rankwise

    dev = args.device
    torch.manual_seed(0)
    layers: list[Any] = []
    for _ in range(24):
        layers += [torch.nn.Linear(1024, 1024), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(256, 1024, device=dev)
    tensors = sum(1 for _ in model.parameters())
    with tempfile.TemporaryDirectory() as tmp:
        run = rankwise.init(project="gpu", dir=tmp, console="off", system=False)
        freq = 10
        for watched in (False, True):
            if watched:
                run.watch(model, log=args.watch_log, log_freq=freq)
            steps, back = [], []
            for _ in range(args.watch_steps):
                sync(dev)
                t = time.perf_counter()
                opt.zero_grad()
                loss = model(x).pow(2).mean()
                b = time.perf_counter()
                loss.backward()
                back.append(time.perf_counter() - b)
                opt.step()
                run.log({"loss": loss.detach()})
                sync(dev)
                steps.append(time.perf_counter() - t)
            by: dict[int, list[float]] = {}
            bb: dict[int, list[float]] = {}
            for i, (st, bk) in enumerate(zip(steps[freq:], back[freq:])):
                by.setdefault(i % freq, []).append(st)
                bb.setdefault(i % freq, []).append(bk)
            med = {r: statistics.median(v) * 1e3 for r, v in by.items()}
            medb = {r: statistics.median(v) * 1e3 for r, v in bb.items()}
            hi = max(med, key=lambda r: med[r])
            others = statistics.median(v for r, v in med.items() if r != hi)
            others_b = statistics.median(v for r, v in medb.items() if r != hi)
            extra = med[hi] - others
            what = f"log={args.watch_log}" if watched else "off"
            print(
                f"watch ({what}, {tensors} tensors): step {others:.2f} ms; the slowest of "
                f"every {freq} {med[hi]:.2f} ms (+{extra:.2f} ms, "
                f"{extra / tensors * 1e3:.0f} µs a tensor); backward() returns after "
                f"{others_b:.2f} ms, on that step {medb[hi]:.2f} ms"
            )
        if args.watch_profile:
            from torch.profiler import ProfilerActivity, profile

            run.unwatch(model)
            run.watch(model, log=args.watch_log, log_freq=1)
            for _ in range(3):
                opt.zero_grad()
                model(x).pow(2).mean().backward()
            sync(dev)
            acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == "cuda" else [])
            with profile(activities=acts) as prof:
                for _ in range(3):
                    opt.zero_grad()
                    model(x).pow(2).mean().backward()
                sync(dev)
            avg = prof.key_averages()
            for key, rows in (("self_cpu_time_total", 14), ("self_cuda_time_total", 8)):
                if dev == "cuda" or "cpu" in key:
                    print(avg.table(sort_by=key, row_limit=rows, max_name_column_width=40))
        run.finish()


# --- media ----------------------------------------------------------------------------


def drain(run: Any) -> None:
    """Wait (untimed) until the encoder has encoded everything (bench_media.drain)."""
    enc = run._media
    if enc is not None:
        enc._wake.set()
    end = time.monotonic() + 30
    while enc is not None and (enc.queue or enc.pending_bytes() > 0) and time.monotonic() < end:
        time.sleep(0.0002)


def media(args: argparse.Namespace) -> None:
    import numpy as np
    import torch

    import rankwise

    with tempfile.TemporaryDirectory() as tmp:
        run = rankwise.init(project="gpu", dir=tmp, console="off", system=False)
        dev, n = args.device, args.n
        img_gpu = torch.rand(3, 512, 512, device=dev)
        img_np = img_gpu.cpu().numpy()
        vals = torch.randn(1_000_000, device=dev)
        counts = torch.histc(vals, bins=64)
        edges = torch.linspace(-5, 5, 65, device=dev)
        counts_np, edges_np = counts.cpu().numpy(), edges.cpu().numpy()
        hist = rankwise.Histogram
        cases = {
            f"image 3x512x512, {dev}": lambda: rankwise.Image(img_gpu),
            "image 3x512x512, NumPy": lambda: rankwise.Image(img_np),
            f"histogram 64 bins, {dev}": lambda: hist(np_histogram=(counts, edges)),
            "histogram 64 bins, NumPy": lambda: hist(np_histogram=(counts_np, edges_np)),
        }
        print("media: the training thread's run.log() (µs), after the first  p50  p99")
        step = 0
        for name, make in cases.items():
            times = []
            for _ in range(args.media_iters):
                step += 1
                sync(dev)
                t = time.perf_counter()
                run.log({"v": make()}, step=step)
                times.append((time.perf_counter() - t) * 1e6)
                drain(run)
            rest = times[1:]
            print(f"  {name:<28} {q(rest, 0.5):>9,.0f} {q(rest, 0.99):>9,.0f}   "
                  f"(first call {times[0]:,.0f})")  # fmt: skip
        # Does log() wait for queued device work? Queue ~queued_ms of matrix products whose
        # result is the image, then log it.
        a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
        sync(dev)
        t = time.perf_counter()
        for _ in range(10):
            a = (a @ a).clamp_(-1, 1)
        sync(dev)
        per10 = time.perf_counter() - t
        reps = max(1, int(args.queued_ms / 1e3 / per10))
        sync(dev)
        t0 = time.perf_counter()
        for _ in range(reps * 10):
            a = (a @ a).clamp_(-1, 1)
        img = torch.sigmoid(a[:256, :256].float())
        t = time.perf_counter()
        run.log({"queued": rankwise.Image(img)}, step=10_000)
        call = time.perf_counter() - t
        sync(dev)
        work = time.perf_counter() - t0
        print(
            f"  log() of an image behind {work * 1e3:,.0f} ms of queued work: "
            f"{call * 1e3:.2f} ms (it {'did not wait' if call < work / 4 else 'WAITED'})"
        )
        run.finish()
        info = rankwise.Api(tmp).run(run.id, project="gpu")
        got = info.media("queued")
        import io

        from PIL import Image as PILImage

        pixels = np.asarray(PILImage.open(io.BytesIO(got[0].read()))) if got else None
        expect = np.rint(img.cpu().numpy() * 255).astype(np.uint8)
        same = pixels is not None and np.array_equal(pixels, expect)
        print(f"  the queued image read back: {'equal to the tensor' if same else 'DIFFERENT'}")


# --- flight ---------------------------------------------------------------------------

FLIGHT_CHILD = r"""
import json, os, sys, time, pickle
sys.path.insert(0, sys.argv[1])
mode, backend, device, data = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
import torch
import torch.distributed as dist
import rankwise
from rankwise.sdk import flight
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[6], RANK="0", WORLD_SIZE="1")
out = {}
if mode == "time":
    buf = sys.argv[7]
    if buf != "unset":
        os.environ["TORCH_FR_BUFFER_SIZE"] = buf
    dist.init_process_group(backend, rank=0, world_size=1)
    x = torch.ones(int(sys.argv[8]), device=device)
    for _ in range(200):
        dist.all_reduce(x)
    if device == "cuda": torch.cuda.synchronize()
    times = []
    for _ in range(int(sys.argv[9])):
        t = time.perf_counter()
        dist.all_reduce(x)
        if device == "cuda": torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    times.sort()
    out["median_us"] = times[len(times) // 2] * 1e6
    n = 0
    for name in flight.DUMPS:
        dump = getattr(torch._C._distributed_c10d, name, None)
        if dump is not None:
            raw = dump(includeCollectives=True, includeStackTraces=False, onlyActive=False)
            n += len(pickle.loads(raw).get("entries") or [])
    out["entries"] = n
    dist.destroy_process_group()
    print(json.dumps(out))
    sys.exit(0)
run = rankwise.init(project="flight", dir=data, console="off", system=False, stall_timeout=2.0,
                    settings={"flush_interval": 0.05, "heartbeat_interval": 0.5})
out["buffer_var"] = os.environ.get("TORCH_FR_BUFFER_SIZE")
c10d = torch._C._distributed_c10d
out["dumps"] = [n for n in flight.DUMPS if hasattr(c10d, n)]
dist.init_process_group(backend, rank=0, world_size=1)
x = torch.ones(1024, device=device)
for step in range(200):
    dist.all_reduce(x)
    run.log({"step": step}, step=step)
if device == "cuda": torch.cuda.synchronize()
got = flight.entries(True)
out["after_200"] = {
    "n": len(got), "ops": sorted({c.op for c in got}), "states": sorted({c.state for c in got}),
    "seq": [got[0].seq, got[-1].seq] if got else [], "pg": sorted({c.pg for c in got}),
    "sizes": got[-1].sizes if got else None, "dtypes": got[-1].dtypes if got else None,
}
if device == "cuda":
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(400):
        a = (a @ a).clamp_(-1, 1)
    y = a[0, :1024].float().contiguous()
    work = dist.all_reduce(y, async_op=True)
    got = flight.entries(True)
    out["queued"] = {"last": [got[-1].op, got[-1].seq, got[-1].state] if got else None}
    try:
        dump = getattr(c10d, flight.DUMPS[0])
        raw = dump(includeCollectives=True, includeStackTraces=False, onlyActive=False)
        raw = pickle.loads(raw)
        e = (raw.get("entries") or [{}])[-1]
        plain = (int, float, str, bool, type(None))
        out["queued"]["raw"] = {
            k: v if isinstance(v, plain) else str(v)[:80] for k, v in e.items() if k != "frames"
        }
    except Exception as exc:
        out["queued"]["raw"] = repr(exc)
    # the stall: the training thread blocks on the device, an all_reduce queued behind work
    for _ in range(5000):
        a = (a @ a).clamp_(-1, 1)
    y = a[0, :1024].float().contiguous()
    dist.all_reduce(y, async_op=True)
    t = time.perf_counter()
    torch.cuda.synchronize()  # the stall
    out["blocked_s"] = time.perf_counter() - t
    run.log({"step": 1000}, step=1000)
run.finish()
dist.destroy_process_group()
print(json.dumps(out))
"""


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def child(*argv: str, timeout: float = 300) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "TORCH_FR_BUFFER_SIZE"}
    proc = subprocess.run(
        [sys.executable, "-c", FLIGHT_CHILD, str(REPO), *argv],
        capture_output=True, text=True, timeout=timeout, env=env,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"flight child failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def flight(args: argparse.Namespace) -> None:
    from rankwise.stream import records as R

    with tempfile.TemporaryDirectory() as tmp:
        out = child("run", args.backend, args.device, tmp, str(free_port()))
        print(f"flight ({args.backend}, {args.device}): TORCH_FR_BUFFER_SIZE set by init(): "
              f"{out['buffer_var']}")  # fmt: skip
        print(f"  dump functions in this torch: {out['dumps']}")
        print(f"  entries() after 200 all_reduces: {json.dumps(out['after_200'])}")
        if "queued" in out:
            print(f"  entries() with an all_reduce queued behind device work: {out['queued']}")
            print(f"  the training thread blocked {out['blocked_s']:.1f} s on the device")
        stalls = [r for r in stream_records(Path(tmp)) if type(r) is R.Stall]
        for s in stalls:
            fl = [(c.op, c.seq, c.state) for c in s.flight]
            print(
                f"  Stall record: cleared={s.cleared} idle={s.idle_seconds:.1f} s "
                f"where={s.where!r}; flight: {len(fl)} entries, last {fl[-3:]}"
            )
        if not stalls:
            print("  no Stall record (the device work ended before the stall timeout)")
    print(f"  recorder cost, all_reduce of {args.numel} float32 ({args.rounds} rounds, "
          f"{args.iters} calls each; median µs per call):")  # fmt: skip
    settings = ["2000", "0", "unset"]
    got: dict[str, list[float]] = {b: [] for b in settings}
    entries: dict[str, int] = {}
    for r in range(args.rounds):
        for buf in settings[r % 3 :] + settings[: r % 3]:  # rotating order
            res = child("time", args.backend, args.device, tmp, str(free_port()), buf,
                        str(args.numel), str(args.iters))  # fmt: skip
            got[buf].append(res["median_us"])
            entries[buf] = res["entries"]
    on, off = statistics.median(got["2000"]), statistics.median(got["0"])
    print(f"    buffer 2000: {on:.1f} µs {[round(x, 1) for x in got['2000']]} "
          f"({entries['2000']} entries kept)")  # fmt: skip
    print(f"    buffer 0:    {off:.1f} µs {[round(x, 1) for x in got['0']]} "
          f"({entries['0']} entries kept)")  # fmt: skip
    unset = statistics.median(got["unset"])
    print(f"    unset (torch's default): {unset:.1f} µs {[round(x, 1) for x in got['unset']]} "
          f"({entries['unset']} entries kept)")  # fmt: skip
    print(f"    overhead of 2000 against 0: {(on - off) / off * 100:+.1f} %")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", nargs="+", default=["nvml", "tracked", "watch", "media", "flight"])
    p.add_argument("--watch-steps", type=int, default=300)
    p.add_argument("--watch-log", default="gradients")
    p.add_argument("--watch-profile", action="store_true", help="profile 3 recorded passes")
    p.add_argument("--samples", type=int, default=500)
    p.add_argument("--busy-seconds", type=float, default=4.0)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--media-iters", type=int, default=50)
    p.add_argument("--queued-ms", type=float, default=300.0)
    p.add_argument("--backend", default="nccl")
    p.add_argument("--device", default="cuda")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--numel", type=int, default=1024)
    p.add_argument("--n", type=int, default=8192, help="matrix side of the queued work")
    args = p.parse_args()
    import torch

    name = torch.cuda.get_device_name() if torch.cuda.is_available() else "none"
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, device {name}")
    for name in args.only:
        t = time.perf_counter()
        try:
            sections = {"nvml": nvml, "tracked": tracked, "watch": watch, "media": media}
            sections["flight"] = flight
            sections[name](args)
        except Exception as exc:  # one section failing still lets the others report
            import traceback

            traceback.print_exc()
            print(f"{name}: FAILED: {exc!r}")
        print(f"[{name}: {time.perf_counter() - t:.1f} s]", flush=True)


if __name__ == "__main__":
    main()
