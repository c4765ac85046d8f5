"""The one line ``rankwise.init()`` prints on the primary rank: what, where, how to see it.

    rankwise: run default/fuzzy-otter-7 in /work/rankwise; see it at http://127.0.0.1:8585/#/p/default/r/fuzzy-otter-7

The address is ``run.url``: the server's in remote mode, else that of a ``rankwise ui``
serving this data directory (it leaves ``<dir>/.rankwise/ui.json`` while it runs; a file
whose process is gone is ignored). Without either, the line gives the ``rankwise ui``
command to run, as it does when the server refused this process's token (``init`` waits
for the uploader's first answer, a few seconds at most, to know). ``RANKWISE_SILENT=1``
turns the line off.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import sys
from pathlib import Path
from urllib.parse import quote

UI_FILE = Path(".rankwise") / "ui.json"


def page_url(base: str, project: str, run_id: str) -> str:
    """The dashboard's page of one run under ``base`` (a server or ``rankwise ui``)."""
    return f"{base.rstrip('/')}/#/p/{quote(project, safe='')}/r/{quote(run_id, safe='')}"


def ui_address(root: Path) -> str | None:
    """The address of a live ``rankwise ui`` serving ``root``, or None."""
    try:
        info = json.loads((root / UI_FILE).read_text())
        url, pid, host = str(info["url"]), int(info["pid"]), str(info["host"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if host == socket.gethostname():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None  # left behind by a ui that was killed
        except PermissionError:
            pass
    elif any(h in url for h in ("//127.", "//localhost", "//[::1]")):
        return None  # a ui on another node of a shared file system, bound to its loopback
    return url


def note_ui(root: Path, url: str) -> Path | None:
    """Called by ``rankwise ui`` once it listens; returns the file to remove on exit."""
    path = root / UI_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        info = {"url": url, "pid": os.getpid(), "host": socket.gethostname()}
        path.write_text(json.dumps(info))
    except OSError:
        return None
    return path


def line(project: str, run_id: str, root: Path, url: str | None) -> str:
    where = (
        f"see it at {url}" if url else f"see it with: rankwise ui --dir {shlex.quote(str(root))}"
    )
    return f"rankwise: run {project}/{run_id} in {root}; {where}"


def say(text: str) -> None:
    """One line to stderr, in one write: ``print`` writes the text and the newline apart,
    and with an unbuffered stderr (``PYTHONUNBUFFERED``) another rank's line, written to
    the same terminal between the two, ran on after this one."""
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass  # a closed (or no) stderr must not stop training
