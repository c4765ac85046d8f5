"""``fold_run``: a run's derived fields from its streams, for the files and the store alike.

The local reader (one ``StreamFold`` per stream file) and the store (one row per stream,
its fold kept at ingest) each reduce a stream to ``StreamFacts``; everything a run says
beyond that — its state and crashed ranks, name and tags (the primary's start record),
created/updated/steps, its own ranks and nodes, the first failure, the hang report, the
first non-finite values, merged config and summary, each rank's summary, the metric
definitions — is computed here, once. A stream's state depends on *now*, so it is
settled at read time (``rankwise.stream.fold.stream_state``), and on its siblings: a
running stream that a sibling's ``Finish`` names in ``peers_gone`` (its process seen dead
on its host) is crashed, so a server or another host knows what only that host could see.

Precedence when streams disagree: primary last, latest incarnation last, so their start
record, config and summary win.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from ..divergence import StreamNonFinite, divergence, first_nonfinite
from ..failures import Failure, StreamEnd, first_failure
from ..hang import HangReport, RankPosition, hang_report
from ..stream import records as R
from ..stream.fold import (
    FirstNonFinite,
    LocalPids,
    StreamFold,
    StreamState,
    run_state,
    stream_state,
)
from ..wire.runs import MetricDefinition, RunInfo, StreamInfo, Unsynced
from .code import code_of, nodes_of
from .summary import environment


@dataclass
class StreamFacts:
    """What a run is folded from, per stream (a file's fold or a store row)."""

    label: str
    incarnation: int
    start: R.StreamStart | None
    finish: R.Finish | None
    acked_seq: int
    first_time: float | None
    last_time: float | None
    last_step: int
    points: int
    dropped: int
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)  # last values + user-set
    damage: str | None = None
    path: str = ""
    metric_defs: dict[str, R.DefineMetric] = field(default_factory=dict)
    stall: R.Stall | None = None  # the open stall, with stacks and flight-recorder entries
    # Per metric, the stream's first non-finite value (StreamFold.first_nonfinite).
    first_nonfinite: dict[str, FirstNonFinite] = field(default_factory=dict)
    # What ran, by scope (StreamFold.provenance).
    provenance: dict[str, R.Provenance] = field(default_factory=dict)

    @classmethod
    def of(cls, label: str, incarnation: int, fold: StreamFold, **where: Any) -> StreamFacts:
        """A stream file's facts from its fold (``where``: ``damage``, ``path``)."""
        return cls(
            label=label,
            incarnation=incarnation,
            start=fold.start,
            finish=fold.finish,
            acked_seq=fold.last_seq,
            first_time=fold.first_time,
            last_time=fold.last_time,
            last_step=fold.last_step,
            points=fold.points,
            dropped=fold.dropped,
            config=fold.config,
            summary=fold.summary,
            metric_defs=fold.metric_defs,
            stall=fold.stall,
            first_nonfinite=fold.first_nonfinite,
            provenance=fold.provenance,
            **where,
        )

    @property
    def is_primary(self) -> bool:
        return bool(self.start.is_primary) if self.start is not None else False


def stream_info(s: StreamFacts, state: str) -> StreamInfo:
    start, fin = s.start, s.finish
    return StreamInfo(
        label=s.label,
        incarnation=s.incarnation,
        rank=start.rank if start else -1,
        local_rank=start.local_rank if start else -1,
        node=start.node_rank if start else -1,
        host=start.host if start else "",
        pid=start.pid if start else 0,
        is_primary=s.is_primary,
        state=state,
        last_step=s.last_step,
        points=s.points,
        dropped=s.dropped,
        started=start.time if start else s.first_time,
        last_seen=s.last_time,
        exit_code=fin.exit_code if fin else None,
        signal=fin.signal if fin else None,
        error_type=fin.error_type if fin else None,
        error_message=fin.error_message if fin else None,
        traceback=fin.traceback if fin else None,
        acked_seq=s.acked_seq,
        damage=s.damage,
        path=s.path,
        data_dir=start.data_dir if start else "",
    )


# The label of a stream that a rank's child process wrote with the rank's run object (an
# ``mp.Process`` it passed the run to): ``<rank's label>-child-<pid>`` (rankwise.wandb).
_CHILD = re.compile(r"(.+)-child-\d+")


def ranks_of(streams: Sequence[StreamInfo]) -> set[str]:
    """The ranks (labels) of ``streams``: a child process's stream is its rank's."""
    out: set[str] = set()
    for s in streams:
        child = _CHILD.fullmatch(s.label)
        out.add(child.group(1) if child else s.label)
    return out


def _reported_gone(facts: Sequence[StreamFacts], states: list[str]) -> list[str]:
    """A running stream that a sibling saw dead (``Finish.peers_gone``: same host, pid
    gone) is crashed, wherever it is read: the latest incarnation of that label, when
    it was silent since the report (a later incarnation is not the one seen dead)."""
    gone: dict[str, float] = {}
    for s in facts:
        if s.finish is not None:
            for label in s.finish.peers_gone:
                gone[label] = max(gone.get(label, s.finish.time), s.finish.time)
    if not gone:
        return states
    latest = {s.label: s.incarnation for s in facts}  # facts are sorted by incarnation
    return [
        "crashed"
        if state == "running"
        and s.label in gone
        and s.incarnation == latest[s.label]
        and (s.last_time is None or s.last_time <= gone[s.label])
        else state
        for s, state in zip(facts, states)
    ]


def fold_run(
    project: str,
    run_id: str,
    facts: Sequence[StreamFacts],
    crash_timeout: float,
    now: float,
    with_rank_summaries: bool = True,
    local_pids: LocalPids = False,
) -> RunInfo:
    """The run of ``facts`` (one per stream file), every state settled for ``now``."""
    facts = sorted(facts, key=lambda s: (s.label, s.incarnation))
    streams = _settled_streams(facts, crash_timeout, now, local_pids)
    state, crashed = run_state(
        StreamState(s.label, s.incarnation, s.is_primary, s.state) for s in streams
    )
    ordered = sorted(facts, key=lambda s: (s.is_primary, s.incarnation, s.label))
    starts = [s.start for s in ordered if s.start is not None]
    primary = starts[-1] if starts else None
    config, summary = _merged_config_summary(ordered)
    created, updated = _time_span(streams)
    # a later incarnation of a label wins over an earlier one
    ranks = _rank_summaries(facts) if with_rank_summaries else None
    own_ranks = ranks_of(streams)
    nonfinite = first_nonfinite(
        StreamNonFinite(s.label, info.rank, s.first_nonfinite)
        for s, info in zip(facts, streams)
        if s.first_nonfinite
    )
    return RunInfo(
        project=project,
        id=run_id,
        **_identity(primary, run_id, len(facts)),
        environment=environment(primary),
        state=state,
        crashed=crashed,
        # The run's own ranks and nodes; world_size and num_nodes are the job's.
        run_ranks=len(own_ranks),
        label=next(iter(own_ranks)) if len(own_ranks) == 1 else None,
        run_nodes=max(1, len({(s.node, s.host) for s in streams if s.rank >= 0 or s.host})),
        created=created,
        updated=updated,
        duration=max(0.0, updated - created)
        if created is not None and updated is not None
        else None,
        steps=max((s.last_step for s in streams), default=-1) + 1,
        n_streams=len(streams),
        config=config,
        summary=summary,
        first_failure=_first_failure(facts, streams),
        hang=_hang(facts, streams),
        first_nonfinite=nonfinite,
        divergence=divergence(nonfinite),
        unsynced_detail=None,  # the server's to say (``unsynced``)
        streams=streams,
        rank_summaries=ranks,
        code=code_of(ordered),
        nodes=nodes_of(facts),
        defined_metrics=_defined_metrics(ordered),
    )


def _settled_streams(
    facts: Sequence[StreamFacts], crash_timeout: float, now: float, local_pids: LocalPids
) -> list[StreamInfo]:
    """Each stream's info, its state settled for ``now`` (in the order of ``facts``)."""
    states = [
        stream_state(
            StreamFold(start=s.start, finish=s.finish, last_time=s.last_time),
            now,
            crash_timeout,
            local_pids,
        )
        for s in facts
    ]
    states = _reported_gone(facts, states)
    return [stream_info(s, st) for s, st in zip(facts, states)]


class _Identity(TypedDict):
    name: str
    group: str | None
    job_type: str | None
    tags: list[str]
    notes: str | None
    run_mode: str | None
    base_id: str | None
    world_size: int
    num_nodes: int


def _identity(primary: R.StreamStart | None, run_id: str, n_streams: int) -> _Identity:
    """The fields of ``RunInfo`` the primary's start record names (defaults without one)."""
    if primary is None:
        return {
            "name": run_id,
            "group": None,
            "job_type": None,
            "tags": [],
            "notes": None,
            "run_mode": None,
            "base_id": None,
            "world_size": n_streams,
            "num_nodes": 1,
        }
    return {
        "name": primary.name or run_id,
        "group": primary.group,
        "job_type": primary.job_type,
        "tags": list(primary.tags),
        "notes": primary.notes,
        "run_mode": primary.run_mode,
        "base_id": primary.base_id,
        "world_size": primary.world_size,
        "num_nodes": primary.num_nodes,
    }


def _merged_config_summary(
    ordered: Sequence[StreamFacts],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's config and summary: each stream's merged over the ones before it."""
    config: dict[str, Any] = {}
    summary: dict[str, Any] = {}
    for s in ordered:
        config.update(s.config)
        summary.update(s.summary)
    return config, summary


def _defined_metrics(ordered: Sequence[StreamFacts]) -> dict[str, MetricDefinition]:
    """``define_metric`` by name: the latest definition wins, the primary's on a tie."""
    defined: dict[str, R.DefineMetric] = {}
    for s in ordered:
        for name, rec in s.metric_defs.items():
            held = defined.get(name)
            if held is None or rec.time >= held.time:
                defined[name] = rec
    return {
        name: MetricDefinition(
            reduce=d.reduce,
            step_metric=d.step_metric,
            summary=d.summary,
            goal=d.goal,
            hidden=d.hidden,
        )
        for name, d in sorted(defined.items())
    }


def _time_span(streams: Sequence[StreamInfo]) -> tuple[float | None, float | None]:
    """(created, updated): the first stream's start and the last sign of life of any."""
    times = [s.started for s in streams if s.started is not None]
    seen = [s.last_seen for s in streams if s.last_seen is not None]
    return (min(times) if times else None), (max(seen) if seen else None)


def _rank_summaries(facts: Sequence[StreamFacts]) -> dict[str, dict[str, Any]]:
    """Each label's summary; ``facts`` by label and incarnation, so the latest wins."""
    ranks: dict[str, dict[str, Any]] = {}
    for s in facts:
        ranks.setdefault(s.label, {}).update(s.summary)
    return ranks


def _first_failure(facts: Sequence[StreamFacts], streams: Sequence[StreamInfo]) -> Failure | None:
    """The failure that came first of the streams that ended badly (``rankwise.failures``)."""
    return first_failure(
        StreamEnd(
            label=info.label,
            incarnation=info.incarnation,
            rank=info.rank,
            node=info.node,
            state=info.state,
            error_type=info.error_type,
            error_message=info.error_message,
            time=s.finish.time if s.finish is not None else info.last_seen,
            exit_code=info.exit_code,
            signal=info.signal,
        )
        for s, info in zip(facts, streams)
    )


def _hang(facts: Sequence[StreamFacts], streams: Sequence[StreamInfo]) -> HangReport | None:
    """The hang report of the latest incarnation of each label (``rankwise.hang``)."""
    latest: dict[str, tuple[StreamFacts, StreamInfo]] = {}
    for s, info in zip(facts, streams):  # sorted by label, incarnation: the latest wins
        latest[s.label] = (s, info)
    return hang_report(
        RankPosition(
            label=info.label,
            rank=info.rank,
            state=info.state,
            stall=s.stall,
            last_seen=info.last_seen,
        )
        for s, info in latest.values()
    )


def unsynced(run: RunInfo, server: str | None) -> Unsynced | None:
    """Crashed streams may hold records their process never uploaded (a surviving sibling
    uploads them when there is one, ``rankwise.sdk.orphans``): say where, and how to sync.
    ``server`` is this server's URL; None where the server reads the files itself. The
    command names the run's directory as the streams recorded it (``<data dir>`` for a
    stream written before rankwise recorded it)."""
    if not run.crashed or server is None:
        return None
    crashed = [s for s in run.streams if s.label in run.crashed]
    hosts = sorted({s.host for s in crashed if s.host})
    dirs = sorted({s.data_dir for s in crashed}) or [""]
    commands = [
        f"rankwise sync {shlex.quote(_run_dir(d, run)) if d else '<data dir>'} --server {server}"
        for d in dirs
    ]
    command = "; ".join(commands)
    return Unsynced(
        streams=list(run.crashed),
        hosts=hosts,
        command=command,
        message=(
            "crashed streams may hold records not yet uploaded; on "
            f"{', '.join(hosts) or 'their node'}, run: {command}"
        ),
    )


def _run_dir(data_dir: str, run: RunInfo) -> str:
    # The writer's path style, whatever the server's: a Windows path keeps its "\\".
    sep = "\\" if "\\" in data_dir and "/" not in data_dir else "/"
    return sep.join((data_dir.rstrip("/\\"), run.project, run.id))
