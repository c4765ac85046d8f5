"""Store reads of rich data: a run's media keys, media items, histograms, tables' rows.

Mixed into ``SQLStore`` (it uses the store's read snapshots and stream lookups); the
rows are written by ``rankwise.store.media``. Each read is one snapshot and one index
range of ``(run, key, step)``. A run the store does not know answers ``None`` (the HTTP
API's 404); a known run without the key answers empty.

Labels are stream labels; the incarnations of one label (a restarted rank) read as one.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..stream import records as R
from ..wire.media import HistogramsEntry, MediaKey, MediaReply, MediaRow
from .media import floats
from .sqlbase import SQLBase
from .tx import Tx
from .types import TableRow

_meta = msgspec.json.Decoder(dict[str, Any])
_strs = msgspec.json.Decoder(list[str])
_start = msgspec.msgpack.Decoder(R.StreamStart)


class MediaReads(SQLBase):
    """Store methods for media items, tables and histograms."""

    def _streams(self, tx: Tx, project: str, run_id: str) -> list[tuple[int, int, str, int]]:
        raise NotImplementedError  # SQLStore's

    def _labels(self, tx: Tx, project: str, run_id: str) -> tuple[int, dict[int, str]] | None:
        """(run id, stream id → label) of a known run; None for an unknown one."""
        streams = self._streams(tx, project, run_id)
        if not streams:
            return None
        return streams[0][1], {sid: label for sid, _, label, _ in streams}

    def _primary_labels(self, tx: Tx, run: int) -> set[str]:
        return {
            label
            for label, start in tx.all(
                "SELECT label, start FROM streams WHERE run = ? AND acked_seq >= 0", (run,)
            )
            if start is not None and _start.decode(start).is_primary
        }

    def media_keys(self, project: str, run_id: str) -> list[MediaKey] | None:
        """Every media, table and histogram key of the run, with its steps and labels."""

        def read(tx: Tx) -> list[MediaKey] | None:
            got = self._labels(tx, project, run_id)
            if got is None:
                return None
            run, labels = got
            # One entry per key (a key logged as two kinds, which the SDK does not do,
            # is named by the kind of its lowest step); its steps and labels of any kind.
            found: dict[str, tuple[dict[str, int], set[int], set[str]]] = {}
            for sql in (
                "SELECT DISTINCT key, kind, step, stream FROM media_items WHERE run = ?",
                "SELECT DISTINCT key, 'table', step, stream FROM media_tables WHERE run = ?",
                "SELECT DISTINCT key, 'histogram', step, stream FROM histograms WHERE run = ?",
            ):
                for key, kind, step, sid in tx.all(sql, (run,)):
                    if int(sid) in labels:
                        kinds, steps, who = found.setdefault(key, ({}, set(), set()))
                        kinds[kind] = min(int(step), kinds.get(kind, int(step)))
                        steps.add(int(step))
                        who.add(labels[int(sid)])
            return [
                MediaKey(
                    key=k,
                    kind=min(kinds, key=lambda kd: (kinds[kd], kd)),
                    steps=sorted(s),
                    labels=sorted(w),
                )
                for k, (kinds, s, w) in sorted(found.items())
            ]

        return self._read(read)

    def media(
        self, project: str, run_id: str, key: str, label: str | None = None, step: int | None = None
    ) -> MediaReply | None:
        """The items of one media key (at ``step``, of ``label``; None: all)."""

        def read(tx: Tx) -> MediaReply | None:
            got = self._labels(tx, project, run_id)
            if got is None:
                return None
            run, labels = got
            sids = {s for s, lab in labels.items() if label is None or lab == label}
            steps = sorted(
                int(r[0])
                for r in tx.all(
                    "SELECT DISTINCT step FROM media_items WHERE run = ? AND key = ?", (run, key)
                )
            )
            sql = (
                "SELECT step, stream, idx, kind, digest, format, size, caption, meta, seq, time "
                "FROM media_items WHERE run = ? AND key = ?"
            )
            params: list[Any] = [run, key]
            if step is not None:
                sql += " AND step = ?"
                params.append(step)
            rows = []
            for st, sid, idx, kind, digest, fmt, size, caption, meta, seq, t in tx.all(sql, params):
                if int(sid) not in sids:
                    continue
                extra = _meta.decode(meta) if meta and meta != "{}" else {}
                item = msgspec.convert(
                    {
                        **extra,
                        "step": int(st),
                        "label": labels[int(sid)],
                        "kind": kind,
                        "index": int(idx),
                        "digest": digest,
                        "format": fmt,
                        "size": int(size),
                        "caption": caption,
                        "time": float(t),
                    },
                    MediaRow,
                )
                rows.append(((int(st), item.label, int(seq), int(idx)), item))
            rows.sort(key=lambda r: r[0])
            return MediaReply(key=key, items=[r[1] for r in rows], steps=steps)

        return self._read(read)

    def histograms(
        self, project: str, run_id: str, key: str, label: str | None = None
    ) -> list[HistogramsEntry] | None:
        """One series per label of one histogram key, in step order."""

        def read(tx: Tx) -> list[HistogramsEntry] | None:
            got = self._labels(tx, project, run_id)
            if got is None:
                return None
            run, labels = got
            per: dict[str, list[tuple[Any, ...]]] = {}
            for st, seq, sid, nan, pos, neg, counts, edges in tx.all(
                "SELECT step, seq, stream, nan, posinf, neginf, counts, edges FROM histograms "
                "WHERE run = ? AND key = ? ORDER BY step",
                (run, key),
            ):
                lab = labels.get(int(sid))
                if lab is not None and (label is None or lab == label):
                    per.setdefault(lab, []).append(
                        (int(st), int(seq), nan, pos, neg, counts, edges)
                    )
            out = []
            for lab in sorted(per):
                rows = sorted(per[lab], key=lambda r: (r[0], r[1]))
                out.append(
                    HistogramsEntry(
                        label=lab,
                        steps=[r[0] for r in rows],
                        edges=[floats(r[6]) for r in rows],
                        counts=[floats(r[5]) for r in rows],
                        nan=[int(r[2]) for r in rows],
                        posinf=[int(r[3]) for r in rows],
                        neginf=[int(r[4]) for r in rows],
                    )
                )
            return out

        return self._read(read)

    def table_row(
        self,
        project: str,
        run_id: str,
        key: str,
        label: str | None = None,
        step: int | None = None,
    ) -> TableRow | None:
        """The table logged under ``key`` at ``step`` (None: the latest) by ``label``
        (None: the primary stream's at that step, else the lowest label's), as the local
        reader picks it; None when the run or such a table is unknown. Logged twice at one
        step by one label: the later one."""

        def read(tx: Tx) -> TableRow | None:
            got = self._labels(tx, project, run_id)
            if got is None:
                return None
            run, labels = got
            rows = [
                (int(st), labels[int(sid)], int(seq), d, int(sz), int(n), cols, types)
                for st, sid, seq, d, sz, n, cols, types in tx.all(
                    "SELECT step, stream, seq, digest, size, nrows, columns, types "
                    "FROM media_tables WHERE run = ? AND key = ?",
                    (run, key),
                )
                if int(sid) in labels
            ]
            if not rows:
                return None
            steps = sorted({r[0] for r in rows})
            all_labels = sorted({r[1] for r in rows})
            pick = [r for r in rows if label is None or r[1] == label]
            if step is not None:
                pick = [r for r in pick if r[0] == step]
            elif pick:
                top = max(r[0] for r in pick)
                pick = [r for r in pick if r[0] == top]
            if not pick:
                return None
            # The primary's at that step, else the lowest label's; its latest record.
            primary = self._primary_labels(tx, run)
            best = min(pick, key=lambda r: (r[1] not in primary, r[1], -r[2]))
            return TableRow(
                key=key,
                label=best[1],
                step=best[0],
                digest=best[3],
                size=best[4],
                nrows=best[5],
                columns=_strs.decode(best[6]),
                types=_strs.decode(best[7]),
                steps=steps,
                labels=all_labels,
            )

        return self._read(read)

    def blob_kind(self, project: str, digest: str) -> tuple[str, str] | None:
        """(kind, format) of a blob a record of the project named (e.g. ``("image",
        "png")``, ``("table", "parquet")``); None when no record of the project names it."""

        def read(tx: Tx) -> tuple[str, str] | None:
            row = tx.one(
                "SELECT b.kind, b.format FROM blob_kinds b JOIN runs r ON r.id = b.run "
                "WHERE b.digest = ? AND r.project = ? ORDER BY b.kind LIMIT 1",
                (digest, project),
            )
            return None if row is None else (str(row[0]), str(row[1]))

        return self._read(read)

    # The name the blob routes look the content type up by (``routes.blobs.media_type``).
    blob_media = blob_kind
