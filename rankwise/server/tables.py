"""Pages of a logged table: DuckDB over the table's Parquet blob.

A table is one immutable Parquet file named by its sha256 (``rankwise.store.media``
keeps its shape and column names). A page is one DuckDB query over that file: DuckDB
reads only the row groups and columns it needs (a page in file order stops after
``offset + limit`` rows; a sorted page is a top-N over the sort column), so a 100k-row
table is never loaded whole into this process per request.

SQL is built from fixed text, parameters and identifiers only: the sort and filter
columns must be among the table's own columns (as its record and its Parquet schema both
name them) and are quoted; the filter's text and the file's path are parameters.

Filters (``filter_col`` + ``filter``), by the column's logged type:

* ``int``/``float``: ``N`` or ``=N`` (equal), ``!=N``, ``>N``, ``>=N``, ``<N``, ``<=N``,
  or ``A..B`` (A <= value <= B, inclusive); anything else is refused (422).
* ``bool``: ``true``/``false`` (or ``1``/``0``).
* ``str``, ``image`` (the image's digest), ``list``, ``null``: a case-insensitive
  substring of the cell's text.

Sorting: by one column, ascending or descending, NULLs last, ties in file order.
Files on an object store (no ``local_path``) are copied once into a local
content-addressed cache (verified against the digest: a digest names one content, so
the cache is always right).
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

MAX_LIMIT = 1000
# A sorted page is a top-N of offset + limit rows: the offset is capped, and DuckDB's
# memory and spill files too (per server process).
MAX_OFFSET = 10_000_000
MEMORY_LIMIT = "1GB"
MAX_SPILL = "4GB"
MAX_FILTER = 200  # characters of a filter's text
# One way only to match each number (no digit can go to two groups), so a failing match
# backtracks linearly, never quadratically; and a filter is short anyway.
_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf|nan"
_CMP = re.compile(rf"\s*(=|==|!=|>=|<=|>|<)?\s*({_NUM})\s*", re.I)
_RANGE = re.compile(rf"\s*({_NUM})\s*\.\.\s*({_NUM})\s*", re.I)
_OPS = {None: "=", "=": "=", "==": "=", "!=": "<>", ">": ">", ">=": ">=", "<": "<", "<=": "<="}
_ROW_NUMBER = "file_row_number"


class TableQueryError(ValueError):
    """A page that cannot be asked for (an unknown column, a malformed filter): 422."""


class BlobSource(Protocol):
    """What the pager needs of the server's blob store (``BlobStore``)."""

    def local_path(self, project: str, digest: str) -> Path | None: ...

    def open(self, project: str, digest: str) -> Any:
        """A binary file object, or None when the store lacks the blob."""


@dataclass
class Page:
    rows: list[list[Any]]
    total: int


def quote(name: str) -> str:
    """A column name as a DuckDB identifier (only ever a name the table itself has)."""
    return '"' + name.replace('"', '""') + '"'


def _number(text: str, kind: str) -> float | int:
    low = text.lower()
    if kind == "int" and re.fullmatch(r"[-+]?\d+", text):
        return int(text)
    if low in ("inf", "+inf", "-inf", "nan"):
        return float(low)
    return float(text)


def where(column: str, kind: str, text: str) -> tuple[str, list[Any]]:
    """The WHERE clause and its parameters for filtering ``column`` (see the module)."""
    col = quote(column)
    if len(text) > MAX_FILTER:
        raise TableQueryError(f"a filter is at most {MAX_FILTER} characters")
    if kind in ("int", "float"):
        m = _RANGE.fullmatch(text)
        if m:
            return f"{col} BETWEEN ? AND ?", [_number(m[1], kind), _number(m[2], kind)]
        m = _CMP.fullmatch(text)
        if m is None:
            raise TableQueryError(
                f"filter {text!r} on number column {column!r}: write N, =N, !=N, >N, >=N, "
                "<N, <=N or A..B"
            )
        return f"{col} {_OPS[m[1]]} ?", [_number(m[2], kind)]
    if kind == "bool":
        low = text.strip().lower()
        if low not in ("true", "false", "1", "0"):
            raise TableQueryError(f"filter {text!r} on bool column {column!r}: write true or false")
        return f"{col} = ?", [low in ("true", "1")]
    return f"strpos(lower(CAST({col} AS VARCHAR)), lower(?)) > 0", [text]


class TablePager:
    """Pages of Parquet tables, one shared in-memory DuckDB database (a cursor each)."""

    def __init__(
        self,
        cache_dir: Path | None = None,
        threads: int = 2,
        memory_limit: str = MEMORY_LIMIT,
        max_spill: str = MAX_SPILL,
    ) -> None:
        import duckdb  # the [server] extra; imported when a table is first asked for

        self._cache = cache_dir or Path(tempfile.gettempdir()) / f"rankwise-tables-{os.getuid()}"
        # A page's memory and spill are bounded whatever the query: past them DuckDB
        # raises (422 to the client), never grows the process without end.
        spill = self._cache / "spill"
        spill.mkdir(parents=True, exist_ok=True)
        self._db = duckdb.connect(
            ":memory:",
            config={
                "threads": threads,
                "autoinstall_known_extensions": False,
                "autoload_known_extensions": False,
                "memory_limit": memory_limit,
                "temp_directory": str(spill),
                "max_temp_directory_size": max_spill,
            },
        )
        self._lock = threading.Lock()

    def path(self, blobs: BlobSource, project: str, digest: str) -> Path:
        """A local file holding the blob (the store's own, or the cache's copy)."""
        local = blobs.local_path(project, digest)
        if local is not None and local.is_file():
            return local
        dest = self._cache / digest[:2] / digest
        if dest.exists():
            return dest
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".part-")
        try:
            h = hashlib.sha256()
            src = blobs.open(project, digest)
            if src is None:
                raise FileNotFoundError(f"blob {digest} is not in the blob store")
            with os.fdopen(fd, "wb") as out, src:
                while chunk := src.read(1 << 20):
                    h.update(chunk)
                    out.write(chunk)
            if h.hexdigest() != digest:
                raise OSError(f"blob {digest} read back with another digest: not cached")
            os.replace(tmp, dest)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return dest

    def page(
        self,
        path: Path,
        columns: list[str],
        types: list[str],
        *,
        offset: int = 0,
        limit: int = 100,
        sort: str | None = None,
        desc: bool = False,
        filter_col: str | None = None,
        filter_text: str | None = None,
        nrows: int | None = None,
    ) -> Page:
        if not 1 <= limit <= MAX_LIMIT:
            raise TableQueryError(f"limit={limit} must be between 1 and {MAX_LIMIT}")
        if not 0 <= offset <= MAX_OFFSET:
            raise TableQueryError(f"offset={offset} must be between 0 and {MAX_OFFSET}")
        import duckdb

        with self._lock:
            cur = self._db.cursor()
        try:
            src = "read_parquet(?, file_row_number = true)"
            if sort is not None or filter_col is not None:
                described = cur.execute(f"DESCRIBE SELECT * FROM {src}", [str(path)]).fetchall()
                have = {r[0] for r in described}
                for name, what in ((sort, "sort"), (filter_col, "filter_col")):
                    if name is not None and (name not in columns or name not in have):
                        raise TableQueryError(
                            f"{what}={name!r} is not a column of this table (its columns: "
                            f"{', '.join(columns[:20])}{' ...' if len(columns) > 20 else ''})"
                        )
            cond, params = "", [str(path)]
            if filter_col is not None and filter_text:
                clause, args = where(filter_col, types[columns.index(filter_col)], filter_text)
                cond, params = f" WHERE {clause}", params + args
            # Without a sort DuckDB keeps the file's order (``preserve_insertion_order``)
            # and stops after offset + limit rows; a sort breaks ties by the row number
            # (unless the table has a column of that name).
            order = ""
            if sort:
                order = f" ORDER BY {quote(sort)} {'DESC' if desc else 'ASC'} NULLS LAST"
                if _ROW_NUMBER not in columns:
                    order += f", {_ROW_NUMBER}"
            if _ROW_NUMBER in columns or not sort:
                src = "read_parquet(?)"
            cols = ", ".join(quote(c) for c in columns)
            try:
                rows = cur.execute(
                    f"SELECT {cols} FROM {src}{cond}{order} LIMIT ? OFFSET ?",
                    [*params, limit, offset],
                ).fetchall()
                if cond or nrows is None:
                    count = cur.execute(f"SELECT count(*) FROM {src}{cond}", params).fetchone()
                    total = int(count[0]) if count else 0
                else:
                    total = nrows
            except duckdb.BinderException as exc:  # a record naming columns its file lacks
                raise TableQueryError(
                    f"the table's file does not match its record: {exc}"
                ) from None
            except duckdb.OutOfMemoryException:
                raise TableQueryError(
                    "this page needs more memory than the server gives a table query: ask "
                    "for a smaller offset, or filter first"
                ) from None
            return Page(rows=[list(r) for r in rows], total=total)
        except (duckdb.InvalidInputException, duckdb.ConversionException):
            # A record naming a blob that is not Parquet, or whose columns hold other
            # types than it says: the uploaded data is wrong, not the server (DuckDB's
            # text names a server path, so it is not passed on).
            raise TableQueryError(
                "the table's blob is not a Parquet file matching its record (columns and "
                "types): log the table again"
            ) from None
        finally:
            cur.close()
