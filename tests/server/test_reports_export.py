"""``rankwise report export``: the requests a panel makes (pinned for the dashboard and the
exporter alike), the data slot's escaping, and a whole export of a data directory's
report through the CLI: every panel's reply and every image inline, nothing to fetch."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rankwise
from rankwise import report_export as X
from rankwise.cli import main
from rankwise.server.serve import index_url
from rankwise.store import open_store
from rankwise.wire.reports import Report
from tests.helpers.env import REPO

FIXTURE = json.loads((REPO / "tests" / "data" / "report_requests.json").read_text("utf-8"))
DATA = re.compile(r'<script id="rankwise-export" type="application/json">(.*?)</script>', re.S)


@pytest.mark.parametrize(
    "case", FIXTURE["cases"], ids=lambda c: f"{c['block']['type']}-{c['block']['id']}"
)
def test_block_requests_are_the_dashboards(case: dict[str, Any]) -> None:
    """ui/test/reports.test.js checks lib/reports.js against the same file."""
    reqs = X.block_requests(case["block"], FIXTURE["project"])
    assert reqs == case["requests"]
    if "key" in case:
        assert X.request_key(reqs[0]) == case["key"]


def test_the_data_slot_cannot_end_its_script_element() -> None:
    text = X.script_json({"t": "</script><script>alert(1)</script>&\u2028"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"t": "</script><script>alert(1)</script>&\u2028"}


def _runs(root: Path) -> None:
    """Two small runs in a data directory: a loss each, images and a table in the first."""
    settings = {"system": False, "console": "off"}
    for i, run_id in enumerate(("a", "b")):
        run = rankwise.init(project="p", id=run_id, dir=root, settings=settings)
        for step in range(20):
            run.log({"loss": 1.0 / (step + 1) + i}, step=step)
            if run_id == "a" and step == 10:  # an earlier image: not shown, not inlined
                green = np.zeros((8, 12, 3), dtype=np.uint8)
                green[..., 1] = 200
                run.log({"samples": [rankwise.Image(green, caption="green")]}, step=step)
        if run_id == "a":
            img = np.zeros((8, 12, 3), dtype=np.uint8)
            img[..., 0] = 200
            table = rankwise.Table(columns=["id", "label"], data=[[1, "<b>cat</b>"], [2, "dog"]])
            run.log({"samples": [rankwise.Image(img, caption="red")], "preds": table}, step=20)
        run.finish()


BLOCKS: list[dict[str, Any]] = [
    {"id": "t", "type": "text", "text": "# Loss\n\nIt fell. <script>alert(1)</script>"},
    {
        "id": "c",
        "type": "chart",
        "runs": [{"project": "p", "run": "a"}, {"project": "p", "run": "b"}],
        "metrics": ["loss"],
    },
    {"id": "m", "type": "media", "run": {"project": "p", "run": "a"}, "key": "samples"},
    {"id": "tb", "type": "table", "run": {"project": "p", "run": "a"}, "key": "preds"},
    {"id": "f", "type": "failure", "run": {"project": "p", "run": "b"}},
]


def test_export_a_data_directorys_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if not X.template_path().is_file():
        pytest.fail("the dashboard is not built: make setup (cd ui && npm run build)")
    root = tmp_path / "runs"
    _runs(root)
    assert main(["report", "export", "p/weekly", "--dir", str(root), "--out", "x.html"]) == 2
    assert "has no reports yet" in capsys.readouterr().err
    store = open_store(index_url(root))  # what the dashboard of `rankwise ui` saves
    store.migrate()
    store.save_report("p", "weekly", "Week </script> 1", BLOCKS)
    store.close()

    out = tmp_path / "out" / "weekly.html"
    assert (
        main(
            ["report", "export", "weekly", "--project", "p", "--dir", str(root), "--out", str(out)]
        )
        == 0
    )
    assert "opens offline" in capsys.readouterr().out
    html = out.read_text("utf-8")
    found = DATA.search(html)
    assert found is not None, "the data slot was not filled"
    data = json.loads(found.group(1))
    report = Report(**data["report"])
    assert (report.name, report.title, report.version, report.blocks) == (
        "weekly",
        "Week </script> 1",
        1,
        BLOCKS,
    )
    # Every request the panels make has its reply, and nothing else is there.
    wanted = {X.request_key(r) for b in BLOCKS for r in X.block_requests(b, "p")}
    assert set(data["replies"]) == wanted
    chart = data["replies"][X.request_key(X.block_requests(BLOCKS[1], "p")[0])]
    assert [r["run"] for r in chart["runs"]] == ["a", "b"]
    assert chart["runs"][0]["band"]["mean"][:3] == pytest.approx([1.0, 0.5, 1 / 3])
    assert chart["runs"][1]["band"]["mean"][0] == pytest.approx(2.0)
    media = data["replies"][X.request_key(X.block_requests(BLOCKS[2], "p")[0])]
    assert [it["step"] for it in media["items"]] == [10, 20]
    shown = [it["digest"] for it in media["items"] if it["step"] == 20]
    assert list(data["blobs"]) == shown  # only what the panel shows (the latest step)
    assert data["blobs"][shown[0]].startswith("data:image/png;base64,")
    table = data["replies"][X.request_key(X.block_requests(BLOCKS[3], "p")[0])]
    assert table["rows"] == [[1, "<b>cat</b>"], [2, "dog"]]
    # One file: its script and stylesheet inline, nothing it would fetch.
    markup = re.sub(r"(<script[^>]*>).*?</script>", r"\1</script>", html, flags=re.S)
    assert markup.count("<script") == 2  # the data and the bundle, both inline
    assert not re.search(r"<(script|img|link|iframe)[^>]+(src|href)=\"(?!data:)", markup)
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    # an older version, and a report that does not exist
    assert (
        main(
            [
                "report",
                "export",
                "p/weekly",
                "--dir",
                str(root),
                "--out",
                str(out),
                "--version",
                "2",
            ]
        )
        == 2
    )
    assert "no version 2 of 'weekly'" in capsys.readouterr().err
    assert main(["report", "list", "--project", "p", "--dir", str(root)]) == 0
    assert "weekly" in capsys.readouterr().out
    assert main(["report", "show", "p/weekly", "--dir", str(root)]) == 0
    text = capsys.readouterr().out
    assert "version 1 of 1" in text and "chart loss of p/a, p/b" in text


def test_pdf_without_chromium_names_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANKWISE_CHROMIUM", str(tmp_path / "no-such-chromium"))
    page = tmp_path / "r.html"
    page.write_text("<p>x</p>")
    with pytest.raises(rankwise.errors.UsageError, match="apt-get install chromium"):
        X.print_pdf(page, tmp_path / "r.pdf")
