"""``rankwise artifact ls|get|put``: list, download and store artifacts from the shell.

Local mode reads and writes the artifact store of a data directory (``--dir``); with
``--server`` (or ``RANKWISE_SERVER``) the same commands go to a server. ``put`` outside a
run records no run: the version has no ``run_id``; to a server it stages the files in the
data directory's store first (an upload cut short is finished by ``rankwise sync``).
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from pathlib import Path
from typing import Any

import msgspec

from ..errors import UsageError
from ..settings import default_dir, default_project, default_server
from ._format import size, table, when


def add_artifact_commands(sub: Any) -> None:
    p = sub.add_parser("artifact", help="list, download and store artifacts")
    asub = p.add_subparsers(dest="artifact_command", required=True)
    ls = asub.add_parser("ls", help="artifact names of a project, or the versions of one")
    ls.add_argument("name", nargs="?", default=None, help="list this artifact's versions")
    ls.add_argument("--type", default=None, help="only artifacts of this type")
    ls.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    _where(ls)
    ls.set_defaults(func=cmd_ls)
    get = asub.add_parser("get", help="download a version's files (verified)")
    get.add_argument("ref", help="NAME, NAME:v3, NAME:ALIAS or PROJECT/NAME:ALIAS")
    get.add_argument("--root", default=None, help="where to write (./artifacts/NAME:VERSION)")
    _where(get)
    get.set_defaults(func=cmd_get)
    put = asub.add_parser("put", help="store a file or directory as a new version")
    put.add_argument("path", help="a file or a directory")
    put.add_argument("--name", required=True, help="artifact name")
    put.add_argument("--type", required=True, help="artifact type (dataset, model, ...)")
    put.add_argument("--alias", action="append", default=[], help="an alias (repeatable)")
    put.add_argument("--description", default=None)
    _where(put)
    put.set_defaults(func=cmd_put)


def _where(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dir", default=None, help="data directory (RANKWISE_DIR, ./rankwise-runs)")
    p.add_argument("--project", default=None, help="project (RANKWISE_PROJECT, default)")
    p.add_argument("--server", default=None, help="a server instead (RANKWISE_SERVER)")
    p.add_argument("--token", default=None, help="token for --server (RANKWISE_TOKEN)")


def _api(args: argparse.Namespace) -> Any:
    from ..api import Api

    return Api(args.dir, server=default_server(args.server), token=args.token)


def _project(args: argparse.Namespace) -> str:
    return default_project(args.project)


def cmd_ls(args: argparse.Namespace) -> int:
    api, project = _api(args), _project(args)
    if args.name is None:
        names = api.artifacts(project, type=args.type)
        if args.json:
            for s in names:
                print(msgspec.json.encode(s).decode())
            return 0
        if not names:
            print(f"no artifacts in project {project!r}")
            return 0
        rows = [
            [s.name, s.type, str(s.versions), s.latest, size(s.size), when(s.updated_at)]
            for s in names
        ]
        print(table(rows, ["NAME", "TYPE", "VERSIONS", "LATEST", "SIZE", "UPDATED"]))
        return 0
    name = args.name if "/" in args.name else f"{project}/{args.name}"
    versions = api.artifact_versions(name)
    if args.json:
        for a in versions:
            print(msgspec.json.encode(a.info).decode())
        return 0
    rows = [
        [a.version, ",".join(a.aliases), size(a.size), str(len(a.files())), a.digest[:12],
         a.info.run_id or "-", when(a.created_at or 0.0)]
        for a in versions
    ]  # fmt: skip
    print(table(rows, ["VERSION", "ALIASES", "SIZE", "FILES", "DIGEST", "RUN", "CREATED"]))
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    ref = args.ref if "/" in args.ref else f"{_project(args)}/{args.ref}"
    art = _api(args).artifact(ref)
    where = art.download(args.root)
    print(f"rankwise: {art.qualified_name} ({len(art.files())} files) -> {where}")
    return 0


def cmd_put(args: argparse.Namespace) -> int:
    from ..artifacts.artifact import Artifact
    from ..artifacts.local import LocalArtifacts, OutboxEntry
    from ..artifacts.remote import RemoteArtifacts
    from ..artifacts.worker import commit_local, latest_sizes, stage
    from ..wire.artifacts import CommitRequest

    project = _project(args)
    path = Path(args.path)
    art = Artifact(args.name, args.type, description=args.description)
    if path.is_dir():
        art.add_dir(path)
    elif path.is_file():
        art.add_file(path)
    else:
        raise UsageError(f"{path} is not a file or a directory")
    files = art.pending()
    root = default_dir(args.dir)
    store = LocalArtifacts(root, project)
    server = default_server(args.server)
    likely = latest_sizes(store, art.name) if server is None else {}
    manifest, _ = stage(files, store, likely)  # remote: a failed upload resumes from files/
    request = CommitRequest(
        type=art.type,
        manifest=manifest,
        client_id=uuid.uuid4().hex,
        description=art.description,
        aliases=[a for a in args.alias if a != "latest"],
        created_at=time.time(),
    )
    if server is None:
        info, _ = commit_local(store, art.name, request, files)
        print(f"rankwise: {info.qualified_name} in {store.base}")
        return 0
    store.outbox_put(OutboxEntry(name=art.name, request=request))
    with RemoteArtifacts(server, project, args.token) as client:
        info = client.publish(art.name, request, store.files_root)
    store.outbox_done(request.client_id)
    print(f"rankwise: {info.qualified_name} on {server}")
    return 0


def cmd_sync_artifacts(path: Path, server: str, token: str | None) -> int:
    """The artifact part of ``rankwise sync``; returns the number of failures."""
    from ..artifacts.remote import RemoteArtifacts
    from ..artifacts.sync import artifact_projects, sync_artifacts

    root, projects = artifact_projects(path)
    failures = 0
    for project in projects:
        try:
            client = RemoteArtifacts(server, project, token)
        except Exception as exc:
            print(f"rankwise: artifacts of {project!r} not synced: {exc}")
            failures += 1
            continue
        with client:
            report = sync_artifacts(root, project, client)
        print(
            f"rankwise: artifacts of {project!r}: {len(report.published)} version(s), "
            f"{report.uses} use(s) synced"
        )
        for what, why in sorted(report.failed.items()):
            print(f"rankwise: error: {what}: {json.dumps(why)}")
        failures += len(report.failed)
    return failures
