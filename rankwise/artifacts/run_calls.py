"""What ``run.log_artifact``/``use_artifact``/``log_model``/``use_model`` do.

``Run`` keeps thin methods that call these with its public handle
(``Run.handle(any_rank=True)``, ``rankwise.sdk.handle``), so the run module knows nothing
of stores and this one nothing of ``Run``: the token comes from ``handle.settings``, the
server from ``handle.server``, and the run's artifact worker is kept in
``handle.slots["artifacts"]``.

Ranks that do not record (``handle.recording()`` False): ``log_artifact`` and
``log_model`` do nothing and return the artifact (the recording rank logs it; a rank that
logs nothing may call them unguarded). ``use_artifact`` still resolves the artifact and
returns it, since a rank that only reads a data set needs its files: in local mode it
reads the local store and records no lineage (the rank records nothing); in remote mode
it asks the server's ``use`` route, the one an ingest token may resolve through, which
records lineage under the run with no stream label.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .. import _log
from ..errors import UsageError
from ..names import is_id
from ..sdk.handle import RunHandle
from .artifact import Artifact
from .local import LocalArtifacts, parse_ref
from .manifest import check_alias, check_tags
from .source import Source
from .worker import ArtifactWorker, Publisher

WORKER = "artifacts"  # the handle's slot holding the run's artifact worker


def _root(run: RunHandle) -> Path:
    return run.dir.parent.parent


def _token(run: RunHandle) -> str | None:
    return run.settings.token


def _worker(run: RunHandle) -> ArtifactWorker:
    worker: ArtifactWorker | None = run.slots.get(WORKER)
    if worker is None:
        server = run.server
        publisher = None
        if server:
            token, project = _token(run), run.project

            def publisher() -> Publisher:
                from .remote import RemoteArtifacts  # on first use: it imports httpx

                return RemoteArtifacts(server, project, token)

        store = LocalArtifacts(_root(run), run.project)
        worker = ArtifactWorker(store, run.run_id, run.label, publisher)
        run.slots[WORKER] = worker
        run.add_component(worker, after_writer=True)  # the stream's finish comes first
    return worker


def _aliases(aliases: Any) -> list[str]:
    if aliases is None:
        return []
    if isinstance(aliases, str):
        aliases = [aliases]
    return [check_alias(a) for a in aliases if a != "latest"]


def _default_name(path: str, run: RunHandle, kind: str) -> str:
    base = os.path.basename(os.path.normpath(path))
    name = f"run-{run.run_id}-{base}"
    if not is_id(name):
        raise UsageError(
            f"{kind} {path!r}: its file name cannot name an artifact: pass name= (letters, "
            "digits, '.', '_', '-')"
        )
    return name[:128]


def as_artifact(
    path_or_artifact: Any, name: str | None, type: str | None, run: RunHandle
) -> Artifact:
    if isinstance(path_or_artifact, Artifact):
        return path_or_artifact
    if not isinstance(path_or_artifact, str | os.PathLike):
        raise UsageError(
            f"log_artifact takes a rankwise.Artifact or a path, not {type_name(path_or_artifact)}"
        )
    path = os.fspath(path_or_artifact)
    art = Artifact(name or _default_name(path, run, "path"), type or "unspecified")
    if os.path.isdir(path):
        art.add_dir(path)
    else:
        art.add_file(path)
    return art


def type_name(obj: object) -> str:
    return type(obj).__name__


def log_artifact(
    run: RunHandle,
    artifact_or_path: Any,
    name: str | None = None,
    type: str | None = None,
    aliases: Any = None,
    tags: Any = None,
) -> Artifact:
    wanted_tags = check_tags(tags)
    art = as_artifact(artifact_or_path, name, type, run)
    wanted = _aliases(aliases)
    art.check_metadata()
    if not run.recording():
        return art
    if run.state() != "running":
        _log.warn(f"log_artifact({art.name!r}) after the run ended: not logged")
        return art
    _worker(run).submit(art, wanted, wanted_tags)
    return art


def use_artifact(
    run: RunHandle,
    artifact_or_name: Any,
    type: str | None = None,
    aliases: Any = None,
    use_as: str | None = None,
) -> Artifact:
    if isinstance(artifact_or_name, Artifact):
        art = artifact_or_name
        if art.info is None and art.state == "PENDING":
            art.wait()  # one this process logged: use the stored version
        info = art.info
        if info is None:
            raise UsageError(f"artifact {art.name!r} is not stored: log it first")
        ref_text = f"{info.project}/{info.name}:{info.version}"
    elif isinstance(artifact_or_name, str):
        ref_text = artifact_or_name
    else:
        raise UsageError(
            f"use_artifact takes a name or an Artifact, not {type_name(artifact_or_name)}"
        )
    project, name, ref = parse_ref(ref_text)
    project = project or run.project
    source: Source
    if run.server:
        from .remote import ServerSource

        server_source = ServerSource(run.server, _token(run))
        with server_source.client(project) as client:
            label = run.label if run.recording() else None
            info = client.use(name, ref, run.run_id, label)
        source = server_source
    else:
        store = LocalArtifacts(_root(run), project)
        info = store.resolve(name, ref)
        if run.recording():
            store.record_use(name, info.version, run.run_id, run.label)
        source = store
    if type is not None and info.type != type:
        raise UsageError(f"artifact {info.qualified_name} has type {info.type!r}, not {type!r}")
    return Artifact.from_version(info, source)


def log_model(run: RunHandle, path: Any, name: str | None = None, aliases: Any = None) -> Artifact:
    path = os.fspath(path)
    art = Artifact(name or _default_name(path, run, "model"), "model")
    if os.path.isdir(path):
        art.add_dir(path)
    else:
        art.add_file(path)
    return log_artifact(run, art, aliases=aliases)


def use_model(run: RunHandle, name: str, root: Any = None) -> str:
    """Download model ``name`` and return its file (a model of one file) or directory."""
    art = use_artifact(run, name, type="model")
    where = art.download(root)
    files = [e for e in art.files() if e.ref is None]
    if len(files) == 1:
        return os.path.join(where, *files[0].path.split("/"))
    return where
