"""``rankwise ui``: the edits kept beside the runs (``edits.jsonl``) into the index.

The dashboard's edits under ``rankwise ui`` go to both the index and the run's
``edits.jsonl``; ``rankwise edit --dir`` and ``Api(dir=).edit_run`` write the file only.
This follower reads each run's file when it grows (and every file at start, so an index
rebuilt from scratch has them) and keeps its edits in the store; an edit already kept
is kept once (``run_edits`` is unique by run, time, field and source).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from ..edits import EDITS_FILE, read_file
from ..store.base import Store
from ..stream.files import iter_run_dirs

log = logging.getLogger("rankwise.server")


class EditFiles:
    def __init__(self, root: Path, store: Store, interval: float = 1.0) -> None:
        self.root = Path(root)
        self.store = store
        self.interval = interval
        self._sizes: dict[Path, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rankwise-edits", daemon=True)

    def poll(self) -> int:
        """One pass; returns how many runs' files were read."""
        read = 0
        for run_dir in iter_run_dirs(self.root):
            path = run_dir / EDITS_FILE
            try:
                size = path.stat().st_size
            except OSError:
                continue
            if self._sizes.get(path) == size:
                continue
            edits = read_file(run_dir)
            if edits and self.store.edit_run(run_dir.parent.name, run_dir.name, edits):
                self._sizes[path] = size  # an unknown run (not indexed yet): next pass
                read += 1
        return read

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.poll()
            except Exception as exc:  # keep serving what is indexed already
                log.warning("rankwise ui: reading edit files failed: %r", exc)
