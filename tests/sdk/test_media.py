"""Rich values (issue #9): each type through a real run and back through ``Api(dir=)``,
and bad input: the constructors refuse it with a message naming the fix, and inside
``run.log()`` a value that cannot be encoded is skipped with one warning, the rest kept."""

from __future__ import annotations

import io
import logging
import wave
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.env import need

np = need("numpy")
PIL_Image = need("PIL.Image")
pa = need("pyarrow")
pd = need("pandas")

import rankwise  # noqa: E402
from rankwise.errors import MediaError, UsageError  # noqa: E402
from rankwise.stream import records as R  # noqa: E402
from rankwise.stream.blobs import blob_path, digest_of  # noqa: E402

FAST = {"flush_interval": 0.05, "system": False, "console": "off"}


def start(tmp_path: Path, **settings: Any) -> rankwise.Run:
    return rankwise.init(project="m", dir=tmp_path, settings={**FAST, **settings})


def read_back(tmp_path: Path, run: rankwise.Run) -> rankwise.RunInfo:
    return rankwise.Api(dir=tmp_path).run(run.id)


def png_pixels(data: bytes) -> Any:
    with PIL_Image.open(io.BytesIO(data)) as im:
        assert im.format == "PNG"
        return np.asarray(im)


# -- images --------------------------------------------------------------------------


def test_image_arrays_round_trip_as_png(tmp_path: Path) -> None:
    rgb = (np.arange(20 * 30 * 3) % 256).astype(np.uint8).reshape(20, 30, 3)
    grey_float = np.linspace(0, 1, 28 * 28).reshape(1, 28, 28)  # a batch of one, CHW
    signed = np.linspace(-1, 1, 16).reshape(4, 4)
    mask = np.eye(5, dtype=bool)
    run = start(tmp_path)
    run.log(
        {
            "rgb": rankwise.Image(rgb, caption="rgb"),
            "chw": rankwise.Image(np.ascontiguousarray(rgb.transpose(2, 0, 1))),
            "grey": rankwise.Image(grey_float),
            "signed": rankwise.Image(signed),
            "mask": rankwise.Image(mask),
            "rgba": rankwise.Image(np.zeros((3, 3, 4), np.uint8) + 9),
            "loss": 0.5,
        },
        step=2,
    )
    run.finish()
    info = read_back(tmp_path, run)
    [item] = info.media("rgb")
    assert (item.step, item.label, item.kind, item.format) == (2, run.label, "image", "png")
    assert (item.width, item.height, item.caption) == (30, 20, "rgb")
    assert digest_of(item.read()) == item.digest and Path(item.path).exists()
    assert item.path == str(blob_path(tmp_path / "m" / run.id, item.digest))
    np.testing.assert_array_equal(png_pixels(item.read()), rgb)
    np.testing.assert_array_equal(png_pixels(info.media("chw")[0].read()), rgb)
    expect = np.clip(np.rint(grey_float[0] * 255), 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(png_pixels(info.media("grey")[0].read()), expect)
    expect = np.clip(np.rint((signed + 1) * 127.5), 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(png_pixels(info.media("signed")[0].read()), expect)
    np.testing.assert_array_equal(png_pixels(info.media("mask")[0].read()), mask * 255)
    assert png_pixels(info.media("rgba")[0].read()).shape == (3, 3, 4)
    [row] = info.history()
    assert (row["step"], row["loss"]) == (2, 0.5)


def test_image_of_normalised_data_spans_0_to_255(tmp_path: Path) -> None:
    """The MNIST tutorial logs ``(x - 0.1307) / 0.3081`` (about -0.42 .. 2.82): W&B's classic
    ``to_uint8`` stretches min..max to 0..255, so its digits show instead of a black square."""
    torch = need("torch")
    import rankwise.wandb as wandb

    digit = np.zeros((28, 28), np.float32)
    digit[6:22, 12:16] = 1.0  # a "1" on a black background, as ToTensor() gives it
    norm = (digit - 0.1307) / 0.3081
    rgb = np.stack([norm, norm * 0.5, -norm], axis=-1)  # HWC, below 0 and above 1
    cases = {
        "numpy grey": rankwise.Image(norm),
        "torch grey CHW": rankwise.Image(torch.from_numpy(norm).reshape(1, 28, 28)),
        "numpy RGB": rankwise.Image(rgb),
        "torch RGB CHW": rankwise.Image(torch.from_numpy(rgb).permute(2, 0, 1)),
        "wandb numpy": wandb.Image(norm),
        "wandb torch": wandb.Image(torch.from_numpy(norm).reshape(1, 1, 28, 28)),
        "wandb RGB": wandb.Image(torch.from_numpy(rgb).permute(2, 0, 1), caption="7"),
    }
    for name, image in cases.items():
        px = png_pixels(image.png()).astype(int)
        assert (px.min(), px.max()) == (0, 255), name
        if px.ndim == 2:  # the stroke white, the background black
            assert px[10, 13] == 255 and px[0, 0] == 0, name
        else:  # one min..max for all channels: red's stroke is the max, blue's the min
            assert px[10, 13, 0] == 255 and px[10, 13, 2] == 0, name
    # Integers and [0, 1] floats keep their meaning; a constant negative image is black.
    assert png_pixels(rankwise.Image(np.full((2, 2), 0.5)).png()).max() == 128
    assert png_pixels(rankwise.Image(np.full((2, 2), 300, np.int32)).png()).max() == 255
    assert png_pixels(rankwise.Image(np.full((2, 2), -3.0)).png()).max() == 0
    # ... and the tutorial's tensor round-trips through a run as the same pixels.
    run = start(tmp_path)
    run.log({"digit": wandb.Image(torch.from_numpy(norm).reshape(1, 28, 28))}, step=1)
    run.finish()
    stored = png_pixels(read_back(tmp_path, run).media("digit")[0].read())
    assert (int(stored.min()), int(stored.max())) == (0, 255)
    assert stored[10, 13] == 255


def test_image_from_torch_pil_and_files(tmp_path: Path) -> None:
    torch = need("torch")
    chw = torch.rand(3, 8, 6)
    pil = PIL_Image.fromarray(np.full((5, 7, 3), 200, np.uint8))
    png = tmp_path / "a.png"
    pil.save(png)
    jpeg = tmp_path / "b.jpg"
    pil.save(jpeg, "JPEG")
    run = start(tmp_path)
    run.log(
        {
            "torch": rankwise.Image(chw),
            "pil": rankwise.Image(pil),
            "png": rankwise.Image(png),
            "jpeg": rankwise.Image(str(jpeg)),
        }
    )
    # Scaled in float64, as ``Image`` does: in float32 a pixel a hair under x.5 can round
    # up (0.76666665 × 255 is 196 in float32, 195 in float64; about 1 run in 1,000 drew one).
    expect = np.rint(chw.numpy().astype(np.float64).transpose(1, 2, 0) * 255).astype(np.uint8)
    chw.zero_()  # the copy was taken at construction: this does not reach the log
    run.finish()
    info = read_back(tmp_path, run)
    np.testing.assert_array_equal(png_pixels(info.media("torch")[0].read()), expect)
    np.testing.assert_array_equal(png_pixels(info.media("pil")[0].read()), np.asarray(pil))
    assert info.media("png")[0].read() == png.read_bytes()  # a file's bytes, as they are
    jitem = info.media("jpeg")[0]
    assert jitem.read() == jpeg.read_bytes() and jitem.format == "jpeg"
    assert (jitem.width, jitem.height) == (7, 5)


def test_gallery_is_one_record_of_many_items_capped(tmp_path: Path, caplog: Any) -> None:
    images = [rankwise.Image(np.full((4, 4), i, np.uint8), caption=str(i)) for i in range(12)]
    run = start(tmp_path, max_gallery_items=10)
    with caplog.at_level(logging.WARNING, logger="rankwise"):
        run.log({"gallery": images}, step=0)
        run.log({"gallery": images[:3]}, step=1)
        run.finish()
    items = read_back(tmp_path, run).media("gallery")
    assert [(m.step, m.index) for m in items] == [(0, i) for i in range(10)] + [
        (1, i) for i in range(3)
    ]
    assert [m.caption for m in items[:10]] == [str(i) for i in range(10)]
    assert sum("keeps the first 10" in r.message for r in caplog.records) == 1


# -- tables ------------------------------------------------------------------------


def test_table_round_trip_parquet_and_image_cells(tmp_path: Path) -> None:
    imgs = [np.full((6, 6, 3), 40 * i, np.uint8) for i in range(3)]
    table = rankwise.Table(columns=["id", "image", "guess", "score", "ok", "scores", "note"])
    for i in range(3):
        table.add_data(i, rankwise.Image(imgs[i]), f"g{i}", i / 4, i % 2 == 0, [0.1, i], None)
    assert table.types == ["int", "image", "str", "float", "bool", "list", "null"]
    run = start(tmp_path)
    run.log({"predictions": table}, step=5)
    table.add_data(9, None, "late", 1.0, True, [], None)  # after log(): not in step 5
    run.finish()
    info = read_back(tmp_path, run)
    back = info.table("predictions")
    assert isinstance(back, rankwise.Table)
    assert back.columns == table.columns and back.types == table.types
    assert (back.step, back.label) == (5, run.label) and len(back.data) == 3
    assert [r[0] for r in back.data] == [0, 1, 2] and back.data[2][2] == "g2"
    assert back.data[1][5] == [0.1, 1.0] and back.data[0][6] is None
    for i, row in enumerate(back.data):
        np.testing.assert_array_equal(png_pixels(row[1].png()), imgs[i])
    df = back.get_dataframe()
    assert list(df.columns) == table.columns and df["score"].tolist() == [0.0, 0.25, 0.5]
    # The blob is a Parquet file anyone can open; image cells hold the PNG blobs' digests.
    [key] = [k for k in info.media_keys() if k.key == "predictions"]
    assert key.kind == "table" and key.steps == [5]
    run_dir = tmp_path / "m" / run.id
    from rankwise.stream.frames import scan

    records = scan(Path(info.streams[0].path).read_bytes()).records
    [rec] = [r for r in records if isinstance(r, R.TableRec)]
    assert (rec.nrows, rec.ncols, rec.types) == (3, 7, table.types)
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    parquet = pq.read_table(blob_path(run_dir, rec.digest))
    assert parquet.column("guess").to_pylist() == ["g0", "g1", "g2"]
    assert b"rankwise.types" in parquet.schema.metadata
    assert sorted(rec.blobs) == sorted(set(parquet.column("image").to_pylist()))
    assert set(rec.blob_digests()) == {rec.digest, *rec.blobs}
    assert pd.read_parquet(blob_path(run_dir, rec.digest))["id"].tolist() == [0, 1, 2]


def test_table_from_and_to_dataframe(tmp_path: Path) -> None:
    df = pd.DataFrame({"a": [1, 2], "b": ["x", "y"], "c": [0.5, np.nan]})
    table = rankwise.Table(dataframe=df)
    assert table.columns == ["a", "b", "c"] and table.types == ["int", "str", "float"]
    run = start(tmp_path)
    run.log({"t": table, "t2": rankwise.Table(data=[[1, "a"]], columns=["n", "s"])}, step=0)
    run.log({"t": rankwise.Table(dataframe=df.head(1))}, step=1)
    run.finish()
    info = read_back(tmp_path, run)
    out = info.table("t", step=0).get_dataframe()
    pd.testing.assert_frame_equal(out, df)
    assert len(info.table("t").data) == 1  # step=None: the latest
    assert info.table("t2").data == [[1, "a"]]
    with pytest.raises(KeyError):
        info.table("t", step=7)


def test_table_rules_match_wandb() -> None:
    t = rankwise.Table(columns=["a", "b"])
    with pytest.raises(MediaError, match="got 1 cells for 2 columns"):
        t.add_data(1)
    t.add_data(1, "x")
    t.add_data(2.5, None)  # an int column takes a float: the column becomes float
    assert t.types == ["float", "str"] and t.data[0][0] == 1.0
    with pytest.raises(MediaError, match="holds str cells, not int"):
        t.add_data(1.0, 3)
    with pytest.raises(MediaError, match="cell of type object"):
        t.add_data(1.0, object())
    with pytest.raises(MediaError, match="1000-column cap"):
        rankwise.Table(columns=[f"c{i}" for i in range(100_000)])
    with pytest.raises(MediaError, match="unique"):
        rankwise.Table(columns=["a", "a"])
    assert rankwise.Table().columns == ["Input", "Output", "Expected"]
    assert isinstance(MediaError("x"), UsageError)


# -- histograms, audio, video, text ---------------------------------------------------


def test_histogram_counts_equal_numpys_and_nonfinite_are_counted(tmp_path: Path) -> None:
    values = np.random.default_rng(0).normal(size=10_000)
    dirty = np.concatenate([values, [np.nan, np.nan, np.inf, -np.inf, -np.inf]])
    counts, edges = np.histogram(values, bins=32)
    run = start(tmp_path)
    run.log({"h": rankwise.Histogram(dirty, num_bins=32)}, step=0)
    run.log({"h": rankwise.Histogram(np_histogram=(counts, edges))}, step=1)
    run.log({"h": rankwise.Histogram([1, 2, 2, 3])}, step=2)
    run.finish()
    info = read_back(tmp_path, run)
    series = info.histograms("h", label=run.label)
    assert series.steps.tolist() == [0, 1, 2]
    assert series.counts.shape == (3, 64) and series.edges.shape == (3, 65)
    np.testing.assert_array_equal(series.counts[0, :32], counts)
    np.testing.assert_allclose(series.edges[0, :33], edges)
    assert np.isnan(series.counts[0, 32:]).all()  # padded to the widest
    np.testing.assert_array_equal(series.counts[1, :32], counts)
    assert (series.nan.tolist(), series.posinf.tolist(), series.neginf.tolist()) == (
        [2, 0, 0],
        [1, 0, 0],
        [2, 0, 0],
    )
    assert series.counts[2].sum() == 4
    assert list(info.histograms("h")) == [run.label]


def test_histogram_of_a_torch_tensor_and_limits() -> None:
    torch = need("torch")
    t = torch.arange(10, dtype=torch.float32)
    h = rankwise.Histogram(t, num_bins=5)
    t.zero_()
    counts, edges, *_ = h._encode_histogram()
    assert counts == [2.0] * 5 and edges[0] == 0.0 and edges[-1] == 9.0
    lazy = rankwise.Histogram(np_histogram=(torch.ones(4), torch.arange(5.0)))
    assert lazy._encode_histogram()[0] == [1.0] * 4
    with pytest.raises(MediaError, match="1 to 512"):
        rankwise.Histogram([1.0], num_bins=513)
    with pytest.raises(MediaError, match="4 counts need 5 edges"):
        rankwise.Histogram(np_histogram=([1, 2, 3, 4], [0, 1, 2]))
    with pytest.raises(MediaError, match="not both"):
        rankwise.Histogram()


def test_audio_video_text_html_round_trip(tmp_path: Path) -> None:
    wave_f = np.sin(np.linspace(0, 20, 800))
    stereo = np.stack([wave_f, -wave_f], axis=1)
    frames = (np.arange(5 * 8 * 6 * 3) % 256).astype(np.uint8).reshape(5, 8, 6, 3)
    gif_path = tmp_path / "v.gif"
    PIL_Image.fromarray(frames[0]).save(gif_path)
    run = start(tmp_path)
    run.log(
        {
            "a": rankwise.Audio(wave_f, sample_rate=8000, caption="sine"),
            "a2": rankwise.Audio(stereo.T, sample_rate=8000),
            "v": rankwise.Video(frames, fps=5),
            "vt": rankwise.Video(frames.transpose(0, 3, 1, 2), fps=5),
            "vf": rankwise.Video(gif_path),
            "t": rankwise.Text("hello\nworld é"),
            "h": rankwise.Html("<b>hi</b><script>alert(1)</script>"),
        },
        step=0,
    )
    run.finish()
    info = read_back(tmp_path, run)
    a = info.media("a")[0]
    assert (a.kind, a.format, a.sample_rate, a.channels, a.caption) == (
        "audio",
        "wav",
        8000,
        1,
        "sine",
    )
    assert a.duration == pytest.approx(0.1)
    with wave.open(io.BytesIO(a.read())) as w:
        pcm = np.frombuffer(w.readframes(w.getnframes()), "<i2")
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (8000, 1, 2)
    np.testing.assert_array_equal(pcm, (wave_f * 32767).astype("<i2"))
    with wave.open(io.BytesIO(info.media("a2")[0].read())) as w:
        assert w.getnchannels() == 2 and w.getnframes() == 800
    v = info.media("v")[0]
    assert (v.kind, v.format, v.frames, v.fps, v.width, v.height) == ("video", "gif", 5, 5.0, 6, 8)
    with PIL_Image.open(io.BytesIO(v.read())) as im:
        assert im.format == "GIF" and im.n_frames == 5 and im.size == (6, 8)
    assert info.media("vt")[0].read() == v.read()
    assert info.media("vf")[0].read() == gif_path.read_bytes()
    assert info.media("t")[0].read().decode() == "hello\nworld é"
    h = info.media("h")[0]
    assert (h.kind, h.format) == ("html", "html") and h.read().startswith(b"<b>hi</b>")
    assert {k.key: k.kind for k in info.media_keys()} == {
        "a": "audio", "a2": "audio", "v": "video", "vt": "video", "vf": "video",
        "t": "text", "h": "html",
    }  # fmt: skip


# -- bad input ------------------------------------------------------------------------


def test_constructors_refuse_bad_input_naming_the_fix(tmp_path: Path) -> None:
    cases = [
        (lambda: rankwise.Image(np.zeros((2, 3, 4, 5))), "HW, HWC or CHW"),
        (lambda: rankwise.Image(np.zeros((8, 8, 2))), "1, 3 or 4 channels"),
        (lambda: rankwise.Image(np.zeros((4, 4), complex)), "give uint8"),
        (lambda: rankwise.Image(np.array([["a"]])), "give uint8"),
        (lambda: rankwise.Image({"x": 1}), "cannot take a dict"),
        (lambda: rankwise.Image(np.zeros((0, 4))), "each side must be 1"),
        # 2 GB of pixels (a broadcast view: nothing is allocated), refused from its shape
        (lambda: rankwise.Image(np.broadcast_to(np.uint8(0), (26_000, 26_000, 3))), "downscale"),
        (lambda: rankwise.Audio(np.zeros(10)), "sample_rate"),
        (lambda: rankwise.Audio(np.zeros((10, 5)), 100), "1 or 2"),
        (lambda: rankwise.Video(np.zeros((2, 4, 4, 3))), "uint8"),
        (lambda: rankwise.Video(np.zeros((4, 4, 3), np.uint8)), "(T, H, W, C)"),
        (lambda: rankwise.Text(b"bytes"), "str"),
    ]
    for make, words in cases:
        with pytest.raises(MediaError, match=words.replace("(", r"\(").replace(")", r"\)")):
            make()
    svg = tmp_path / "x.png"
    svg.write_text('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>')
    with pytest.raises(MediaError, match="not a PNG or JPEG file"):
        rankwise.Image(svg)
    html = tmp_path / "x.mp4"
    html.write_text("<html><script>alert(1)</script></html>")
    with pytest.raises(MediaError, match="not a MP4 or GIF file"):
        rankwise.Video(html)
    with pytest.raises(MediaError, match="cannot read"):
        rankwise.Image(tmp_path / "missing.png")


def test_log_skips_what_cannot_be_encoded_and_keeps_the_rest(tmp_path: Path, caplog: Any) -> None:
    nan_image = np.full((4, 4), np.nan)
    table = rankwise.Table(columns=["a"], data=[[1]])
    table.data.append([object()])  # put in by hand, past add_data's check
    good = rankwise.Image(np.zeros((4, 4), np.uint8))
    big = rankwise.Image(np.zeros((80, 80, 3), np.uint8))  # made before the cap is set
    run = start(tmp_path, max_media_bytes=10_000)
    with pytest.raises(MediaError, match="10000-byte cap"):  # the run's cap, at once
        rankwise.Image(np.zeros((80, 80, 3), np.uint8))
    with caplog.at_level(logging.WARNING, logger="rankwise"):
        run.log(
            {
                "nan": rankwise.Image(nan_image),
                "bad_table": table,
                "gallery": [good, rankwise.Image(nan_image), good],
                "mixed": [good, rankwise.Histogram([1.0])],
                "big": big,  # 19,200 bytes > 10,000
                "bad\x00key": good,
                "loss": 1.5,
                "ok": good,
                "array": np.zeros(3),
            },
            step=0,
        )
        run.log({"nan": rankwise.Image(nan_image), "loss": 2.5}, step=1)
        run.finish()
    info = read_back(tmp_path, run)
    rankwise.Image(np.zeros((80, 80, 3), np.uint8))  # the cap ended with the run
    assert [r["loss"] for r in info.history()] == [1.5, 2.5]
    assert {k.key for k in info.media_keys()} == {"ok", "gallery"}
    assert len(info.media("gallery")) == 2
    text = [r.message for r in caplog.records]
    nan_msgs = [m for m in text if "'nan'" in m]
    assert len(nan_msgs) == 1 and "np.nan_to_num" in nan_msgs[0]  # once per key
    assert any("'bad_table'" in m and "cell of type object" in m for m in text)
    assert any("'mixed'" in m and "own key" in m for m in text)
    assert any("'big'" in m and "max_media_bytes" in m for m in text)
    assert any("rankwise.Image(x)" in m for m in text)  # the plain array's hint
    assert any("cannot be stored" in m for m in text)
    assert info.state == "finished"


def test_rich_values_in_nested_dicts_and_from_rankwise_log(tmp_path: Path) -> None:
    run = start(tmp_path)
    rankwise.log({"val": {"img": rankwise.Image(np.ones((2, 2))), "acc": 0.9}}, step=3)
    rankwise.finish()
    info = read_back(tmp_path, run)
    assert [m.key for m in info.media("val/img")] == ["val/img"]
    assert info.history()[0]["val/acc"] == 0.9


def test_a_value_made_long_before_its_log_is_recorded(tmp_path: Path) -> None:
    """Made before init() and logged after other calls: log() was not armed for it, so
    the writer thread finds it and hands it on; finish() still records it."""
    early = rankwise.Image(np.ones((3, 3)))
    run = start(tmp_path)
    run.log({"loss": 1.0}, step=0)  # the arming from init() is spent here
    run.log({"late": early, "loss": 2.0}, step=1)
    run.finish()
    info = read_back(tmp_path, run)
    assert [(m.key, m.step) for m in info.media("late")] == [("late", 1)]
    assert [r["loss"] for r in info.history()] == [1.0, 2.0]


def test_cuda_tensors_are_copied_without_a_sync_and_encoded(tmp_path: Path) -> None:
    """A CUDA image and a histogram of device counts (what run.watch passes): the copy
    to pinned host memory is started non-blocking; the encoder thread waits for it."""
    torch = need("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    img = torch.rand(3, 16, 16, device="cuda")
    values = torch.randn(10_000, device="cuda")
    counts = torch.histc(values, bins=64)
    lo, hi = values.min(), values.max()
    edges = torch.linspace(0, 1, 65, device="cuda") * (hi - lo) + lo
    run = start(tmp_path)
    run.log({"img": rankwise.Image(img), "h": rankwise.Histogram(np_histogram=(counts, edges))})
    run.finish()
    info = read_back(tmp_path, run)
    expect = np.rint(img.cpu().numpy().transpose(1, 2, 0) * 255).astype(np.uint8)
    np.testing.assert_array_equal(png_pixels(info.media("img")[0].read()), expect)
    series = info.histograms("h", label=run.label)
    np.testing.assert_array_equal(series.counts[0], counts.cpu().numpy())
    assert series.counts[0].sum() == 10_000
