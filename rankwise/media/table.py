"""``rankwise.Table``: rows of cells, stored as one Parquet blob.

Cells: ``str``, ``int``, ``float``, ``bool``, ``None``, ``rankwise.Image``, and short
lists (at most ``MAX_LIST`` numbers or strings). numpy scalars become the Python value.
Each column has one type, taken from its first non-None cell (W&B's rule): a cell of
another type is refused (``MediaError``), except an int in a float column (kept as a
float). ``types`` are str | int | float | bool | image | list | null (only None so far).

Stored as Parquet (pyarrow) with the column types in the file's metadata
(``rankwise.types``); an image cell is the digest (a string) of the image's own PNG
blob. Caps: ``MAX_COLUMNS`` columns and ``MAX_ROWS`` rows (W&B keeps 200,000), both
checked as the table is built, so a bad table fails where it is made.
"""

from __future__ import annotations

import io
import json
import numbers
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..errors import MediaError
from .base import PutBlob, Rich, need
from .image import Image

MAX_COLUMNS = 1_000
MAX_ROWS = 200_000
MAX_LIST = 1_024
TYPES = ("str", "int", "float", "bool", "image", "list", "null")
_META_TYPES = b"rankwise.types"
_PLAIN = {str: "str", int: "int", float: "float", bool: "bool", type(None): "null"}

# (digest, size, nrows, ncols, columns, types, image blobs): what TableRec needs.
EncodedTable = tuple[str, int, int, int, list[str], list[str], list[str]]


class Table(Rich):
    """A table to log: ``t = rankwise.Table(columns=["id", "image", "guess"])``,
    ``t.add_data(0, rankwise.Image(x), 7)``, ``run.log({"predictions": t})``.

    ``data`` is a list of rows (lists); ``dataframe`` a pandas DataFrame (it wins over
    ``data``, as in W&B). ``columns`` default to ``["Input", "Output", "Expected"]`` when
    neither gives them. A logged table is encoded from the rows as they are when the
    encoder thread gets to it: build a new table per log rather than changing one.
    """

    kind = "table"
    # Set on a table read back (RunInfo.table()): the step it was logged at, and by whom.
    step: int | None = None
    label: str | None = None

    def __init__(
        self,
        columns: Sequence[Any] | None = None,
        data: Iterable[Sequence[Any]] | None = None,
        dataframe: Any = None,
    ) -> None:
        self.data: list[list[Any]] = []
        self._types: list[str] = []
        if dataframe is not None:
            if not hasattr(dataframe, "columns") or not hasattr(dataframe, "itertuples"):
                raise MediaError("Table dataframe= takes a pandas DataFrame")
            columns = [str(c) for c in dataframe.columns]
            data = (list(row) for row in dataframe.itertuples(index=False, name=None))
        elif columns is None:
            columns = ["Input", "Output", "Expected"] if data is None else None
        rows = [list(r) for r in data] if data is not None else []
        if columns is None:
            columns = [f"c{i}" for i in range(len(rows[0]))] if rows else []
        if isinstance(columns, (str, bytes)):
            raise MediaError("Table columns= takes a list of names, not one string")
        self.columns = [str(c) for c in columns]
        if len(self.columns) > MAX_COLUMNS:
            raise MediaError(
                f"Table of {len(self.columns)} columns is over the {MAX_COLUMNS}-column cap: "
                "split it, or put long vectors in a list cell or a Histogram"
            )
        if len(set(self.columns)) != len(self.columns):
            raise MediaError(f"Table columns must be unique: {self.columns!r}")
        self._types = ["null"] * len(self.columns)
        for row in rows:
            self.add_data(*row)

    def __repr__(self) -> str:
        return f"<rankwise.Table {len(self.data)} rows x {len(self.columns)} columns>"

    @property
    def types(self) -> list[str]:
        """Each column's type (see the module docstring)."""
        return list(self._types)

    def add_data(self, *row: Any) -> None:
        """Append one row; it must have one cell per column (else ``MediaError``)."""
        if len(row) != len(self.columns):
            raise MediaError(
                f"Table.add_data got {len(row)} cells for {len(self.columns)} columns "
                f"{self.columns!r}: give one per column"
            )
        if len(self.data) >= MAX_ROWS:
            raise MediaError(
                f"Table is at its cap of {MAX_ROWS} rows: log a new table (or a sample)"
            )
        cells = list(row)
        types = self._types
        nbytes = 16 * len(cells)
        saved = None
        for i, value in enumerate(cells):
            kind = _PLAIN.get(value.__class__)
            if kind is not None and (kind == types[i] or kind == "null"):
                continue  # the usual cell: a plain value of its column's type
            if saved is None:
                saved = list(types)
            try:
                cells[i] = value = self._cell(i, value)
            except MediaError:
                self._types[:] = saved  # a refused row changes no column's type
                raise
            nbytes += getattr(value, "_nbytes", 0)
        self.data.append(cells)
        self._nbytes += nbytes

    def _cell(self, i: int, value: Any) -> Any:
        kind, value = cell_type(value, self.columns[i])
        have = self._types[i]
        if kind == "null" or kind == have:
            return value
        if have == "null":
            self._types[i] = kind
        elif have == "float" and kind == "int":
            return float(value)
        elif have == "int" and kind == "float":
            self._types[i] = "float"
            for r in self.data:
                if r[i] is not None:
                    r[i] = float(r[i])
        else:
            raise MediaError(
                f"Table column {self.columns[i]!r} holds {have} cells, not {kind} "
                f"({_short(value)}): keep one type per column"
            )
        return value

    def get_column(self, name: str) -> list[Any]:
        i = self.columns.index(name)
        return [r[i] for r in self.data]

    def iterrows(self) -> Iterable[tuple[int, list[Any]]]:
        return enumerate(self.data)

    def get_dataframe(self) -> Any:
        """The table as a pandas DataFrame (image cells stay ``rankwise.Image``)."""
        pd = need("pandas", "Table.get_dataframe()")
        return pd.DataFrame(self.data, columns=self.columns)

    def _frozen(self) -> Table:
        """The table as logged: a copy of the row list sharing the rows (taken on the
        training thread, so rows added after ``log()`` are not in this step's table)."""
        t: Table = object.__new__(Table)
        t.columns, t._types, t.data = list(self.columns), list(self._types), list(self.data)
        t._nbytes = self._nbytes
        return t

    # -- encoding (encoder thread) ----------------------------------------------------
    def _encode_table(self, put: PutBlob) -> EncodedTable:
        pa = need("pyarrow", "Table")
        pq = need("pyarrow.parquet", "Table")
        rows, types = self.data, list(self._types)
        _recheck(rows, self.columns, types)
        blobs: dict[str, None] = {}
        arrays = []
        for i, kind in enumerate(types):
            col = [r[i] for r in rows]
            if kind == "image":
                digests: list[str | None] = []
                for cell in col:
                    if cell is None:
                        digests.append(None)
                        continue
                    digest, _ = put(cell.png())
                    blobs[digest] = None
                    digests.append(digest)
                col = digests
            arrays.append(pa.array(col, type=_arrow_type(pa, kind, col)))
        meta = {_META_TYPES: json.dumps(types).encode()}
        schema = pa.schema(
            [pa.field(n, a.type) for n, a in zip(self.columns, arrays)], metadata=meta
        )
        out = io.BytesIO()
        pq.write_table(pa.Table.from_arrays(arrays, schema=schema), out, compression="zstd")
        digest, size = put(out.getvalue())
        return digest, size, len(rows), len(self.columns), list(self.columns), types, list(blobs)


def _recheck(rows: list[list[Any]], columns: list[str], types: list[str]) -> None:
    """add_data() checked every cell; rows put into ``table.data`` by hand were not."""
    for row in rows:
        if len(row) != len(columns):
            raise MediaError(
                f"Table has a row of {len(row)} cells for {len(columns)} columns: add rows "
                "with add_data()"
            )
        for i, cell in enumerate(row):
            kind = cell_type(cell, columns[i])[0]
            if kind != "null" and kind != types[i] and not (kind == "int" and types[i] == "float"):
                raise MediaError(
                    f"Table column {columns[i]!r} holds {types[i]} cells, not {kind} "
                    f"({_short(cell)}): add rows with add_data(), one type per column"
                )


def table_from_parquet(
    data: bytes,
    load_image: Callable[[str], Image] | None = None,
    types: list[str] | None = None,
) -> Table:
    """A ``Table`` read back from its Parquet bytes (``TableRec.digest``'s blob). Image
    cells become ``Image``s made by ``load_image(digest)``, or stay digests without it;
    ``types`` default to the file's own metadata."""
    pq = need("pyarrow.parquet", "Table")
    t = pq.read_table(io.BytesIO(data))
    meta = t.schema.metadata or {}
    if types is None:
        types = json.loads(meta[_META_TYPES]) if _META_TYPES in meta else []
    table = Table(columns=t.column_names)
    cols = [t.column(i).to_pylist() for i in range(t.num_columns)]
    for i, kind in enumerate(types or []):
        table._types[i] = kind
        if kind == "image" and load_image is not None:
            cols[i] = [None if d is None else load_image(d) for d in cols[i]]
    table.data = [list(r) for r in zip(*cols)] if cols else []
    return table


def cell_type(value: Any, column: str) -> tuple[str, Any]:
    """The cell's type name and its stored value; ``MediaError`` for an unknown type."""
    if value is None:
        return "null", None
    cls = value.__class__
    if cls is str:
        return "str", value
    if cls is bool:
        return "bool", value
    if cls is int:
        return "int", value
    if cls is float:
        return "float", value
    if isinstance(value, Image):
        return "image", value
    if isinstance(value, (list, tuple)):
        if len(value) > MAX_LIST:
            raise MediaError(
                f"Table column {column!r}: a list cell of {len(value)} items is over "
                f"{MAX_LIST}: store long vectors elsewhere (a Histogram, a file)"
            )
        items = [cell_type(v, column)[1] for v in value]
        kinds = {type(v) for v in items if v is not None}
        if not (kinds <= {int, float, bool} or kinds <= {str}):
            raise MediaError(
                f"Table column {column!r}: a list cell holds numbers or strings, not a mix "
                f"or {', '.join(sorted(k.__name__ for k in kinds))}"
            )
        return "list", items
    if isinstance(value, str):
        return "str", str(value)
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0 and not hasattr(value, "detach"):
        return cell_type(value.item(), column)  # numpy scalar
    if isinstance(value, numbers.Integral):
        return "int", int(value)
    if isinstance(value, numbers.Real):
        return "float", float(value)
    raise MediaError(
        f"Table column {column!r}: a cell of type {type(value).__name__} "
        f"({_short(value)}) cannot be stored: give str, int, float, bool, None, "
        "rankwise.Image or a short list (str(x) keeps its text)"
    )


def _arrow_type(pa: Any, kind: str, col: list[Any]) -> Any:
    if kind in ("str", "image"):
        return pa.string()
    if kind == "int":
        return pa.int64()
    if kind == "float":
        return pa.float64()
    if kind == "bool":
        return pa.bool_()
    if kind == "null":
        return pa.null()
    inner = {type(v) for cell in col if cell for v in cell if v is not None}
    if str in inner:
        return pa.list_(pa.string())
    return pa.list_(pa.int64() if inner <= {int} else pa.float64())


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
