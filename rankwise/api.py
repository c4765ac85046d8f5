"""Reading runs back: ``rankwise.Api(dir=...)``.

The local reader folds the stream files of a data directory directly (no index, no
server). Every complete frame of a torn file is used and the damage is reported on the
stream (``StreamInfo.damage``), never raised.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._summary import CrossRankLast, complete_step, environment
from .errors import RunNotFoundError, UsageError
from .failures import Failure, StreamEnd, first_failure
from .health import RankHealth
from .names import check_id
from .stream import records as R
from .stream.files import iter_run_dirs, list_streams
from .stream.fold import StreamFold, StreamState, run_state, stream_state
from .stream.frames import scan

if TYPE_CHECKING:
    from ._remote import RemoteReader
    from .stream.columns import MetricColumns
    from .stream.history import StreamColumns


@dataclass
class StreamInfo:
    """One stream (one process's file) of a run."""

    label: str
    incarnation: int
    rank: int
    local_rank: int
    node: int
    host: str
    pid: int
    is_primary: bool
    state: str
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
    damage: str | None
    path: str


class RunInfo:
    """A run as read back: metadata, state, config, summary, streams and history."""

    # From a server: crashed streams may hold records not yet uploaded, and the
    # ``rankwise sync`` command that uploads them. Read from the files: nothing to upload.
    unsynced: str | None = None

    def __init__(
        self,
        project: str,
        run_id: str,
        streams: list[tuple[StreamInfo, StreamFold]],
        columns: dict[str, MetricColumns] | None = None,
    ):
        self.project = project
        self._kept_columns = columns or {}
        self.id = run_id
        self._folds = streams
        self.streams = [s for s, _ in streams]
        primary = self._primary_start()
        self.name: str = (primary.name if primary else None) or run_id
        self.group = primary.group if primary else None
        self.job_type = primary.job_type if primary else None
        self.tags: list[str] = list(primary.tags) if primary else []
        self.notes = primary.notes if primary else None
        self.run_mode = primary.run_mode if primary else None
        self.base_id = primary.base_id if primary else None
        self.world_size = primary.world_size if primary else len(self.streams)
        self.num_nodes = primary.num_nodes if primary else 1
        # The run's own ranks and nodes; world_size and num_nodes are the job's.
        self.run_ranks = len({s.label for s in self.streams})
        self.run_nodes = max(1, len({(s.node, s.host) for s in self.streams}))
        # Command line, Python, platform, launcher, rankwise version, host (primary's).
        self.environment: dict[str, Any] = environment(primary)
        self.state, self.crashed = run_state(
            StreamState(s.label, s.incarnation, s.is_primary, s.state) for s in self.streams
        )
        times = [s.started for s in self.streams if s.started is not None]
        self.created = min(times) if times else None
        seen = [s.last_seen for s in self.streams if s.last_seen is not None]
        self.updated = max(seen) if seen else None
        self.steps = max((s.last_step for s in self.streams), default=-1) + 1

    def _primary_start(self) -> R.StreamStart | None:
        starts = [f.start for _, f in self._ordered() if f.start is not None]
        return starts[-1] if starts else None

    def _ordered(self) -> list[tuple[StreamInfo, StreamFold]]:
        # Primary last and latest incarnation last, so merges let them win.
        return sorted(self._folds, key=lambda t: (t[0].is_primary, t[0].incarnation, t[0].label))

    @property
    def config(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for _, fold in self._ordered():
            out.update(fold.config)
        return out

    @property
    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for _, fold in self._ordered():
            out.update(fold.summary)
        return out

    @property
    def summary_ranks(self) -> dict[str, dict[str, Any]]:
        """Each stream label's own summary: ``{label: {key: value}}``. ``summary`` is the
        primary rank's; see ``rankwise._summary`` for what several ranks setting one
        key means."""
        out: dict[str, dict[str, Any]] = {}
        for info, fold in sorted(self._folds, key=lambda t: (t[0].label, t[0].incarnation)):
            out.setdefault(info.label, {}).update(fold.summary)
        return out

    @property
    def summary_cross_rank(self) -> dict[str, dict[str, Any]]:
        """Per metric, the cross-rank line's last complete value: ``{"step", "n", "mean",
        "wmean", "min", "max"}`` at the last step every live rank has reached (what the
        dashboard's chart header quotes). Reads the run's stream files."""
        fold = CrossRankLast(complete_step((s.state, s.last_step) for s in self.streams))
        for info in self.streams:
            for rec in _read(Path(info.path))[0]:
                if type(rec) is R.Metrics:
                    fold.add(rec.step, rec.values, rec.weight)
        return fold.result()

    @property
    def first_failure(self) -> Failure | None:
        """The run's first failure (``rankwise.failures``): the failed or crashed rank
        that went first, with the ranks that failed after it in ``.then``; None without."""
        return first_failure(
            StreamEnd(
                label=info.label,
                incarnation=info.incarnation,
                rank=info.rank,
                node=info.node,
                state=info.state,
                error_type=info.error_type,
                error_message=info.error_message,
                time=fold.finish.time if fold.finish is not None else info.last_seen,
                exit_code=info.exit_code,
                signal=info.signal,
            )
            for info, fold in self._folds
        )

    @property
    def metric_keys(self) -> list[str]:
        keys: set[str] = set()
        for _, fold in self._folds:
            keys |= fold.metric_keys
        return sorted(keys)

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
        wanted = set(keys) if keys is not None else None
        rows: list[dict[str, Any]] = []
        for info in self.streams:
            if label is not None and info.label != label:
                continue
            for rec in _read(Path(info.path))[0]:
                if type(rec) is not R.Metrics:
                    continue
                values = rec.values
                if wanted is not None:
                    values = {k: v for k, v in values.items() if k in wanted}
                    if not values:
                        continue
                row: dict[str, Any] = {"step": rec.step, "time": rec.time, "label": info.label}
                if rec.weight is not None:
                    row["weight"] = rec.weight
                row.update(values)
                rows.append(row)
        rows.sort(key=lambda r: (r["step"], r["time"]))
        return rows

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
        from .stream.history import frame_columns

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
        keeps steps in that closed range), ordered by step then time, read straight from
        the stream files' bytes (``rankwise.stream.columns``): fast for millions of rows.
        """
        if not _numpy():
            raise UsageError("scan() needs numpy: pip install numpy")
        from .stream.history import merge

        keys = [keys] if isinstance(keys, str) else keys
        if type(self).history is not RunInfo.history:  # a reader whose rows come from elsewhere
            from .stream.history import columns_from_rows

            return columns_from_rows(self.history(keys=keys, label=label), keys, step_range)
        columns = self._columns(keys, label)
        out: dict[str, StreamColumns] = {}
        for info in self.streams:
            if info.label in out or (label is not None and info.label != label):
                continue
            parts = [columns[s.path] for s in self.streams if s.label == info.label]
            out[info.label] = merge(info.label, parts, keys, step_range)
        return out

    def _columns(self, keys: Sequence[str] | None, label: str | None) -> dict[str, MetricColumns]:
        # Api.run() keeps what it read to fold the streams: the first scan uses it.
        out: dict[str, MetricColumns] = {}
        for info in self.streams:
            if label is not None and info.label != label:
                continue
            kept = self._kept_columns.get(info.path)  # every key's values
            if kept is None:
                from .stream.columns import read_columns

                kept = read_columns(Path(info.path), list(keys) if keys is not None else None)
            out[info.path] = kept
        return out

    def health(
        self, window: float = 60.0, factor: float = 1.25, now: float | None = None
    ) -> list[RankHealth]:
        """Each rank's health (``rankwise.health``): state, step rate over the last
        ``window`` seconds, lag behind the median rank, ``slow`` (slower than the median
        by ``factor``) and the open stall, if any. Latest incarnation of each stream."""
        from .health import StreamSteps, assess, step_points

        latest: dict[str, tuple[StreamInfo, StreamFold]] = {}
        for info, fold in self._folds:
            if info.label not in latest or info.incarnation > latest[info.label][0].incarnation:
                latest[info.label] = (info, fold)
        streams = [
            StreamSteps(
                label=info.label,
                points=step_points(_read(Path(info.path))[0]),
                rank=info.rank,
                node=info.node,
                state=info.state,
                last_seen=info.last_seen,
                stall=fold.stall,
            )
            for info, fold in latest.values()
        ]
        if now is None and self.state == "running":
            now = time.time()
        return assess(streams, now=now, window=window, factor=factor)

    def __repr__(self) -> str:
        return f"<rankwise.RunInfo {self.project}/{self.id} {self.state}>"


def _read(path: Path) -> tuple[list[R.AnyRecord], str | None]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        return [], f"cannot read: {exc}"
    result = scan(data)
    return result.records, (str(result.damage) if result.damage else None)


@functools.cache
def _numpy() -> bool:
    """numpy is not a dependency of the SDK: the columnar reader needs it (pandas has it)."""
    return importlib.util.find_spec("numpy") is not None


def load_stream(  # type: ignore[no-untyped-def]
    label: str, incarnation: int, path: Path, crash_timeout: float, now: float, keep: bool = False
):
    """A stream's ``StreamInfo``, its fold and, with ``keep``, its columns (every key).

    With numpy installed the ``Metrics`` records are folded from columns
    (``rankwise.stream.history.fold_columns``), without a record object each."""
    cols: MetricColumns | None = None
    if _numpy():
        from .stream.history import fold_columns

        try:
            fold, cols = fold_columns(path, None if keep else [])
            damage = str(cols.damage) if cols.damage else None
        except OSError as exc:
            fold, damage = StreamFold(), f"cannot read: {exc}"
    else:
        records, damage = _read(path)
        fold = StreamFold()
        fold.apply(records)
    start, fin = fold.start, fold.finish
    info = StreamInfo(
        label=label,
        incarnation=incarnation,
        rank=start.rank if start else -1,
        local_rank=start.local_rank if start else -1,
        node=start.node_rank if start else -1,
        host=start.host if start else "",
        pid=start.pid if start else 0,
        is_primary=start.is_primary if start else False,
        state=stream_state(fold, now, crash_timeout),
        last_step=fold.last_step,
        points=fold.points,
        dropped=fold.dropped,
        started=start.time if start else fold.first_time,
        last_seen=fold.last_time,
        exit_code=fin.exit_code if fin else None,
        signal=fin.signal if fin else None,
        error_type=fin.error_type if fin else None,
        error_message=fin.error_message if fin else None,
        traceback=fin.traceback if fin else None,
        damage=damage,
        path=str(path),
    )
    return info, fold, (cols if keep else None)


class Api:
    """Read runs from a data directory, ``Api(dir=...)``, or a server, ``Api(server=URL)``.

    ``dir`` defaults to ``RANKWISE_DIR`` or ``./rankwise``. ``crash_timeout`` (seconds) is
    how old a silent stream's last record must be before it is called crashed (a server
    applies its own). With ``server=`` the same methods return the same objects, read
    through the HTTP API (``rankwise._remote``), authenticated with ``token`` (a read
    token; default ``RANKWISE_TOKEN``).
    """

    def __init__(
        self,
        dir: str | os.PathLike[str] | None = None,
        crash_timeout: float = 60.0,
        server: str | None = None,
        token: str | None = None,
    ) -> None:
        self.dir = Path(dir or os.environ.get("RANKWISE_DIR") or "rankwise").expanduser()
        self.crash_timeout = crash_timeout
        self._remote: RemoteReader | None = None
        if server is not None:
            from ._remote import RemoteReader

            self._remote = RemoteReader(server, token=token)

    def projects(self) -> list[str]:
        if self._remote is not None:
            return self._remote.projects()
        return sorted({run.parent.name for run in iter_run_dirs(self.dir)})

    def _run_dirs(self, project: str | None) -> Iterable[tuple[str, Path]]:
        if project:
            check_id(project, "project")  # never a path: "../x" cannot leave the directory
        for run in iter_run_dirs(self.dir, project or None):
            yield run.parent.name, run

    def _load(self, project: str, path: Path, keep: bool = False) -> RunInfo:
        # keep: the run was asked for by id, so its history is likely read next: keep the
        # columns read for the fold (every key) for the first scan()/history_df().
        now = time.time()
        loaded = [
            load_stream(label, inc, p, self.crash_timeout, now, keep)
            for label, inc, p in list_streams(path / "streams")
        ]
        columns = {info.path: cols for info, _, cols in loaded if cols is not None}
        return RunInfo(project, path.name, [(i, f) for i, f, _ in loaded], columns)

    def runs(
        self,
        project: str | None = None,
        group: str | None = None,
        job_type: str | None = None,
        state: str | Sequence[str] | None = None,
        tags: str | Sequence[str] | None = None,
    ) -> list[RunInfo]:
        """Runs, newest first, filtered by every argument given (tags: all must match)."""
        states = {state} if isinstance(state, str) else set(state or ())
        for s in sorted(states):  # the server's rule and message, so both readers agree
            if s not in R.STATES:
                raise UsageError(f"state={s!r} is not one of {', '.join(R.STATES)}")
        want_tags = {tags} if isinstance(tags, str) else set(tags or ())
        if self._remote is not None:
            return self._remote.runs(project, group, job_type, states, want_tags)
        out = []
        for proj, path in self._run_dirs(project):
            run = self._load(proj, path)
            if group is not None and run.group != group:
                continue
            if job_type is not None and run.job_type != job_type:
                continue
            if states and run.state not in states:
                continue
            if want_tags and not want_tags <= set(run.tags):
                continue
            out.append(run)
        out.sort(key=lambda r: r.created or 0.0, reverse=True)
        return out

    def run(self, id: str, project: str | None = None) -> RunInfo:
        """One run by id; ``"project/id"`` also works."""
        if project is None and "/" in id:
            project, id = id.split("/", 1)
        if self._remote is not None:
            return self._remote.run(id, project)
        found = [(proj, path) for proj, path in self._run_dirs(project) if path.name == id]
        if not found:
            where = f"project {project!r}" if project else "any project"
            raise RunNotFoundError(f"no run {id!r} in {where} under {self.dir}")
        if len(found) > 1:
            names = ", ".join(f"{p}/{id}" for p, _ in found)
            raise UsageError(f"run id {id!r} exists in several projects ({names}): pass project=")
        return self._load(*found[0], keep=True)
