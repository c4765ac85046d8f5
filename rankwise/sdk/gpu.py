"""GPUs through NVML (nvidia-ml-py's ``pynvml``), for the system sampler's thread.

``pynvml`` is imported by ``Gpus.open()`` only, on the sampler's thread, never on import of
rankwise; without it, without a driver, or when ``nvmlInit`` fails, ``open()`` returns
None and there are no GPU series — never an error. GPUs are named by their NVML index
(PCI bus order, what ``nvidia-smi`` shows), the one name every process on a node agrees
on whatever its ``CUDA_VISIBLE_DEVICES``.

A query a device does not support (an old GPU without NVLink, a container without
permission for power) is asked once and then never again, so an unsupported series costs
one failed call per process, not one per sample; any other failure skips that series for
that sample only. Keys, per sampled GPU ``i``::

    gpu/i/util_percent  gpu/i/mem_util_percent  gpu/i/mem_used_bytes  gpu/i/mem_total_bytes
    gpu/i/temp_c  gpu/i/power_w  gpu/i/sm_clock_mhz
    gpu/i/pcie_tx_bytes_per_s  gpu/i/pcie_rx_bytes_per_s       (see below)
    gpu/i/nvlink_tx_bytes_per_s  gpu/i/nvlink_rx_bytes_per_s   (all links summed)
    gpu/i/ecc_corrected  gpu/i/ecc_uncorrected                 (since the driver loaded)

Traffic is the rate of NVML's byte counters between two samples (so the first sample
has none), read for NVLink and PCIe in one call. A GPU without the PCIe counters gives
the driver's own PCIe throughput instead, which blocks 20 ms per direction to measure.

and for the recording process itself ``proc/gpu/i/mem_used_bytes`` on every GPU where
NVML lists its pid (nothing inside a container with its own pid namespace, where NVML
reports host pids).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Values = dict[str, "float | int"]

# NVML return codes after which a query is not asked again on that device.
_PERMANENT = {
    3,  # NVML_ERROR_NOT_SUPPORTED
    4,  # NVML_ERROR_NO_PERMISSION
    13,  # NVML_ERROR_FUNCTION_NOT_FOUND (an older driver)
}
_ALL_LINKS = 0xFFFFFFFF  # scopeId asking NVML for the sum over every NVLink
# Cumulative counters read in one nvmlDeviceGetFieldValues call, as per-second rates:
# key, field id, scopeId, scale to bytes. A field the device does not support is
# dropped for good on that device.
_COUNTERS: tuple[tuple[str, int, int, float], ...] = (
    # NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_{TX,RX}: KiB over every link
    ("nvlink_tx_bytes_per_s", 138, _ALL_LINKS, 1024.0),
    ("nvlink_rx_bytes_per_s", 139, _ALL_LINKS, 1024.0),
    # NVML_FI_DEV_PCIE_COUNT_{TX,RX}_BYTES (Hopper and later drivers): bytes, may wrap
    ("pcie_tx_bytes_per_s", 197, 0, 1.0),
    ("pcie_rx_bytes_per_s", 198, 0, 1.0),
)
# Without the PCIe counters: the driver's own throughput, KB/s. Each of these calls
# samples for 20 ms before it returns (measured on an H200: the two made a sample of
# every series take 41 ms), which is why the counters come first.
_PCIE_SAMPLED = (
    ("pcie_tx_bytes_per_s", "NVML_PCIE_UTIL_TX_BYTES"),
    ("pcie_rx_bytes_per_s", "NVML_PCIE_UTIL_RX_BYTES"),
)
# nvmlFieldValue_t.valueType -> the union member that holds the value
_VALUE_MEMBER = dict(enumerate(("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")))
# Series read with one call each: key, pynvml function, arguments after the handle
# (names of pynvml constants, or values), scale to the unit in the key.
_SCALARS: tuple[tuple[str, str, tuple[Any, ...], float], ...] = (
    ("temp_c", "nvmlDeviceGetTemperature", ("NVML_TEMPERATURE_GPU",), 1),
    ("power_w", "nvmlDeviceGetPowerUsage", (), 0.001),  # milliwatts
    ("sm_clock_mhz", "nvmlDeviceGetClockInfo", ("NVML_CLOCK_SM",), 1),
    # memory error type corrected (0) / uncorrected (1), volatile counter (0)
    ("ecc_corrected", "nvmlDeviceGetTotalEccErrors", (0, 0), 1),
    ("ecc_uncorrected", "nvmlDeviceGetTotalEccErrors", (1, 0), 1),
)


class Rates:
    """Per-second rates of cumulative counters; the first value of a key gives none."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[float, float]] = {}

    def add(self, out: Values, key: str, value: float, now: float) -> None:
        prev = self._last.get(key)
        self._last[key] = (value, now)
        # A counter that went backwards was reset (a driver reload, a wrap): skip once.
        if prev is not None and now > prev[1] and value >= prev[0]:
            out[key] = (value - prev[0]) / (now - prev[1])


def preload_nvml() -> None:
    """Import NVML's bindings on the calling thread, before a sampler or capture thread
    needs them. A module a thread is importing when the process forks stays locked in
    the child (CPython does not reset its per-module import locks at fork), so a forked
    child that imported it later would hang; imported up front, it is never imported on
    a thread of ours."""
    try:
        import pynvml  # type: ignore[import-untyped, import-not-found, unused-ignore]  # noqa: F401
    except Exception:
        pass


class Gpus:
    """The NVML devices this process samples; every method is safe to call and quiet."""

    def __init__(self, nvml: Any, handles: dict[int, Any], count: int) -> None:
        self._nv = nvml
        self._handles = handles  # NVML index -> handle, restricted by gpu_device_ids
        self.count = count  # devices on the node
        self._off: set[tuple[int, str]] = set()
        self._rates = Rates()

    @classmethod
    def open(cls, ids: Sequence[int] | None) -> Gpus | None:
        """NVML's view of this node, or None when there is no NVML to be had."""
        try:
            import pynvml as nvml  # type: ignore[import-untyped, import-not-found, unused-ignore]
        except Exception:
            return None
        try:
            nvml.nvmlInit()
        except Exception:
            return None
        try:
            count = int(nvml.nvmlDeviceGetCount())
            wanted = range(count) if ids is None else [i for i in ids if 0 <= i < count]
            handles = {i: nvml.nvmlDeviceGetHandleByIndex(i) for i in wanted}
        except Exception:
            _quiet(nvml.nvmlShutdown)
            return None
        return cls(nvml, handles, count)

    @property
    def indices(self) -> list[int]:
        return sorted(self._handles)

    def close(self) -> None:
        _quiet(self._nv.nvmlShutdown)

    def _ask(self, index: int, what: str, fn: str, *args: Any) -> Any:
        if (index, what) in self._off:
            return None
        try:
            return getattr(self._nv, fn)(*args)
        except Exception as exc:
            # AttributeError: a pynvml too old to know the call.
            if getattr(exc, "value", None) in _PERMANENT or isinstance(exc, AttributeError):
                self._off.add((index, what))
            return None

    def sample(self, out: Values, now: float) -> None:
        """Add every supported series of every sampled GPU to ``out``."""
        nv = self._nv
        for i, h in self._handles.items():
            p = f"gpu/{i}/"
            util = self._ask(i, "util", "nvmlDeviceGetUtilizationRates", h)
            if util is not None:
                out[p + "util_percent"] = int(util.gpu)
                out[p + "mem_util_percent"] = int(util.memory)
            mem = self._ask(i, "mem", "nvmlDeviceGetMemoryInfo", h)
            if mem is not None:
                out[p + "mem_used_bytes"] = int(mem.used)
                out[p + "mem_total_bytes"] = int(mem.total)
            for key, fn, names, scale in _SCALARS:
                args = [getattr(nv, a, None) if isinstance(a, str) else a for a in names]
                value = None if None in args else self._ask(i, key, fn, h, *args)
                if value is not None:
                    out[p + key] = value * scale if scale != 1 else int(value)
            self._counters(i, h, p, out, now)

    def _counters(self, i: int, h: Any, p: str, out: Values, now: float) -> None:
        """NVLink and PCIe traffic as rates of NVML's counters (``_COUNTERS``); PCIe from
        the driver's 20 ms samples only on a device without its counters."""
        wanted = [c for c in _COUNTERS if (i, c[0]) not in self._off]
        fields = [(field, scope) for _, field, scope, _ in wanted]
        values = self._ask(i, "fields", "nvmlDeviceGetFieldValues", h, fields) if fields else None
        for (key, _, _, scale), v in zip(wanted, values or ()):
            value = _field_value(v)
            if value is None:
                self._off.add((i, key))  # not on this device (no NVLink, an older GPU)
            else:
                self._rates.add(out, p + key, value * scale, now)
        for key, const in _PCIE_SAMPLED:
            if (i, key) in self._off or (i, "fields") in self._off:
                arg = getattr(self._nv, const, None)
                fn = "nvmlDeviceGetPcieThroughput"
                got = None if arg is None else self._ask(i, const, fn, h, arg)
                if got is not None:
                    out[p + key] = got * 1024

    def process_memory(self, pid: int, out: Values) -> None:
        """``proc/gpu/i/mem_used_bytes`` for each sampled GPU where NVML lists ``pid``."""
        for i, h in self._handles.items():
            procs = self._ask(i, "procs", "nvmlDeviceGetComputeRunningProcesses", h)
            for proc in procs or ():
                if proc.pid == pid:
                    out[f"proc/gpu/{i}/mem_used_bytes"] = int(proc.usedGpuMemory or 0)

    def index_of(self, token: str | None) -> int | None:
        """The NVML index of a ``CUDA_VISIBLE_DEVICES`` entry: an index or a UUID (prefix)."""
        if not token:
            return None
        if token.isdigit():
            return int(token) if int(token) < self.count else None
        if not token.startswith("GPU-"):
            return None  # MIG instances and the like: not a whole GPU
        for i in range(self.count):
            try:
                uuid = self._nv.nvmlDeviceGetUUID(self._nv.nvmlDeviceGetHandleByIndex(i))
            except Exception:
                continue
            if isinstance(uuid, bytes):
                uuid = uuid.decode(errors="replace")
            if str(uuid).startswith(token):
                return i
        return None


def _field_value(v: Any) -> float | None:
    """The number in one ``nvmlFieldValue_t``, or None when NVML returned an error for it."""
    if getattr(v, "nvmlReturn", 1) != 0:
        return None
    member = _VALUE_MEMBER.get(getattr(v, "valueType", 3), "ullVal")
    try:
        return float(getattr(v.value, member))
    except Exception:
        return None


def _quiet(fn: Callable[[], Any]) -> None:
    try:
        fn()
    except Exception:
        pass
