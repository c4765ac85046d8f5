"""``run.watch``/``run.unwatch`` on CPU torch: hooks, keys, cadence, numbers, DDP names.

Every histogram is checked against ``np.histogram`` of the same values (edges and
counts exactly equal), on the CPU path and on the device path run on CPU tensors; the
device path also runs on ``meta`` tensors, which hold no data: any read back to the host
(``.item()``, ``bool(tensor)``) would raise there, so it proves the path never syncs.
"""

from __future__ import annotations

import math
import socket
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rankwise
from rankwise.sdk import tensor_stats as S
from rankwise.sdk import watch as W
from rankwise.stream import records as R
from rankwise.stream.files import read_whole_frames
from rankwise.stream.frames import MAGIC, iter_frames
from tests.helpers.env import need

torch = need("torch")
pytestmark = pytest.mark.torch


def stream_records(path: Path) -> list[R.AnyRecord]:
    found = read_whole_frames(path, len(MAGIC), 1 << 30)
    out: list[R.AnyRecord] = []
    for body, stop in iter_frames(found.data):
        out.extend(R.decode_payload(memoryview(found.data)[body:stop]))
    return out


def histograms(path: Path) -> dict[tuple[str, int], R.HistogramRec]:
    return {(r.key, r.step): r for r in stream_records(path) if isinstance(r, R.HistogramRec)}


def metrics(path: Path) -> list[R.Metrics]:
    return [r for r in stream_records(path) if isinstance(r, R.Metrics)]


def model() -> Any:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))


def hooks_on(m: Any) -> list[int]:
    return [len(p._backward_hooks or {}) for p in m.parameters()]


def step(m: Any, x: Any | None = None) -> None:
    m.zero_grad()
    m(torch.randn(4, 6) if x is None else x).pow(2).sum().backward()


@pytest.fixture
def run(tmp_path: Path) -> Any:
    r = rankwise.init(project="watch", dir=tmp_path)
    yield r
    r.finish()


def numpy_says(values: Any) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(values).ravel()
    return np.histogram(a[np.isfinite(a)], 64)


CASES = {
    "normal": lambda: torch.randn(10_000),
    "float64": lambda: torch.randn(3, 333, dtype=torch.float64) * 1e-3,
    "skewed": lambda: torch.rand(5000) ** 8 - 0.25,
    "non-finite": lambda: torch.tensor([1.0, math.nan, 2.0, math.inf, -math.inf, math.nan, 7.5]),
    "constant": lambda: torch.full((17,), 0.3),
    "all-nan": lambda: torch.full((5,), math.nan),
    "empty": lambda: torch.zeros(0),
    "half": lambda: torch.randn(999).half(),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("path", ["host", "device"])
def test_a_histogram_is_numpys_of_the_finite_values(case: str, path: str) -> None:
    torch.manual_seed(1)
    t = CASES[case]()
    fn = S.row_host if path == "host" else S.row_device
    x = t.reshape(-1) if t.dtype in (torch.float32, torch.float64) else t.reshape(-1).float()
    row = fn(x, True).numpy()
    counts, edges = numpy_says(x.numpy())
    assert row[: S.BINS].tolist() == counts.tolist()
    assert row[S.EDGES : S.EDGES + S.BINS + 1].tolist() == edges.tolist()
    a = x.numpy()
    assert row[S.NAN : S.NAN + 3].tolist() == [
        np.isnan(a).sum(),
        np.isposinf(a).sum(),
        np.isneginf(a).sum(),
    ]
    norm = float(np.sqrt(np.sum(a.astype(np.float64) ** 2))) if a.size else 0.0
    assert row[S.NORM] == pytest.approx(norm, rel=1e-5, nan_ok=True)
    # _row picks the path by device and upcasts half precision itself
    assert S.row(t, True).numpy()[: S.BINS].tolist() == counts.tolist()


def test_the_device_path_counts_alike_in_deterministic_mode() -> None:
    x = torch.cat([torch.randn(5000), torch.tensor([math.nan, math.inf])])
    plain = S.row_device(x, True)
    torch.use_deterministic_algorithms(True)
    try:
        strict = S.row_device(x, True)
        assert torch.allclose(strict, plain, rtol=0, atol=0, equal_nan=True)
    finally:
        torch.use_deterministic_algorithms(False)


def test_the_device_path_never_reads_a_value_back() -> None:
    # meta tensors have shapes and no data: any host read of a value would raise here
    row = S.row_device(torch.empty(1000, device="meta"), True)
    assert row.shape == (S.ROW,) and row.device.type == "meta"
    assert S.row_device(torch.empty(10, device="meta"), False).shape == (S.ROW,)


def test_hooks_keys_and_cadence(run: Any) -> None:
    m = model()
    run.watch(m, log="all", log_freq=3)
    assert hooks_on(m) == [1, 1, 1, 1]
    for i in range(7):
        step(m)
        run.log({"loss": float(i)})
    run.finish()
    names = ["0.weight", "0.bias", "2.weight", "2.bias"]
    hists = histograms(run.path)
    assert sorted({s for _, s in hists}) == [2, 5]  # the 3rd and 6th backward passes
    assert {k for k, _ in hists} == {
        f"{kind}/{n}" for kind in ("gradients", "parameters") for n in names
    }
    for h in hists.values():
        assert len(h.counts) == 64 and len(h.edges) == 65
    norms = [r for r in metrics(run.path) if "grad_norm/total" in r.values]
    assert [r.step for r in norms] == [2, 5]
    assert set(norms[0].values) == {f"grad_norm/{n}" for n in names} | {"grad_norm/total"}
    # the run's own steps are untouched: log() went on 0, 1, 2, ...
    losses = [r.step for r in metrics(run.path) if "loss" in r.values]
    assert losses == list(range(7))
    assert hooks_on(m) == [0, 0, 0, 0]  # the run's end removed them


def test_recorded_numbers_are_the_passes_own(run: Any) -> None:
    m = model()
    run.watch(m, log="all", log_freq=2)
    seen: dict[str, Any] = {}
    for i in range(2):
        step(m, torch.full((4, 6), 0.5 + i))
    for name, p in m.named_parameters():
        seen[name] = (p.grad.clone(), p.detach().clone())
    run.finish()
    hists = histograms(run.path)
    (norms,) = [r.values for r in metrics(run.path) if "grad_norm/total" in r.values]
    for name, (grad, value) in seen.items():
        for kind, t in (("gradients", grad), ("parameters", value)):
            counts, edges = numpy_says(t.numpy())
            h = hists[f"{kind}/{name}", 1]
            assert h.counts == counts.tolist() and h.edges == edges.tolist()
        assert norms[f"grad_norm/{name}"] == pytest.approx(float(grad.norm()), rel=1e-6)
    total = math.sqrt(sum(float(g.norm()) ** 2 for g, _ in seen.values()))
    assert norms["grad_norm/total"] == pytest.approx(total, rel=1e-6)


def test_log_choices(run: Any) -> None:
    grads, params, norms_only = model(), model(), model()
    run.watch(grads, log_freq=1)
    run.watch(params, log="parameters", log_freq=1)
    run.watch(norms_only, log=None, log_freq=1)
    for m in (grads, params, norms_only):
        step(m)
    run.finish()
    keys = {k for k, _ in histograms(run.path)}
    norm_keys = {k for r in metrics(run.path) for k in r.values}
    # W&B's prefixes for the second and third model: graph_<n>, no separator
    assert keys == {f"gradients/{n}" for n in ("0.weight", "0.bias", "2.weight", "2.bias")} | {
        f"parameters/graph_1{n}" for n in ("0.weight", "0.bias", "2.weight", "2.bias")
    }
    assert "grad_norm/total" in norm_keys and "grad_norm/graph_2total" in norm_keys
    assert not any(k.startswith("grad_norm/graph_1") for k in norm_keys)


def test_watch_twice_keeps_one_set_of_hooks_and_unwatch_removes_them(run: Any) -> None:
    a, b = model(), model()
    run.watch(a, log_freq=2)
    run.watch(a, log="all", log_freq=2)
    run.watch([a, b], log_freq=2)
    assert hooks_on(a) == [1, 1, 1, 1] and hooks_on(b) == [1, 1, 1, 1]
    step(a)
    run.unwatch(a)
    assert hooks_on(a) == [0, 0, 0, 0] and hooks_on(b) == [1, 1, 1, 1]
    step(a)  # no hooks: nothing recorded
    run.watch(a, log_freq=2)  # watched again: a fresh counter, its keys unchanged
    step(a)
    step(a)
    step(b)
    run.unwatch()
    assert hooks_on(a) == [0, 0, 0, 0] and hooks_on(b) == [0, 0, 0, 0]
    run.unwatch(b)  # not watched any more: a warning, no error
    run.finish()
    hists = histograms(run.path)
    assert {s for _, s in hists} == {1}
    assert {k for k, _ in hists} == {
        f"gradients/{n}" for n in ("0.weight", "0.bias", "2.weight", "2.bias")
    }


def test_bad_arguments_raise_at_the_call(run: Any) -> None:
    with pytest.raises(TypeError, match=r"torch\.nn\.Module"):
        run.watch("model")
    with pytest.raises(TypeError, match=r"torch\.nn\.Module"):
        run.watch([model(), 3])
    with pytest.raises(ValueError, match="'gradients', 'parameters', 'all' or None"):
        run.watch(model(), log="weights")
    for freq in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="log_freq"):
            run.watch(model(), log_freq=freq)
    with pytest.raises(ValueError, match="'primary' or 'all'"):
        run.watch(model(), ranks="some")
    with pytest.raises(TypeError, match=r"torch\.nn\.Module"):
        run.unwatch(object())
    run.finish()
    m = model()
    run.watch(m)  # after the run ended: a warning, no hooks
    assert hooks_on(m) == [0, 0, 0, 0]


def test_a_failure_inside_a_hook_never_reaches_training(
    run: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(t: Any, hist: bool) -> Any:
        raise RuntimeError("device lost")

    m = model()
    run.watch(m, log="all", log_freq=1)
    monkeypatch.setattr(S, "row", broken)
    for _ in range(3):
        step(m)  # no exception
    monkeypatch.undo()
    step(m)
    run.finish()
    err = capsys.readouterr().err
    assert err.count("run.watch could not record") == 1, err
    assert {s for _, s in histograms(run.path)} == {3}


def test_a_run_that_does_not_record_watches_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANKWISE_DISABLED", "1")
    r = rankwise.init(project="watch", dir=tmp_path)
    assert not r
    m = model()
    r.watch(m)
    assert hooks_on(m) == [0, 0, 0, 0]
    with pytest.raises(ValueError):
        r.watch(m, log="bad")  # a programming error shows on every rank alike
    r.finish()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_ddp_model_keeps_wandbs_module_prefix(run: Any, tmp_path: Path) -> None:
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1
    )
    try:
        inner = model()
        ddp = torch.nn.parallel.DistributedDataParallel(inner)
        run.watch(ddp, log="all", log_freq=1)
        run.watch(ddp.module, log="all", log_freq=1)  # the same model: no second set
        run.watch(ddp, log="all", log_freq=1)
        assert hooks_on(inner) == [1, 1, 1, 1]
        ddp(torch.randn(4, 6)).sum().backward()
        run.finish()
    finally:
        dist.destroy_process_group()
    keys = {k for k, _ in histograms(run.path)}
    assert "gradients/module.0.weight" in keys and "parameters/module.2.bias" in keys
    assert all(".module." not in k and "graph_" not in k for k in keys)


def test_a_non_finite_gradient_is_counted_and_its_norm_says_so(run: Any) -> None:
    m = torch.nn.Linear(3, 2)
    run.watch(m, log_freq=1)
    x = torch.tensor([[1.0, math.nan, 2.0]])
    m(x).sum().backward()  # weight's gradient row 0/1 column 1 is NaN, bias's is finite
    run.finish()
    h = histograms(run.path)["gradients/weight", 0]
    assert (h.nan, h.posinf, h.neginf, sum(h.counts)) == (2, 0, 0, 4)
    (norms,) = [r.values for r in metrics(run.path) if "grad_norm/total" in r.values]
    assert math.isnan(norms["grad_norm/weight"]) and math.isnan(norms["grad_norm/total"])
    assert norms["grad_norm/bias"] == pytest.approx(math.sqrt(2))


def test_a_model_dropped_without_unwatch_is_not_kept_alive(run: Any) -> None:
    import gc
    import weakref

    m = model()
    run.watch(m, log="all")
    gone = weakref.ref(m)
    weights = weakref.ref(m[0].weight)
    del m
    gc.collect()
    assert gone() is None and weights() is None
    run.watch(model())  # forgets the dead entry
    assert len(run.handle(any_rank=True).slots[W.WATCHER]._models) == 1
