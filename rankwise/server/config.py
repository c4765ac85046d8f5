"""``ServerSettings``: the knobs of the HTTP server, passed to ``create_app``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

STATIC_DIR = Path(__file__).resolve().parent / "static"


@dataclass(frozen=True)
class ServerSettings:
    # Largest upload body accepted, compressed and after decompression alike (bytes).
    # Above the largest frame a writer makes (64 MiB), so any stream can be uploaded.
    max_body_bytes: int = 96 * 1024 * 1024
    # Where the built dashboard lives (index.html); a placeholder page is served without.
    static_dir: Path = STATIC_DIR
    # Runs accepted in one compare request.
    max_compare_runs: int = 64
    # ``rankwise ui``: the data directory the server reads itself (nothing to upload, so
    # a crashed stream's run object carries no ``rankwise sync`` hint).
    tails_dir: Path | None = None
