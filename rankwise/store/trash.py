"""Deleting runs: the trash, purges and their blob collection, the audit log (migration 15).

* **Trash.** ``delete_runs`` sets ``runs.deleted_at`` (and who) and drops the run's
  ``run_index`` row, in one transaction with its audit entry: the run is hidden from
  every list and filter, and ``get_run`` answers None, while all its rows stay.
  ``restore_runs`` clears the mark (the index row is rebuilt on the next read).
* **Purge.** ``purge_runs`` removes one run per write transaction: its streams, points,
  aggregates, console, media rows, blob kinds, alerts, edits and index row, the artifact
  versions it logged that nothing else keeps (below) and its lineage; the ``runs`` row
  stays as a tombstone (``purged_at``) so that a late upload is refused (410), not taken
  as a new run. In the same transaction a ``purges`` journal row lists the blobs those
  rows named. A crash (SIGKILL) before the commit leaves the run whole (in the trash or
  not, as it was); after it, the run is gone and the journal remains.
* **Blob collection** (``collect``), only after that commit: each journalled digest no
  remaining row references (a run's ``blob_kinds``, in the trash too, or an artifact
  version's file or chunk in the project) is deleted from the blob store, then the
  journal row goes. It is idempotent: a server restart (``collect`` at start and in every
  sweep) finishes a purge a crash interrupted. So a blob may outlive its rows (collected
  later), but a row never names a deleted blob.
* **Artifacts.** A version logged by a purged run survives while another run uses it
  (``artifact_uses``), an alias names it, or it is its name's latest (``latest`` is the
  alias W&B always shows); it then stays with ``run_id`` NULL (its logger is gone).
* **Audit.** Every delete, restore and purge is one ``audit_log`` row: who, action,
  project, target (run ids, or the filter as JSON), count, when.

A narrow race is left open: a live run that uploads a blob another run's purge is
collecting at that instant may find it gone before its record lands; its upload then gets
409 ``missing_blobs`` and sends the blob again (``rankwise.sdk.blobsend``), so nothing
dangles.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from ..stream.identity import StreamId
from ..wire.runs import RunInfo
from ..wire.trash import AuditEntry, TrashedRun
from . import migrations as M
from .sqlbase import SQLBase
from .tx import Tx, marks, schema_in

DAY = 86400.0
_LABELS_PER_READ = 400  # stream labels per statement of ``upload_states`` (under 999 marks)
DEFAULT_RETENTION_DAYS = 30.0

# Test hook: ``RANKWISE_TEST_PURGE_PAUSE`` = ``rows`` (inside a purge's row transaction,
# before its commit) or ``blobs`` (after its first blob is deleted): the purge writes the
# file ``RANKWISE_TEST_PURGE_MARK`` and sleeps there, for a test to SIGKILL the server.
PAUSE_ENV = "RANKWISE_TEST_PURGE_PAUSE"
MARK_ENV = "RANKWISE_TEST_PURGE_MARK"


def _pause(point: str) -> None:
    if os.environ.get(PAUSE_ENV) != point:
        return
    mark = os.environ.get(MARK_ENV)
    if mark:
        Path(mark).write_text(point)
    time.sleep(3600)


class Collector(Protocol):
    """What blob collection needs of a blob store (``store.blobs.BlobStore``)."""

    def delete(self, project: str, digest: str) -> bool: ...


# Run-keyed and stream-keyed tables a purge empties of the run's rows.
_BY_RUN = ("aggs", "console", "media_items", "media_tables", "histograms", "blob_kinds",
           "run_edits", "run_index")  # fmt: skip
_BY_STREAM = ("chunks", "series", "console_counts", "stalls")


def _pending_table(tx: Tx) -> tuple[str, ...]:
    """``upload_blocks`` (uploads not yet compacted) where the schema has it."""
    return ("upload_blocks",) if schema_in(tx) >= M.PENDING else ()


def _stream_tables(tx: Tx) -> tuple[str, ...]:
    """``_BY_STREAM``, and ``chunk_sums`` where the schema has it."""
    return _BY_STREAM + (("chunk_sums",) if schema_in(tx) >= M.SUMS else ())


class Trash(SQLBase):
    """Store methods for deleting runs; mixed into ``SQLStore`` (see the module docstring)."""

    def _run(self, tx: Tx, project: str, run_id: str, now: float) -> RunInfo | None:
        raise NotImplementedError  # SQLStore's

    # -- state -------------------------------------------------------------------------

    def run_gone(self, project: str, run_id: str) -> str | None:
        """``deleted`` (in the trash), ``purged`` (removed for good) or None (live, or
        unknown): what an upload to the run is answered (``server.upload``)."""

        def read(tx: Tx) -> str | None:
            if not self._trash(tx):
                return None
            row = tx.one(
                "SELECT deleted_at, purged_at FROM runs WHERE project = ? AND run_id = ?",
                (project, run_id),
            )
            if row is None or row[0] is None:
                return None
            return "purged" if row[1] is not None else "deleted"

        return self._read(read)

    def upload_state(self, key: StreamId) -> tuple[str | None, int]:
        """``run_gone`` and the stream's mark (-1: unknown) in one read transaction."""
        return self.upload_states([key])[0]

    def upload_states(self, keys: Sequence[StreamId]) -> list[tuple[str | None, int]]:
        """``upload_state`` of each of ``keys``, all in one read transaction (a node's
        batch asks for a dozen streams at once: one snapshot, not one each), and one
        statement per run they name (``_LABELS_PER_READ`` labels at a time): on
        PostgreSQL each statement is a round trip, which a thousand ranks' uploads pay
        every second."""

        def read(tx: Tx) -> list[tuple[str | None, int]]:
            deleted = ", r.deleted_at, r.purged_at" if self._trash(tx) else ""
            by_run: dict[tuple[str, str], list[str]] = {}
            for key in keys:
                by_run.setdefault((key.project, key.run_id), []).append(key.label)
            found: dict[tuple[str, str, str, int], int] = {}  # (project, run, label, inc.)
            gone: dict[tuple[str, str], str | None] = {}  # the runs that exist
            for (project, run_id), labels in by_run.items():
                wanted = sorted(set(labels))
                for a in range(0, len(wanted), _LABELS_PER_READ):
                    part = wanted[a : a + _LABELS_PER_READ]
                    among, params = tx.any_of("s.label", part)
                    for row in tx.all(
                        f"SELECT s.label, s.incarnation, s.acked_seq{deleted} FROM runs r "
                        f"LEFT JOIN streams s ON s.run = r.id AND {among} "
                        "WHERE r.project = ? AND r.run_id = ?",
                        (*params, project, run_id),
                    ):
                        state = None
                        if deleted and row[3] is not None:
                            state = "purged" if row[4] is not None else "deleted"
                        gone[(project, run_id)] = state
                        if row[0] is not None:
                            mark = -1 if row[2] is None else int(row[2])
                            found[(project, run_id, str(row[0]), int(row[1]))] = mark
            out: list[tuple[str | None, int]] = []
            for key in keys:
                run = (key.project, key.run_id)
                if run not in gone:
                    out.append((None, -1))
                else:
                    mark = found.get((key.project, key.run_id, key.label, key.incarnation), -1)
                    out.append((gone[run], mark))
            return out

        return self._read(read) if keys else []

    # -- delete and restore ------------------------------------------------------------

    def _known(self, tx: Tx, project: str, run_ids: Sequence[str]) -> list[tuple[int, str, Any]]:
        """(pk, run id, deleted_at) of those of ``run_ids`` that are runs with data and
        not purged, in the order given."""
        out: list[tuple[int, str, Any]] = []
        ids = list(dict.fromkeys(run_ids))
        for a in range(0, len(ids), 500):
            part = ids[a : a + 500]
            rows = tx.all(
                "SELECT r.id, r.run_id, r.deleted_at FROM runs r "
                f"WHERE r.project = ? AND r.run_id IN ({marks(len(part))}) "
                "AND r.purged_at IS NULL AND EXISTS "
                "(SELECT 1 FROM streams s WHERE s.run = r.id AND s.acked_seq >= 0)",
                (project, *part),
            )
            got = {str(r[1]): (int(r[0]), str(r[1]), r[2]) for r in rows}
            out += [got[i] for i in part if i in got]
        return out

    def delete_runs(
        self, project: str, run_ids: Sequence[str], who: str, target: str | None = None
    ) -> list[str]:
        """Move these runs to the trash (those live; unknown ones are skipped); returns
        the ids moved. ``target``: what the audit log names (default: the ids)."""

        def put(tx: Tx) -> list[str]:
            now = time.time()
            todo = [
                (pk, rid) for pk, rid, gone in self._known(tx, project, run_ids) if gone is None
            ]
            for pk, _ in todo:
                tx.run(
                    "UPDATE runs SET deleted_at = ?, deleted_by = ? WHERE id = ?", (now, who, pk)
                )
                tx.run("DELETE FROM run_index WHERE run = ?", (pk,))
            done = [rid for _, rid in todo]
            _audit(tx, now, who, "delete", project, target or " ".join(done), len(done))
            return done

        return self._write(put)

    def restore_runs(self, project: str, run_ids: Sequence[str], who: str) -> list[str]:
        """Take these runs out of the trash; returns the ids restored."""

        def put(tx: Tx) -> list[str]:
            now = time.time()
            todo = [(pk, rid) for pk, rid, gone in self._known(tx, project, run_ids) if gone]
            for pk, _ in todo:
                tx.run("UPDATE runs SET deleted_at = NULL, deleted_by = NULL WHERE id = ?", (pk,))
                tx.run("DELETE FROM run_index WHERE run = ?", (pk,))
            done = [rid for _, rid in todo]
            _audit(tx, now, who, "restore", project, " ".join(done), len(done))
            return done

        return self._write(put)

    def trashed_runs(self, project: str, retention_days: float) -> list[TrashedRun]:
        """The project's runs in the trash, newest deletion first."""

        def read(tx: Tx) -> list[TrashedRun]:
            if not self._trash(tx):
                return []
            rows = tx.all(
                "SELECT run_id, deleted_at, deleted_by FROM runs WHERE project = ? "
                "AND deleted_at IS NOT NULL AND purged_at IS NULL ORDER BY deleted_at DESC, run_id",
                (project,),
            )
            now = time.time()
            out = []
            for rid, at, by in rows:
                run = self._run(tx, project, str(rid), now)
                out.append(
                    TrashedRun(
                        project=project,
                        id=str(rid),
                        name=run.name if run is not None else str(rid),
                        deleted_at=float(at),
                        deleted_by=by,
                        purge_after=float(at) + retention_days * DAY,
                    )
                )
            return out

        return self._read(read)

    def expired_runs(self, before: float) -> list[tuple[str, str]]:
        """(project, run id) of the runs deleted before ``before``, not purged yet."""

        def read(tx: Tx) -> list[tuple[str, str]]:
            if not self._trash(tx):
                return []
            rows = tx.all(
                "SELECT project, run_id FROM runs WHERE deleted_at < ? AND purged_at IS NULL "
                "ORDER BY deleted_at",
                (before,),
            )
            return [(str(p), str(r)) for p, r in rows]

        return self._read(read)

    # -- purge -------------------------------------------------------------------------

    def purge_runs(
        self,
        project: str,
        run_ids: Sequence[str],
        who: str,
        blobs: Collector | None,
        target: str | None = None,
    ) -> list[str]:
        """Remove these runs for good (in the trash or not), one transaction each, then
        collect their blobs no remaining row references; returns the ids purged."""
        known = self._read(lambda tx: [rid for _, rid, _ in self._known(tx, project, run_ids)])
        self._write(
            lambda tx: _audit(
                tx, time.time(), who, "purge", project, target or " ".join(known), len(known)
            )
        )
        done = []
        for rid in known:

            def rows(tx: Tx, rid: str = rid) -> bool:
                return self._purge_rows(tx, project, rid)

            if self._write(rows):
                done.append(rid)
        self._forget_streams(project, set(done))
        self.collect(blobs)
        return done

    def _forget_streams(self, project: str, run_ids: set[str]) -> None:
        cache = getattr(self, "_stream_ids", None)
        if cache is None or not run_ids:
            return
        for key in [k for k in cache if k.project == project and k.run_id in run_ids]:
            cache.pop(key, None)

    def _purge_rows(self, tx: Tx, project: str, run_id: str) -> bool:
        row = tx.one(
            "SELECT id FROM runs WHERE project = ? AND run_id = ? AND purged_at IS NULL"
            + tx.for_update,
            (project, run_id),
        )
        if row is None:
            return False
        run = int(row[0])
        sids = [int(s[0]) for s in tx.all(
            f"SELECT id FROM streams WHERE run = ? ORDER BY id{tx.for_update}", (run,)
        )]  # fmt: skip
        digests = {str(d[0]) for d in tx.all("SELECT digest FROM blob_kinds WHERE run = ?", (run,))}
        digests |= _drop_artifacts(tx, project, run_id)
        by_stream = _stream_tables(tx)
        for a in range(0, len(sids), 500):
            part = sids[a : a + 500]
            for table in by_stream:
                tx.run(f"DELETE FROM {table} WHERE stream IN ({marks(len(part))})", part)
        events = [int(e[0]) for e in tx.all("SELECT id FROM alert_events WHERE run = ?", (run,))]
        for a in range(0, len(events), 500):
            part = events[a : a + 500]
            tx.run(f"DELETE FROM alert_outbox WHERE event IN ({marks(len(part))})", part)
        tx.run("DELETE FROM alert_events WHERE run = ?", (run,))
        for table in _BY_RUN + _pending_table(tx):
            tx.run(f"DELETE FROM {table} WHERE run = ?", (run,))
        tx.run("DELETE FROM streams WHERE run = ?", (run,))
        now = time.time()
        tx.run(
            "UPDATE runs SET purged_at = ?, deleted_at = COALESCE(deleted_at, ?) WHERE id = ?",
            (now, now, run),
        )
        tx.run(
            "INSERT INTO purges (run, project, run_id, at, digests) VALUES (?, ?, ?, ?, ?)",
            (run, project, run_id, now, json.dumps(sorted(digests))),
        )
        _pause("rows")
        return True

    def pending_purges(self) -> int:
        """Purges whose blobs are not all collected yet (the journal's rows)."""
        row = self._read(
            lambda tx: tx.one("SELECT COUNT(*) FROM purges") if self._trash(tx) else (0,)
        )
        return int(row[0]) if row else 0

    def collect(self, blobs: Collector | None) -> int:
        """Finish every journalled purge: delete the blobs it names that no row
        references any more, then its journal row; returns how many blobs were deleted.
        Without a blob store only the journal is cleared (``rankwise ui``: a run's blobs
        go with its folder)."""
        jobs = self._read(
            lambda tx: (
                tx.all("SELECT run, project, digests FROM purges ORDER BY run")
                if self._trash(tx)
                else []
            )
        )
        deleted = 0
        for run, project, text in jobs:
            digests = [str(d) for d in json.loads(text)]
            if blobs is not None:

                def free(tx: Tx, p: str = str(project), ds: list[str] = digests) -> list[str]:
                    return _unreferenced(tx, p, ds)

                for d in self._read(free):
                    if blobs.delete(str(project), d):
                        deleted += 1
                        _pause("blobs")

            def done_with(tx: Tx, run: Any = run) -> int:
                return tx.run("DELETE FROM purges WHERE run = ?", (run,))

            self._write(done_with)
        return deleted

    # -- audit -------------------------------------------------------------------------

    def audit_log(self, limit: int = 1000, project: str | None = None) -> list[AuditEntry]:
        """The audit log, newest first."""

        def read(tx: Tx) -> list[AuditEntry]:
            if not self._trash(tx):
                return []
            sql = "SELECT at, who, action, project, target, count FROM audit_log"
            params: list[Any] = []
            if project is not None:
                sql += " WHERE project = ?"
                params.append(project)
            rows = tx.all(sql + " ORDER BY at DESC, id DESC LIMIT ?", [*params, int(limit)])
            return [
                AuditEntry(at=float(a), who=w, action=x, project=p, target=t, count=int(n))
                for a, w, x, p, t, n in rows
            ]

        return self._read(read)


def _audit(tx: Tx, at: float, who: str, action: str, project: str, target: str, n: int) -> None:
    tx.run(
        "INSERT INTO audit_log (at, who, action, project, target, count) VALUES (?, ?, ?, ?, ?, ?)",
        (at, who, action, project, target[:4000], n),
    )


def _drop_artifacts(tx: Tx, project: str, run_id: str) -> set[str]:
    """Remove the artifact versions ``run_id`` logged that nothing keeps (see the module
    docstring) and its lineage; returns the digests (files and chunks) they named."""
    digests: set[str] = set()
    rows = tx.all(
        "SELECT v.id, v.name, v.version, n.latest FROM artifact_versions v "
        "JOIN artifact_names n ON n.project = v.project AND n.name = v.name "
        "WHERE v.project = ? AND v.run_id = ?",
        (project, run_id),
    )
    for vid, name, version, latest in rows:
        used = tx.one(
            "SELECT 1 FROM artifact_uses WHERE project = ? AND name = ? AND version = ? "
            "AND run_id <> ?",
            (project, name, version, run_id),
        )
        aliased = tx.one(
            "SELECT 1 FROM artifact_aliases WHERE project = ? AND name = ? AND version = ?",
            (project, name, version),
        )
        if used or aliased or int(version) == int(latest):
            tx.run("UPDATE artifact_versions SET run_id = NULL WHERE id = ?", (vid,))
            continue
        for digest, chunks in tx.all(
            "SELECT digest, chunks FROM artifact_files WHERE version_id = ?", (vid,)
        ):
            digests.add(str(digest))
            for c in json.loads(chunks) if chunks else []:
                digests.add(str(c[0] if isinstance(c, list) else c["digest"]))
        tx.run("DELETE FROM artifact_files WHERE version_id = ?", (vid,))
        tx.run(
            "DELETE FROM artifact_commits WHERE project = ? AND name = ? AND version = ?",
            (project, name, version),
        )
        tx.run("DELETE FROM artifact_versions WHERE id = ?", (vid,))
    tx.run("DELETE FROM artifact_uses WHERE project = ? AND run_id = ?", (project, run_id))
    return digests


def _unreferenced(tx: Tx, project: str, digests: Sequence[str]) -> list[str]:
    """Those of ``digests`` no row of the project references: no run's blob kinds (runs
    in the trash included) and no artifact version's file or chunk."""
    out = []
    for d in digests:
        if tx.one(
            "SELECT 1 FROM blob_kinds b JOIN runs r ON r.id = b.run "
            "WHERE b.digest = ? AND r.project = ?",
            (d, project),
        ):
            continue
        if tx.one(
            "SELECT 1 FROM artifact_files f JOIN artifact_versions v ON v.id = f.version_id "
            "WHERE v.project = ? AND (f.digest = ? OR f.chunks LIKE ?)",
            (project, d, f"%{d}%"),
        ):
            continue
        out.append(d)
    return out
