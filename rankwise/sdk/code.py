"""``run.log_code()``: a run's source files as an artifact of type ``code``, and
``restore()``: one file of a run's code (or of its ``save()``d files) back on disk.

W&B's signature and defaults: ``root="."``, ``include_fn`` keeps ``*.py`` files,
``exclude_fn`` leaves out rankwise's data directory, version-control and environment
folders. The artifact is named ``source-<project>-<run id>`` unless ``name`` is given; it
is stored by ``rankwise.artifacts`` like any other (hashed in the background, uploaded in
remote mode).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from ..errors import UsageError

SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", "__pycache__", ".venv", "venv", "node_modules", "wandb",
     "rankwise-runs", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox"}
)  # fmt: skip


def include_py(path: str, root: str | None = None) -> bool:
    return path.endswith(".py")


def exclude_default(path: str, root: str | None = None) -> bool:
    rel = os.path.relpath(path, root) if root else path
    return any(part in SKIP_DIRS for part in Path(rel).parts[:-1])


def _call(fn: Callable[..., bool], path: str, root: str) -> bool:
    """W&B calls ``include_fn(path, root)``, older code ``include_fn(path)``."""
    try:
        return bool(fn(path, root))
    except TypeError:
        return bool(fn(path))


def source_files(
    root: str,
    include_fn: Callable[..., bool] = include_py,
    exclude_fn: Callable[..., bool] = exclude_default,
    skip: Path | None = None,
) -> list[tuple[str, str]]:
    """(absolute path, path relative to ``root``) of the files to save, sorted."""
    out: list[tuple[str, str]] = []
    base = os.path.abspath(root)
    skip_dir = str(skip.absolute()) if skip is not None else None
    for folder, dirs, files in os.walk(base):
        dirs[:] = sorted(
            d for d in dirs
            if d not in SKIP_DIRS and os.path.join(folder, d) != skip_dir
        )  # fmt: skip
        for f in sorted(files):
            path = os.path.join(folder, f)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            if _call(exclude_fn, path, base) or not _call(include_fn, path, base):
                continue
            out.append((path, os.path.relpath(path, base)))
    return out


def log_code(
    run: Any,  # rankwise.sdk.run.Run (not imported: Run imports this module)
    root: str | os.PathLike[str] | None = ".",
    name: str | None = None,
    include_fn: Callable[..., bool] = include_py,
    exclude_fn: Callable[..., bool] = exclude_default,
) -> Any:
    """Save the source files under ``root`` as a ``code`` artifact of ``run`` (see the
    module docstring); returns the artifact, or None when no file matched."""
    from ..artifacts.artifact import Artifact

    base = os.fspath(root) if root is not None else "."
    if not os.path.isdir(base):
        raise UsageError(f"log_code(root={base!r}): not a directory")
    files = source_files(base, include_fn, exclude_fn, skip=run.dir.parent.parent)
    if not files:
        from .. import _log

        _log.warn(f"log_code(): no file under {os.path.abspath(base)} matched include_fn")
        return None
    art = Artifact(name or f"source-{run.project}-{run.id}", "code")
    for path, rel in files:
        art.add_file(path, name=rel.replace(os.sep, "/"))
    return run.log_artifact(art)


def restore(
    run: Any,
    name: str,
    root: str | os.PathLike[str],
    replace: bool = False,
) -> IO[str] | None:
    """The file ``name`` of ``run`` (a ``RunInfo``) written under ``root`` and opened for
    reading: from the run's ``code`` artifacts (the latest first), else from the files it
    ``save()``d (read from a data directory only). None when the run has no such file."""
    target = Path(root) / name
    if target.exists() and not replace:
        return open(target)  # the caller's to close, as W&B's
    arts = [a for a in run.logged_artifacts() if a.type == "code"]
    for art in reversed(arts):
        if any(e.path == name for e in art.files()):
            art.download(root=root, path_prefix=name)
            return open(target)
    saved = _saved_file(run, name)
    if saved is not None:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(saved.read_bytes())
        return open(target)
    return None


def _saved_file(run: Any, name: str) -> Path | None:
    source = getattr(run, "_from", None)
    data_dir = getattr(source, "_root", None)
    if data_dir is None:
        return None
    files = (Path(data_dir) / str(run.project) / str(run.id) / "files").resolve()
    path: Path = (files / name).resolve()
    if files not in path.parents or not path.is_file():
        return None
    return path
