"""The uploader against a scripted server (httpx MockTransport): resume, retry, rewind.

The wire is swapped through the transport seam; the end-to-end tests
(``test_upload_e2e.py``) run the same code against a real uvicorn.
"""

from __future__ import annotations

import gzip
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

import rankwise
from rankwise.sdk.retry import GiveUp, backoff_delay
from rankwise.sdk.uploader import StreamUpload, Uploader
from rankwise.settings import Settings
from rankwise.stream import records as R
from rankwise.stream.frames import MAGIC, scan
from rankwise.stream.identity import StreamId
from tests.helpers.env import need
from tests.helpers.servers import free_port
from tests.helpers.streams import body, records

REF = StreamId("p", "r", "rank-0", 0)
FAST = Settings(upload_interval=0.01, upload_backoff_max=0.05, upload_timeout=5.0)


class ScriptedServer:
    """Speaks the ingest protocol; ``fail`` may answer a request instead (or raise)."""

    def __init__(self, mark: int = -1) -> None:
        self.mark = mark
        self.posted: list[list[int]] = []  # seqs of each accepted body
        self.encodings: list[str] = []
        self.refused = 0
        self.fail: Callable[[httpx.Request], httpx.Response | None] | None = None

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.fail is not None:
            answer = self.fail(request)
            if answer is not None:
                return answer
        if request.url.path == "/api/v1/ack":
            return httpx.Response(200, json={"acked_seq": self.mark})
        encoding = request.headers.get("content-encoding", "identity")
        self.encodings.append(encoding)
        data = request.content
        if encoding == "gzip":
            data = gzip.decompress(data)
        elif encoding == "zstd":
            import zstandard

            data = zstandard.ZstdDecompressor().decompress(data)
        seqs = [r.seq for r in scan(data).records]
        if seqs[0] > self.mark + 1:
            self.refused += 1
            error = {"status": 409, "message": "gap", "acked_seq": self.mark}
            return httpx.Response(409, json={"error": error})
        self.posted.append(seqs)
        self.mark = max(self.mark, seqs[-1])
        return httpx.Response(200, json={"acked_seq": self.mark})


def stream_file(tmp_path: Path, steps: int = 20, per_frame: int = 3) -> tuple[Path, int]:
    recs = records(steps=steps)
    path = tmp_path / "rank-0.0.rwlog"
    path.write_bytes(body(recs, per_frame=per_frame))
    return path, recs[-1].seq


def upload(path: Path, server: ScriptedServer, **kw: object) -> StreamUpload:
    client = httpx.Client(base_url="http://srv", transport=httpx.MockTransport(server))
    return StreamUpload(client, path, REF, **kw)


def drain(up: StreamUpload) -> None:
    while up.pump():
        pass


def test_resumes_after_the_servers_mark(tmp_path: Path) -> None:
    path, last = stream_file(tmp_path)
    server = ScriptedServer(mark=7)  # frames hold seqs 0-2, 3-5, 6-8, ...
    up = upload(path, server)
    drain(up)
    assert server.posted[0][0] == 6  # the frame holding mark + 1, not earlier
    assert server.mark == last and up.acked == last and up.pending_bytes() == 0
    assert not up.pump()  # nothing new: no request


def append(path: Path, recs: list[R.AnyRecord], per_frame: int = 3) -> None:
    with open(path, "ab") as f:
        f.write(body(recs, per_frame)[len(MAGIC) :])


def test_409_rewinds_to_the_mark(tmp_path: Path) -> None:
    recs = records(steps=25)
    path = tmp_path / "rank-0.0.rwlog"
    path.write_bytes(body(recs[:12]))
    server = ScriptedServer(mark=11)
    up = upload(path, server)
    up.resume()
    assert up.pending_bytes() == 0
    # The server lost data (restored from a backup): its mark went back to 4.
    server.mark = 4
    append(path, recs[12:])
    drain(up)
    assert server.refused == 1  # seq 12 onwards was refused with 409 and the mark ...
    assert server.posted[0][0] == 3  # ... so it was resent from the frame holding seq 5
    assert server.mark == recs[-1].seq


def test_413_halves_the_batch_and_one_huge_frame_gives_up(tmp_path: Path) -> None:
    path, last = stream_file(tmp_path, steps=3000, per_frame=50)
    server = ScriptedServer()
    limit = 60_000
    server.fail = lambda req: (
        httpx.Response(413, json={"error": {"status": 413, "message": "too big"}})
        if len(req.content) > limit
        else None
    )
    up = upload(path, server, max_batch=512 * 1024, encoding="identity")
    drain(up)
    assert server.mark == last and up.max_batch < limit
    flat = [s for seqs in server.posted for s in seqs]
    assert flat == list(range(last + 1))
    server.fail = lambda req: httpx.Response(413, json={"error": {"message": "too big"}})
    append(path, [R.Metrics(last + 1, 1.0, 1, {"x": 1.0})])
    with pytest.raises(GiveUp, match="max-body-mb"):
        drain(up)


def test_415_falls_back_to_gzip(tmp_path: Path) -> None:
    need("zstandard")
    path, last = stream_file(tmp_path)
    server = ScriptedServer()
    server.fail = lambda req: (
        httpx.Response(415, json={"error": {"message": "no zstd"}})
        if req.headers.get("content-encoding") == "zstd"
        else None
    )
    up = upload(path, server, encoding="zstd")
    from rankwise.sdk.retry import Retry

    with pytest.raises(Retry):
        up.pump()
    drain(up)
    assert server.mark == last and set(server.encodings) == {"gzip"}


def test_backoff_is_capped_and_jittered() -> None:
    delays = [backoff_delay(n, cap=2.0) for n in range(1, 40)]
    assert all(0 < d <= 2.0 for d in delays)
    assert delays[0] <= 0.25 and max(delays) > 0.9
    assert len({round(backoff_delay(5, cap=2.0), 6) for _ in range(20)}) > 1


def test_uploader_retries_through_an_outage(tmp_path: Path) -> None:
    path, last = stream_file(tmp_path)
    server = ScriptedServer()
    failures = iter([httpx.ConnectError("down"), httpx.ReadTimeout("slow"), 503, 502])

    def flaky(req: httpx.Request) -> httpx.Response | None:
        nxt = next(failures, None)
        if isinstance(nxt, Exception):
            raise nxt
        if nxt is not None:
            return httpx.Response(nxt, text="busy")
        return None

    server.fail = flaky
    up = Uploader("http://srv", path, REF, FAST, transport=httpx.MockTransport(server))
    up.start()
    up.stop(time.monotonic() + 10)
    assert up.drained and server.mark == last
    assert [s for seqs in server.posted for s in seqs] == list(range(last + 1))


def test_uploader_reports_what_is_left(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = stream_file(tmp_path)
    server = ScriptedServer()
    server.fail = lambda req: httpx.Response(503, text="down")
    settings = Settings(upload_interval=0.01, upload_backoff_max=0.05, upload_timeout=0.3)
    up = Uploader("http://srv", path, REF, settings, transport=httpx.MockTransport(server))
    up.start()
    t0 = time.monotonic()
    up.stop(time.monotonic() + 30)
    assert time.monotonic() - t0 < 10.0  # gave up after upload_timeout (0.3 s), not at 30 s
    assert not up.drained
    err = capsys.readouterr().err
    assert "rankwise sync" in err and str(path) in err and "503" in err


def test_uploader_gives_up_on_a_wrong_url(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = stream_file(tmp_path)
    server = ScriptedServer()
    server.fail = lambda req: httpx.Response(404, text="nothing here")
    up = Uploader("http://srv", path, REF, FAST, transport=httpx.MockTransport(server))
    up.start()
    up.stop(time.monotonic() + 5)
    err = capsys.readouterr().err
    assert "is it a rankwise server" in err and "rankwise sync" in err


def test_server_down_never_slows_log_and_finish_is_bounded(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    settings = {"flush_interval": 0.02, "upload_timeout": 0.5, "upload_backoff_max": 0.1}
    run = rankwise.init(project="p", server=url, settings=settings)
    t0 = time.perf_counter()
    for step in range(2000):
        run.log({"loss": 1.0 / (step + 1)})
    # A call that waited on the network even once would take upload_timeout (0.5 s); the
    # calls' cost is benchmarks/bench_log.py's (under a microsecond each).
    assert time.perf_counter() - t0 < 0.5
    t0 = time.monotonic()
    run.finish()
    assert time.monotonic() - t0 < 10.0  # bounded (upload_timeout 0.5 s + the last try)
    err = capsys.readouterr().err
    assert f"rankwise sync {run.dir}" in err and url in err
    assert len(rankwise.Api(dir=data_dir).run(run.id).history()) == 2000  # all kept locally


def test_bad_server_url_is_a_usage_error(data_dir: Path) -> None:
    with pytest.raises(rankwise.UsageError, match="http"):
        rankwise.init(project="p", server="ftp://x")
