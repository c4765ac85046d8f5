"""rankwise.names: one strict rule set for ids, keys and file names (security §6 rows 10-12)."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rankwise
from rankwise import names
from rankwise.errors import BadNameError, UsageError

TRAVERSAL = [
    "../x",
    "a/../../x",
    "./a",
    "a//b",
    "/etc/passwd",
    "C:\\x",
    "C:x",
    "..\\x",
    "a\\..\\x",
    "file:///etc/passwd",
    "//proc/self/root",
    "a/",
    "",
    ".",
    "..",
]
ENCODED = [
    "..%2f..%2fx",
    "%2e%2e/x",
    "%252e%252e%252f",
    "%25252e%25252e",
    "a%23/../x",
    "a;/../x",
    "a%00.png",
    "a\x00.png",
    "a\u202e.png",
    "a\u200b.png",
    "a\x1b[31m.png",
    "a\n.png",
    "a\ud800.png",
    "my%20file",
]
BAD_IDS = [
    "..",
    ".",
    "a/b",
    "a\\b",
    "CON",
    "con",
    "nul.txt",
    "LPT1",
    "x" * 129,
    "my%20proj",
    "my proj",
    "-a",
    "_a",
    "caf\u00e9",
    "\uff41bc",
    "",
    "a\x00",
    "run\n",
    "COM1.txt",
]


@pytest.mark.parametrize("bad", TRAVERSAL + ENCODED)
def test_file_names_refuse_traversal_and_encodings(bad: str, tmp_path: Path) -> None:
    assert not names.is_file_name(bad)
    with pytest.raises(BadNameError, match="cannot be used: use a relative path"):
        names.check_file_name(bad)
    with pytest.raises(BadNameError):
        names.resolve_inside(tmp_path, bad)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("good", ["a.png", "media/step 10/img.png", "ckpt/model-1.pt", "ünï.txt"])
def test_file_names_accept_plain_relative_paths(good: str, tmp_path: Path) -> None:
    assert names.resolve_inside(tmp_path, good) == tmp_path.resolve() / good


def test_a_symlink_under_the_root_cannot_lead_outside(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "out").symlink_to(tmp_path)
    with pytest.raises(BadNameError, match="outside"):
        names.resolve_inside(root, "out/secret")


@pytest.mark.parametrize("bad", BAD_IDS)
def test_ids_are_strict(bad: str) -> None:
    with pytest.raises(BadNameError, match="use 1-128 characters"):
        names.check_id(bad, "project")


@pytest.mark.parametrize("good", ["a", "run-1", "A.b_c-9", "x" * 128, "console", "com10"])
def test_ids_accept_the_usual(good: str) -> None:
    assert names.check_id(good) == good


@pytest.mark.parametrize(
    "bad",
    ["", " loss", "loss ", "a\x00b", "a\tb", "a\u202eb", "a\u200db", "x" * 251, "cafe\u0301"],
)
def test_keys_refuse_control_bidi_long_and_non_nfc(bad: str) -> None:
    with pytest.raises(BadNameError, match="NFC"):
        names.check_key(bad, "metric key")


@pytest.mark.parametrize(
    "good", ["train/loss", "loss", "gpu/0/util %", "a b", "δ/lr", "caf\u00e9", "x" * 250, "a//b"]
)
def test_keys_accept_slashes_spaces_and_nfc_unicode(good: str) -> None:
    assert names.check_key(good) == good


def test_nfc_and_nfd_spellings_never_both_pass() -> None:
    nfc = "caf\u00e9"
    nfd = unicodedata.normalize("NFD", nfc)
    assert names.is_key(nfc) and not names.is_key(nfd)


def test_casefold_clash() -> None:
    assert names.casefold_clash("Run1", ["run1", "other"]) == "run1"
    assert names.casefold_clash("run1", ["run1"]) is None
    assert names.casefold_clash("a", []) is None


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_is_refused_or_resolves_inside_the_root(text: str) -> None:
    root = Path("/srv/rankwise-root")
    try:
        path = names.resolve_inside(root, text)
    except BadNameError:
        return
    assert path.is_relative_to(root)
    assert path == root / text  # nothing rewritten: what is stored is what was asked


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.sampled_from(TRAVERSAL + ENCODED + BAD_IDS), st.text()))
def test_any_text_is_a_valid_id_only_under_the_strict_rule(text: str) -> None:
    ok = names.is_id(text)
    assert ok == bool(
        text
        and len(text) <= 128
        and text.isascii()
        and text[0].isalnum()
        and all(c.isalnum() or c in "._-" for c in text)
        and text.split(".")[0].upper() not in names._DEVICES
    )


def test_init_names_the_fix_for_a_bad_project_and_id(data_dir: Path) -> None:
    with pytest.raises(UsageError, match=r"project '\.\./x' cannot be used: use 1-128"):
        rankwise.init(project="../x")
    with pytest.raises(UsageError, match="run id 'a/b' cannot be used"):
        rankwise.init(project="p", id="a/b")
    with pytest.raises(UsageError, match="group 'g g' cannot be used"):
        rankwise.init(project="p", id="r", group="g g")
    assert not data_dir.exists() or not any(data_dir.rglob("*.rwlog"))


def test_init_refuses_a_run_differing_only_in_case(data_dir: Path) -> None:
    rankwise.init(project="p", id="run1", console="off", system=False).finish()
    with pytest.raises(UsageError, match="differs only in case from 'run1'"):
        rankwise.init(project="p", id="RUN1", console="off", system=False)
    with pytest.raises(UsageError, match="project 'P' differs only in case"):
        rankwise.init(project="P", id="run2", console="off", system=False)


def test_log_skips_a_bad_key_with_one_warning_and_keeps_the_rest(
    data_dir: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    run = rankwise.init(project="p", id="keys", console="off", system=False)
    for step in range(3):
        run.log({"train/loss": 1.0, "bad\u202ekey": 2.0, "ok key": step})
    run.finish()
    assert capfd.readouterr().err.count("cannot be stored") == 1
    info = rankwise.Api(dir=str(data_dir)).run("keys", project="p")
    assert info.metric_keys == ["ok key", "train/loss"]
