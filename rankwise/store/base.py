"""The ``Store`` protocol: what the ingester writes and the HTTP API reads.

Two implementations, one test suite: SQLite (embedded default) and PostgreSQL (several
server processes share one database). The write side is one batched primitive,
``ingest``; everything else reads.

Exactly-once is a property of the store, not of the network: every stream has a
high-water mark (the highest ``seq`` applied), and ``ingest`` applies only records with a
higher ``seq``, updating the mark *in the same transaction* as the data and the cross-rank
aggregates. Replaying any prefix, the whole stream twice, or two ingesters at once
therefore changes nothing. Records of one stream must arrive in ``seq`` order without
gaps beyond the mark (a gap is refused, so the sender resends from the mark).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..edits import Edit
from ..stream import records as R
from ..stream.identity import StreamId
from ..wire.charts import Band, Series, XAxis
from ..wire.health import ConsolePage, StallEvent, SystemSeries
from ..wire.heatmap import HeatmapReply
from ..wire.media import HistogramsEntry, MediaKey, MediaReply
from ..wire.runs import CrossRankValue, RunInfo, SavedView
from .reports import ReportStore
from .types import ConsoleQuery, TableRow

if TYPE_CHECKING:
    from ..alerting import Destination
    from ..artifacts.manifest import Entry
    from ..health import StreamSteps
    from ..stream.fold import LocalPids
    from ..tokens import NewToken, TokenInfo
    from ..wire.alerts import AlertEvent
    from ..wire.artifacts import ArtifactSummary, CommitRequest, RunArtifacts, VersionInfo
    from ..wire.trash import AuditEntry, TrashedRun
    from .alerts import Claimed
    from .tokens import SessionInfo
    from .trash import Collector


@dataclass
class RunQuery:
    project: str | None = None
    group: str | None = None
    job_type: str | None = None
    states: Sequence[str] = ()
    tags: Sequence[str] = ()  # all must match
    search: str | None = None  # substring of name or id, case-insensitive
    sort: str = "-created"  # created | updated | name | state | steps, "-" for descending
    limit: int = 100
    offset: int = 0


class RunStore(Protocol):
    """The write side (``ingest``, exactly-once per stream) and the runs it makes."""

    # Whether a stream's (host, pid) may be checked against this host's processes when
    # its state is settled: only for ``rankwise ui``'s index of local files.
    local_pids: LocalPids

    def ingest(
        self,
        batches: Sequence[tuple[StreamId, Sequence[R.AnyRecord]]],
        secrets: Sequence[str | None] | None = None,
    ) -> dict[StreamId, int]:
        """Apply the records newer than each stream's mark; returns each stream's mark.

        ``secrets``, one per batch: the stream secret its upload presented (None: none).
        A stream bound to a secret (``rankwise.stream.streamkey``) then takes a batch
        only with that secret (``store.ingest.StreamKeyRefused``). Without ``secrets``
        the caller read the streams' own files (``rankwise ui``): nothing is checked."""

    def acked(self, key: StreamId) -> int:
        """The stream's high-water mark: the highest seq applied, -1 when unknown."""

    def projects(self) -> list[str]: ...

    def list_runs(self, query: RunQuery) -> tuple[list[RunInfo], int]:
        """One page of runs matching ``query`` and the total count of matches."""

    def get_run(self, project: str, run_id: str) -> RunInfo | None: ...


class CompactStore(Protocol):
    """Uploads are stored whole as they arrive and folded into series later
    (``rankwise.store.compact``); every read merges what is still pending, in memory
    (``rankwise.store.pending_view``)."""

    def compact(self, runs: Sequence[int] | None = None, wait: bool = True) -> int:
        """Fold the pending uploads (of the run ids ``runs``, default all) now; returns
        how many were folded. ``wait=False``: none when another process is compacting."""

    def start_compactor(self) -> None:
        """Start the background compactor thread (idempotent; ``close`` stops it)."""


class ChartStore(Protocol):
    """A run's scalar metrics: keys, per-stream series, the cross-rank band, history."""

    def metric_keys(self, project: str, run_id: str) -> list[str]: ...

    def series(
        self,
        project: str,
        run_id: str,
        key: str,
        *,
        labels: Sequence[str] | None = None,
        x: XAxis = "step",
        lo: float | None = None,
        hi: float | None = None,
        max_points: int = 2000,
    ) -> list[Series]:
        """Per-stream series, M4-downsampled to at most ``max_points`` per stream."""

    def band(
        self,
        project: str,
        run_id: str,
        key: str,
        *,
        x: XAxis = "step",
        lo: float | None = None,
        hi: float | None = None,
        max_points: int = 2000,
    ) -> Band:
        """The cross-rank aggregate, downsampled keeping every bucket's extremes."""

    def heatmap(
        self,
        project: str,
        run_id: str,
        key: str,
        *,
        x: XAxis = "step",
        lo: float | None = None,
        hi: float | None = None,
        buckets: int = 500,
        offset: int = 0,
        limit: int = 1024,
    ) -> HeatmapReply | None:
        """One page of ranks of the metric's rank x step heatmap: per rank the mean of each
        of at most ``buckets`` equal x buckets (whole steps wide on the step axis), the
        buckets' cross-rank median and each rank's distance from it
        (``rankwise.store.heatmap_reads``); None for an unknown run."""

    def cross_rank_last(
        self, project: str, run_id: str, upto: int | None = None
    ) -> dict[str, CrossRankValue]:
        """Per metric, the cross-rank aggregate at its last step ``<= upto`` (the run's
        summary of its cross-rank lines)."""

    def history(
        self,
        project: str,
        run_id: str,
        keys: Sequence[str] | None = None,
        label: str | None = None,
    ) -> list[dict[str, Any]]:
        """Every logged row, as ``rankwise.Api`` returns it (step, time, label, values)."""

    def stored_points(self, project: str, run_id: str) -> dict[tuple[str, str], int]:
        """Per (label, metric key), the points stored, each copy counted (``history``
        merges rows by stream and seq, so it cannot show a point stored twice)."""


class ViewStore(Protocol):
    """The dashboard's saved views (``rankwise.store.saved_views``)."""

    def list_views(self, project: str) -> list[SavedView]:
        """The dashboard's saved views of the project's runs table, by name."""

    def save_view(
        self, project: str, name: str, filters: dict[str, Any], columns: list[str]
    ) -> SavedView:
        """Create a saved view, or replace the one of that name."""

    def delete_view(self, project: str, name: str) -> bool:
        """Delete a saved view; False when there was none of that name."""


class HealthStore(Protocol):
    """Rank health (``rankwise.store.health_reads``); each answers None for an unknown
    run."""

    def console(self, project: str, run_id: str, q: ConsoleQuery) -> ConsolePage | None:
        """A page of the run's captured console lines, in time order."""

    def system_keys(self, project: str, run_id: str) -> list[str] | None:
        """The system metric keys the run's streams sampled, sorted."""

    def system_series(
        self,
        project: str,
        run_id: str,
        chart: str,
        *,
        lo: float | None = None,
        hi: float | None = None,
        max_points: int = 2000,
    ) -> list[SystemSeries] | None:
        """One line per node, GPU or process of one system chart, x = time (M4)."""

    def health_streams(
        self, project: str, run_id: str, window: float, now: float | None = None
    ) -> tuple[RunInfo, list[StreamSteps], float] | None:
        """The run, each stream's step points and stall for ``rankwise.health.assess``,
        and the time to assess at."""

    def stalls(
        self, project: str, run_id: str, labels: Sequence[str] = (), limit: int = 100
    ) -> list[StallEvent] | None:
        """The watchdog's stall reports, newest first."""


class MediaStore(Protocol):
    """Rich data (``rankwise.store.media_reads``); each answers None for an unknown run."""

    def media_keys(self, project: str, run_id: str) -> list[MediaKey] | None:
        """Every media, table and histogram key of the run, with its steps and labels."""

    def media(
        self, project: str, run_id: str, key: str, label: str | None = None, step: int | None = None
    ) -> MediaReply | None:
        """The items of one media key (at ``step``, of ``label``; None: all)."""

    def histograms(
        self, project: str, run_id: str, key: str, label: str | None = None
    ) -> list[HistogramsEntry] | None:
        """One series per label of one histogram key, in step order."""

    def table_row(
        self,
        project: str,
        run_id: str,
        key: str,
        label: str | None = None,
        step: int | None = None,
    ) -> TableRow | None:
        """The table of ``key`` at ``step`` (None: the latest) by ``label``."""

    def blob_kind(self, project: str, digest: str) -> tuple[str, str] | None:
        """(kind, format) of a blob a record of the project names, None if none does."""


class ArtifactStore(Protocol):
    """Artifacts (``rankwise.store.artifacts``): versions, aliases, lineage."""

    def commit_artifact(
        self, project: str, name: str, req: CommitRequest, now: float | None = None
    ) -> tuple[VersionInfo, bool]:
        """Store a version in one transaction (the next number, aliases moved; content
        equal to the latest's or a known ``client_id`` creates none): (version, created)."""

    def use_artifact(
        self,
        project: str,
        name: str,
        ref: str,
        run_id: str,
        label: str | None = None,
        now: float | None = None,
    ) -> VersionInfo | None:
        """Record lineage; the version ``ref`` names with its manifest (None: none)."""

    def artifact_names(self, project: str, type: str | None = None) -> list[ArtifactSummary]:
        """The artifact names of a project, by name."""

    def artifact_versions(self, project: str, name: str) -> list[VersionInfo] | None:
        """The versions of a name, newest first (None: no such name)."""

    def artifact_version(self, project: str, name: str, ref: str) -> VersionInfo | None:
        """One version (``latest``, ``v3``, an alias) with manifest and ``used_by``."""

    def artifact_entry(self, project: str, name: str, ref: str, path: str) -> Entry | None:
        """One manifest entry of a version (None: no such version or path)."""

    def run_artifacts(self, project: str, run_id: str) -> RunArtifacts:
        """What a run logged and used."""


class TokenStore(Protocol):
    """API tokens and dashboard sessions (``rankwise.store.tokens``)."""

    def create_token(
        self, role: str, projects: Sequence[str] | None = None, name: str = ""
    ) -> NewToken: ...

    def get_token(self, token_id: str) -> TokenInfo | None: ...

    def list_tokens(self) -> list[TokenInfo]: ...

    def has_admin_token(self) -> bool: ...

    def revoke_token(self, token_id: str) -> bool: ...

    def touch_tokens(self, used: dict[str, float]) -> None: ...

    def create_session(self, session_id: str, token_id: str) -> None: ...

    def get_session(self, session_id: str) -> SessionInfo | None: ...

    def touch_session(self, session_id: str, every: float) -> None: ...

    def revoke_session(self, session_id: str) -> bool: ...


class AlertStore(Protocol):
    """Alerts (``rankwise.store.alerts``): destinations, events decided once, the
    outbox."""

    def add_destination(self, dest: Destination) -> Destination: ...

    def list_destinations(self, project: str | None = None) -> list[Destination]: ...

    def get_destination(self, dest_id: str) -> Destination | None: ...

    def remove_destination(self, dest_id: str) -> bool: ...

    def replace_config_destinations(self, dests: Sequence[Destination]) -> None: ...

    def decide_event(
        self,
        project: str,
        run_id: str,
        kind: str,
        key: str,
        title: str,
        text: str,
        level: str = "ERROR",
        details: dict[str, Any] | None = None,
        at: float | None = None,
    ) -> int | None:
        """Decide one event of a run once (None: decided before, or no such run)."""

    def alert_candidates(self, since: float) -> list[tuple[str, str]]: ...

    def last_event_time(self, project: str, run_id: str, kind: str, key_prefix: str) -> float: ...

    def run_alerts(self, project: str, run_id: str) -> list[AlertEvent]: ...

    def open_alert_runs(self, project: str | None = None) -> dict[tuple[str, str], int]: ...

    def claim_deliveries(self, now: float, lease: float, limit: int = 16) -> list[Claimed]: ...

    def settle_delivery(
        self, outbox: int, *, delivered: bool, error: str = "", retry_at: float | None = None
    ) -> None: ...


class RunEditStore(Protocol):
    """The part of ``Store`` that edits runs."""

    def edit_run(self, project: str, run_id: str, edits: Sequence[Edit]) -> bool:
        """Keep ``edits`` of the run (an edit equal to one kept is kept once); False
        when there is no such run."""

    def run_edits(self, project: str, run_id: str) -> list[Edit] | None:
        """The run's edits, oldest first (None: no such run)."""


class RunFilterStore(Protocol):
    """The part of ``Store`` that finds runs by a filter."""

    def find_runs(
        self,
        project: str,
        filters: dict[str, Any] | None = None,
        order: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> tuple[list[RunInfo], int]:
        """One page of the project's runs that ``filters`` (W&B's MongoDB-style,
        ``rankwise.filters``) picks, ordered by ``order``, and the count of all of them.
        A bad filter raises ``UsageError`` naming the operator or field."""


class TrashStore(Protocol):
    """The part of ``Store`` that deletes runs (``rankwise.store.trash``)."""

    def run_gone(self, project: str, run_id: str) -> str | None:
        """``deleted``, ``purged`` or None (live or unknown)."""

    def upload_state(self, key: StreamId) -> tuple[str | None, int]:
        """``run_gone`` of the stream's run and its ``acked`` mark, in one read (what
        every upload asks first: ``server.upload.check_upload``)."""

    def upload_states(self, keys: Sequence[StreamId]) -> list[tuple[str | None, int]]:
        """``upload_state`` of each of ``keys``, in one read."""

    def delete_runs(
        self, project: str, run_ids: Sequence[str], who: str, target: str | None = None
    ) -> list[str]:
        """Move these runs to the trash; returns the ids moved (audited)."""

    def restore_runs(self, project: str, run_ids: Sequence[str], who: str) -> list[str]:
        """Take these runs out of the trash; returns the ids restored (audited)."""

    def trashed_runs(self, project: str, retention_days: float) -> list[TrashedRun]:
        """The project's runs in the trash, newest deletion first."""

    def expired_runs(self, before: float) -> list[tuple[str, str]]:
        """(project, run id) of runs deleted before ``before``, not purged yet."""

    def purge_runs(
        self,
        project: str,
        run_ids: Sequence[str],
        who: str,
        blobs: Collector | None,
        target: str | None = None,
    ) -> list[str]:
        """Remove these runs for good and collect their unreferenced blobs (audited)."""

    def collect(self, blobs: Collector | None) -> int:
        """Finish the journalled purges' blob collection; returns blobs deleted."""

    def pending_purges(self) -> int:
        """Purges whose blobs are not all collected yet."""

    def audit_log(self, limit: int = 1000, project: str | None = None) -> list[AuditEntry]:
        """Who deleted, restored or purged what, newest first."""


class Store(
    RunStore,
    CompactStore,
    ChartStore,
    ViewStore,
    HealthStore,
    MediaStore,
    ArtifactStore,
    TokenStore,
    AlertStore,
    ReportStore,
    RunEditStore,
    RunFilterStore,
    TrashStore,
    Protocol,
):
    """Everything the ingester writes and the server reads: the protocols above, plus the
    schema and the lifetime. ``SQLStore`` implements it for SQLite and PostgreSQL; code
    that needs one part only may take that part's protocol."""

    def migrate(self) -> None:
        """Create or upgrade the schema (numbered migrations; safe to call every start)."""

    def schema_version(self) -> int:
        """The highest migration applied (0: none yet)."""

    def close(self) -> None: ...

    def __enter__(self) -> Store: ...

    def __exit__(self, *exc: object) -> None: ...
