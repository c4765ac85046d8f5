"""The server's malloc arena cap (``rankwise.server.arenas``), seen in glibc's own
per-arena statistics of a process whose threads allocate at once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.servers import REPO

_THREADS = """
import ctypes, sys, threading
from rankwise.server.arenas import limit_arenas

print(limit_arenas() if sys.argv[1] == "capped" else None, flush=True)
n = 8
together = threading.Barrier(n)
held = []

def work():
    together.wait()  # every thread alive at once, each with its first allocations
    held.append([bytearray(1024) for _ in range(500)])  # over pymalloc's 512 B: malloc

threads = [threading.Thread(target=work) for _ in range(n)]
for t in threads:
    t.start()
for t in threads:
    t.join()
ctypes.CDLL(None).malloc_stats()  # 'Arena N:' per arena, on stderr
"""


def _arenas(how: str, **env: str) -> tuple[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", _THREADS, how],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"} | env,
        timeout=60,
        check=True,
    )
    return out.stdout.strip(), sum(line.startswith("Arena ") for line in out.stderr.splitlines())


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's malloc")
def test_the_server_caps_its_malloc_arenas_unless_the_operator_chose() -> None:
    said, capped = _arenas("capped")
    assert said == "True" and capped <= 2, (said, capped)
    _, free = _arenas("free")
    assert free > 2, free  # without the cap each thread takes its own
    said, theirs = _arenas("capped", MALLOC_ARENA_MAX="4")  # the environment's, left alone
    assert said == "False" and 2 < theirs <= 4, (said, theirs)


_SERVES = """
import sys
from pathlib import Path
from rankwise.server import serve

def seen(*args, **kwargs):  # what the process is tuned to when it would start serving
    print(sys.getswitchinterval(), flush=True)
    raise SystemExit(0)

serve._Server.run = seen
serve.uvicorn_config = lambda *a, **k: None
if sys.argv[1] == "ui":
    serve.serve_ui(sys.argv[2], port=0, announce=lambda url: None)
else:
    serve.serve_db("sqlite:///" + sys.argv[2] + "/store.db", port=0, announce=lambda url: None)
"""


@pytest.mark.parametrize("how", ["ui", "server"])
def test_rankwise_ui_and_server_are_tuned_before_they_serve(how: str, tmp_path: Path) -> None:
    """`rankwise ui`'s tailer writes its index as a server's ingest does: both get the
    short switch interval (and the arena cap, tested above) before their threads start."""
    from rankwise.server.serve import GIL_SWITCH_INTERVAL

    out = subprocess.run(
        [sys.executable, "-c", _SERVES, how, str(tmp_path)],
        capture_output=True, text=True, cwd=REPO, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert float(out.stdout.split()[-1]) == GIL_SWITCH_INTERVAL != sys.getswitchinterval()
