"""Numbered schema migrations for both stores, recorded in a ``schema_version`` table.

Each migration is applied in its own transaction together with the row that records it,
so a crash mid-upgrade leaves the schema at the last whole version. Migrations are only
ever appended: a released one is never edited (the database may already hold it).

Tables (version 12)::

    runs      one row per (project, run_id); the integer ``id`` keys the rest
    streams   one row per stream: the mark (``acked_seq``), the folded state (``fold``,
              a msgpack ``StreamFold``; since version 11 it holds the stream's first
              non-finite value per metric) and the columns run listing needs without it
    metrics   metric names, interned to integers
    series    one row per (stream, metric): its point count and its open chunk
    chunks    columnar points of one series (see ``rankwise.store.chunks``)
    chunk_sums  (version 19) a closed chunk's sum and count of finite values per block
              of 2**wlog steps, keyed by the chunk's id (see ``rankwise.store.step_sums``)
    aggs      cross-rank aggregates per (run, metric, block of BLOCK steps), an
              ``Agg`` blob (see ``rankwise.store.aggregate``); since version 6 it counts
              the NaN, +Inf and -Inf values of each step
    views     the dashboard's saved views per (project, name), JSON
              (see ``rankwise.store.saved_views``)
    console   captured lines: run, stream, time, stdout/stderr, text; by (run, time)
              and (stream, time) (see ``rankwise.store.health``)
    console_counts  lines per (stream, stdout/stderr), kept with the lines
    stalls    the watchdog's stall reports per (stream, seq), stacks as JSON
    system_keys  system metric names; their series are chunks with metric = -id
    tokens    API tokens: id, role, projects (JSON list, NULL: all), sha256 of the secret,
              created, last_used, revoked (see ``rankwise.store.tokens``)
    sessions  dashboard sessions: sha256 of the cookie's 256-bit id, token, created,
              last_seen, revoked
    media_items  one row per item of a logged image/audio/video/html/text value (a
              gallery is several, ``idx`` in order): step, key, kind, format, digest,
              size, caption, the kind's own fields (width, height, ...) as JSON
    media_tables one row per logged table: step, key, the Parquet blob's digest and
              size, its shape, column names and types (JSON)
    histograms  one row per logged histogram: step, key, counts and edges as float64
              little-endian bytes, the NaN/+Inf/-Inf counts
    blob_kinds  what each blob a run's records name is (kind, format), so the server
              picks a served blob's content type from what it stored, never the client
    artifact_names     one row per (project, artifact name): its type, its latest version
              number (-1: none yet), the time it last changed; the row a commit locks
              (see ``rankwise.store.artifacts``)
    artifact_versions  one row per version v<N> of a name: manifest digest, size, file
              count, description, metadata (JSON), who logged it (run, label), when
    artifact_files     the manifest: one row per path of a version, file digest, size and
              chunks (JSON list of [digest, size]) or a reference URI (``ref``)
    artifact_aliases   (project, name, alias) -> version number, unique; ``latest`` is
              never stored (it is ``artifact_names.latest``)
    artifact_uses      lineage: (project, name, version, run, label) and when
    artifact_commits   (project, client_id) -> (name, version): a retried commit answers
              the version its first attempt made or matched
    alert_destinations  who is told: id, project ('*': all), origin, the ``Destination``
              as JSON (its secrets too: never shown), created
    alert_events  each event decided once: unique (run, kind, key), title, text, level,
              time, details (JSON) (see ``rankwise.store.alerts``)
    alert_outbox  one delivery per (event, destination): pending | delivered | failed,
              attempts, next_at (due time, or the claim's lease), last error, delivered
    reports   one row per (project, name, version) of a report: title, blocks (JSON),
              created, author; the newest version is the report (``rankwise.store.reports``)
    purges    (version 15) the purge journal: a purged run whose rows are gone and whose
              blobs (``digests``, JSON) are still to be collected (``rankwise.store.trash``)
    audit_log (version 15) who deleted, restored or purged what (project, target, count)
              and when
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import SchemaTooNewError
from .aggregate import WITH_COUNTS
from .tx import Tx


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sqlite: str
    postgres: str
    # Data the DDL cannot reach (rewriting blobs), run after it in the same transaction.
    data: Callable[[Tx], None] | None = None


_V1_SQLITE = """
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    project TEXT NOT NULL,
    run_id TEXT NOT NULL,
    UNIQUE (project, run_id)
);
CREATE TABLE streams (
    id INTEGER PRIMARY KEY,
    run INTEGER NOT NULL REFERENCES runs (id),
    label TEXT NOT NULL,
    incarnation INTEGER NOT NULL,
    acked_seq INTEGER NOT NULL DEFAULT -1,
    start BLOB,
    finish BLOB,
    first_time REAL,
    last_time REAL,
    last_step INTEGER NOT NULL DEFAULT -1,
    points INTEGER NOT NULL DEFAULT 0,
    dropped INTEGER NOT NULL DEFAULT 0,
    fold BLOB,
    UNIQUE (run, label, incarnation)
);
CREATE TABLE metrics (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
);
CREATE TABLE series (
    stream INTEGER NOT NULL,
    metric INTEGER NOT NULL,
    points INTEGER NOT NULL,
    open_chunk INTEGER,
    PRIMARY KEY (stream, metric)
);
-- Small columns first: SQLite reads a row's columns in order, through the overflow
-- pages of every blob before the one asked for, and a chart reads only head or subs.
CREATE TABLE chunks (
    id INTEGER PRIMARY KEY,
    stream INTEGER NOT NULL,
    metric INTEGER NOT NULL,
    n INTEGER NOT NULL,
    step_lo INTEGER NOT NULL,
    step_hi INTEGER NOT NULL,
    t_lo REAL NOT NULL,
    t_hi REAL NOT NULL,
    kind TEXT NOT NULL,
    head BLOB NOT NULL,
    subs BLOB NOT NULL,
    xs BLOB NOT NULL,
    ys BLOB NOT NULL,
    seqs BLOB NOT NULL,
    weights BLOB
);
CREATE INDEX chunks_by_step ON chunks (stream, metric, step_lo);
CREATE TABLE aggs (
    run INTEGER NOT NULL,
    metric INTEGER NOT NULL,
    block INTEGER NOT NULL,
    t_lo REAL NOT NULL,
    t_hi REAL NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (run, metric, block)
);
"""

_V1_POSTGRES = """
CREATE TABLE runs (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project TEXT NOT NULL,
    run_id TEXT NOT NULL,
    UNIQUE (project, run_id)
);
CREATE TABLE streams (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run BIGINT NOT NULL REFERENCES runs (id),
    label TEXT NOT NULL,
    incarnation BIGINT NOT NULL,
    acked_seq BIGINT NOT NULL DEFAULT -1,
    start BYTEA,
    finish BYTEA,
    first_time DOUBLE PRECISION,
    last_time DOUBLE PRECISION,
    last_step BIGINT NOT NULL DEFAULT -1,
    points BIGINT NOT NULL DEFAULT 0,
    dropped BIGINT NOT NULL DEFAULT 0,
    fold BYTEA,
    UNIQUE (run, label, incarnation)
);
CREATE TABLE metrics (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
);
CREATE TABLE series (
    stream BIGINT NOT NULL,
    metric BIGINT NOT NULL,
    points BIGINT NOT NULL,
    open_chunk BIGINT,
    PRIMARY KEY (stream, metric)
);
CREATE TABLE chunks (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    stream BIGINT NOT NULL,
    metric BIGINT NOT NULL,
    n BIGINT NOT NULL,
    step_lo BIGINT NOT NULL,
    step_hi BIGINT NOT NULL,
    t_lo DOUBLE PRECISION NOT NULL,
    t_hi DOUBLE PRECISION NOT NULL,
    kind TEXT NOT NULL,
    head BYTEA NOT NULL,
    subs BYTEA NOT NULL,
    xs BYTEA NOT NULL,
    ys BYTEA NOT NULL,
    seqs BYTEA NOT NULL,
    weights BYTEA
);
-- Points are float columns that do not compress; skipping compression saves CPU twice.
ALTER TABLE chunks ALTER COLUMN xs SET STORAGE EXTERNAL;
ALTER TABLE chunks ALTER COLUMN ys SET STORAGE EXTERNAL;
ALTER TABLE chunks ALTER COLUMN seqs SET STORAGE EXTERNAL;
ALTER TABLE chunks ALTER COLUMN subs SET STORAGE EXTERNAL;
CREATE INDEX chunks_by_step ON chunks (stream, metric, step_lo);
CREATE TABLE aggs (
    run BIGINT NOT NULL,
    metric BIGINT NOT NULL,
    block BIGINT NOT NULL,
    t_lo DOUBLE PRECISION NOT NULL,
    t_hi DOUBLE PRECISION NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (run, metric, block)
);
ALTER TABLE aggs ALTER COLUMN data SET STORAGE EXTERNAL;
"""

# x = time queries range over t_lo the way x = step queries range over step_lo.
_V2 = "CREATE INDEX chunks_by_time ON chunks (stream, metric, t_lo);"

# The dashboard's saved views (``rankwise.store.saved_views``): JSON kept verbatim.
_V3_SQLITE = """
CREATE TABLE views (
    project TEXT NOT NULL,
    name TEXT NOT NULL,
    data TEXT NOT NULL,
    updated REAL NOT NULL,
    PRIMARY KEY (project, name)
);
"""
_V3_POSTGRES = """
CREATE TABLE views (
    project TEXT NOT NULL,
    name TEXT NOT NULL,
    data TEXT NOT NULL,
    updated DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (project, name)
);
"""

# Rank health (``rankwise.store.health``): console lines, stalls, system key names.
# System samples and step progress are chunk series (negative metric ids and 0).
_V4_SQLITE = """
CREATE TABLE system_keys (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
);
CREATE TABLE console (
    id INTEGER PRIMARY KEY,
    run INTEGER NOT NULL,
    stream INTEGER NOT NULL,
    time REAL NOT NULL,
    err INTEGER NOT NULL,
    text TEXT NOT NULL
);
CREATE INDEX console_by_run ON console (run, time);
CREATE INDEX console_by_stream ON console (stream, time);
CREATE TABLE console_counts (
    stream INTEGER NOT NULL,
    err INTEGER NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (stream, err)
);
CREATE TABLE stalls (
    stream INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    time REAL NOT NULL,
    idle REAL NOT NULL,
    cleared INTEGER NOT NULL,
    location TEXT NOT NULL,
    stacks TEXT NOT NULL,
    PRIMARY KEY (stream, seq)
);
"""
_V4_POSTGRES = """
CREATE TABLE system_keys (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
);
CREATE TABLE console (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run BIGINT NOT NULL,
    stream BIGINT NOT NULL,
    time DOUBLE PRECISION NOT NULL,
    err SMALLINT NOT NULL,
    text TEXT NOT NULL
);
CREATE INDEX console_by_run ON console (run, time, id);
CREATE INDEX console_by_stream ON console (stream, time, id);
CREATE TABLE console_counts (
    stream BIGINT NOT NULL,
    err SMALLINT NOT NULL,
    n BIGINT NOT NULL,
    PRIMARY KEY (stream, err)
);
CREATE TABLE stalls (
    stream BIGINT NOT NULL,
    seq BIGINT NOT NULL,
    time DOUBLE PRECISION NOT NULL,
    idle DOUBLE PRECISION NOT NULL,
    cleared SMALLINT NOT NULL,
    location TEXT NOT NULL,
    stacks TEXT NOT NULL,
    PRIMARY KEY (stream, seq)
);
"""

_V5_SQLITE = """
CREATE TABLE tokens (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    role TEXT NOT NULL,
    projects TEXT,
    secret_hash BLOB NOT NULL,
    created REAL NOT NULL,
    last_used REAL,
    revoked REAL
);
CREATE TABLE sessions (
    id_hash BLOB PRIMARY KEY,
    token TEXT NOT NULL REFERENCES tokens (id),
    created REAL NOT NULL,
    last_seen REAL NOT NULL,
    revoked REAL
);
"""
_V5_POSTGRES = """
CREATE TABLE tokens (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    role TEXT NOT NULL,
    projects TEXT,
    secret_hash BYTEA NOT NULL,
    created DOUBLE PRECISION NOT NULL,
    last_used DOUBLE PRECISION,
    revoked DOUBLE PRECISION
);
CREATE TABLE sessions (
    id_hash BYTEA PRIMARY KEY,
    token TEXT NOT NULL REFERENCES tokens (id),
    created DOUBLE PRECISION NOT NULL,
    last_seen DOUBLE PRECISION NOT NULL,
    revoked DOUBLE PRECISION
);
"""


def _v6_count_nonfinite(tx: Tx) -> None:
    """Give every stored aggregate block the three non-finite count columns, all zero.

    A version-5 block is ``k | 9 column codes | steps | columns``; version 6 sets
    ``WITH_COUNTS`` in ``k`` and has 12 codes, the new three ``_ZERO`` (3), which store
    no bytes. So the upgrade rewrites the head of each blob without decoding the rest
    (a block already in the new form is left alone). Steps ingested before it have no
    counts: their NaN and ±Inf values were left out of the aggregates, as they were then.
    """
    last: tuple[int, int, int] = (-(2**62), -(2**62), -(2**62))
    while True:
        rows = tx.all(
            "SELECT run, metric, block, data FROM aggs WHERE (run, metric, block) > (?, ?, ?) "
            "ORDER BY run, metric, block LIMIT 2000",
            last,
        )
        if not rows:
            return
        todo = []
        for run, metric, block, data in rows:
            (word,) = struct.unpack_from("<I", data)
            if not word & WITH_COUNTS:
                head = struct.pack("<I", word | WITH_COUNTS) + bytes(data[4:13])
                todo.append((head + b"\x03\x03\x03" + bytes(data[13:]), run, metric, block))
        if todo:
            tx.many("UPDATE aggs SET data = ? WHERE run = ? AND metric = ? AND block = ?", todo)
        last = (int(rows[-1][0]), int(rows[-1][1]), int(rows[-1][2]))


# Rich data (``rankwise.store.media``): rows keyed by (stream, seq[, idx]) like stalls,
# so a record's rows are one primary-key range; ``run`` is kept on each row so that
# "keys of a run" and "items of a key at a step" are one index range without a join.
_V7_SQLITE = """
CREATE TABLE media_items (
    stream INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    run INTEGER NOT NULL,
    step INTEGER NOT NULL,
    time REAL NOT NULL,
    key TEXT NOT NULL,
    kind TEXT NOT NULL,
    format TEXT NOT NULL,
    digest TEXT NOT NULL,
    size INTEGER NOT NULL,
    caption TEXT,
    meta TEXT NOT NULL,
    PRIMARY KEY (stream, seq, idx)
);
CREATE INDEX media_by_key ON media_items (run, key, step);
CREATE TABLE media_tables (
    stream INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    run INTEGER NOT NULL,
    step INTEGER NOT NULL,
    key TEXT NOT NULL,
    digest TEXT NOT NULL,
    size INTEGER NOT NULL,
    nrows INTEGER NOT NULL,
    ncols INTEGER NOT NULL,
    columns TEXT NOT NULL,
    types TEXT NOT NULL,
    PRIMARY KEY (stream, seq)
);
CREATE INDEX media_tables_by_key ON media_tables (run, key, step);
CREATE TABLE histograms (
    stream INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    run INTEGER NOT NULL,
    step INTEGER NOT NULL,
    key TEXT NOT NULL,
    bins INTEGER NOT NULL,
    nan INTEGER NOT NULL,
    posinf INTEGER NOT NULL,
    neginf INTEGER NOT NULL,
    counts BLOB NOT NULL,
    edges BLOB NOT NULL,
    PRIMARY KEY (stream, seq)
);
CREATE INDEX histograms_by_key ON histograms (run, key, step);
CREATE TABLE blob_kinds (
    digest TEXT NOT NULL,
    run INTEGER NOT NULL,
    kind TEXT NOT NULL,
    format TEXT NOT NULL,
    PRIMARY KEY (digest, run)
);
"""
_V7_POSTGRES = """
CREATE TABLE media_items (
    stream BIGINT NOT NULL,
    seq BIGINT NOT NULL,
    idx INTEGER NOT NULL,
    run BIGINT NOT NULL,
    step BIGINT NOT NULL,
    time DOUBLE PRECISION NOT NULL,
    key TEXT NOT NULL,
    kind TEXT NOT NULL,
    format TEXT NOT NULL,
    digest TEXT NOT NULL,
    size BIGINT NOT NULL,
    caption TEXT,
    meta TEXT NOT NULL,
    PRIMARY KEY (stream, seq, idx)
);
CREATE INDEX media_by_key ON media_items (run, key, step);
CREATE TABLE media_tables (
    stream BIGINT NOT NULL,
    seq BIGINT NOT NULL,
    run BIGINT NOT NULL,
    step BIGINT NOT NULL,
    key TEXT NOT NULL,
    digest TEXT NOT NULL,
    size BIGINT NOT NULL,
    nrows BIGINT NOT NULL,
    ncols BIGINT NOT NULL,
    columns TEXT NOT NULL,
    types TEXT NOT NULL,
    PRIMARY KEY (stream, seq)
);
CREATE INDEX media_tables_by_key ON media_tables (run, key, step);
CREATE TABLE histograms (
    stream BIGINT NOT NULL,
    seq BIGINT NOT NULL,
    run BIGINT NOT NULL,
    step BIGINT NOT NULL,
    key TEXT NOT NULL,
    bins INTEGER NOT NULL,
    nan BIGINT NOT NULL,
    posinf BIGINT NOT NULL,
    neginf BIGINT NOT NULL,
    counts BYTEA NOT NULL,
    edges BYTEA NOT NULL,
    PRIMARY KEY (stream, seq)
);
CREATE INDEX histograms_by_key ON histograms (run, key, step);
CREATE TABLE blob_kinds (
    digest TEXT NOT NULL,
    run BIGINT NOT NULL,
    kind TEXT NOT NULL,
    format TEXT NOT NULL,
    PRIMARY KEY (digest, run)
);
"""

_V8_SQLITE = """
CREATE TABLE artifact_names (
    project TEXT NOT NULL,
    name TEXT NOT NULL,
    type TEXT NOT NULL,
    latest INTEGER NOT NULL DEFAULT -1,
    updated_at REAL NOT NULL,
    PRIMARY KEY (project, name)
);
CREATE TABLE artifact_versions (
    id INTEGER PRIMARY KEY,
    project TEXT NOT NULL,
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    type TEXT NOT NULL,
    digest TEXT NOT NULL,
    size INTEGER NOT NULL,
    file_count INTEGER NOT NULL,
    description TEXT,
    metadata TEXT NOT NULL,
    created_at REAL NOT NULL,
    run_id TEXT,
    label TEXT,
    client_id TEXT NOT NULL,
    UNIQUE (project, name, version),
    UNIQUE (project, client_id)
);
CREATE INDEX artifact_versions_by_run ON artifact_versions (project, run_id);
CREATE TABLE artifact_files (
    version_id INTEGER NOT NULL,
    path TEXT NOT NULL,
    digest TEXT NOT NULL,
    size INTEGER NOT NULL,
    chunks TEXT,
    ref TEXT,
    PRIMARY KEY (version_id, path)
);
CREATE TABLE artifact_aliases (
    project TEXT NOT NULL,
    name TEXT NOT NULL,
    alias TEXT NOT NULL,
    version INTEGER NOT NULL,
    PRIMARY KEY (project, name, alias)
);
CREATE TABLE artifact_uses (
    project TEXT NOT NULL,
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    label TEXT NOT NULL,
    time REAL NOT NULL,
    PRIMARY KEY (project, name, version, run_id, label)
);
CREATE INDEX artifact_uses_by_run ON artifact_uses (project, run_id);
CREATE TABLE artifact_commits (
    project TEXT NOT NULL,
    client_id TEXT NOT NULL,
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    PRIMARY KEY (project, client_id)
);
"""

_V8_POSTGRES = """
CREATE TABLE artifact_names (
    project TEXT NOT NULL,
    name TEXT NOT NULL,
    type TEXT NOT NULL,
    latest BIGINT NOT NULL DEFAULT -1,
    updated_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (project, name)
);
CREATE TABLE artifact_versions (
    id BIGSERIAL PRIMARY KEY,
    project TEXT NOT NULL,
    name TEXT NOT NULL,
    version BIGINT NOT NULL,
    type TEXT NOT NULL,
    digest TEXT NOT NULL,
    size BIGINT NOT NULL,
    file_count INTEGER NOT NULL,
    description TEXT,
    metadata TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    run_id TEXT,
    label TEXT,
    client_id TEXT NOT NULL,
    UNIQUE (project, name, version),
    UNIQUE (project, client_id)
);
CREATE INDEX artifact_versions_by_run ON artifact_versions (project, run_id);
CREATE TABLE artifact_files (
    version_id BIGINT NOT NULL,
    path TEXT NOT NULL,
    digest TEXT NOT NULL,
    size BIGINT NOT NULL,
    chunks TEXT,
    ref TEXT,
    PRIMARY KEY (version_id, path)
);
CREATE TABLE artifact_aliases (
    project TEXT NOT NULL,
    name TEXT NOT NULL,
    alias TEXT NOT NULL,
    version BIGINT NOT NULL,
    PRIMARY KEY (project, name, alias)
);
CREATE TABLE artifact_uses (
    project TEXT NOT NULL,
    name TEXT NOT NULL,
    version BIGINT NOT NULL,
    run_id TEXT NOT NULL,
    label TEXT NOT NULL,
    time DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (project, name, version, run_id, label)
);
CREATE INDEX artifact_uses_by_run ON artifact_uses (project, run_id);
CREATE TABLE artifact_commits (
    project TEXT NOT NULL,
    client_id TEXT NOT NULL,
    name TEXT NOT NULL,
    version BIGINT NOT NULL,
    PRIMARY KEY (project, client_id)
);
"""

# A series' tail (its chunks from ``series.open_chunk`` on, ``rankwise.store.ingest``) is
# found by id within the series.
_V9 = "CREATE INDEX chunks_by_id ON chunks (stream, metric, id);"

# Alerts (``rankwise.store.alerts``): who is told of what, each event decided once by its
# unique (run, kind, key), and the outbox its deliveries are sent from.
_V10 = """
CREATE TABLE alert_destinations (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    origin TEXT NOT NULL,
    spec TEXT NOT NULL,
    created DOUBLE PRECISION NOT NULL
);
CREATE INDEX alert_destinations_by_project ON alert_destinations (project);
CREATE TABLE alert_events (
    id {id},
    run BIGINT NOT NULL,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    title TEXT NOT NULL,
    text TEXT NOT NULL,
    level TEXT NOT NULL,
    time DOUBLE PRECISION NOT NULL,
    details TEXT NOT NULL,
    UNIQUE (run, kind, key)
);
CREATE TABLE alert_outbox (
    id {id},
    event BIGINT NOT NULL,
    destination TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    next_at DOUBLE PRECISION NOT NULL,
    created DOUBLE PRECISION NOT NULL,
    last_error TEXT NOT NULL,
    delivered DOUBLE PRECISION,
    UNIQUE (event, destination)
);
CREATE INDEX alert_outbox_due ON alert_outbox (state, next_at);
"""
_V10_SQLITE = _V10.format(id="INTEGER PRIMARY KEY")
_V10_POSTGRES = _V10.format(id="BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY")


def _v11_first_nonfinite(tx: Tx) -> None:
    """Find each stream's first non-finite value per metric in what it already holds.

    From version 11 on, ingest keeps them in the stream's fold as records arrive
    (``StreamFold.first_nonfinite``, ``rankwise.divergence``); a stream ingested before
    gets them here, once, from its float chunks. Reads then never scan a history.
    """
    from .chunks import decode_xy
    from .fold_cache import decode_fold, encode_fold

    names = {int(i): str(n) for i, n in tx.all("SELECT id, name FROM metrics")}
    for (sid,) in tx.all("SELECT id FROM streams ORDER BY id"):
        found: list[tuple[str, int, float, float]] = []
        for metric, n, xs, ys, kind in tx.all(
            "SELECT metric, n, xs, ys, kind FROM chunks WHERE stream = ? AND kind = 'f' "
            "ORDER BY id",
            (sid,),
        ):
            name = names.get(int(metric))
            if name is None:  # step progress, system samples: not a logged metric
                continue
            step, t, y = decode_xy(int(n), xs, ys, kind)
            bad = np.flatnonzero(~np.isfinite(y))
            if len(bad):
                i = int(bad[np.lexsort((t[bad], step[bad]))[0]])
                found.append((name, int(step[i]), float(t[i]), float(y[i])))
        if not found:
            continue
        row = tx.one("SELECT fold FROM streams WHERE id = ?", (sid,))
        fold = decode_fold(row[0] if row else None)
        for name, step_at, time_at, value in found:
            fold.note_nonfinite(name, step_at, time_at, value)
        tx.run("UPDATE streams SET fold = ? WHERE id = ?", (encode_fold(fold), sid))


# Artifact version tags (``log_artifact(tags=)``): a JSON list of names per version.
_V12 = "ALTER TABLE artifact_versions ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';"

# Reports (``rankwise.store.reports``): each save is a version, kept whole.
_V13 = """
CREATE TABLE reports (
    project TEXT NOT NULL,
    name TEXT NOT NULL,
    version BIGINT NOT NULL,
    title TEXT NOT NULL,
    data TEXT NOT NULL,
    created {real} NOT NULL,
    author TEXT NOT NULL,
    PRIMARY KEY (project, name, version)
);
"""
_V13_SQLITE = _V13.format(real="REAL")
_V13_POSTGRES = _V13.format(real="DOUBLE PRECISION")


# Run edits (``rankwise.store.run_edits``): every change of a run's name, tags, notes,
# group or job type, kept (the history); and ``run_index``, one row per run of what run
# filters read (``rankwise.store.run_filters``), refreshed from the streams when stale.
_V14_SQLITE = """
CREATE TABLE run_edits (
    id INTEGER PRIMARY KEY,
    run INTEGER NOT NULL REFERENCES runs (id),
    at REAL NOT NULL,
    field TEXT NOT NULL,
    value TEXT NOT NULL,
    source TEXT NOT NULL,
    who TEXT,
    UNIQUE (run, at, field, source)
);
CREATE TABLE run_index (
    run INTEGER PRIMARY KEY REFERENCES runs (id),
    project TEXT NOT NULL,
    run_id TEXT NOT NULL,
    stamp TEXT NOT NULL,
    name TEXT,
    grp TEXT,
    job_type TEXT,
    tags TEXT NOT NULL,
    created REAL,
    updated REAL,
    state TEXT NOT NULL,
    steps BIGINT NOT NULL,
    config TEXT NOT NULL,
    summary TEXT NOT NULL,
    cross_rank TEXT NOT NULL
);
CREATE INDEX run_index_created ON run_index (project, created);
CREATE INDEX run_index_group ON run_index (project, grp);
CREATE INDEX run_index_job_type ON run_index (project, job_type);
"""
_V14_POSTGRES = """
CREATE TABLE run_edits (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run BIGINT NOT NULL REFERENCES runs (id),
    at DOUBLE PRECISION NOT NULL,
    field TEXT NOT NULL,
    value TEXT NOT NULL,
    source TEXT NOT NULL,
    who TEXT,
    UNIQUE (run, at, field, source)
);
CREATE TABLE run_index (
    run BIGINT PRIMARY KEY REFERENCES runs (id),
    project TEXT NOT NULL,
    run_id TEXT NOT NULL,
    stamp TEXT NOT NULL,
    name TEXT,
    grp TEXT,
    job_type TEXT,
    tags JSONB NOT NULL,
    created DOUBLE PRECISION,
    updated DOUBLE PRECISION,
    state TEXT NOT NULL,
    steps BIGINT NOT NULL,
    config JSONB NOT NULL,
    summary JSONB NOT NULL,
    cross_rank JSONB NOT NULL
);
CREATE INDEX run_index_created ON run_index (project, created);
CREATE INDEX run_index_group ON run_index (project, grp);
CREATE INDEX run_index_job_type ON run_index (project, job_type);
"""

# Deleting runs (``rankwise.store.trash``): a run in the trash has ``deleted_at`` (and
# who); a purged run keeps its ``runs`` row as a tombstone (``purged_at``) so a late
# upload to it is refused rather than starting it afresh. ``purges`` is the journal of
# purges whose rows are gone but whose blobs may not be collected yet (crash-safe GC);
# ``audit_log`` is who deleted, restored or purged what, and when.
_V15 = """
ALTER TABLE runs ADD COLUMN deleted_at {real};
ALTER TABLE runs ADD COLUMN deleted_by TEXT;
ALTER TABLE runs ADD COLUMN purged_at {real};
CREATE INDEX runs_deleted ON runs (project, deleted_at);
CREATE TABLE purges (
    run {big} PRIMARY KEY,
    project TEXT NOT NULL,
    run_id TEXT NOT NULL,
    at {real} NOT NULL,
    digests TEXT NOT NULL
);
CREATE TABLE audit_log (
    id {id},
    at {real} NOT NULL,
    who TEXT NOT NULL,
    action TEXT NOT NULL,
    project TEXT NOT NULL,
    target TEXT NOT NULL,
    count BIGINT NOT NULL
);
CREATE INDEX audit_log_at ON audit_log (at);
"""
_V15_SQLITE = _V15.format(real="REAL", big="INTEGER", id="INTEGER PRIMARY KEY")
_V15_POSTGRES = _V15.format(
    real="DOUBLE PRECISION", big="BIGINT", id="BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
)

# ``run_index.info``: the run as ``_run`` folded it when the row was made (MessagePack of
# ``RunInfo``), so that a page of runs whose streams are all settled is read, not refolded.
# The rows are dropped so that every run is indexed again (on the next read) with it.
_V16_SQLITE = """
ALTER TABLE run_index ADD COLUMN info BLOB;
DELETE FROM run_index;
"""
_V16_POSTGRES = """
ALTER TABLE run_index ADD COLUMN info BYTEA;
DELETE FROM run_index;
"""

# Uploads stored as they arrive (``rankwise.store.pending``): one row per (stream,
# upload) holding every series' points of it, folded into ``chunks``/``series``/``aggs``
# later by the compactor (``rankwise.store.compact``) and then deleted.
_V17 = """
CREATE TABLE upload_blocks (
    id {id},
    run BIGINT NOT NULL,
    stream BIGINT NOT NULL,
    seq_lo BIGINT NOT NULL,
    seq_hi BIGINT NOT NULL,
    data {blob} NOT NULL
);
CREATE INDEX upload_blocks_run ON upload_blocks (run, id);
"""
_V17_SQLITE = _V17.format(id="INTEGER PRIMARY KEY", blob="BLOB")
_V17_POSTGRES = _V17.format(id="BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", blob="BYTEA")

# The compactor takes a few streams' rows per transaction (``compact.compact_streams``):
# by stream, not by scanning every pending row each time.
_V18 = "CREATE INDEX upload_blocks_stream ON upload_blocks (stream, id);"

# Each closed chunk's sums and counts per block of steps, for the heatmap
# (``rankwise.store.step_sums``); ``id`` is the chunk's.
_V19 = """
CREATE TABLE chunk_sums (
    id BIGINT PRIMARY KEY,
    stream BIGINT NOT NULL,
    metric BIGINT NOT NULL,
    step_lo BIGINT NOT NULL,
    step_hi BIGINT NOT NULL,
    wlog INTEGER NOT NULL,
    b0 BIGINT NOT NULL,
    sums {blob} NOT NULL
);
CREATE INDEX chunk_sums_by_step ON chunk_sums (stream, metric, step_lo);
"""
_V19_SQLITE = _V19.replace("id BIGINT PRIMARY KEY", "id INTEGER PRIMARY KEY").format(blob="BLOB")
_V19_POSTGRES = _V19.format(blob="BYTEA")

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "runs, streams, columnar chunks, aggregates", _V1_SQLITE, _V1_POSTGRES),
    Migration(2, "index chunks by time", _V2, _V2),
    Migration(3, "saved views of the runs table", _V3_SQLITE, _V3_POSTGRES),
    Migration(4, "console lines, stalls, system key names", _V4_SQLITE, _V4_POSTGRES),
    Migration(5, "API tokens and dashboard sessions", _V5_SQLITE, _V5_POSTGRES),
    Migration(6, "non-finite counts in the aggregates", "", "", _v6_count_nonfinite),
    Migration(7, "media items, tables, histograms, blob kinds", _V7_SQLITE, _V7_POSTGRES),
    Migration(8, "artifacts: names, versions, files, aliases, lineage", _V8_SQLITE, _V8_POSTGRES),
    Migration(9, "index chunks by series and id (the open tail)", _V9, _V9),
    Migration(10, "alerts: destinations, events, outbox", _V10_SQLITE, _V10_POSTGRES),
    Migration(11, "each stream's first non-finite value per metric", "", "", _v11_first_nonfinite),
    Migration(12, "artifact version tags", _V12, _V12),
    Migration(
        13, "reports: versions of titled pages of text and panels", _V13_SQLITE, _V13_POSTGRES
    ),
    Migration(14, "run edits and the run filter index", _V14_SQLITE, _V14_POSTGRES),
    Migration(15, "deleted runs, the purge journal, the audit log", _V15_SQLITE, _V15_POSTGRES),
    Migration(16, "each run's folded info in the run filter index", _V16_SQLITE, _V16_POSTGRES),
    Migration(17, "uploads stored whole until compacted", _V17_SQLITE, _V17_POSTGRES),
    Migration(18, "pending uploads by stream", _V18, _V18),
    Migration(19, "closed chunks' sums per block of steps", _V19_SQLITE, _V19_POSTGRES),
)

LATEST = MIGRATIONS[-1].version
PENDING = 17  # from this version on, ingest stores uploads whole (``upload_blocks``)
SUMS = 19  # from this version on, closed chunks get ``chunk_sums`` rows

VERSION_TABLE = {
    "sqlite": "CREATE TABLE IF NOT EXISTS schema_version "
    "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied REAL NOT NULL)",
    "postgres": "CREATE TABLE IF NOT EXISTS schema_version "
    "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied DOUBLE PRECISION NOT NULL)",
}


def statements(script: str) -> list[str]:
    """Split a migration into statements (none of ours has a ``;`` in a literal)."""
    code = "\n".join(ln for ln in script.splitlines() if not ln.strip().startswith("--"))
    return [stmt.strip() for stmt in code.split(";") if stmt.strip()]


def check_version(current: int) -> None:
    if current > LATEST:
        raise SchemaTooNewError(
            f"the database schema is at version {current}, newer than this rankwise knows "
            f"(up to {LATEST}): upgrade rankwise (pip install -U rankwise) to open it"
        )
