"""System metrics: the node, its GPUs and this process, sampled on a daemon thread.

Every recording process runs one ``SystemSampler`` thread that wakes every
``settings.system_interval`` seconds (10 s by default; ``system=False`` turns it off) and
hands one ``System`` record to the stream's writer, so nothing here runs on the training
thread and ``log()`` costs the same with or without it.

=========  ================================================  ===========================
keys       what                                              sampled by
=========  ================================================  ===========================
node/*     CPU %, load, memory, disk I/O rates and usage     one process per node
           (of the data directory's filesystem), network
gpu/i/*    each GPU by NVML index (see ``rankwise.sdk.gpu``) one process per node
proc/*     RSS, CPU %, threads; with NVML the GPU this       every recording process
           process was given (``proc/gpu_index``) and its
           memory on each GPU it uses
=========  ================================================  ===========================

The node's sampler is its local rank 0. Under every run mode a node on which any process
records has its local rank 0 recording too, so local rank 0 *is* the node's first
recording process and no coordination between processes is needed. Keys carry no node or
rank: the stream's ``StreamStart`` (``node_rank``, ``host``, ``rank``) says whose they are.

Invariants: a failing probe costs its own series, never the sample or the thread; torch
is never imported (the device is read at ``attach`` only if the program already
initialised CUDA); NVML is imported on the sampler's thread. Rates (``*_per_s``) are
differences of cumulative counters between samples, so the first sample has none. At
``stop`` one last sample is taken when the previous one is more than a second old, so a
short run still has one.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING

from .. import _log
from ..stream import records as R
from .gpu import Gpus, Rates, Values, preload_nvml

if TYPE_CHECKING:
    from ..settings import Settings
    from .handle import RunHandle


class NodeProbe:
    """This machine as a whole, through psutil."""

    def __init__(self, disk_path: str) -> None:
        import psutil

        self._ps = psutil
        self._disk_path = disk_path
        self._rates = Rates()
        with suppress(Exception):
            psutil.cpu_percent(None)  # the first call only starts the measurement

    def sample(self, out: Values, now: float) -> None:
        ps, rates = self._ps, self._rates
        with suppress(Exception):
            out["node/cpu_percent"] = float(ps.cpu_percent(None))
        with suppress(Exception):
            one, five, fifteen = os.getloadavg()
            out.update({"node/load1": one, "node/load5": five, "node/load15": fifteen})
        with suppress(Exception):
            vm = ps.virtual_memory()
            out["node/mem_used_bytes"] = int(vm.used)
            out["node/mem_available_bytes"] = int(vm.available)
            out["node/mem_total_bytes"] = int(vm.total)
            out["node/mem_percent"] = float(vm.percent)
        with suppress(Exception):
            io = ps.disk_io_counters()
            if io is not None:  # None in some containers
                rates.add(out, "node/disk_read_bytes_per_s", io.read_bytes, now)
                rates.add(out, "node/disk_write_bytes_per_s", io.write_bytes, now)
        with suppress(Exception):
            du = ps.disk_usage(self._disk_path)
            out["node/disk_used_bytes"] = int(du.used)
            out["node/disk_free_bytes"] = int(du.free)
            out["node/disk_percent"] = float(du.percent)
        with suppress(Exception):
            net = ps.net_io_counters()
            if net is not None:
                rates.add(out, "node/net_sent_bytes_per_s", net.bytes_sent, now)
                rates.add(out, "node/net_recv_bytes_per_s", net.bytes_recv, now)


class ProcessProbe:
    """The recording process itself."""

    def __init__(self) -> None:
        import psutil

        self._proc = psutil.Process()
        with suppress(Exception):
            self._proc.cpu_percent(None)

    def sample(self, out: Values) -> None:
        with suppress(Exception), self._proc.oneshot():
            out["proc/rss_bytes"] = int(self._proc.memory_info().rss)
            out["proc/cpu_percent"] = float(self._proc.cpu_percent(None))
            out["proc/threads"] = int(self._proc.num_threads())


def device_token(
    env: Mapping[str, str], local_rank: int, ordinal: int | None, uuid: str | None
) -> str | None:
    """This process's GPU as a ``CUDA_VISIBLE_DEVICES`` entry (an index or a UUID).

    Preference: the UUID of torch's current device; torch's current ordinal; the only
    visible device; ``LOCAL_RANK`` (the torchrun convention ``cuda:LOCAL_RANK``).
    """
    if uuid:
        return uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
    raw = env.get("CUDA_VISIBLE_DEVICES")
    visible = None if raw is None else [t.strip() for t in raw.split(",") if t.strip()]
    if visible is not None and not visible:
        return None  # CUDA_VISIBLE_DEVICES="" hides every GPU
    if ordinal is None:
        ordinal = 0 if visible is not None and len(visible) == 1 else local_rank
    if visible is None:
        return str(ordinal)
    return visible[ordinal] if 0 <= ordinal < len(visible) else None


def torch_device() -> tuple[int | None, str | None]:
    """(ordinal, uuid) of the calling thread's CUDA device, if the program set one up."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None, None
    try:
        cuda = torch.cuda
        if not cuda.is_initialized():
            return None, None  # asking would initialise CUDA: not ours to do
        ordinal = int(cuda.current_device())
    except Exception:
        return None, None
    try:
        uuid = str(cuda.get_device_properties(ordinal).uuid)
    except Exception:
        uuid = None
    return ordinal, uuid


class SystemSampler:
    """The daemon thread; ``put`` hands a sample to the writer."""

    def __init__(
        self,
        put: Callable[[Values], None],
        interval: float,
        node: bool,
        gpu_ids: Sequence[int] | None,
        disk_path: str,
        token: str | None,
    ) -> None:
        self._put = put
        self._interval = interval
        self._node = node
        self._gpu_ids = gpu_ids
        self._disk_path = disk_path
        self._token = token
        self._pid = os.getpid()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rankwise-system", daemon=True)
        self.samples = 0
        self._warned = False

    def start(self) -> None:
        preload_nvml()  # on this thread, never the sampler's (see gpu.preload_nvml)
        self._thread.start()

    def stop(self, deadline: float) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(max(0.0, min(deadline - time.monotonic(), 5.0)))

    def _run(self) -> None:
        gpus: Gpus | None = None
        try:
            node = NodeProbe(self._disk_path) if self._node else None
            proc = ProcessProbe()
            gpus = Gpus.open(self._gpu_ids)
            gpu_index = gpus.index_of(self._token) if gpus is not None else None
            last = time.monotonic()
            while True:
                stopped = self._stop.wait(self._interval)
                if stopped and time.monotonic() - last < 1.0:
                    break
                last = time.monotonic()
                try:
                    self._sample(node, proc, gpus, gpu_index)
                except Exception as exc:  # a bad sample is skipped, the next one is tried
                    self._warn(exc)
                if stopped:
                    break
        except Exception as exc:  # tracking never takes training down
            self._warn(exc)
        finally:
            if gpus is not None:
                gpus.close()

    def _sample(
        self, node: NodeProbe | None, proc: ProcessProbe, gpus: Gpus | None, gpu_index: int | None
    ) -> None:
        now = time.time()
        out: Values = {}
        if node is not None:
            node.sample(out, now)
            if gpus is not None:
                gpus.sample(out, now)
        proc.sample(out)
        if gpus is not None:
            if gpu_index is not None:
                out["proc/gpu_index"] = gpu_index
            gpus.process_memory(self._pid, out)
        if out:
            self._put(out)
            self.samples += 1

    def _warn(self, exc: Exception) -> None:
        if not self._warned:
            self._warned = True
            _log.warn(f"system metrics: {exc!r} (shown once)")


def attach(run: RunHandle, settings: Settings) -> SystemSampler | None:
    """Start sampling for a recording run (on the thread that called ``init()``)."""
    if not settings.system:
        return None
    ordinal, uuid = torch_device()
    token = device_token(os.environ, run.local_rank, ordinal, uuid)

    def put(values: Values) -> None:
        run.put_control(lambda seq, t: R.System(seq, t, values))

    sampler = SystemSampler(
        put,
        interval=float(settings.system_interval),
        node=run.local_rank == 0,
        gpu_ids=settings.gpu_device_ids,
        disk_path=str(run.dir),
        token=token,
    )
    run.add_component(sampler)
    sampler.start()
    return sampler
