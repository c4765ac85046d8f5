"""The hang report: the roll call of a hung job — who waits where, and who went elsewhere.

Each rank's watchdog judges only itself (``rankwise.sdk.watchdog``): a hung job leaves
one open ``Stall`` per stuck rank, each with the training thread's position (``where``
and its stack) and, with PyTorch's flight recorder on, the last collectives the process
entered. ``hang_report`` reads them together, as ``failures.first_failure`` reads the
ends of streams:

* **Where each rank is.** The stalled ranks are grouped by their training thread's
  position (``where`` plus its stack). The largest group is where the job waits (a tie
  goes to the group with the lowest rank); the ranks in other groups are **the odd ones
  out**, named first. Ranks still logging (not stalled while others are) are odd ones out
  too, and ranks that ended (failed, crashed, killed, finished) are listed as such.
* **Which collective.** Per process group, each stalled rank's highest collective
  number (``collective_seq_id``, which every member counts alike) says how far it got.
  The highest number any rank reached is the collective the job waits in; the ranks
  whose last number is lower never entered it, and lead the odd ones out. This needs no
  torch at read time: the server and ``rankwise ui`` judge what the ranks recorded.
  Without flight-recorder entries the report stands on the stacks alone.

Only the latest incarnation of each stream counts; a run has a hang report while at
least one of them has an open stall and did not finish — also once the job was killed
(or failed in a collective's timeout) while hung, since that is when people read it.
Pure functions of per-stream facts: the local reader, ``rankwise ui`` and the server use
the same rule (``read.fold.fold_run``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .stream import records as R

ENDED = ("failed", "crashed", "killed", "finished")
# The per-process parts of a formatted stack line that differ between ranks that stand
# at the same place (none today; kept so that a thread id in a frame never splits them).
_NOISE = re.compile(r"0x[0-9a-f]+")


@dataclass(frozen=True)
class RankPosition:
    """What the report needs of one stream (the latest incarnation of one label)."""

    label: str
    rank: int
    state: str  # running, finished, failed, killed or crashed
    stall: R.Stall | None  # the open stall (StreamFold.stall), None when not stalled
    last_seen: float | None = None


@dataclass
class HangRank:
    """One rank in the report."""

    label: str
    rank: int
    where: str = ""  # the training thread's position, for a stalled rank
    state: str = "running"
    since: float | None = None  # when it stopped logging (stalled ranks)
    # Its last collective in the report's process group (-1: none recorded).
    last_seq: int = -1
    last_op: str = ""


@dataclass
class HangGroup:
    """Stalled ranks that stand at the same place."""

    where: str
    ranks: list[HangRank]
    stack: str = ""  # the training thread's stack, as the group's first rank recorded it


@dataclass
class HangCollective:
    """The collective the job waits in, from the flight recorder."""

    pg: str
    seq: int
    op: str
    detail: str  # "1 tensor of [4] float32"
    entered: list[int]  # the ranks that entered it
    missing: list[HangRank]  # the ranks that did not, with their last collective


@dataclass
class HangReport:
    """A hung job's roll call (module docstring). ``message`` is its first line."""

    time: float | None  # when the first rank stopped logging
    waiting: HangGroup | None  # where most stalled ranks stand
    elsewhere: list[HangGroup]  # the other positions: their ranks are odd ones out
    logging: list[HangRank]  # not stalled (still logging) while others are
    ended: list[HangRank]  # failed, crashed, killed or finished
    collective: HangCollective | None
    odd: list[str] = field(default_factory=list)  # labels of the odd ones out, first first
    message: str = ""
    lines: list[str] = field(default_factory=list)


def ranks_text(ranks: Sequence[int]) -> str:
    """ "rank 2" / "ranks 0, 2, 3" / "ranks 0–5, 7": runs of three or more as ranges."""
    got = sorted(set(ranks))
    if not got:
        return "no rank"
    parts: list[str] = []
    i = 0
    while i < len(got):
        j = i
        while j + 1 < len(got) and got[j + 1] == got[j] + 1:
            j += 1
        if j - i >= 2:
            parts.append(f"{got[i]}–{got[j]}")
        else:
            parts.extend(str(r) for r in got[i : j + 1])
        i = j + 1
    return ("rank " if len(got) == 1 else "ranks ") + ", ".join(parts)


def _key(stall: R.Stall) -> tuple[str, str]:
    return stall.where, _NOISE.sub("", stall.stacks.get(stall.thread, ""))


def _who(p: RankPosition) -> int:
    return p.rank if p.rank >= 0 else 10**9


def _op(name: str) -> str:
    """ "gloo:all_reduce" -> "all_reduce" (the backend prefix torch adds)."""
    return name.rsplit(":", 1)[-1] or name


def _detail(c: R.Collective) -> str:
    n = len(c.sizes)
    if not n:
        return ""
    shapes = ", ".join("[" + ", ".join(map(str, s)) + "]" for s in c.sizes[:3])
    more = ", …" if n > 3 else ""
    dtype = c.dtypes[0].lower() if c.dtypes and len(set(c.dtypes)) == 1 else ""
    return f"{n} tensor{'s' if n != 1 else ''} of {shapes}{more}{' ' + dtype if dtype else ''}"


def _collective(stalled: list[RankPosition]) -> HangCollective | None:
    """The collective the stalled ranks wait in, from their flight-recorder entries."""
    per_pg: dict[str, dict[str, R.Collective]] = {}  # pg -> label -> last entry
    for p in stalled:
        assert p.stall is not None
        for c in p.stall.flight:
            held = per_pg.setdefault(c.pg, {}).get(p.label)
            if held is None or c.seq >= held.seq:
                per_pg[c.pg][p.label] = c
    if not per_pg:
        return None
    ranks = {p.label: p for p in stalled}

    def spread(pg: str) -> tuple[int, int, str]:
        seqs = [c.seq for c in per_pg[pg].values()]
        # Prefer the group where ranks disagree, then the one most ranks are in.
        return (max(seqs) - min(seqs), len(seqs), pg)

    pg = max(per_pg, key=spread)
    last = per_pg[pg]
    top = max(c.seq for c in last.values())
    entry = next(c for c in last.values() if c.seq == top)
    entered = sorted(ranks[label].rank for label, c in last.items() if c.seq >= top)
    missing = [
        HangRank(
            label=p.label,
            rank=p.rank,
            where=p.stall.where if p.stall else "",
            state=p.state,
            last_seq=last[p.label].seq if p.label in last else -1,
            last_op=_op(last[p.label].op) if p.label in last else "",
        )
        for p in sorted(stalled, key=_who)
        if p.label not in last or last[p.label].seq < top
    ]
    return HangCollective(
        pg=pg, seq=top, op=_op(entry.op), detail=_detail(entry), entered=entered, missing=missing
    )


def _rank(p: RankPosition) -> HangRank:
    since = p.stall.time - p.stall.idle_seconds if p.stall is not None else None
    where = p.stall.where if p.stall is not None else ""
    return HangRank(label=p.label, rank=p.rank, where=where, state=p.state, since=since)


def _name(r: HangRank) -> str:
    return f"rank {r.rank}" if r.rank >= 0 else r.label


def hang_report(streams: Iterable[RankPosition]) -> HangReport | None:
    """The run's hang report (module docstring), or None when no rank is stalled."""
    current = sorted(streams, key=lambda p: (_who(p), p.label))
    # A stall stays open in a rank killed (or failed, by a collective's timeout) while
    # hung: the report outlives the job, which is when people read it.
    # A finished stream is not hung, whatever stall it left open: finish() may stop the
    # watchdog before it saw logging resume.
    stalled = [p for p in current if p.stall is not None and p.state != "finished"]
    if not stalled:
        return None
    groups: dict[tuple[str, str], list[RankPosition]] = {}
    for p in stalled:
        assert p.stall is not None
        groups.setdefault(_key(p.stall), []).append(p)
    built = [
        HangGroup(
            where=key[0],
            ranks=[_rank(p) for p in members],
            stack=members[0].stall.stacks.get(members[0].stall.thread, "")
            if members[0].stall
            else "",
        )
        for key, members in groups.items()
    ]
    # The largest group first; a tie goes to the group holding the lowest rank.
    built.sort(key=lambda g: (-len(g.ranks), min(r.rank for r in g.ranks)))
    waiting, elsewhere = built[0], built[1:]
    logging = [_rank(p) for p in current if p.stall is None and p.state == "running"]
    ended = [
        _rank(p) for p in current if p.state in ENDED and (p.stall is None or p.state == "finished")
    ]
    collective = _collective(stalled)
    odd: list[HangRank] = []
    if collective is not None:
        odd.extend(collective.missing)
        in_it = set(collective.entered)
        odd.extend(r for r in logging if r.rank not in in_it)
    # With a single position and no collective to tell, nobody stands out by place.
    if len(built) > 1 or collective is None or not odd:
        odd.extend(r for g in elsewhere for r in g.ranks)
        odd.extend(logging)
    seen: set[str] = set()
    odd = [r for r in odd if not (r.label in seen or seen.add(r.label))]  # type: ignore[func-returns-value]
    times = [r.since for g in built for r in g.ranks if r.since is not None]
    report = HangReport(
        time=min(times) if times else None,
        waiting=waiting,
        elsewhere=elsewhere,
        logging=logging,
        ended=ended,
        collective=collective,
        odd=[r.label for r in odd],
    )
    report.lines = _lines(report, odd)
    report.message = report.lines[0]
    return report


def _lines(report: HangReport, odd: list[HangRank]) -> list[str]:
    """The report in words, the odd ones out first."""
    lines: list[str] = []
    waiting = report.waiting
    assert waiting is not None
    c = report.collective
    logging = {r.label for r in report.logging}
    if odd:
        parts = []
        for r in odd:
            if r.label in logging:
                parts.append(f"{_name(r)} is still logging")
            elif r.where:
                parts.append(f"{_name(r)} is in {r.where}")
            else:
                parts.append(f"{_name(r)} stalled")
        one = len(odd) == 1
        lead = "; ".join(parts)
        lines.append(
            f"{lead} — {'it is the one' if one else 'they are the ones'} that went elsewhere"
        )
    else:
        lines.append(f"every stalled rank waits in {waiting.where or 'the same place'}")
    verb = "waits" if len(waiting.ranks) == 1 else "wait"
    lines.append(f"{ranks_text([r.rank for r in waiting.ranks])} {verb} in {waiting.where or '?'}")
    for g in report.elsewhere:
        lines.append(f"{ranks_text([r.rank for r in g.ranks])} in {g.where or '?'}")
    if c is not None:
        what = f"{c.op}, {c.detail}" if c.detail else c.op
        head = f"collective #{c.seq} ({what}) of process group {c.pg}: entered by "
        line = head + ranks_text(c.entered)
        for m in c.missing:
            last = f"#{m.last_seq} ({m.last_op})" if m.last_seq >= 0 else "none recorded"
            line += f"; {_name(m)}'s last is {last}"
        lines.append(line)
    if report.logging:
        lines.append(f"still logging: {ranks_text([r.rank for r in report.logging])}")
    for r in report.ended:
        lines.append(f"{_name(r)} {r.state}")
    return lines
