"""Upload pacing: a loaded server asks its uploaders to post less often, and they do.

The controller is checked on a clock the test moves (its rules are arithmetic); the whole
loop with a real ``rankwise server`` and real rank processes: under pressure the ranks
post a fraction as often, every row still lands exactly once, and the end of the run
drains without waiting out the interval.
"""

from __future__ import annotations

import itertools
import math
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import rankwise
from rankwise._http import MAX_ADVISED_INTERVAL, advised_interval
from rankwise.server.pacing import (
    BUSY_TARGET,
    CALM_WINDOWS,
    FIRST_CAPACITY,
    FLOOR,
    MIN_ADMITTED,
    MIN_SHRINK,
    REFUSED_FLOOR,
    SHRINK,
    Pacer,
)
from tests.helpers.runs import assert_same_history, launch_ranks, wait_all
from tests.helpers.servers import ServerProcess


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _second(pacer: Pacer, clock: Clock, *times: float) -> None:
    """One window: these ingest times observed, then the clock moves on a second."""
    for t in times:
        pacer.observe(t)
    clock.now += 1.0
    pacer.header()  # the next reply closes the window


def test_no_advice_while_uploads_are_quick() -> None:
    clock = Clock()
    pacer = Pacer(max_interval=10.0, target=0.5, clock=clock)
    for _ in range(20):
        _second(pacer, clock, *[0.01] * 50)
    assert pacer.interval == 0.0 and pacer.header() is None


def _until_heard(pacer: Pacer, clock: Clock, *times: float) -> None:
    """Seconds of these ingest times until the interval has held for a whole interval."""
    for _ in range(max(1, math.ceil(pacer.interval))):
        _second(pacer, clock, *times)


def test_the_interval_grows_with_pressure_up_to_the_cap() -> None:
    clock = Clock()
    pacer = Pacer(max_interval=10.0, target=0.5, clock=clock)
    _second(pacer, clock, *[0.75] * 20)  # 1.5x the target: from the floor, 1.5x
    assert pacer.interval == pytest.approx(FLOOR * 1.5)
    assert pacer.header() == "1.5"
    _until_heard(pacer, clock, *[5.0] * 20)  # 10x the target: at most doubled at once
    assert pacer.interval == pytest.approx(3.0)
    for _ in range(5):
        _until_heard(pacer, clock, *[5.0] * 20)
    assert pacer.interval == 10.0  # never past max_interval


def test_it_grows_at_most_once_per_interval() -> None:
    """Slow seconds right after the interval grew are uploaders that have not posted
    since, so have not heard it: growing again on them overshoots. A start's flood of
    first uploads is slow for two or three seconds; it used to take the interval from
    2 s to 8 s, and every uploader then waited 8 s after the flood had passed."""
    clock = Clock()
    pacer = Pacer(max_interval=10.0, target=0.5, clock=clock)
    _second(pacer, clock, *[2.0] * 20)
    assert pacer.interval == pytest.approx(2.0)
    _second(pacer, clock, *[2.0] * 20)  # one second into a 2 s interval: not heard yet
    assert pacer.interval == pytest.approx(2.0)
    _second(pacer, clock, *[2.0] * 20)  # every uploader has posted since: still slow
    assert pacer.interval == pytest.approx(4.0)


def test_a_refusal_raises_it_at_once_and_counts_as_a_change() -> None:
    clock = Clock()
    pacer = Pacer(max_interval=10.0, target=0.5, clock=clock)
    pacer.refused()
    assert pacer.interval == REFUSED_FLOOR
    _second(pacer, clock, *[2.0] * 20)  # the refused have not come back yet
    assert pacer.interval == REFUSED_FLOOR
    _second(pacer, clock, *[2.0] * 20)
    assert pacer.interval == pytest.approx(2 * REFUSED_FLOOR)


def test_the_p90_is_what_counts_not_one_slow_request() -> None:
    clock = Clock()
    pacer = Pacer(max_interval=10.0, target=0.5, clock=clock)
    _second(pacer, clock, *([0.01] * 95 + [30.0] * 5))
    assert pacer.interval == 0.0
    _second(pacer, clock, *([0.01] * 80 + [2.0] * 20))
    assert pacer.interval == pytest.approx(2.0)


def test_event_loop_lag_counts_as_pressure() -> None:
    clock = Clock()
    pacer = Pacer(max_interval=10.0, target=0.5, clock=clock)
    pacer.observe_lag(1.0)
    clock.now += 1.0
    pacer.header()
    assert pacer.interval == pytest.approx(2.0)


def _slowed_to_the_cap(pacer: Pacer, clock: Clock) -> None:
    """Slow seconds until the interval reaches the cap (it has just changed)."""
    for _ in range(30):
        _second(pacer, clock, 5.0)
        if pacer.interval == 10.0:
            return
    raise AssertionError(f"never reached the cap: {pacer.interval}")


def test_it_shrinks_only_after_calm_and_then_stops() -> None:
    clock = Clock()
    pacer = Pacer(max_interval=10.0, target=0.5, clock=clock)
    _slowed_to_the_cap(pacer, clock)
    for _ in range(10):  # a whole interval, calm only in runs shorter than CALM_WINDOWS
        for _ in range(CALM_WINDOWS - 1):
            _second(pacer, clock, 0.01)
        _second(pacer, clock, 0.3)  # between a third of the target and the target: holds
    assert pacer.interval == 10.0
    seen = []
    for _ in range(60):
        _second(pacer, clock, 0.01)
        seen.append(pacer.interval)
    shrinking = [b for a, b in itertools.pairwise(seen) if 0 < b < a]
    assert shrinking
    assert all(b >= MIN_SHRINK * a - 1e-9 for a, b in itertools.pairwise(seen) if b > 0)
    assert seen[-1] == 0.0 and pacer.header() is None  # under the floor: no advice at all


def test_it_shrinks_at_most_once_per_interval() -> None:
    """Uploaders hear of a new interval only at their next post: calm seconds within
    one interval of the last change may be ranks still waiting out the longer one, so
    the interval holds until a whole interval has passed since it changed."""
    clock = Clock()
    pacer = Pacer(max_interval=10.0, target=0.5, clock=clock)
    changes = [(clock.now, 0.0)]  # (when the interval changed, to what)
    for pressure in [5.0] * 20 + [0.01] * 40:
        _second(pacer, clock, pressure)
        if pacer.interval != changes[-1][1]:
            changes.append((clock.now, pacer.interval))
    assert [b for _, b in changes[1:]] == pytest.approx([2.0, 4.0, 8.0, 10.0, 5.0, 2.5, 1.25, 0])
    for (t0, held), (t1, _) in itertools.pairwise(changes):
        assert t1 - t0 >= held - 1e-9, f"{held} s held for only {t1 - t0} s: {changes}"


@pytest.mark.parametrize(
    ("busy", "factor"),
    [(0.0, MIN_SHRINK), (0.1, MIN_SHRINK), (0.3, 0.6), (0.45, SHRINK), (0.9, SHRINK)],
)
def test_how_far_it_shrinks_follows_how_busy_the_group_commit_was(
    busy: float, factor: float
) -> None:
    """Twice as many uploads cost the committer at most twice as much: one busy under
    a quarter of the time halves the interval, a busier one shrinks it to what would
    make it BUSY_TARGET busy, and never by less than SHRINK."""
    clock = Clock()
    pacer = Pacer(max_interval=10.0, target=0.5, clock=clock)
    _slowed_to_the_cap(pacer, clock)
    while pacer.interval == 10.0:
        pacer.busy(busy)  # the store's seconds in this second
        _second(pacer, clock, 0.01)
    assert pacer.interval == pytest.approx(10.0 * factor)
    assert factor == pytest.approx(min(SHRINK, max(MIN_SHRINK, busy / BUSY_TARGET)))


def test_the_group_commit_reports_its_store_time(tmp_path: Path) -> None:
    from rankwise.server.group_commit import GroupCommit
    from rankwise.store import open_store
    from rankwise.stream.identity import StreamId
    from tests.helpers.streams import records

    store = open_store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    store.migrate()
    spent: list[float] = []
    try:
        commit = GroupCommit(store, on_busy=spent.append)
        t0 = time.monotonic()
        commit.ingest(StreamId("p", "r", "rank-0", 0), list(records(steps=5)))
        took = time.monotonic() - t0
    finally:
        store.close()
    assert len(spent) == 1 and 0 < spent[0] <= took


def test_admission_follows_what_the_process_has_shown_it_can_finish() -> None:
    """Little's law: with ``capacity`` uploads finished a second, ``inflight`` uploads in
    progress take ``inflight / capacity`` seconds; past the budget a new one is refused."""
    clock = Clock()
    pacer = Pacer(max_interval=10.0, target=0.5, clock=clock)
    assert pacer.capacity == FIRST_CAPACITY  # before any window: a cautious guess
    assert pacer.admits(int(FIRST_CAPACITY) - 1, 1.0)
    assert not pacer.admits(int(FIRST_CAPACITY), 1.0)
    _second(pacer, clock, *[0.01] * 300)  # 300 finished in a second
    assert pacer.capacity == pytest.approx(300.0)
    assert pacer.admits(299, 1.0) and not pacer.admits(300, 1.0)
    assert pacer.admits(100, 0.5) and not pacer.admits(160, 0.5)
    for _ in range(10):  # quiet seconds do not make a busy server look slow at once
        _second(pacer, clock, 0.01)
    assert 0.99**10 * 300 - 1 < pacer.capacity <= 300.0
    for _ in range(3600):  # nor does a quiet hour make a burst look like overload
        _second(pacer, clock)
    assert pacer.capacity == FIRST_CAPACITY
    assert pacer.admits(MIN_ADMITTED - 1, 0.0)  # a few are always let in


def test_max_interval_zero_never_advises() -> None:
    clock = Clock()
    pacer = Pacer(max_interval=0.0, target=0.5, clock=clock)
    for _ in range(5):
        _second(pacer, clock, *[10.0] * 10)
    assert pacer.header() is None and not pacer.enabled


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("2.5", 2.5), (" 3 ", 3.0), (None, 0.0), ("", 0.0), ("soon", 0.0), ("-1", 0.0),
     ("nan", 0.0), ("0", 0.0), ("1e9", MAX_ADVISED_INTERVAL), ("inf", MAX_ADVISED_INTERVAL)],
)  # fmt: skip
def test_the_uploader_reads_the_advice_defensively(value: str | None, seconds: float) -> None:
    assert advised_interval(value) == seconds


_POST = re.compile(r'"POST /api/v1/ingest\?[^"]*label=rank-0[^"]*" 200')


def _ingest_posts(tmp_path: Path, name: str, *server_args: str) -> tuple[int, float]:
    """Two ranks logging 100 steps 50 ms apart with a 50 ms upload interval against a
    server run with ``server_args``: rank 0's accepted ingest POSTs and the job's time."""
    data = tmp_path / name / "data"
    data.mkdir(parents=True)
    db = f"sqlite:///{tmp_path / name / 'server.db'}"
    log = tmp_path / name / "server.log"
    args = ("--log-level", "debug", *server_args)  # debug: uvicorn's access log
    with ServerProcess.db(db, log, *args) as server:
        t0 = time.monotonic()
        procs = launch_ranks(
            data, "paced", 2, "--steps", "100", "--sleep", "0.05", server=server.url,
            RANKWISE_UPLOAD_INTERVAL="0.05", RANKWISE_UPLOAD_TIMEOUT="60",
        )  # fmt: skip
        outs = wait_all(procs, timeout=120)
        took = time.monotonic() - t0
        assert all("not uploaded" not in err for _, err in outs), outs
        local = rankwise.Api(dir=data).run("paced")
        remote = rankwise.Api(server=server.url, token=server.token).run("paced")
        assert_same_history(local, remote, db)  # every row exactly once, paced or not
        assert len(remote.history()) == 2 * 100 * 2
    return len(_POST.findall(log.read_text())), took


@pytest.mark.slow
def test_a_loaded_server_spaces_the_uploads_and_loses_nothing(tmp_path: Path) -> None:
    """The pace target is set so low that every upload counts as pressure: the server
    asks for a 2 s interval from its first second on. Rank 0 then posts a fraction as
    often as against the same server not pacing, and the job is not held up by it."""
    free, free_took = _ingest_posts(tmp_path, "free", "--max-upload-interval", "0")
    paced, paced_took = _ingest_posts(
        tmp_path, "paced", "--pace-target", "0.000001", "--max-upload-interval", "2"
    )
    assert free >= 30, f"only {free} posts unpaced: the workload did not post often"
    # ~1 s unpaced before the first advice, then one post per ~2 s, then the drain.
    assert paced <= free // 2, (paced, free)
    # The drain at the end ignores the interval: no run waits ~2 s more for its last post.
    assert paced_took < free_took + 10, (paced_took, free_took)


@contextmanager
def _paced_long(
    tmp_path: Path, run_id: str, at_least: float = 8.0
) -> Iterator[tuple[Any, str, int]]:
    """A run uploading to a server that asks every uploader for up to 30 s between posts,
    logging a step every 20 ms until its uploader has just been told >= ``at_least`` s
    (it now sleeps >= 0.8 times that): the run, the server's URL and the next step."""
    from rankwise.sdk.uploader import Uploader
    from rankwise.server import ServerSettings, create_app
    from rankwise.store import open_store
    from tests.helpers.servers import serve_in_thread
    from tests.helpers.wait import wait_until

    store = open_store(f"sqlite:///{tmp_path / 'server.db'}")
    store.migrate()
    settings = ServerSettings(pace_target=1e-6, max_upload_interval=30.0)
    fast = {"flush_interval": 0.02, "upload_interval": 0.05, "upload_timeout": 20}
    try:
        with serve_in_thread(create_app(store, settings)) as url:
            run = rankwise.init(project="p", id=run_id, server=url, settings=fast)
            uploader = next(c for c, _ in run._components if isinstance(c, Uploader))
            step = 0

            def paced_long() -> bool:
                nonlocal step
                run.log({"x": float(step)}, step=step)
                step += 1
                upload = uploader._upload
                return upload is not None and upload.advised >= at_least

            wait_until(paced_long, timeout=30, every=0.02)
            try:
                yield run, url, step
            finally:
                run.finish()
    finally:
        store.close()


@pytest.mark.slow
def test_the_end_of_a_run_does_not_wait_out_the_interval(data_dir: Path, tmp_path: Path) -> None:
    """Once the uploader has been asked for a long interval (here >= 8 s) it sleeps that
    long between posts; ``finish()`` then cuts the sleep and drains at once."""
    with _paced_long(tmp_path, "drain") as (run, url, step):
        run.log({"x": float(step)}, step=step)
        t0 = time.monotonic()
        run.finish()
        took = time.monotonic() - t0
        remote = rankwise.Api(server=url).run("drain", project="p")
        assert [r["x"] for r in remote.history()] == [float(i) for i in range(step + 1)]
    # Typically well under a second; the paced sleep it cut was >= 6.4 s.
    assert took < 5.0, f"finish() took {took:.1f}s: it waited out the paced interval"


@pytest.mark.parametrize("pacing", [True, False])
def test_uploads_past_the_backlog_budget_are_refused_at_once(tmp_path: Path, pacing: bool) -> None:
    """With the group commit already holding more work than two pace targets allow (the
    store's writer held for a second), a new upload gets 429 at once (``Retry-After``,
    nothing applied) instead of joining a wait that grows; every upload sent again until
    accepted lands exactly once. With pacing off the same burst is only bounded by
    ``--max-inflight``."""
    import asyncio
    import os

    import httpx

    from rankwise.server import ServerSettings, create_app
    from rankwise.store import open_store
    from tests.helpers.servers import serve_in_thread
    from tests.helpers.streams import body, records

    store = open_store(f"sqlite:///{tmp_path / 'server.db'}")
    store.migrate()
    # A target so small that one upload waiting is already over the budget.
    settings = ServerSettings(pace_target=1e-6, max_upload_interval=10.0 if pacing else 0.0)
    labels = [f"rank-{i}" for i in range(16)]
    bodies = {lb: body(records(lb, steps=200, run="burst")) for lb in labels}

    async def burst(url: str) -> dict[str, list[int]]:
        token = os.environ["RANKWISE_TOKEN"]
        seen: dict[str, list[int]] = {lb: [] for lb in labels}
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:

            async def send(label: str) -> None:
                params = {"project": "p", "run": "burst", "label": label, "incarnation": "0"}
                headers = {"Authorization": f"Bearer {token}",
                           "Content-Type": "application/x-rankwise-stream"}  # fmt: skip
                while True:
                    r = await client.post(
                        "/api/v1/ingest", params=params, content=bodies[label], headers=headers
                    )
                    seen[label].append(r.status_code)
                    if r.status_code != 429:
                        return
                    assert int(r.headers["retry-after"]) >= 1
                    await asyncio.sleep(0.05)

            await asyncio.gather(*(send(lb) for lb in labels))
        return seen

    import threading

    release = threading.Event()
    try:
        with serve_in_thread(create_app(store, settings)) as url:
            # The store's writer is held (as by a slow disk) while the burst arrives, so
            # the first upload is still waiting when the others come.
            held = threading.Thread(target=lambda: store._write(lambda tx: release.wait(30)))  # type: ignore[attr-defined]
            held.start()
            threading.Timer(1.0, release.set).start()
            seen = asyncio.run(burst(url))
            held.join(30)
            run = rankwise.Api(server=url).run("burst", project="p")
            rows = run.history()
    finally:
        release.set()
        store.close()
    assert all(codes[-1] == 200 for codes in seen.values()), seen
    refused = sum(codes.count(429) for codes in seen.values())
    assert (refused > 0) == pacing, seen
    assert len(rows) == 16 * 200  # every row once, refused or not


def test_a_stall_is_sent_at_once_past_the_pacing(data_dir: Path, tmp_path: Path) -> None:
    """While the server asks for >= 16 s between posts, a record the watchdog marks
    urgent (a stall) still reaches the server at once, not after the paced sleep
    (>= 12.8 s): within a second or two, 10 s allowed for a loaded machine."""
    from tests.helpers.wait import wait_until

    with _paced_long(tmp_path, "urgent", at_least=16.0) as (run, url, last):
        run.log({"x": float(last)}, step=last)
        handle = run.handle()
        assert handle is not None
        handle.urgent()
        api = rankwise.Api(server=url)

        def landed() -> bool:
            rows = api.run("urgent", project="p").history()
            return bool(rows) and rows[-1]["step"] == last

        t0 = time.monotonic()
        wait_until(landed, timeout=10, every=0.1)
        took = time.monotonic() - t0
    assert took < 10.0, took  # typically under a second; the paced sleep is >= 12.8 s


def test_admission_is_one_object_over_the_pacer() -> None:
    """``Admission.admit(inflight, backlog)``: None to take the upload, else the 429 to
    answer, whose Retry-After is at least the pace it now asks of everyone; bodies still
    arriving hold receiving slots, per sender and in all, never admission slots."""
    from rankwise.server.pacing import ADMIT_WAIT, REFUSED_FLOOR, Admission

    clock = itertools.count(0.0, 0.001)  # no window ever closes during the test
    pacer = Pacer(max_interval=10.0, target=0.5, clock=lambda: next(clock))
    admission = Admission(pacer, max_inflight=16, retry_after=1)
    assert admission.admit(0, 0.0) is None
    assert admission.admit(MIN_ADMITTED - 1, ADMIT_WAIT * pacer.target) is None
    behind = admission.admit(1, ADMIT_WAIT * pacer.target + 0.01)  # the group commit's backlog
    assert behind is not None and behind.status == 429
    assert "behind (1 uploads in progress)" in behind.message
    assert pacer.interval == REFUSED_FLOOR and behind.retry_after == REFUSED_FLOOR
    full = admission.admit(16, 0.0)
    assert full is not None and "--max-inflight 16" in full.message

    for _ in range(16):
        assert admission.receive("t:1") is None
    mine = admission.receive("t:1")
    assert mine is not None and mine.status == 429 and mine.retry_after == 1
    assert admission.receive("t:2") is None  # another sender still gets a slot
    for _ in range(16):
        admission.received("t:1")
    admission.received("t:2")
    assert admission.receiving == {}

    off = Admission(Pacer(max_interval=0.0), max_inflight=0, retry_after=1)  # no caps at all
    assert off.admit(10_000, 1e9) is None
