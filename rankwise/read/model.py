"""What a run and its streams are as read back: declared once, here.

The local reader folds stream files into these structs, the store folds its rows into
the same structs (both through ``rankwise.read.fold.fold_run``), the server encodes them
as they are (msgspec, JSON or MessagePack), ``Api(server=)`` decodes them as they are,
and the OpenAPI document's reply schemas are derived from them. Adding a field to a run
is one line here (and its value in ``fold_run``).

Fields equal to their default are left out of a reply (``omit_defaults``): a run in a
list carries no streams unless asked for, and only one run's reply carries the
per-rank and cross-rank summaries.

A ``RunInfo`` also answers questions that need more than its fields (``history()``,
``health()``, ``metric_keys``, the summaries of a run read from a list): it asks the
reader that made it (its *source*: the files, or the server), which is never encoded.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from ..errors import UsageError
from ..failures import Failure

if TYPE_CHECKING:
    from ..health import RankHealth
    from ..media.table import Table
    from ..stream.history import StreamColumns
    from .media import HistogramSeries, MediaFile, MediaKey


@functools.cache
def numpy_available() -> bool:
    """numpy is not a dependency of the SDK: the columnar reader needs it (pandas has it)."""
    return importlib.util.find_spec("numpy") is not None


class StreamInfo(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One stream (one process's file) of a run."""

    label: str
    incarnation: int
    rank: int
    local_rank: int
    node: int
    host: str
    pid: int
    is_primary: bool
    state: str  # running, finished, failed, killed or crashed
    last_step: int
    points: int
    dropped: int
    started: float | None
    last_seen: float | None
    exit_code: int | None
    signal: int | None
    error_type: str | None
    error_message: str | None
    traceback: str | None
    acked_seq: int = -1  # the highest seq read (a file) or applied (a server)
    damage: str | None = None  # what is wrong with the file's tail; files only
    # Where it was read from: the file (Api(dir=)), the run's URL (Api(server=)). Never
    # part of a reply, so the one field two readers of the same stream disagree on.
    path: str = ""


class Unsynced(msgspec.Struct, kw_only=True):
    """Crashed streams may hold records their process never uploaded."""

    streams: list[str]  # labels of the crashed streams
    hosts: list[str]  # where their files are
    command: str  # "rankwise sync <data dir> --server <this server>"
    message: str


class RunSource(Protocol):
    """What a ``RunInfo`` asks for what its fields do not hold (files or a server)."""

    def summaries(self, run: RunInfo) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]: ...

    def metric_keys(self, run: RunInfo) -> list[str]: ...

    def history(
        self, run: RunInfo, keys: Sequence[str] | None, label: str | None
    ) -> list[dict[str, Any]]: ...

    def health(
        self, run: RunInfo, window: float, factor: float, now: float | None
    ) -> list[RankHealth]: ...

    def scan(
        self,
        run: RunInfo,
        keys: Sequence[str] | None,
        label: str | None,
        step_range: tuple[int, int] | None,
    ) -> dict[str, StreamColumns]: ...

    # Rich data (rankwise.read.media): every item of ``key`` (all labels when None),
    # sorted by step, label, index; the table (KeyError when none); each label's series.
    def media_keys(self, run: RunInfo) -> list[MediaKey]: ...

    def media(self, run: RunInfo, key: str, label: str | None) -> list[MediaFile]: ...

    def table(self, run: RunInfo, key: str, step: int | None, label: str | None) -> Table: ...

    def histograms(self, run: RunInfo, key: str) -> dict[str, HistogramSeries]: ...


class RunInfo(msgspec.Struct, kw_only=True, omit_defaults=True, dict=True):
    """A run as read back: metadata, state, config, summary, streams and history."""

    project: str
    id: str
    name: str
    group: str | None
    job_type: str | None
    tags: list[str]
    notes: str | None
    run_mode: str | None
    base_id: str | None  # the id all ranks of the launch agreed on
    # The primary rank's command (argv list), python, platform, launcher,
    # rankwise_version and host, as recorded at init().
    environment: dict[str, Any]
    state: str  # running, finished, failed, killed or crashed
    crashed: list[str]  # labels of the crashed streams
    world_size: int  # the job's; run_ranks is this run's own
    num_nodes: int
    run_ranks: int  # the ranks (stream labels) this run holds
    run_nodes: int  # the nodes this run's streams ran on
    created: float | None
    updated: float | None
    duration: float | None
    steps: int
    n_streams: int
    config: dict[str, Any]
    summary: dict[str, Any]  # the primary rank's last value of each key, or what it set
    first_failure: Failure | None  # the failed or crashed stream that went first
    # From a server, crashed streams that may hold records not yet uploaded (None: none,
    # or read from the files); ``unsynced`` is its message.
    sync_hint: Unsynced | None = msgspec.field(name="unsynced")
    streams: list[StreamInfo] = msgspec.field(default_factory=list)
    # Each stream label's own summary, and per metric the cross-rank line's last complete
    # value ({"step", "n", "mean", "wmean", "min", "max"}): one run's reply only.
    rank_summaries: dict[str, dict[str, Any]] | None = msgspec.field(
        default=None, name="summary_ranks"
    )
    cross_rank_summary: dict[str, dict[str, Any]] | None = msgspec.field(
        default=None, name="summary_cross_rank"
    )

    def _source(self) -> RunSource:
        source: RunSource | None = getattr(self, "_from", None)
        if source is None:
            raise UsageError("this RunInfo was not read by rankwise.Api: it has no source")
        return source

    def attach(self, source: RunSource) -> RunInfo:
        """Remember the reader that made this run (never encoded); returns the run."""
        self._from = source
        return self

    @property
    def unsynced(self) -> str | None:
        """From a server: crashed streams may hold records not yet uploaded, and the
        ``rankwise sync`` command that uploads them. Read from the files: None."""
        return self.sync_hint.message if self.sync_hint is not None else None

    def _summaries(self) -> None:
        self.rank_summaries, self.cross_rank_summary = self._source().summaries(self)

    @property
    def summary_ranks(self) -> dict[str, dict[str, Any]]:
        """Each stream label's own summary: ``{label: {key: value}}``. ``summary`` is the
        primary rank's; see ``rankwise._summary`` for what several ranks setting one
        key means."""
        if self.rank_summaries is None:
            self._summaries()
        return {k: dict(v) for k, v in (self.rank_summaries or {}).items()}

    @property
    def summary_cross_rank(self) -> dict[str, dict[str, Any]]:
        """Per metric, the cross-rank line's last complete value: ``{"step", "n", "mean",
        "wmean", "min", "max"}`` at the last step every live rank has reached (what the
        dashboard's chart header quotes)."""
        if self.cross_rank_summary is None:
            self._summaries()
        return {k: dict(v) for k, v in (self.cross_rank_summary or {}).items()}

    @property
    def metric_keys(self) -> list[str]:
        return self._source().metric_keys(self)

    def history(
        self, keys: Sequence[str] | None = None, label: str | None = None
    ) -> list[dict[str, Any]]:
        """One row per ``log()`` call: ``step``, ``time``, ``label`` and the values.

        ``keys`` keeps only those metrics (rows with none of them are left out);
        ``label`` keeps one stream (all its incarnations). Rows are sorted by step, then
        time.
        """
        if isinstance(keys, str):
            keys = [keys]
        return self._source().history(self, keys, label)

    def history_df(
        self, keys: Sequence[str] | None = None, label: str | None = None, *, polars: bool = False
    ) -> Any:
        """``history()`` as a pandas DataFrame (needs pandas installed), or a polars one
        with ``polars=True``; built from ``scan()``'s arrays, not from rows."""
        lib = "polars" if polars else "pandas"
        try:
            frames = importlib.import_module(lib)
        except ImportError:
            raise UsageError(f"history_df() needs {lib}: pip install {lib}") from None
        keys = [keys] if isinstance(keys, str) else keys
        from ..stream.history import frame_columns

        series = list(self.scan(keys, label=label).values())
        table = frame_columns(series) if any(len(s) for s in series) else None
        if table is None:
            return frames.DataFrame(self.history(keys=keys, label=label))
        return table.to_polars(frames) if polars else table.to_pandas(frames)

    def scan(
        self,
        keys: Sequence[str] | None = None,
        label: str | None = None,
        step_range: tuple[int, int] | None = None,
    ) -> dict[str, StreamColumns]:
        """The history as numpy arrays, one ``StreamColumns`` per stream label: ``step``,
        ``time``, ``weight`` and ``values[key]`` (float64, NaN where a row lacks the key).

        The same rows as ``history()`` (``keys``, ``label``; ``step_range=(first, last)``
        keeps steps in that closed range), ordered by step then time. From files they are
        read straight from the stream files' bytes (``rankwise.stream.columns``): fast for
        millions of rows.
        """
        if not numpy_available():
            raise UsageError("scan() needs numpy: pip install numpy")
        keys = [keys] if isinstance(keys, str) else keys
        return self._source().scan(self, keys, label, step_range)

    def health(
        self, window: float = 60.0, factor: float = 1.25, now: float | None = None
    ) -> list[RankHealth]:
        """Each rank's health (``rankwise.health``): state, step rate over the last
        ``window`` seconds, lag behind the median rank, ``slow`` (slower than the median
        by ``factor``) and the open stall, if any. Latest incarnation of each stream."""
        return self._source().health(self, window, factor, now)

    # -- rich data: see rankwise.read.media --------------------------------------------
    def media_keys(self) -> list[MediaKey]:
        """The keys holding images, audio, video, html, text, tables or histograms, each
        with its ``kind``, ``steps`` and stream ``labels``."""
        return self._source().media_keys(self)

    def media(self, key: str, label: str | None = None) -> list[MediaFile]:
        """Every image/audio/video/html/text item logged under ``key`` (one per gallery
        image), by step, then label: ``step``, ``label``, ``kind``, ``caption``,
        ``format``, ``width``/``height``..., ``digest``; ``read()`` gives the bytes,
        ``path`` the file (``Api(dir=)``)."""
        return self._source().media(self, key, label)

    def table(self, key: str, step: int | None = None, label: str | None = None) -> Table:
        """The ``rankwise.Table`` logged under ``key`` at ``step`` (None: the latest) by
        stream ``label`` (None: the primary's, else the lowest label's). KeyError when
        there is none."""
        return self._source().table(self, key, step, label)

    def histograms(
        self, key: str, label: str | None = None
    ) -> HistogramSeries | dict[str, HistogramSeries]:
        """The histograms logged under ``key`` over steps: for one ``label`` its
        ``HistogramSeries`` (``steps``, ``edges``, ``counts`` numpy arrays; KeyError when
        it logged none); for ``label=None`` a dict label → series of every stream."""
        series = self._source().histograms(self, key)
        if label is None:
            return series
        if label not in series:
            raise KeyError(f"stream {label!r} logged no histogram {key!r}")
        return series[label]

    def __repr__(self) -> str:
        return f"<rankwise.RunInfo {self.project}/{self.id} {self.state}>"


class Project(msgspec.Struct, kw_only=True):
    name: str
    runs: int
    updated: float | None


class ProjectsReply(msgspec.Struct, kw_only=True):
    projects: list[Project]


class RunsReply(msgspec.Struct, kw_only=True):
    runs: list[RunInfo]  # with streams when with_streams=true
    total: int


# -- rank health as the server replies it (``RunInfo.health()`` returns ``RankHealth``) --


class Stall(msgspec.Struct, kw_only=True, omit_defaults=True):
    where: str  # e.g. "all_reduce at train.py:88"
    since: float | None  # when logging stopped (Unix seconds)
    seconds: float | None  # how long it has been stalled
    stacks: dict[str, str] | None = None  # per thread; with stacks=true


class RankReply(msgspec.Struct, kw_only=True):
    """One rank's health (its latest stream), as ``rankwise.health.assess`` found it."""

    label: str
    rank: int
    node: int
    host: str
    state: str
    last_step: int
    last_seen: float | None
    step_rate: float | None  # steps per second over the window
    lag_steps: float  # steps behind the median rank (negative: ahead)
    lag_seconds: float | None
    slow: bool  # slower than the median rate by the factor
    stalled: bool
    stall: Stall | None
    message: str  # e.g. "rank 5 stalled for 7 min in all_reduce at ..."

    @classmethod
    def of(cls, h: RankHealth, host: str, last_seen: float | None, stacks: bool) -> RankReply:
        stall = None
        if h.stalled:
            stall = Stall(where=h.stall_where, since=h.stall_since, seconds=h.stall_seconds)
            if stacks:
                stall.stacks = h.stacks
        return cls(
            label=h.label,
            rank=h.rank,
            node=h.node,
            host=host,
            state=h.state,
            last_step=h.last_step,
            last_seen=last_seen,
            step_rate=h.step_rate,
            lag_steps=h.lag_steps,
            lag_seconds=h.lag_seconds,
            slow=h.slow,
            stalled=h.stalled,
            stall=stall,
            message=h.describe(),
        )

    def assessed(self, median_rate: float | None) -> RankHealth:
        """Back to the ``RankHealth`` that ``RunInfo.health()`` returns."""
        from ..health import RankHealth

        stall = self.stall
        return RankHealth(
            label=self.label,
            rank=self.rank,
            node=self.node,
            state=self.state,
            last_step=self.last_step,
            step_rate=self.step_rate,
            median_rate=median_rate,
            lag_steps=self.lag_steps,
            lag_seconds=self.lag_seconds,
            slow=self.slow,
            stalled=self.stalled,
            stall_where=stall.where if stall else "",
            stall_since=stall.since if stall else None,
            stall_seconds=stall.seconds if stall else None,
            stacks=dict(stall.stacks or {}) if stall else {},
        )


class HealthReply(msgspec.Struct, kw_only=True):
    state: str
    crashed: list[str]
    now: float  # the time assessed at
    window: float
    factor: float
    median_rate: float | None
    ranks: list[RankReply]
