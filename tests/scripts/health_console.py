"""Prints every way a program can, then reports what it saw (tests/sdk/test_console.py).

Usage: ``health_console.py <data dir> <console mode> <facts.json>``. Writes through
Python, raw file descriptors, libc (``printf``, ``write``), a tqdm bar, an ANSI colour
and a forked child, then records in ``facts.json`` whether ``sys.stdout`` and file
descriptors 1 and 2 were restored, in the child at once and in the parent by finish().
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import time

from tqdm import tqdm  # type: ignore[import-untyped]

import rankwise


def where(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


data, mode, facts_path = sys.argv[1:4]
before = {1: where(1), 2: where(2)}
original = sys.stdout, sys.stderr
run = rankwise.init(
    project="console",
    dir=data,
    console=mode,
    system=False,
    stall_timeout=0,
    settings={"flush_interval": 0.05},
)
libc = ctypes.CDLL(None)
print("python stdout line")
print("python stderr line", file=sys.stderr)
print("\x1b[32mgreen\x1b[0m")
sys.stdout.flush()
os.write(1, b"fd1 line\n")
os.write(2, b"fd2 line\n")
libc.printf(b"printf line %d\n", 7)
libc.fflush(None)
libc.write(2, b"libc stderr line\n", 17)
for _ in tqdm(range(30), mininterval=0, ascii=True):
    time.sleep(0.002)
print("partial", end="")
sys.stdout.flush()

pid = os.fork()
if pid == 0:
    child = {
        "stdout_restored": sys.stdout is original[0] and sys.stderr is original[1],
        "fds_restored": where(1) == before[1] and where(2) == before[2],
    }
    print("child line", flush=True)  # to the terminal, not into the parent's capture
    with open(facts_path + ".child", "w") as f:
        json.dump(child, f)
    os._exit(0)
os.waitpid(pid, 0)

run.finish()
facts = {
    "stdout_restored": sys.stdout is original[0] and sys.stderr is original[1],
    "fds_restored": where(1) == before[1] and where(2) == before[2],
}
print("after finish", flush=True)
with open(facts_path, "w") as f:
    json.dump(facts, f)
