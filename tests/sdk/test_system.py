"""System metrics: node, GPU (a fake NVML in a subprocess) and process series."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import rankwise
from rankwise.sdk.system import device_token
from rankwise.stream import records as R
from rankwise.stream.frames import scan
from tests.helpers.env import clean_env

SCRIPTS = Path(__file__).parents[1] / "scripts"
FAKE_NVML = SCRIPTS / "health_nvml"


def system_env(**extra: str) -> dict[str, str]:
    """A clean environment without this machine's CUDA_VISIBLE_DEVICES."""
    env = clean_env(**extra)
    if "CUDA_VISIBLE_DEVICES" not in extra:
        env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


def samples(data: Path) -> dict[str, list[dict[str, Any]]]:
    """Each stream label's System values."""
    out: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(data.glob("*/*/streams/*.rwlog")):
        label = path.name.split(".")[0]
        recs = scan(path.read_bytes()).records
        out[label] = [r.values for r in recs if type(r) is R.System]
    return out


def run_system(
    tmp_path: Path, kwargs: dict[str, Any] | None = None, fake_nvml: bool = True, **env: str
) -> tuple[list[dict[str, Any]], str]:
    if fake_nvml:
        env["PYTHONPATH"] = str(FAKE_NVML)
    data = tmp_path / "data"
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS / "health_system.py"), str(data), json.dumps(kwargs or {})],
        env=system_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    (only,) = samples(data).values()
    return only, proc.stderr


def keys(values: list[dict[str, Any]]) -> set[str]:
    return {k for v in values for k in v}


def test_node_gpu_and_process_series_with_nvml(tmp_path: Path) -> None:
    calls = tmp_path / "calls.json"
    values, _ = run_system(
        tmp_path, FAKE_NVML_CALLS=str(calls), CUDA_VISIBLE_DEVICES="0", HEALTH_SECONDS="1.2"
    )
    assert len(values) >= 3
    seen = keys(values)
    for key in (
        "node/cpu_percent",
        "node/load1",
        "node/mem_used_bytes",
        "node/mem_available_bytes",
        "node/disk_used_bytes",
        "node/disk_percent",
        "node/disk_read_bytes_per_s",
        "node/net_sent_bytes_per_s",
        "node/net_recv_bytes_per_s",
        "proc/rss_bytes",
        "proc/cpu_percent",
        "proc/threads",
    ):
        assert key in seen, key
    last = values[-1]
    assert last["gpu/0/util_percent"] == 50 and last["gpu/1/util_percent"] == 51
    assert last["gpu/0/mem_used_bytes"] == 2**30 and last["gpu/0/mem_total_bytes"] == 80 * 2**30
    assert last["gpu/0/temp_c"] == 60 and last["gpu/0/sm_clock_mhz"] == 1980
    assert last["gpu/0/power_w"] == 250.0
    # PCIe traffic: GPU 0's byte counters as rates (3 and 4 MiB more per sample), GPU 1's
    # from the driver's sampled throughput (no counters), asked for no other GPU.
    assert last["gpu/0/pcie_tx_bytes_per_s"] > 0 and last["gpu/0/pcie_rx_bytes_per_s"] > 0
    tx, rx = last["gpu/0/pcie_tx_bytes_per_s"], last["gpu/0/pcie_rx_bytes_per_s"]
    assert abs(rx / tx - 4 / 3) < 1e-6
    assert last["gpu/1/pcie_tx_bytes_per_s"] == 1000 * 1024
    assert last["gpu/1/pcie_rx_bytes_per_s"] == 2000 * 1024
    assert last["gpu/0/ecc_corrected"] == 3 and last["gpu/0/ecc_uncorrected"] == 0
    assert last["gpu/0/nvlink_tx_bytes_per_s"] > 0 and last["gpu/0/nvlink_rx_bytes_per_s"] > 0
    # The process's own GPU: CUDA_VISIBLE_DEVICES=0 and its memory there.
    assert last["proc/gpu_index"] == 0 and last["proc/gpu/0/mem_used_bytes"] == 512 * 2**20
    # GPU 1 has no power reading and no NVLink: no series, and asked once only.
    assert not any(k.startswith(("gpu/1/power", "gpu/1/nvlink")) for k in seen)
    counts = json.loads(calls.read_text())
    assert counts["nvmlDeviceGetPowerUsage"] == len(values) + 1  # GPU 0 each time, GPU 1 once
    assert counts["nvmlDeviceGetPcieThroughput"] == 2 * len(values)  # GPU 1 only
    # one call a sample per GPU for every counter; GPU 1, which has none, only once
    assert counts["nvmlDeviceGetFieldValues"] == len(values) + 1
    # The sampler opens NVML once and closes it once; the node's record of what ran
    # (rankwise.sdk.provenance) may open and close it once more for the driver and models.
    assert counts["nvmlInit"] == counts["nvmlShutdown"] and counts["nvmlInit"] in (1, 2)


def test_gpu_device_ids_limit_the_gpus_and_uuids_name_the_process_gpu(tmp_path: Path) -> None:
    values, _ = run_system(tmp_path, {"gpu_device_ids": [1]}, CUDA_VISIBLE_DEVICES="GPU-fake-1")
    seen = keys(values)
    assert any(k.startswith("gpu/1/") for k in seen)
    assert not any(k.startswith("gpu/0/") for k in seen)
    assert {v["proc/gpu_index"] for v in values} == {1}


def test_gpu_device_ids_from_the_environment(tmp_path: Path) -> None:
    values, _ = run_system(tmp_path, RANKWISE_GPU_DEVICE_IDS="0")
    seen = keys(values)
    assert "gpu/0/util_percent" in seen and not any(k.startswith("gpu/1/") for k in seen)


@pytest.mark.parametrize(
    "env", [{"HEALTH_NO_PYNVML": "1"}, {"FAKE_NVML_FAIL": "1"}], ids=["no-module", "no-driver"]
)
def test_without_nvml_there_are_no_gpu_series_and_no_error(
    tmp_path: Path, env: dict[str, str]
) -> None:
    values, stderr = run_system(tmp_path, **env)
    seen = keys(values)
    assert values and "node/cpu_percent" in seen and "proc/rss_bytes" in seen
    assert not any(k.startswith(("gpu/", "proc/gpu")) for k in seen)
    # Not even a warning (init's own "rankwise: run ..." line aside).
    assert [x for x in stderr.splitlines() if "rankwise" in x and "rankwise: run " not in x] == []


def test_system_off_switch(tmp_path: Path) -> None:
    values, _ = run_system(tmp_path, {"system": False})
    assert values == []
    values, _ = run_system(tmp_path / "env", RANKWISE_SYSTEM="0")
    assert values == []


def test_sampling_runs_on_its_own_thread_and_stops_at_finish(data_dir: Path) -> None:
    import threading

    run = rankwise.init(project="system", system_interval=0.05, console="off", stall_timeout=0)
    assert "rankwise-system" in {t.name for t in threading.enumerate()}
    run.finish()
    assert "rankwise-system" not in {t.name for t in threading.enumerate()}


@pytest.mark.torchrun
def test_one_node_sampler_under_torchrun(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node=2",
            str(SCRIPTS / "health_system.py"),
            str(data),
        ],
        env=system_env(HEALTH_SECONDS="1.2"),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    by_label = samples(data)
    assert set(by_label) == {"rank-0", "rank-1"}
    node0, node1 = keys(by_label["rank-0"]), keys(by_label["rank-1"])
    assert "node/cpu_percent" in node0 and "proc/rss_bytes" in node0
    # Local rank 1 samples itself only: one node sampler per node.
    assert "proc/rss_bytes" in node1 and not any(k.startswith("node/") for k in node1)


@pytest.mark.parametrize(
    ("env", "local_rank", "ordinal", "uuid", "expected"),
    [
        ({}, 3, None, None, "3"),  # torchrun convention: cuda:LOCAL_RANK
        ({"CUDA_VISIBLE_DEVICES": "4,5,6,7"}, 1, None, None, "5"),
        ({"CUDA_VISIBLE_DEVICES": "6"}, 2, None, None, "6"),  # one GPU per process
        ({"CUDA_VISIBLE_DEVICES": "4,5"}, 0, 1, None, "5"),  # torch's current device wins
        ({"CUDA_VISIBLE_DEVICES": ""}, 0, None, None, None),  # GPUs hidden
        ({"CUDA_VISIBLE_DEVICES": "0,1"}, 5, None, None, None),  # no such device
        ({}, 0, 0, "1234-abcd", "GPU-1234-abcd"),  # torch's device UUID is exact
    ],
)
def test_device_token(
    env: dict[str, str], local_rank: int, ordinal: int | None, uuid: str | None, expected: str
) -> None:
    assert device_token(env, local_rank, ordinal, uuid) == expected


def test_settings_parse_and_validate(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"RANKWISE_GPU_DEVICE_IDS": "0, 2", "RANKWISE_SYSTEM": "off", "RANKWISE_CONSOLE": "off"}
    opts = rankwise.Settings.resolve(None, env)
    assert opts.gpu_device_ids == (0, 2) and opts.system is False and opts.console == "off"
    assert opts.override(gpu_device_ids=[3], system=None).gpu_device_ids == (3,)
    with pytest.raises(rankwise.UsageError, match="system_interval"):
        rankwise.Settings.resolve({"system_interval": 0})
    with pytest.raises(rankwise.UsageError, match="gpu_device_ids"):
        rankwise.Settings.resolve({"gpu_device_ids": "a,b"})
