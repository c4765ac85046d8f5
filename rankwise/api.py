"""Reading runs back: ``rankwise.Api(dir=...)`` or ``rankwise.Api(server=URL)``.

``Api`` picks a reader: the local one folds a data directory's stream files
(``rankwise.read.local``), the remote one asks a server (``rankwise.read.remote``). Both
return the same objects, declared once in ``rankwise.wire.runs``: ``RunInfo`` and its
``StreamInfo``s.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .errors import UsageError
from .read.local import LocalReader
from .settings import default_dir, default_project
from .stream import records as R
from .wire.runs import RunInfo, StreamInfo

if TYPE_CHECKING:
    from .artifacts.artifact import Artifact
    from .read.remote import RemoteReader
    from .wire.artifacts import ArtifactSummary
    from .wire.reports import Report, ReportSummary

__all__ = ["Api", "RunInfo", "StreamInfo"]


class Api:
    """Read runs from a data directory, ``Api(dir=...)``, or a server, ``Api(server=URL)``.

    ``dir`` defaults to ``RANKWISE_DIR`` or ``./rankwise-runs`` (an earlier rankwise's
    ``./rankwise`` when there is no ``./rankwise-runs``). ``crash_timeout`` (seconds) is
    how old a silent stream's last record must be before it is called crashed (a server
    applies its own). With ``server=`` the same methods return the same objects, read
    through the HTTP API (``rankwise.read.remote``), authenticated with ``token`` (a read
    token; default ``RANKWISE_TOKEN``).

    ``workers``: with a data directory, how many processes may read a big run's stream
    files (at least ``read.parallel.MIN_FILES`` files, ``MIN_BYTES`` in all) when a run
    is loaded: 1, the default, reads them in this process; more reads them in
    ``min(workers, CPUs, files)`` processes, this one and a pool of worker processes
    started for that read (``"forkserver"``; ``rankwise.read.parallel``), which gives the
    same ``RunInfo``. A script that sets it runs its code under
    ``if __name__ == "__main__":``, as for any process pool. The CLI (``rankwise show``,
    ``rankwise runs``) passes the CPU count.
    """

    def __init__(
        self,
        dir: str | os.PathLike[str] | None = None,
        crash_timeout: float = 60.0,
        server: str | None = None,
        token: str | None = None,
        workers: int = 1,
    ) -> None:
        self.dir = default_dir(dir, read=True)
        self.crash_timeout = crash_timeout
        self._local = LocalReader(self.dir, crash_timeout, workers)
        self._remote: RemoteReader | None = None
        if server is not None:
            from .read.remote import RemoteReader

            self._remote = RemoteReader(server, token=token)

    def projects(self) -> list[str]:
        if self._remote is not None:
            return self._remote.projects()
        return self._local.projects()

    def runs(
        self,
        project: str | None = None,
        group: str | None = None,
        job_type: str | None = None,
        state: str | Sequence[str] | None = None,
        tags: str | Sequence[str] | None = None,
        filters: dict[str, Any] | None = None,
        order: str | None = None,
    ) -> list[RunInfo]:
        """Runs, newest first, filtered by every argument given (tags: all must match).

        ``filters`` takes W&B's MongoDB-style filters (``{"config.lr": {"$gt": 0.01}}``,
        ``$and``/``$or``; ``rankwise.filters``, docs/filters.md) and ``order`` W&B's
        order (``"-created_at"``, ``"+summary_metrics.loss"``); a server evaluates them in
        SQL. A bad filter raises ``UsageError`` naming the operator or field."""
        states = {state} if isinstance(state, str) else set(state or ())
        for s in sorted(states):  # the server's rule and message, so both readers agree
            if s not in R.STATES:
                raise UsageError(f"state={s!r} is not one of {', '.join(R.STATES)}")
        want_tags = {tags} if isinstance(tags, str) else set(tags or ())
        if filters is not None or order is not None:
            from .filters import parse, parse_order

            parse(filters)  # a bad filter fails here, before a request is sent
            parse_order(order)
            parts: list[dict[str, Any]] = [filters] if filters else []
            for key, value in (("group", group), ("job_type", job_type)):
                if value is not None:
                    parts.append({key: value})
            if states:
                parts.append({"state": {"$in": sorted(states)}})
            parts += [{"tags": t} for t in sorted(want_tags)]
            combined = parts[0] if len(parts) == 1 else ({"$and": parts} if parts else None)
            projects = [project] if project else self.projects()
            found: list[RunInfo] = []
            for proj in projects:
                if self._remote is not None:
                    found += self._remote.find(proj, combined, order)
                else:
                    found += self._local.find(proj, combined, order)
            return [self._mine(r) for r in found]
        if self._remote is not None:
            got = self._remote.runs(project, group, job_type, states, want_tags)
        else:
            got = self._local.runs(project, group, job_type, states, want_tags)
        return [self._mine(r) for r in got]

    def run(self, id: str, project: str | None = None) -> RunInfo:
        """One run by id; ``"project/id"`` also works."""
        if project is None and "/" in id:
            project, id = id.split("/", 1)
        if self._remote is not None:
            return self._mine(self._remote.run(id, project))
        return self._mine(self._local.run(id, project))

    def _mine(self, run: RunInfo) -> RunInfo:
        from .manage import snapshot

        run._api = self  # type: ignore[attr-defined]  # for run.update()
        run._kept = snapshot(run)  # type: ignore[attr-defined]  # what update() compares to
        return run

    def _ref(self, id: str, project: str | None) -> tuple[str, str]:
        if project is None and "/" in id:
            project, id = id.split("/", 1)
        if project is None:
            raise UsageError(f"pass project= (or 'project/{id}') to edit a run on a server")
        return project, id

    # -- editing (rankwise.manage) -------------------------------------------------------
    def update_run(self, run: RunInfo) -> RunInfo:
        """Keep what was changed on ``run`` (name, tags, notes, group, job type) since it
        was read (``RunInfo.update()``, W&B's ``Run.update()``); the run as kept."""
        from . import manage

        return manage.update(run)

    def edit_run(
        self,
        id: str,
        project: str | None = None,
        *,
        name: str | None = None,
        tags: Sequence[str] | None = None,
        add_tags: Sequence[str] = (),
        remove_tags: Sequence[str] = (),
        notes: str | None = None,
        group: str | None = None,
        job_type: str | None = None,
        clear: Sequence[str] = (),
        source: str = "api",
    ) -> RunInfo:
        """Change a run's name, tags (the whole list, or tags to add and remove), notes,
        group or job type (``clear``: fields set to none); kept with the time, merged
        by time with the live run's own edits. Returns the run as edited."""
        from . import manage
        from .edits import changes

        body = manage.body_of(name=name, tags=tags, add_tags=add_tags,
                              remove_tags=remove_tags, notes=notes, group=group,
                              job_type=job_type, clear=clear)  # fmt: skip
        if self._remote is not None:  # a writer token may not read: no read first
            changes((), **body)  # checked here, before a request is sent
            proj, rid = self._ref(id, project)
            remote = self._remote
            got = manage.edit_remote(remote.server, remote._token, proj, rid, body, source)
            return self._mine(remote._attach(got))
        run = self.run(id, project)
        manage.edit_local(self.dir, run, changes(run.tags, **body), source)
        return self.run(run.id, run.project)

    def run_edits(self, id: str, project: str | None = None) -> list[Any]:
        """The run's edit history (``rankwise.edits.Edit``: field, value, at, source,
        who), oldest first."""
        from . import edits as E
        from . import manage

        if self._remote is not None:
            proj, rid = self._ref(id, project)
            return manage.history_remote(self._remote.server, self._remote._token, proj, rid)
        run = self.run(id, project)
        from .stream.files import iter_stream_files
        from .stream.frames import scan

        live: list[Any] = []
        for f in iter_stream_files(self.dir, run.project):
            if f.id.run_id == run.id:
                live += E.live_edits(scan(f.path.read_bytes()).records)
        return E.ordered(live + E.read_file(self.dir / run.project / run.id))

    # -- deleting (rankwise.deletion) -----------------------------------------------------
    def delete_runs(
        self,
        ids: Sequence[str] = (),
        project: str | None = None,
        *,
        filters: dict[str, Any] | None = None,
        purge: bool = False,
        dry_run: bool = False,
    ) -> list[str]:
        """Delete runs by id (``"project/id"`` works) or those ``filters`` picks (W&B's
        MongoDB-style, as ``runs(filters=)``): to the trash, restorable with
        ``restore_runs`` (a server purges its trash after its retention, 30 days by
        default); ``purge=True`` removes them for good, their blobs too where nothing
        else references them. ``dry_run``: only return which runs it would be.
        Returns the ids deleted. A server needs a write token of the project or an
        admin token; a data directory moves the run folders to ``<dir>/.trash``."""
        from . import deletion as D

        if bool(ids) == (filters is not None):
            raise UsageError("pass run ids or filters=, one of the two")
        if isinstance(ids, str):
            ids = [ids]
        proj = project
        plain: list[str] = []
        for i in ids:
            p, rid = i.split("/", 1) if "/" in i else (proj, i)
            if proj is not None and p is not None and p != proj:
                raise UsageError("delete the runs of one project at a time")
            proj = p
            plain.append(rid)
        proj = default_project(proj)
        if filters is not None:
            from .filters import parse

            parse(filters)  # a bad filter fails here, before anything is deleted
        if self._remote is not None:
            remote = self._remote
            got = D.delete_remote(remote.server, remote._token, proj, plain, filters,
                                  purge, dry_run)  # fmt: skip
            return got.runs
        if filters is not None:
            plain = [r.id for r in self._local.find(proj, filters, None)]
        if dry_run:
            return plain
        target = D.filter_text(filters) if filters is not None else None
        return D.delete_local(self.dir, proj, plain, purge, target)

    def restore_runs(self, ids: Sequence[str], project: str | None = None) -> list[str]:
        """Take runs out of the trash; returns the ids restored (those in the trash)."""
        from . import deletion as D

        if isinstance(ids, str):
            ids = [ids]
        plain = [i.split("/", 1)[1] if "/" in i else i for i in ids]
        proj = default_project(project or next((i.split("/")[0] for i in ids if "/" in i), None))
        if self._remote is not None:
            return D.restore_remote(self._remote.server, self._remote._token, proj, plain)
        return D.restore_local(self.dir, proj, plain)

    def trash(self, project: str | None = None) -> list[Any]:
        """The project's runs in the trash (``rankwise.wire.trash.TrashedRun``: id, name,
        deleted_at, deleted_by, purge_after), newest deletion first."""
        from . import deletion as D

        proj = default_project(project)
        if self._remote is not None:
            return D.trash_remote(self._remote.server, self._remote._token, proj)
        return D.trash_local(self.dir, proj)

    def audit_log(self, project: str | None = None, limit: int = 1000) -> list[Any]:
        """Who deleted, restored or purged which runs, when (``AuditEntry``), newest
        first. A server answers admin tokens only."""
        from . import deletion as D

        if self._remote is not None:
            return D.audit_remote(self._remote.server, self._remote._token, project, limit)
        return D.audit_local(self.dir, project, limit)

    # -- artifacts (rankwise.artifacts) --------------------------------------------------
    def artifact(self, name: str, type: str | None = None) -> Artifact:
        """The artifact version ``"project/name:ref"`` names (ref: ``latest`` (default),
        ``v3`` or an alias; project: ``RANKWISE_PROJECT`` or ``default`` when left out),
        with its files listed; ``download()`` writes them. Records no lineage."""
        from .artifacts.artifact import Artifact
        from .artifacts.local import LocalArtifacts, parse_ref

        project, art_name, ref = parse_ref(name)
        project = default_project(project)
        if self._remote is not None:
            source = self._remote.artifact_source()
            with source.client(project) as client:
                info = client.get(art_name, ref)
            art = Artifact.from_version(info, source)
        else:
            store = LocalArtifacts(self.dir, project)
            art = Artifact.from_version(store.resolve(art_name, ref), store)
        if type is not None and art.type != type:
            raise UsageError(f"artifact {art.qualified_name} has type {art.type!r}, not {type!r}")
        return art

    def artifacts(
        self, project: str | None = None, type: str | None = None
    ) -> list[ArtifactSummary]:
        """The artifact names of ``project`` (of ``type`` only, when given): name, type,
        number of versions, latest version, its size and time."""
        project = default_project(project)
        if self._remote is not None:
            with self._remote.artifact_source().client(project) as client:
                return client.list(type)
        from .artifacts.local import LocalArtifacts

        return LocalArtifacts(self.dir, project).summaries(type)

    def artifact_versions(self, name: str, project: str | None = None) -> list[Artifact]:
        """Every version of artifact ``name``, newest first (without their file lists)."""
        from .artifacts.local import parse_ref

        proj, art_name, _ = parse_ref(name)
        project = default_project(proj or project)
        return [
            self.artifact(f"{project}/{art_name}:{v.version}")
            for v in self._versions(project, art_name)
        ]

    def _versions(self, project: str, name: str) -> list[Any]:
        if self._remote is not None:
            with self._remote.artifact_source().client(project) as client:
                return client.versions(name)
        from .artifacts.local import LocalArtifacts

        return LocalArtifacts(self.dir, project).versions(name)

    # -- reports (rankwise.wire.reports) ---------------------------------------------------
    def reports(self, project: str | None = None) -> list[ReportSummary]:
        """The reports of ``project`` (default ``RANKWISE_PROJECT`` or ``default``), by
        name: each one's title, latest version, when it was saved and its block count."""
        from .read import reports as rr

        project = project or os.environ.get("RANKWISE_PROJECT") or "default"
        if self._remote is not None:
            return rr.remote_reports(self._remote, project)
        return rr.local_reports(self.dir, project)

    def report(self, name: str, project: str | None = None, version: int | None = None) -> Report:
        """One report (``"project/name"`` also works): its title and blocks, the latest
        version unless ``version`` names an older one. Raises ``ReportNotFoundError``."""
        from .read import reports as rr

        if project is None and "/" in name:
            project, name = name.split("/", 1)
        project = project or os.environ.get("RANKWISE_PROJECT") or "default"
        if self._remote is not None:
            return rr.remote_report(self._remote, project, name, version)
        return rr.local_report(self.dir, project, name, version)
