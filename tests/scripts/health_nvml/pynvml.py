"""A fake ``pynvml`` for tests: two GPUs, put first on ``sys.path`` of a subprocess.

GPU 0 supports everything, NVLink and the PCIe byte counters included, and lists the
calling process as a compute process; GPU 1 has no power reading, no NVLink and no PCIe
counters (NOT_SUPPORTED, as an older card), so its PCIe traffic is the driver's sampled
throughput.
``FAKE_NVML_FAIL=1`` makes ``nvmlInit`` fail as it does on a machine without a driver.
At ``nvmlShutdown`` the number of calls per function is written as JSON to
``FAKE_NVML_CALLS`` when that is set.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from types import SimpleNamespace

NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1
NVML_PCIE_UTIL_TX_BYTES = 0
NVML_PCIE_UTIL_RX_BYTES = 1
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_LIBRARY_NOT_FOUND = 12

calls: Counter[str] = Counter()
# Cumulative counters per field id: NVLink TX/RX in KiB (1 and 2 MiB more per call),
# PCIe TX/RX in bytes (3 and 4 MiB more per call).
_counter = {138: 0, 139: 0, 197: 0, 198: 0}
_step = {138: 1024, 139: 2048, 197: 3 * 2**20, 198: 4 * 2**20}


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


def _count(fn):
    def wrapper(*args):
        calls[fn.__name__] += 1
        return fn(*args)

    wrapper.__name__ = fn.__name__
    return wrapper


@_count
def nvmlInit() -> None:
    if os.environ.get("FAKE_NVML_FAIL") == "1":
        raise NVMLError(NVML_ERROR_LIBRARY_NOT_FOUND)


@_count
def nvmlShutdown() -> None:
    path = os.environ.get("FAKE_NVML_CALLS")
    if path:
        with open(path, "w") as f:
            json.dump(dict(calls), f)


@_count
def nvmlDeviceGetCount() -> int:
    return 2


@_count
def nvmlDeviceGetHandleByIndex(i: int) -> int:
    if i not in (0, 1):
        raise NVMLError(2)
    return i


@_count
def nvmlDeviceGetUUID(h: int) -> str:
    return f"GPU-fake-{h}"


@_count
def nvmlDeviceGetUtilizationRates(h: int) -> SimpleNamespace:
    return SimpleNamespace(gpu=50 + h, memory=20 + h)


@_count
def nvmlDeviceGetMemoryInfo(h: int) -> SimpleNamespace:
    return SimpleNamespace(used=(1 + h) * 2**30, total=80 * 2**30, free=0)


@_count
def nvmlDeviceGetTemperature(h: int, sensor: int) -> int:
    assert sensor == NVML_TEMPERATURE_GPU
    return 60 + h


@_count
def nvmlDeviceGetPowerUsage(h: int) -> int:
    if h == 1:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return 250_000  # milliwatts


@_count
def nvmlDeviceGetClockInfo(h: int, clock: int) -> int:
    assert clock == NVML_CLOCK_SM
    return 1980


@_count
def nvmlDeviceGetPcieThroughput(h: int, counter: int) -> int:
    return 1000 if counter == NVML_PCIE_UTIL_TX_BYTES else 2000  # KB/s


@_count
def nvmlDeviceGetTotalEccErrors(h: int, kind: int, counter: int) -> int:
    return 3 if kind == 0 else 0


@_count
def nvmlDeviceGetFieldValues(h: int, fields: list[tuple[int, int]]) -> list[SimpleNamespace]:
    out = []
    for field_id, _scope in fields:
        if h == 1:
            out.append(SimpleNamespace(nvmlReturn=NVML_ERROR_NOT_SUPPORTED, value=None))
            continue
        if field_id not in _counter:
            out.append(SimpleNamespace(nvmlReturn=NVML_ERROR_NOT_SUPPORTED, value=None))
            continue
        _counter[field_id] += _step[field_id]
        value = SimpleNamespace(ullVal=_counter[field_id])
        out.append(SimpleNamespace(nvmlReturn=0, valueType=3, value=value))
    return out


@_count
def nvmlDeviceGetComputeRunningProcesses(h: int) -> list[SimpleNamespace]:
    if h == 0:
        return [SimpleNamespace(pid=os.getpid(), usedGpuMemory=512 * 2**20)]
    return [SimpleNamespace(pid=1, usedGpuMemory=2**20)]
