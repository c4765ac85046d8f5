"""``ServerSettings``: the knobs of the HTTP server, passed to ``create_app``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..store.blobs import BlobStore

STATIC_DIR = Path(__file__).resolve().parent / "static"
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True)
class AlertSettings:
    """How alerts are judged and delivered (``rankwise.server.alert_watch``)."""

    # The dashboard's address as people reach it (``--public-url``): each alert links to
    # its run page there. Empty: alerts carry no link.
    public_url: str = ""
    # Webhooks to loopback, link-local and private addresses are refused (SSRF) unless
    # this is set (``--allow-private-webhooks``).
    allow_private_webhooks: bool = False
    # Delivery back-off: the first retry after ``retry_base`` s, doubling up to
    # ``retry_max``; given up ``give_up`` s after the event was decided.
    retry_base: float = 5.0
    retry_max: float = 600.0
    give_up: float = 3600.0
    # One attempt's connect/read time limit (s), and how often the outbox is polled.
    send_timeout: float = 10.0
    poll: float = 1.0
    # How often runs are judged for the events that need time to tell (s).
    evaluate_every: float = 10.0
    # A stall is reported once it is this old (the other ranks' reports arrive meanwhile).
    hang_grace: float = 10.0
    # A running rank with no record for this long: its heartbeat stopped (s).
    heartbeat_timeout: float = 45.0
    # A rank slower than the median over this long is a straggler (s); told at most once
    # per ``straggler_every`` s per rank (a flapping rank is not told again and again).
    straggler_window: float = 300.0
    straggler_every: float = 3600.0
    # Off: no thread judges or delivers (the store still decides ingest-time events).
    enabled: bool = True


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
    # Seconds an upload body may take to arrive once its headers have (a 4 MiB batch at
    # 70 kB/s); past it 408. A body still arriving holds no ``max_inflight`` slot.
    body_deadline: float = 60.0
    # The Retry-After advised with 429 (overload) and 503 (store unavailable), seconds.
    retry_after: int = 1
    # Upload pacing (rankwise.server.pacing): under load, ingest replies ask uploaders to
    # post at most every N seconds, N up to this (0: never ask). ``pace_target`` is the
    # time an ingest request may take in this process before the interval grows (s).
    max_upload_interval: float = 10.0
    pace_target: float = 0.5

    # -- authentication (rankwise.server.auth) --
    # False only for the local `rankwise ui` and `rankwise server --insecure-no-auth`.
    auth: bool = True
    # How long a token's row is trusted without reading the store again (s); a revoked
    # token stops working within this. 0: read it on every request.
    token_cache_ttl: float = 10.0
    # Tokens' last_used is written at most once per this many seconds (batched).
    token_touch_interval: float = 60.0
    # A dashboard session ends after this long unused, or this long after login (s).
    session_idle: float = 12 * 3600.0
    session_max: float = 7 * 24 * 3600.0
    # Host header values answered (DNS rebinding guard): names, "*.suffix", or "*".
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS
    # Largest body of any request but an ingest upload (JSON: compare, saved views).
    max_json_bytes: int = 1024 * 1024
    # ``rankwise ui``: the data directory the server reads itself (nothing to upload, so
    # a crashed stream's run object carries no ``rankwise sync`` hint).
    tails_dir: Path | None = None
    # Distinct metric keys one run may hold across uploads (an upload past it is 413).
    max_keys_per_run: int = 100_000
    # Cells (rows x columns) of one logged table; an upload holding a bigger one is 413.
    max_table_cells: int = 100_000_000
    # Artifact aliases only an admin token may set or move (an ingest token's commit
    # naming one is 403): a leaked training token must not repoint what deploys.
    protected_aliases: tuple[str, ...] = ("production",)

    # -- blobs (rankwise.store.blobs) --
    # Where blobs are kept. None: ``blobs/`` beside a SQLite store's file; for any other
    # store no blob routes (503) and uploads naming blobs wait (409). `rankwise server`
    # always passes one (``--blobs``, ``blobs.default_root``).
    blobs: BlobStore | None = None
    # Largest blob one PUT may store (bytes): 413 above it (`--max-blob-mb`).
    max_blob_bytes: int = 512 * 1024 * 1024

    # -- deleting runs (rankwise.server.trash_sweep) --
    # Days a deleted run stays in the trash, restorable, before the sweep purges it
    # (`--trash-days`); and how often the sweep runs (s).
    trash_retention_days: float = 30.0
    trash_sweep_every: float = 3600.0

    # -- alerts (rankwise.server.alert_watch) --
    alerts: AlertSettings = field(default_factory=AlertSettings)
