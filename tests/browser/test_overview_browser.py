"""The run page's Overview tab and the compare page's Differences view (Chromium, a real
``rankwise ui``): two runs from a git repository the test made, the first with a dirty
tracked file, the second after a commit and with another config."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import rankwise
from tests.helpers.browser import Page, need_browser
from tests.helpers.gitrepo import _git, make_repo
from tests.helpers.servers import ServerProcess

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, str]]:
    need_browser()
    tmp = tmp_path_factory.mktemp("overview")
    repo = tmp / "repo"
    first = make_repo(repo)
    data = tmp / "data"
    mp = pytest.MonkeyPatch()
    mp.chdir(repo)
    try:
        for run_id, lr in (("dirty-run", 0.1), ("clean-run", 0.3)):
            run = rankwise.init(project="ov", id=run_id, dir=data, config={"lr": lr, "bs": 32},
                                tags=["sweep"], notes="the tuned one", system=False,
                                console="off", stall_timeout=0)  # fmt: skip
            run.log({"loss": lr})
            run.finish()
            if run_id == "dirty-run":
                _git(repo, "commit", "-q", "-am", "tune")
    finally:
        mp.undo()
    second = _git(repo, "rev-parse", "HEAD")
    yield data, first, second


@pytest.fixture(scope="module")
def ui(runs: tuple[Path, str, str]) -> Iterator[str]:
    data = runs[0]
    with ServerProcess.ui(data, data.parent / "server.log") as server:
        yield server.url


def test_overview_shows_command_git_diff_nodes_and_packages(
    browser: Any, ui: str, runs: tuple[Path, str, str]
) -> None:
    _, first, _ = runs
    p = Page(browser)
    page = p.page
    page.goto(f"{ui}/#/p/ov/r/dirty-run?tab=overview")
    page.locator("[data-overview]").wait_for()
    assert page.locator("[data-git-commit]").inner_text() == first
    assert page.locator("[data-git-branch]").inner_text() == "main"
    assert "dirty" in page.locator("[data-git-dirty]").inner_text()
    copy = page.locator("[data-git] [data-copy-text]")
    assert copy.inner_text() == f"git checkout {first}"
    page.locator("[data-show-diff]").click()
    diff = page.locator("[data-diff]")
    diff.wait_for()
    assert "+LR = 0.3  # tuned" in diff.inner_text()
    assert page.locator("[data-diff] .add").count() >= 1
    assert page.locator("[data-node]").count() == 1
    assert page.locator("[data-overview-notes]").inner_text() == "the tuned one"
    packages = page.locator("[data-packages]")
    assert packages.locator('[data-package="msgspec"]').count() == 1
    packages.locator("input[type=search]").fill("msgspe")
    assert packages.locator("tr[data-package]").count() == 1
    p.check()
    p.close()


def test_compare_lists_what_differs(browser: Any, ui: str, runs: tuple[Path, str, str]) -> None:
    _, first, second = runs
    p = Page(browser)
    page = p.page
    page.goto(f"{ui}/#/compare?runs=ov/dirty-run,ov/clean-run")
    page.locator("#tab-diff").click()
    table = page.locator("[data-compare-diff]")
    table.wait_for()
    rows = table.locator("tr[data-diff-row]")
    names = [rows.nth(i).get_attribute("data-diff-row") for i in range(rows.count())]
    assert "config/lr" in names and "git/commit" in names and "git/dirty" in names
    assert "config/bs" not in names  # the same in both: not a difference
    commit_row = table.locator('tr[data-diff-row="git/commit"]').inner_text()
    assert first in commit_row and second in commit_row
    p.check()
    p.close()
