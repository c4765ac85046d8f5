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
from typing import TYPE_CHECKING, Any, Literal, Protocol

import msgspec

from ..divergence import Divergence, RankNonFinite
from ..errors import KeyNotLoggedError, UsageError
from ..failures import Failure
from ..hang import HangReport
from ..wire.code import CodeInfo, GitInfo, NodeInfo

if TYPE_CHECKING:
    from ..artifacts.artifact import Artifact
    from ..media.table import Table
    from ..read.media import HistogramSeries, MediaFile
    from ..stream.history import StreamColumns
    from .health import RankHealth
    from .media import MediaKey


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
    data_dir: str = ""  # the data directory its process wrote under, as it recorded it
    # Where it was read from: the file (Api(dir=)), the run's URL (Api(server=)). Never
    # part of a reply, so the one field two readers of the same stream disagree on.
    path: str = ""


class Unsynced(msgspec.Struct, kw_only=True):
    """Crashed streams may hold records their process never uploaded."""

    streams: list[str]  # labels of the crashed streams
    hosts: list[str]  # where their files are
    command: str  # "rankwise sync <the run's directory> --server <this server>"
    message: str


# How a JSON reply spells a float JSON has no number for (MessagePack keeps the float).
Spelled = Literal["NaN", "Infinity", "-Infinity"]


class CrossRankValue(msgspec.Struct, kw_only=True):
    """One metric's cross-rank line at its last complete step (``RunInfo.summary_cross_rank``).

    NaN and ±Inf values are left out of ``n``, the means, min and max, and counted in
    ``nan``/``posinf``/``neginf``; where ``n`` is 0 the means, min and max say NaN (or the
    one infinity logged). A JSON reply spells those as ``"NaN"``, ``"Infinity"`` or
    ``"-Infinity"`` (``spelled()``); MessagePack and ``rankwise.Api`` keep the floats.
    """

    step: int
    n: int  # finite values at the step
    mean: float | Spelled
    wmean: float | Spelled  # weighted where every value there carried a weight, else mean
    min: float | Spelled
    max: float | Spelled
    nan: int = 0
    posinf: int = 0
    neginf: int = 0
    sum: float | Spelled = 0.0  # the total of the finite values (NaN where n is 0)
    # The metric's cross-rank line (``run.define_metric(reduce=)``): which of mean,
    # wmean, sum, min or max ``value`` is.
    reduce: str = "mean"

    @property
    def value(self) -> float | Spelled:
        """The line's value: the field ``reduce`` names (the mean unless defined)."""
        return getattr(self, self.reduce) if self.reduce in _REDUCED else self.mean

    def __getitem__(self, name: str) -> Any:
        """``value["mean"]`` as well as ``value.mean``: these were dicts before, and code
        reading them so keeps working."""
        if name not in self.__struct_fields__:
            raise KeyError(name)
        return getattr(self, name)

    def get(self, name: str, default: Any = None) -> Any:
        """``value.get("nan", 0)``, as a dict answered it."""
        return getattr(self, name) if name in self.__struct_fields__ else default

    def spelled(self) -> CrossRankValue:
        """This value as a JSON reply carries it: non-finite floats as strings."""
        return msgspec.structs.replace(
            self,
            mean=spell(self.mean),
            wmean=spell(self.wmean),
            min=spell(self.min),
            max=spell(self.max),
            sum=spell(self.sum),
        )


_REDUCED = ("mean", "wmean", "sum", "min", "max")


class MetricDefinition(msgspec.Struct, kw_only=True, omit_defaults=True):
    """``run.define_metric(name, ...)`` as the run keeps it (``RunInfo.defined_metrics``,
    keyed by the name: a metric key or a glob ending in ``*``). ``reduce`` is the
    metric's cross-rank line (``rankwise.metric_defs``)."""

    reduce: str = "mean"
    step_metric: str | None = None
    summary: str | None = None
    goal: str | None = None
    hidden: bool = False


_SPELLED: dict[float, Spelled] = {float("inf"): "Infinity", float("-inf"): "-Infinity"}


def spell(value: float | str) -> float | Spelled:
    """``value``, or how JSON spells it when it is NaN or ±Inf."""
    if isinstance(value, float):
        if value != value:
            return "NaN"
        if value in _SPELLED:
            return _SPELLED[value]
        return value
    if value in ("NaN", "Infinity", "-Infinity"):
        return value  # type: ignore[return-value]
    raise ValueError(f"not a float or a spelled one: {value!r}")


class RunSource(Protocol):
    """What a ``RunInfo`` asks for what its fields do not hold (files or a server)."""

    def summaries(
        self, run: RunInfo
    ) -> tuple[dict[str, dict[str, Any]], dict[str, CrossRankValue]]: ...

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

    # Artifacts (rankwise.artifacts): the versions the run logged, and those it used.
    def artifacts(self, run: RunInfo) -> tuple[list[Artifact], list[Artifact]]: ...

    # A blob of the run by sha256 digest (the diff of ``code.git``).
    def blob(self, run: RunInfo, digest: str) -> bytes: ...


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
    run_ranks: int  # the ranks (stream labels, a rank's child processes not counted) it holds
    run_nodes: int  # the nodes this run's streams ran on
    created: float | None
    updated: float | None
    duration: float | None
    steps: int
    n_streams: int
    config: dict[str, Any]
    summary: dict[str, Any]  # the primary rank's last value of each key, or what it set
    first_failure: Failure | None  # the failed or crashed stream that went first
    # The rank a run of one rank is (its stream label, e.g. "rank-3"): which process a
    # per-process run (run_mode="new", W&B's run per process) is. None for several ranks.
    label: str | None = None
    # While ranks are stalled: who waits where, the odd ones out, which collective
    # (``rankwise.hang``); None when no rank is stalled (or in a run list from a server).
    hang: HangReport | None = None
    # Per metric, each rank's first non-finite value (NaN, +Inf, -Inf), earliest first,
    # and per metric a line naming the rank that went first (``rankwise.divergence``).
    first_nonfinite: dict[str, list[RankNonFinite]] = msgspec.field(default_factory=dict)
    divergence: list[Divergence] = msgspec.field(default_factory=list)
    # From a server, crashed streams that may hold records not yet uploaded (None: none,
    # or read from the files): which, where, and the command; ``unsynced`` is its message.
    unsynced_detail: Unsynced | None = msgspec.field(name="unsynced")
    streams: list[StreamInfo] = msgspec.field(default_factory=list)
    # Each stream label's own summary, and per metric the cross-rank line's last complete
    # value: one run's reply only.
    rank_summaries: dict[str, dict[str, Any]] | None = msgspec.field(
        default=None, name="summary_ranks"
    )
    cross_rank_summary: dict[str, CrossRankValue] | None = msgspec.field(
        default=None, name="summary_cross_rank"
    )
    # ``run.define_metric()`` by name (a key or a glob ending in ``*``): the latest
    # definition of each, whichever rank wrote it.
    defined_metrics: dict[str, MetricDefinition] = msgspec.field(default_factory=dict)
    # What ran (``rankwise.wire.code``): the primary's program, git state and packages,
    # and each node's environment; one run's reply only (None / empty in a run list).
    code: CodeInfo | None = None
    nodes: list[NodeInfo] = msgspec.field(default_factory=list)

    def reduce_of(self, key: str) -> str:
        """``key``'s cross-rank line: ``mean`` unless ``define_metric`` chose another
        (an exact definition beats a glob; see ``rankwise.metric_defs``)."""
        from ..metric_defs import reduce_of

        return reduce_of(self.defined_metrics, key)

    def _source(self) -> RunSource:
        source: RunSource | None = getattr(self, "_from", None)
        if source is None:
            raise UsageError("this RunInfo was not read by rankwise.Api: it has no source")
        return source

    def update(self) -> RunInfo:
        """Keep the changes made to ``name``, ``tags``, ``notes``, ``group`` and
        ``job_type`` of this run (W&B's ``Run.update()``); returns the run as kept.
        A data directory keeps them beside the run's streams, a server in its store
        (a writer token). See ``rankwise.manage``."""
        api = getattr(self, "_api", None)  # set by rankwise.Api when it reads the run
        if api is None:
            raise UsageError("this run was not read through rankwise.Api: nothing to update")
        return api.update_run(self)  # type: ignore[no-any-return]

    def delete(self, delete_artifacts: bool = False, *, purge: bool = False) -> None:
        """Delete this run (W&B's ``Run.delete()``): to the trash, restorable with
        ``Api.restore_runs``; ``purge=True`` removes it for good. Artifact versions it
        logged stay while another run uses them or an alias names them, whatever
        ``delete_artifacts`` says (W&B's argument, accepted for compatibility)."""
        api = getattr(self, "_api", None)  # set by rankwise.Api when it reads the run
        if api is None:
            raise UsageError("this run was not read through rankwise.Api: cannot delete it")
        api.delete_runs([self.id], project=self.project, purge=purge)

    def attach(self, source: RunSource) -> RunInfo:
        """Remember the reader that made this run (never encoded); returns the run."""
        self._from = source
        return self

    @property
    def unsynced(self) -> str | None:
        """From a server: crashed streams may hold records not yet uploaded, and the
        ``rankwise sync`` command that uploads them, as one message (``unsynced_detail``
        has the streams, hosts and command apart). Read from the files: None."""
        return self.unsynced_detail.message if self.unsynced_detail is not None else None

    @property
    def sync_hint(self) -> Unsynced | None:
        """The earlier name of ``unsynced_detail``."""
        return self.unsynced_detail

    def _summaries(self) -> None:
        self.rank_summaries, self.cross_rank_summary = self._source().summaries(self)

    @property
    def summary_ranks(self) -> dict[str, dict[str, Any]]:
        """Each stream label's own summary: ``{label: {key: value}}``. ``summary`` is the
        primary rank's; see ``rankwise.read.summary`` for what several ranks setting one
        key means."""
        if self.rank_summaries is None:
            self._summaries()
        return {k: dict(v) for k, v in (self.rank_summaries or {}).items()}

    @property
    def summary_cross_rank(self) -> dict[str, CrossRankValue]:
        """Per metric, the cross-rank line's last complete value (``CrossRankValue``: step,
        n, mean, wmean, min, max and the non-finite counts) at the last step every live
        rank has reached (what the dashboard's chart header quotes)."""
        if self.cross_rank_summary is None:
            self._summaries()
        return dict(self.cross_rank_summary or {})

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
        stream ``label`` (None: the primary's, else the lowest label's).
        ``KeyNotLoggedError`` (a KeyError) when there is none."""
        return self._source().table(self, key, step, label)

    def histograms(
        self, key: str, label: str | None = None
    ) -> HistogramSeries | dict[str, HistogramSeries]:
        """The histograms logged under ``key`` over steps: for one ``label`` its
        ``HistogramSeries`` (``steps``, ``edges``, ``counts`` numpy arrays;
        ``KeyNotLoggedError``, a KeyError, when it logged none); for ``label=None`` a
        dict label → series of every stream."""
        series = self._source().histograms(self, key)
        if label is None:
            return series
        if label not in series:
            raise KeyNotLoggedError(
                f"stream {label!r} logged no histogram {key!r}: pass one of "
                f"{sorted(series)} as label=, or label=None for every stream's"
            )
        return series[label]

    # -- what ran: see rankwise.sdk.provenance -------------------------------------------
    @property
    def git(self) -> GitInfo | None:
        """The repository the primary ran from: ``commit``, ``branch``, ``remote``,
        ``dirty``, the diff's ``diff_digest`` (``diff()`` reads it); None when not
        recorded."""
        return self.code.git if self.code is not None else None

    @property
    def packages(self) -> dict[str, str]:
        """The primary's installed packages, name -> version (empty when not recorded)."""
        return dict(self.code.packages or {}) if self.code is not None else {}

    @property
    def metadata(self) -> dict[str, Any]:
        """What ran as plain data: ``code`` (program, argv, git, packages) and ``nodes``."""
        return {
            "code": msgspec.to_builtins(self.code) if self.code is not None else None,
            "nodes": msgspec.to_builtins(self.nodes),
        }

    def diff(self) -> str | None:
        """``git diff HEAD`` of the tracked files at init (cut at 1 MiB: ``git.
        diff_truncated``); None when the tree was clean or the diff was not recorded."""
        git = self.git
        if git is None or not git.diff_digest:
            return None
        return self._source().blob(self, git.diff_digest).decode("utf-8", "replace")

    # -- artifacts: see rankwise.artifacts ------------------------------------------------
    def logged_artifacts(self) -> list[Artifact]:
        """The artifact versions this run logged (``Artifact``s with their files)."""
        return self._source().artifacts(self)[0]

    def used_artifacts(self) -> list[Artifact]:
        """The artifact versions this run used (``run.use_artifact``)."""
        return self._source().artifacts(self)[1]

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
    # Per run id of the page, its alert events not delivered everywhere (yet): the runs
    # table marks those runs (``rankwise.store.alerts.open_alert_runs``).
    open_alerts: dict[str, int] = msgspec.field(default_factory=dict)


class MetricsReply(msgspec.Struct, kw_only=True):
    keys: list[str]


class HistoryReply(msgspec.Struct, kw_only=True):
    rows: list[dict[str, Any]]  # step, time, label, weight and the values (NaN: null)


class SavedView(msgspec.Struct, kw_only=True):
    """A saved view of the dashboard's runs table (``rankwise.store.saved_views``)."""

    project: str
    name: str  # unique per project
    # The runs table's filters, e.g. {"state": ["crashed"], "tag": ["ddp"]}, kept verbatim.
    filters: dict[str, Any] = msgspec.field(default_factory=dict)
    columns: list[str] = msgspec.field(default_factory=list)  # summary keys shown as columns
    updated: float = 0.0  # when it was last saved (Unix seconds)


class ViewsReply(msgspec.Struct, kw_only=True):
    views: list[SavedView]
