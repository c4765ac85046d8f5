"""One rule set for every name rankwise stores: ids, keys, view names, file names.

A name is checked, never rewritten: a bad one is refused with ``BadNameError`` (a
``UsageError`` whose message names the rule), so two different inputs can never end up
as one stored thing (the ``my%20model`` / ``my model`` confusion of other trackers).

=================  ==========================================================  =======
kind               rule                                                        cap
=================  ==========================================================  =======
id                 ``[A-Za-z0-9][A-Za-z0-9._-]*``: project, run id, group,     128
                   stream label. ASCII only, so no Unicode look-alike exists;
                   ``.``/``..`` cannot occur (first char is alphanumeric);
                   Windows device names (``CON``, ``nul.txt``) are refused.
key                metric and config keys, saved-view names: any printable     250
                   Unicode in NFC form; no control, format (bidi overrides,
                   zero-width) or surrogate characters, no leading or
                   trailing space. ``/`` is a normal separator (``train/loss``).
file name          logical file names (artifacts, blobs): ``/``-separated      1024
                   relative path, each segment a ``key`` without ``\\`` ``:``
                   ``#`` ``%`` ``;``, never empty, ``.`` or ``..``;
                   percent-decoded until stable first, and refused if that
                   changes it (``%2e%2e``, ``%252e``), so what is stored is
                   what was asked.
=================  ==========================================================  =======

Case: names are compared exactly (``Run1`` and ``run1`` are two runs in a store). Where a
name becomes a directory (a project or run under the data directory) a case-insensitive
filesystem would alias the two, so ``casefold_clash`` finds an existing sibling that
differs only in case and the SDK refuses to write into it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import unquote

from .errors import BadNameError as BadName

ID_MAX = 128
KEY_MAX = 250
FILE_MAX = 1024
# The characters of an id (what a simple regex engine can check, e.g. pydantic's).
ID_CHARS_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
# Windows device names: a directory called CON (or con.txt) cannot be made there.
_DEVICES = frozenset(
    ["CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"]
    + [f"{p}{i}" for p in ("COM", "LPT") for i in range(10)]
)


def _any_case(word: str) -> str:
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else re.escape(c) for c in word)


# The whole id rule as one regex (ECMA and Python alike), as the OpenAPI document shows it.
ID_PATTERN = (
    "^(?!(?:"
    + "|".join(_any_case(d) for d in sorted(_DEVICES))
    + r")(?:\.|$))[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
)
_ID = re.compile(ID_PATTERN)
# Unicode categories never allowed: control, format (U+202E, U+200B ...), surrogate,
# private use, unassigned, line and paragraph separators.
_BAD_CATEGORIES = frozenset(("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"))
# The key rule as a regex (ECMA, Python and Rust alike), as near as one gets: no C0/C1
# controls or bidi/zero-width characters, no space at either end. NFC and the other
# refused Unicode categories are checked in code (``is_key``).
_KEY_CHAR = r"\u0000-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff"
KEY_PATTERN = f"^[^ {_KEY_CHAR}](?:[^{_KEY_CHAR}]*[^ {_KEY_CHAR}])?$"
_FILE_FORBIDDEN = frozenset("\\:#%;")
_DECODE_PASSES = 10

ID_RULE = (
    "use 1-128 characters from letters, digits, '.', '_' and '-', starting with a letter or digit"
)
KEY_RULE = (
    "use 1-250 printable characters in Unicode NFC form, without control or bidi "
    "characters and without leading or trailing spaces"
)
FILE_RULE = (
    "use a relative path of '/'-separated names (up to 1024 characters), without '\\', "
    "':', '#', '%', ';', empty, '.' or '..' parts, or control characters"
)


def _shown(value: object) -> str:
    """``value`` for a message: repr, cut short, so a 1 MB name is not printed whole."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def is_id(value: object) -> bool:
    # fullmatch: "$" alone would also accept a trailing newline ("run\n").
    return isinstance(value, str) and _ID.fullmatch(value) is not None


def check_id(value: object, what: str = "run id") -> str:
    """``value`` if it is a valid id (project, run id, group, label), else ``BadName``."""
    if not is_id(value):
        raise BadName(what, ID_RULE, _shown(value))
    return value  # type: ignore[return-value]


def _printable(value: str) -> bool:
    if value.isascii():
        return value.isprintable()
    cat = unicodedata.category
    return not any(cat(c) in _BAD_CATEGORIES for c in value)


def is_key(value: object) -> bool:
    if not isinstance(value, str) or not 0 < len(value) <= KEY_MAX:
        return False
    if value != value.strip() or not _printable(value):
        return False
    return value.isascii() or unicodedata.is_normalized("NFC", value)


def check_key(value: object, what: str = "key") -> str:
    """``value`` if it is a valid metric/config key or view name, else ``BadName``."""
    if not is_key(value):
        raise BadName(what, KEY_RULE, _shown(value))
    return value  # type: ignore[return-value]


def decode_stable(value: str) -> str:
    """``value`` percent-decoded until it stops changing (at most 10 passes)."""
    for _ in range(_DECODE_PASSES):
        decoded = unquote(value, errors="strict") if "%" in value else value
        if decoded == value:
            return value
        value = decoded
    raise ValueError("still changing after 10 decoding passes")


def is_file_name(value: object) -> bool:
    if not isinstance(value, str) or not 0 < len(value) <= FILE_MAX:
        return False
    try:
        if decode_stable(value) != value:
            return False
    except (ValueError, UnicodeDecodeError):
        return False
    if _FILE_FORBIDDEN.intersection(value):
        return False
    return all(part not in ("", ".", "..") and is_key(part) for part in value.split("/"))


def check_file_name(value: object, what: str = "file name") -> str:
    """``value`` if it is a safe logical file name (relative, no traversal), else ``BadName``."""
    if not is_file_name(value):
        raise BadName(what, FILE_RULE, _shown(value))
    return value  # type: ignore[return-value]


def resolve_inside(root: Path, name: str) -> Path:
    """The path of file ``name`` under ``root``; ``BadName`` unless it stays inside.

    ``name`` passes ``check_file_name`` first; the resolved path (symlinks followed) is
    then checked too, so a symlink already under ``root`` cannot lead outside it.
    """
    check_file_name(name)
    base = Path(root).resolve()
    path = (base / name).resolve()
    if not path.is_relative_to(base):
        raise BadName("file name", "it leads outside the data directory", _shown(name))
    return path


def casefold_clash(name: str, existing: Iterable[str]) -> str | None:
    """An existing name equal to ``name`` but for case (what a case-insensitive disk aliases)."""
    folded = name.casefold()
    for other in existing:
        if other != name and other.casefold() == folded:
            return other
    return None
