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
    # Ingest requests handled at once by one server process (0: no limit). Past it the
    # server answers 429 with Retry-After instead of queueing without bound; uploaders
    # wait (with jitter) and resend, the frames staying in their stream files.
    max_inflight: int = 256
    # The Retry-After advised with 429 (overload) and 503 (store unavailable), seconds.
    retry_after: int = 1
