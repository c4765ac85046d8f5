"""``rankwise.Api(dir=...)``: runs folded straight from a data directory's stream files.

No index, no server. Every complete frame of a torn file is used and the damage is
reported on the stream (``StreamInfo.damage``), never raised. A run's fields come from
``fold_run``, as the store's do; what needs the records themselves (history, health,
the cross-rank summary) reads the files again when asked (``LocalRun``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .. import filters as F
from .._datadir import DEFAULT
from ..edits import apply as apply_edits
from ..edits import live_edits
from ..edits import read_file as read_edits
from ..errors import RunNotFoundError, UsageError
from ..names import check_id
from ..stream import records as R
from ..stream.files import iter_run_dirs, list_streams
from ..stream.fold import StreamFold
from ..stream.frames import scan
from ..wire.health import RankHealth
from ..wire.runs import CrossRankValue, RunInfo, StreamInfo, numpy_available
from . import checkpoint
from .fold import StreamFacts, fold_run
from .summary import CrossRankLast, complete_step

# Api.run() keeps the columns it read (for the first scan() and the cross-rank summary)
# of at most this many bytes of stream files: a run of 1,024 ranks x 10,000 steps is
# 10 GB of files, and keeping all of them held 4.9 GB. Past it, a stream's columns are
# read again when asked (the same values, later).
KEEP_BYTES = 512 * 1024 * 1024
# Of a stream past it, its last rows (from this many rows from the end, whole steps):
# the cross-rank summary of a finished run, or of ranks a few steps apart, needs no more.
TAIL_ROWS = 64

if TYPE_CHECKING:
    from ..artifacts.artifact import Artifact
    from ..media.table import Table
    from ..stream.columns import MetricColumns
    from ..stream.history import StreamColumns
    from ..wire.artifacts import VersionInfo
    from ..wire.media import MediaKey
    from .media import HistogramSeries, MediaFile, Streams


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1  # load_stream says why


def _read(path: Path) -> tuple[list[R.AnyRecord], str | None]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        return [], f"cannot read: {exc}"
    result = scan(data)
    return result.records, (str(result.damage) if result.damage else None)


def load_stream(
    label: str, incarnation: int, path: Path, keep: bool = False
) -> tuple[StreamFacts, StreamFold, MetricColumns | None]:
    """One stream file, folded; with ``keep``, also its columns (every key).

    With numpy installed the ``Metrics`` records are folded from columns
    (``rankwise.stream.history.fold_columns``), without a record object each."""
    cols: MetricColumns | None = None
    if numpy_available():
        from ..stream.history import fold_columns

        try:
            # Every key's values: the first non-finite ones are read from them.
            fold, cols = fold_columns(path, None)
            damage = str(cols.damage) if cols.damage else None
        except OSError as exc:
            fold, damage = StreamFold(), f"cannot read: {exc}"
    else:
        records, damage = _read(path)
        fold = StreamFold()
        fold.apply(records)
    facts = StreamFacts.of(label, incarnation, fold, damage=damage, path=str(path))
    return facts, fold, (cols if keep else None)


# One stream file to read (rankwise.read.parallel): label, incarnation, path, what to keep
# of its columns (all of them, its last rows, or none) and how many last rows.
Keep = Literal["full", "tail"] | None
Job = tuple[str, int, str, Keep, int]
# The file's facts and fold, and the columns kept with what they are: every row
# ("full"), the last rows ("tail"), or None.
Loaded = tuple[StreamFacts, StreamFold, "MetricColumns | None", Keep]


def from_checkpoint(job: Job) -> Loaded | None:
    """What ``load_job`` gives, from the stream's fold checkpoint when it has a valid one
    (``rankwise.read.checkpoint``): its fold, and its last rows for any columns asked."""
    label, incarnation, path_s, keep, tail_rows = job
    kept = checkpoint.read(Path(path_s))
    if kept is None:
        return None
    fold, rows = kept
    facts = StreamFacts.of(label, incarnation, fold, damage=None, path=path_s)
    if keep is not None and rows is not None and len(rows) > tail_rows:
        rows = _tail(rows, tail_rows)  # kept with more rows than asked for now
    if keep is None or rows is None:
        return facts, fold, None, None
    return facts, fold, rows, "tail"


def load_job(job: Job) -> Loaded:
    """One file read and folded, with what ``job`` keeps of its columns:
    ``LocalReader.load`` runs it here or in a worker process (what it returns is pickled
    back). A finished stream read whole gets its fold checkpoint (``from_checkpoint``)."""
    label, incarnation, path_s, keep, tail_rows = job
    path = Path(path_s)
    ident = checkpoint.identity(path)
    facts, fold, cols = load_stream(label, incarnation, path, keep=True)
    last = _tail(cols, tail_rows) if cols is not None else None
    if ident is not None and fold.finish is not None and facts.damage is None:
        checkpoint.write(path, ident, fold, last)
    if keep == "full":
        return facts, fold, cols, "full"
    if keep == "tail" and last is not None:
        return facts, fold, last, "tail"
    return facts, fold, None, None


def _tail(cols: MetricColumns, rows: int) -> MetricColumns | None:
    from ..stream.columns import tail

    return tail(cols, rows)


class LocalRun:
    """A run's stream files: what its ``RunInfo`` asks for beyond its fields."""

    def __init__(
        self,
        folds: dict[tuple[str, int], StreamFold],
        columns: dict[str, MetricColumns] | None = None,
        root: Path | None = None,
        tails: dict[str, MetricColumns] | None = None,
    ) -> None:
        self._folds = folds
        # Api.run() keeps what it read to fold the streams (every key, by path): the
        # first scan() uses it instead of reading the files again. Past KEEP_BYTES it
        # keeps each stream's last rows only, for the cross-rank summary.
        self._kept_columns = columns or {}
        self._tails = tails or {}
        self._root = root if root is not None else Path(DEFAULT)  # the data directory

    def _fold(self, info: StreamInfo) -> StreamFold:
        return self._folds[(info.label, info.incarnation)]

    def summaries(
        self, run: RunInfo
    ) -> tuple[dict[str, dict[str, Any]], dict[str, CrossRankValue]]:
        ranks: dict[str, dict[str, Any]] = {}
        for info in run.streams:  # sorted by label, incarnation: later incarnations win
            ranks.setdefault(info.label, {}).update(self._fold(info).summary)
        fold = CrossRankLast(complete_step(run.streams))
        for info in run.streams:
            # From the columns (those Api.run() kept, else read now: no record objects);
            # without numpy, or for a key mixing bools and numbers, record by record.
            cols = self._kept_columns.get(info.path)
            last = self._tails.get(info.path) if cols is None else None
            if last is not None and fold.add_tail(last, self._fold(info).metric_keys):
                continue
            if cols is None and numpy_available():
                from ..stream.columns import read_columns

                try:
                    cols = read_columns(Path(info.path))
                except OSError:
                    continue  # as _read(): an unreadable file adds nothing
            if cols is not None and fold.add_columns(cols):
                continue
            for rec in _read(Path(info.path))[0]:
                if type(rec) is R.Metrics:
                    fold.add(rec.step, rec.values, rec.weight)
        return ranks, fold.result(run.defined_metrics)

    def metric_keys(self, run: RunInfo) -> list[str]:
        keys: set[str] = set()
        for fold in self._folds.values():
            keys |= fold.metric_keys
        return sorted(keys)

    def history(
        self, run: RunInfo, keys: Sequence[str] | None, label: str | None
    ) -> list[dict[str, Any]]:
        wanted = set(keys) if keys is not None else None
        rows: list[dict[str, Any]] = []
        for info in run.streams:
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

    def scan(
        self,
        run: RunInfo,
        keys: Sequence[str] | None,
        label: str | None,
        step_range: tuple[int, int] | None,
    ) -> dict[str, StreamColumns]:
        from ..stream.history import merge

        columns = self._columns(run, keys, label)
        out: dict[str, StreamColumns] = {}
        for info in run.streams:
            if info.label in out or (label is not None and info.label != label):
                continue
            parts = [columns[s.path] for s in run.streams if s.label == info.label]
            out[info.label] = merge(info.label, parts, keys, step_range)
        return out

    def _columns(
        self, run: RunInfo, keys: Sequence[str] | None, label: str | None
    ) -> dict[str, MetricColumns]:
        out: dict[str, MetricColumns] = {}
        for info in run.streams:
            if label is not None and info.label != label:
                continue
            kept = self._kept_columns.get(info.path)  # every key's values
            if kept is None:
                from ..stream.columns import read_columns

                kept = read_columns(Path(info.path), list(keys) if keys is not None else None)
            out[info.path] = kept
        return out

    # -- rich data (rankwise.read.media) -------------------------------------------
    def _streams(self, run: RunInfo, label: str | None = None) -> Streams:
        for info in run.streams:
            if label is None or info.label == label:
                path = Path(info.path)
                yield info.label, path, _read(path)[0]

    def media_keys(self, run: RunInfo) -> list[MediaKey]:
        from .media import local_media_keys

        return local_media_keys(self._streams(run))

    def media(self, run: RunInfo, key: str, label: str | None) -> list[MediaFile]:
        from .media import local_media

        return local_media(self._streams(run, label), key)

    def table(self, run: RunInfo, key: str, step: int | None, label: str | None) -> Table:
        from .media import local_table

        primary = next((s.label for s in run.streams if s.is_primary), None)
        return local_table(self._streams(run, label), key, step, label, primary)

    def histograms(self, run: RunInfo, key: str) -> dict[str, HistogramSeries]:
        from .media import local_histograms

        return local_histograms(self._streams(run), key)

    def blob(self, run: RunInfo, digest: str) -> bytes:
        from ..stream.blobs import read_blob

        return read_blob(self._root / run.project / run.id, digest)

    def artifacts(self, run: RunInfo) -> tuple[list[Artifact], list[Artifact]]:
        """From the local artifact store of the run's data directory."""
        from ..artifacts.artifact import Artifact
        from ..artifacts.local import LocalArtifacts

        store = LocalArtifacts(self._root, run.project)

        def full(infos: list[VersionInfo]) -> list[Artifact]:
            return [
                Artifact.from_version(store.version(i.name, int(i.version[1:]), True), store)
                for i in infos
            ]

        return full(store.logged_by(run.id)), full(store.used_by(run.id))

    def health(
        self, run: RunInfo, window: float, factor: float, now: float | None
    ) -> list[RankHealth]:
        from ..health import StreamSteps, assess, step_points

        latest: dict[str, StreamInfo] = {}
        for info in run.streams:
            if info.label not in latest or info.incarnation > latest[info.label].incarnation:
                latest[info.label] = info
        streams = [
            StreamSteps(
                label=info.label,
                points=step_points(_read(Path(info.path))[0]),
                rank=info.rank,
                node=info.node,
                host=info.host,
                state=info.state,
                last_seen=info.last_seen,
                stall=self._fold(info).stall,
            )
            for info in latest.values()
        ]
        if now is None and run.state == "running":
            now = time.time()
        return assess(streams, now=now, window=window, factor=factor)


class LocalReader:
    """What ``Api`` reads with when given a data directory."""

    def __init__(self, root: Path, crash_timeout: float, workers: int = 1) -> None:
        self.dir = root
        self.crash_timeout = crash_timeout
        # Processes reading a big run's stream files (rankwise.read.parallel): 1, this one.
        self.workers = workers

    def check_dir(self) -> None:
        """A data directory that does not exist is a mistake, not an empty list (the CLI
        and ``Api(dir=)`` say the same)."""
        if not self.dir.is_dir():
            raise UsageError(
                f"the data directory {self.dir} does not exist: pass --dir (or dir=, or set "
                "RANKWISE_DIR) to where rankwise.init() wrote runs"
            )

    def projects(self) -> list[str]:
        self.check_dir()
        return sorted({run.parent.name for run in iter_run_dirs(self.dir)})

    def _run_dirs(self, project: str | None) -> Iterable[tuple[str, Path]]:
        if project:
            check_id(project, "project")  # never a path: "../x" cannot leave the directory
        self.check_dir()
        for run in iter_run_dirs(self.dir, project or None):
            yield run.parent.name, run

    def load(self, project: str, path: Path, keep: bool = False) -> RunInfo:
        # keep: the run was asked for by id, so its history is likely read next: keep the
        # columns read for the fold (every key) for the first scan()/history_df() and the
        # cross-rank summary, of up to KEEP_BYTES of files.
        from .parallel import map_files, pool_size

        now = time.time()
        jobs: list[Job] = []
        sizes: list[int] = []
        budget = KEEP_BYTES if keep else 0
        done: dict[int, Loaded] = {}  # by place: the streams read from their checkpoints
        for i, (label, inc, p) in enumerate(list_streams(path / "streams")):
            kept = from_checkpoint((label, inc, str(p), "tail" if keep else None, TAIL_ROWS))
            if kept is not None:
                done[i] = kept
                continue
            size = _size(p)
            # Within the budget every column, past it the last rows (whole steps).
            what: Keep = ("full" if 0 <= size <= budget else "tail") if keep else None
            jobs.append((label, inc, str(p), what, TAIL_ROWS))
            sizes.append(size)
            budget -= max(size, 0)
        # A big run's files in worker processes when asked (rankwise.read.parallel).
        workers = pool_size(self.workers, sizes)
        read = iter(map_files(load_job, jobs, workers, sizes))
        loaded = [done[i] if i in done else next(read) for i in range(len(done) + len(jobs))]
        tails = {f.path: c for f, _, c, kind in loaded if kind == "tail" and c is not None}
        run = fold_run(
            project,
            path.name,
            [f for f, _, _, _ in loaded],
            self.crash_timeout,
            now,
            local_pids=True,
        )
        folds = {(f.label, f.incarnation): fold for f, fold, _, _ in loaded}
        columns = {f.path: c for f, _, c, kind in loaded if kind == "full" and c is not None}
        # Edits: the live run's RunEdit records and the edits file beside the streams.
        edits = [e for _, fold, _, _ in loaded for e in live_edits(fold.edits)] + read_edits(path)
        if edits:
            run = apply_edits(run, edits)
        return run.attach(LocalRun(folds, columns, self.dir, tails))

    def find(
        self, project: str, filters: dict[str, Any] | None, order: str | None
    ) -> list[RunInfo]:
        """The project's runs ``filters`` picks (``rankwise.filters``), in ``order``."""
        node = F.parse(filters)
        how = F.parse_order(order)
        need_cross = "cross" in F.fields_of(node) or (
            how.field is not None and how.field.kind == "cross"
        )
        kept = []
        for proj, path in self._run_dirs(project):
            run = self.load(proj, path)
            doc = F.doc_of(run, cross=need_cross)
            if F.matches(node, doc):
                value = run.updated if how.field is None else F.value_of(doc, how.field)
                kept.append((value, run))
        kept.sort(key=lambda p: p[1].id)
        return F.sort_key_groups(kept, how.desc)

    def runs(
        self,
        project: str | None,
        group: str | None,
        job_type: str | None,
        states: set[str],
        tags: set[str],
    ) -> list[RunInfo]:
        out = []
        for proj, path in self._run_dirs(project):
            run = self.load(proj, path)
            if group is not None and run.group != group:
                continue
            if job_type is not None and run.job_type != job_type:
                continue
            if states and run.state not in states:
                continue
            if tags and not tags <= set(run.tags):
                continue
            out.append(run)
        out.sort(key=lambda r: r.created or 0.0, reverse=True)
        return out

    def run(self, run_id: str, project: str | None) -> RunInfo:
        found = [(proj, path) for proj, path in self._run_dirs(project) if path.name == run_id]
        if not found:
            where = f"project {project!r}" if project else "any project"
            raise RunNotFoundError(f"no run {run_id!r} in {where} under {self.dir}")
        if len(found) > 1:
            names = ", ".join(f"{p}/{run_id}" for p, _ in found)
            raise UsageError(
                f"run id {run_id!r} exists in several projects ({names}): pass project="
            )
        return self.load(*found[0], keep=True)
