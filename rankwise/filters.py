"""W&B's MongoDB-style run filters: parsed and checked once, then evaluated anywhere.

``Api.runs(project, filters={...}, order="-created_at")`` and the server's runs search
take the same filter. ``parse`` checks it once (bounded in depth, clauses and regex
length, so a hostile filter cannot cause unbounded work) and returns a tree that is then

* evaluated in Python over a run (``matches``): the local reader, ``Api(dir=)``;
* compiled to parameterised SQL for SQLite or PostgreSQL (``to_sql``) over the store's
  ``run_index`` table (``rankwise.store.run_filters``). Every value travels as a bound
  parameter, never in the SQL text.

The same filter picks the same runs everywhere; one test table runs over all three.

Fields: ``state``, ``tags``, ``group``, ``job_type``, ``created_at`` (Unix seconds, or an
ISO-8601 string), ``display_name`` (also ``name``), ``config.KEY[.SUBKEY...]``,
``summary.KEY`` (also ``summary_metrics.KEY``: the primary rank's summary) and
``summary_cross_rank.KEY.STAT`` (the cross-rank line's last complete value, STAT one of
``mean``, ``wmean``, ``min``, ``max``, ``sum``, ``n``, ``step``).

Semantics (the same in Python and SQL):

* a missing key, a JSON null and a non-finite number are all *missing*: ``$eq: null``
  and ``$exists: false`` match them, ``$ne``/``$nin`` match them, nothing else does;
* a number operand matches numbers only, a string strings only, a boolean booleans only;
  ``$gt``/``$gte``/``$lt``/``$lte`` compare numbers numerically and strings by code point;
* ``tags`` is a list: ``$eq``/``$in`` match when any tag does, ``$ne``/``$nin`` when none
  does, ``$regex`` when any tag matches, ``$exists: true`` when there is any tag;
* lists and objects (a config value ``[1, 2]``) match only ``$exists``, ``$ne``, ``$nin``;
* ``state`` is settled at read time (a silent run becomes crashed), so the SQL stores
  answer it from the state the index row was made with when that is final, and keep a
  run that was running for a check on the folded run. There is no ``$not``, so keeping
  those candidates only ever widens what SQL returns; the check narrows it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal

from .errors import UsageError
from .stream.records import STATES

MAX_DEPTH = 8  # nesting of $and / $or
MAX_CLAUSES = 200  # conditions in one filter
MAX_IN = 1000  # values of one $in / $nin
MAX_REGEX = 256  # characters of one $regex
MAX_PATH = 16  # keys of one config / summary path
MAX_STRING = 1000  # characters of one operand

OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$regex", "$exists")
LOGICAL = ("$and", "$or")
CROSS_STATS = ("mean", "wmean", "min", "max", "sum", "n", "step")
SCALAR_FIELDS = ("group", "job_type", "display_name")

_ALIASES = {
    "name": "display_name",
    "displayName": "display_name",
    "createdAt": "created_at",
    "jobType": "job_type",
    "summary_metrics": "summary",
}

Kind = Literal[
    "state",
    "tags",
    "group",
    "job_type",
    "display_name",
    "created_at",
    "config",
    "summary",
    "cross",
]


@dataclass(frozen=True)
class Field:
    kind: Kind
    path: tuple[str, ...] = ()

    @property
    def spelled(self) -> str:
        head = {"cross": "summary_cross_rank"}.get(self.kind, self.kind)
        return ".".join((head, *self.path))


@dataclass(frozen=True)
class Cond:
    field: Field
    op: str
    arg: Any


@dataclass(frozen=True)
class Logic:
    op: Literal["$and", "$or"]
    parts: tuple[Node, ...]


Node = Cond | Logic


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


# -- parsing ---------------------------------------------------------------------------


def parse_field(name: Any, *, for_order: bool = False) -> Field:
    """A field name (``config.lr``, ``summary_metrics.loss``) as a ``Field``."""
    if not isinstance(name, str) or not name:
        raise UsageError(f"a filter field is a non-empty string, not {name!r}")
    head, _, rest = name.partition(".")
    head = _ALIASES.get(head, head)
    if head in ("state", "tags", "group", "job_type", "display_name", "created_at"):
        if rest:
            raise UsageError(f"filter field {name!r}: {head} has no sub-keys")
        if for_order and head == "tags":
            raise UsageError("cannot order runs by tags: order by a field with one value")
        return Field(head)  # type: ignore[arg-type]
    if head in ("config", "summary", "summary_cross_rank"):
        path = tuple(rest.split(".")) if rest else ()
        if not path or any(not p for p in path):
            raise UsageError(
                f"filter field {name!r}: name a key after {head}., e.g. {head}.lr (no empty keys)"
            )
        if len(path) > MAX_PATH:
            raise UsageError(f"filter field {name!r} is deeper than {MAX_PATH} keys")
        if head == "summary_cross_rank":
            if len(path) < 2 or path[-1] not in CROSS_STATS:
                raise UsageError(
                    f"filter field {name!r}: summary_cross_rank.KEY.STAT, STAT one of "
                    f"{', '.join(CROSS_STATS)}"
                )
            return Field("cross", (".".join(path[:-1]), path[-1]))
        return Field(head, path)  # type: ignore[arg-type]
    raise UsageError(
        f"unknown filter field {name!r}: use state, tags, group, job_type, created_at, "
        "display_name, config.KEY, summary.KEY or summary_cross_rank.KEY.STAT"
    )


class _Budget:
    def __init__(self) -> None:
        self.clauses = 0

    def take(self) -> None:
        self.clauses += 1
        if self.clauses > MAX_CLAUSES:
            raise UsageError(f"a filter has at most {MAX_CLAUSES} conditions")


def parse(filters: Any) -> Node | None:
    """Check ``filters`` (a dict, as W&B's ``Api.runs(filters=)``); None: no filter.

    Raises ``UsageError`` naming the operator or field that is wrong."""
    if filters is None:
        return None
    if not isinstance(filters, dict):
        raise UsageError(
            'filters are a JSON object (a dict), e.g. {"config.lr": {"$gt": 0.01}}, '
            f"not {type(filters).__name__}"
        )
    if not filters:
        return None
    return _doc(filters, 1, _Budget())


def _doc(obj: Any, depth: int, budget: _Budget) -> Node:
    if depth > MAX_DEPTH:
        raise UsageError(f"a filter nests $and/$or at most {MAX_DEPTH} deep")
    if not isinstance(obj, dict) or not obj:
        raise UsageError(f"each filter of $and/$or is a non-empty object, not {obj!r:.80}")
    parts: list[Node] = []
    for key, value in obj.items():
        if key in LOGICAL:
            if not isinstance(value, list) or not value:
                raise UsageError(f"{key} takes a non-empty list of filters")
            subs = tuple(_doc(v, depth + 1, budget) for v in value)
            parts.append(subs[0] if len(subs) == 1 else Logic(key, subs))
        elif isinstance(key, str) and key.startswith("$"):
            if key in OPERATORS:
                raise UsageError(
                    f"operator {key} needs a field: write {{FIELD: {{{key!r}: VALUE}}}}, "
                    'e.g. {"config.lr": {"$gt": 0.01}}'
                )
            raise UsageError(
                f"unknown filter operator {key!r}: use one of {', '.join(LOGICAL + OPERATORS)}"
            )
        else:
            field = parse_field(key)
            if isinstance(value, dict) and value and all(str(k).startswith("$") for k in value):
                for op, arg in value.items():
                    budget.take()
                    parts.append(_cond(field, op, arg))
            else:
                budget.take()
                parts.append(_cond(field, "$eq", value))
    return parts[0] if len(parts) == 1 else Logic("$and", tuple(parts))


def _scalar(field: Field, op: str, arg: Any, *, null: bool = True) -> Any:
    if arg is None and null:
        return None
    if isinstance(arg, bool | str):
        if isinstance(arg, str) and len(arg) > MAX_STRING:
            raise UsageError(
                f"{field.spelled} {op}: a string operand has at most {MAX_STRING} chars"
            )
        return arg
    if isinstance(arg, int | float):
        if not math.isfinite(arg):
            raise UsageError(f"{field.spelled} {op}: a number operand must be finite")
        return arg
    raise UsageError(
        f"{field.spelled} {op}: the operand is a string, number, boolean"
        + (" or null" if null else "")
        + f", not {type(arg).__name__}"
    )


def _time(field: Field, op: str, arg: Any) -> Any:
    """``created_at``'s operand as Unix seconds (an ISO-8601 string is converted)."""
    if arg is None:
        return None
    if isinstance(arg, str):
        try:
            when = datetime.fromisoformat(arg.replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(
                f"created_at {op}: {arg!r} is not an ISO-8601 time (e.g. 2026-01-31T12:00:00Z)"
            ) from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        return when.timestamp()
    if isinstance(arg, bool) or not isinstance(arg, int | float) or not math.isfinite(arg):
        raise UsageError(f"created_at {op}: pass Unix seconds or an ISO-8601 string")
    return float(arg)


def _cond(field: Field, op: Any, arg: Any) -> Cond:
    if op not in OPERATORS:
        if op in LOGICAL:
            raise UsageError(f"{op} goes at the top of a filter, not under {field.spelled}")
        raise UsageError(
            f"unknown filter operator {op!r} on {field.spelled}: use one of {', '.join(OPERATORS)}"
        )
    name = field.spelled
    if op == "$exists":
        if not isinstance(arg, bool):
            raise UsageError(f"{name} $exists takes true or false, not {arg!r:.40}")
        return Cond(field, op, arg)
    if op == "$regex":
        if not isinstance(arg, str):
            raise UsageError(f"{name} $regex takes a string pattern")
        if len(arg) > MAX_REGEX:
            raise UsageError(f"{name} $regex: a pattern has at most {MAX_REGEX} characters")
        try:
            re.compile(arg)
        except re.error as exc:
            raise UsageError(f"{name} $regex: {arg!r} is not a regular expression: {exc}") from None
        if field.kind == "created_at":
            raise UsageError("created_at $regex: compare times with $gt/$lt instead")
        return Cond(field, op, arg)
    conv = _time if field.kind == "created_at" else _scalar
    if op in ("$in", "$nin"):
        if not isinstance(arg, list):
            raise UsageError(f"{name} {op} takes a list of values")
        if len(arg) > MAX_IN:
            raise UsageError(f"{name} {op}: at most {MAX_IN} values")
        values = tuple(conv(field, op, a) for a in arg)
        _check_kind(field, op, values)
        return Cond(field, op, values)
    value = conv(field, op, arg)
    if op in ("$gt", "$gte", "$lt", "$lte"):
        if value is None or isinstance(value, bool):
            raise UsageError(f"{name} {op} compares numbers or strings, not {arg!r}")
        if field.kind == "tags":
            raise UsageError(f"tags {op}: tags are compared with $eq, $in, $nin or $regex")
        if field.kind == "state":
            raise UsageError(f"state {op}: compare states with $eq, $in or $nin")
    _check_kind(field, op, (value,))
    return Cond(field, op, value)


def _check_kind(field: Field, op: str, values: tuple[Any, ...]) -> None:
    if field.kind == "state":
        for v in values:
            if v not in STATES:
                raise UsageError(f"state {op}: {v!r} is not one of {', '.join(STATES)}")
    if field.kind == "tags":
        for v in values:
            if not isinstance(v, str):
                raise UsageError(f"tags {op}: a tag is a string, not {v!r}")


def fields_of(node: Node | None) -> set[str]:
    """The kinds of field a filter reads (``state``, ``config``, ...)."""
    if node is None:
        return set()
    if isinstance(node, Cond):
        return {node.field.kind}
    out: set[str] = set()
    for p in node.parts:
        out |= fields_of(p)
    return out


# -- order -----------------------------------------------------------------------------

ORDER_FIELDS = ("created_at", "updated_at", "display_name", "state", "group", "job_type")


@dataclass(frozen=True)
class Order:
    field: Field | None  # None: updated_at (not a filter field)
    desc: bool

    @property
    def is_updated(self) -> bool:
        return self.field is None


def parse_order(order: str | None) -> Order:
    """W&B's ``order``: ``"-created_at"`` (the default), ``"+summary_metrics.loss"``."""
    if order is None or order == "":
        return Order(Field("created_at"), True)
    if not isinstance(order, str) or len(order) > 400:
        raise UsageError("order is a field name with a leading '-' or '+', e.g. -created_at")
    desc = order.startswith("-")
    name = order[1:] if order[:1] in "+-" else order
    if name in ("updated_at", "heartbeat_at", "updatedAt"):
        return Order(None, desc)
    return Order(parse_field(name, for_order=True), desc)


# -- evaluation in Python ------------------------------------------------------------


def _clean(v: Any) -> Any:
    if v is None:
        return MISSING
    if isinstance(v, float) and not math.isfinite(v):
        return MISSING
    return v


def _dig(doc: Any, path: tuple[str, ...]) -> Any:
    for p in path:
        if not isinstance(doc, dict) or p not in doc:
            return MISSING
        doc = doc[p]
    return _clean(doc)


def value_of(doc: dict[str, Any], field: Field) -> Any:
    """The value ``field`` names in a run document (``doc_of``); MISSING when none."""
    if field.kind in ("config", "summary"):
        return _dig(doc[field.kind], field.path)
    if field.kind == "cross":
        key, stat = field.path
        entry = doc["cross"].get(key)
        return MISSING if not isinstance(entry, dict) else _clean(entry.get(stat))
    return _clean(doc[field.kind])


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _eq(v: Any, a: Any) -> bool:
    if a is None:
        return v is MISSING
    if isinstance(a, bool):
        return isinstance(v, bool) and v == a
    if _is_num(a):
        return _is_num(v) and v == a
    return isinstance(v, str) and v == a


def _cmp(v: Any, op: str, a: Any) -> bool:
    if _is_num(a):
        if not _is_num(v):
            return False
    elif not isinstance(v, str):
        return False
    if op == "$gt":
        return bool(v > a)
    if op == "$gte":
        return bool(v >= a)
    if op == "$lt":
        return bool(v < a)
    return bool(v <= a)


def _match_cond(c: Cond, doc: dict[str, Any]) -> bool:
    if c.field.kind == "tags":
        tags: list[str] = doc["tags"]
        if c.op == "$eq":
            return c.arg in tags if c.arg is not None else not tags
        if c.op == "$ne":
            return c.arg not in tags if c.arg is not None else bool(tags)
        if c.op == "$in":
            return any((t in tags) if t is not None else not tags for t in c.arg)
        if c.op == "$nin":
            return not any((t in tags) if t is not None else not tags for t in c.arg)
        if c.op == "$regex":
            rx = re.compile(c.arg)
            return any(rx.search(t) for t in tags)
        return bool(tags) is bool(c.arg)  # $exists
    v = value_of(doc, c.field)
    if c.op == "$eq":
        return _eq(v, c.arg)
    if c.op == "$ne":
        return not _eq(v, c.arg)
    if c.op == "$in":
        return any(_eq(v, a) for a in c.arg)
    if c.op == "$nin":
        return not any(_eq(v, a) for a in c.arg)
    if c.op == "$exists":
        return (v is not MISSING) is bool(c.arg)
    if c.op == "$regex":
        return isinstance(v, str) and re.search(c.arg, v) is not None
    return _cmp(v, c.op, c.arg)


def matches(node: Node | None, doc: dict[str, Any]) -> bool:
    """Whether the run document ``doc`` (``doc_of``) passes the filter."""
    if node is None:
        return True
    if isinstance(node, Cond):
        return _match_cond(node, doc)
    if node.op == "$and":
        return all(matches(p, doc) for p in node.parts)
    return any(matches(p, doc) for p in node.parts)


def doc_of(run: Any, cross: bool = True) -> dict[str, Any]:
    """A ``RunInfo`` as the document filters read (``cross``: with the cross-rank
    summary, which a run read from files computes on first use)."""
    lines: dict[str, dict[str, Any]] = {}
    values = run.summary_cross_rank if cross else {}
    for key, v in values.items():
        lines[key] = {s: getattr(v, s, None) for s in CROSS_STATS}
    return {
        "state": run.state,
        "tags": list(run.tags),
        "group": run.group,
        "job_type": run.job_type,
        "display_name": run.name,
        "created_at": run.created,
        "config": run.config,
        "summary": run.summary,
        "cross": lines,
    }


def _rank(v: Any) -> tuple[int, Any]:
    if _is_num(v):
        return (0, v)
    if isinstance(v, str):
        return (1, v)
    if isinstance(v, bool):
        return (2, v)
    return (3, 0)  # a list or object: after every scalar, unordered among themselves


def sort_key_groups(items: list[tuple[Any, Any]], desc: bool) -> list[Any]:
    """``items`` (value, thing) sorted by value as the stores sort them: numbers, then
    strings, then booleans, each ascending (``desc``: reversed), missing always last.
    Ties keep their order (the caller sorts by id first)."""
    present = [(v, t) for v, t in items if _clean(v) is not MISSING]
    missing = [t for v, t in items if _clean(v) is MISSING]
    present.sort(key=lambda p: _rank(p[0]), reverse=desc)
    return [t for _, t in present] + missing


# -- compilation to SQL ------------------------------------------------------------------

Dialect = Literal["sqlite", "postgres"]

# The run_index column of each field (``rankwise.store.run_filters``).
_COLUMN = {
    "group": "ri.grp",
    "job_type": "ri.job_type",
    "display_name": "ri.name",
    "created_at": "ri.created",
    "config": "ri.config",
    "summary": "ri.summary",
    "cross": "ri.cross_rank",
}


def _json_path(dialect: Dialect, path: tuple[str, ...]) -> Any:
    if dialect == "sqlite":
        return "$" + "".join('."' + p.replace('"', '""') + '"' for p in path)
    return list(path)


@dataclass
class SQL:
    """A compiled condition: ``text`` with ``?`` placeholders and its ``params``."""

    text: str
    params: list[Any]


def to_sql(node: Node | None, dialect: Dialect) -> SQL:
    """``node`` as a condition over ``run_index ri``. ``state`` conditions compile to
    true (see the module docstring): check ``matches`` after when ``fields_of`` has it."""
    if node is None:
        return SQL("1 = 1", [])
    if isinstance(node, Cond):
        return _cond_sql(node, dialect)
    parts = [to_sql(p, dialect) for p in node.parts]
    joiner = " AND " if node.op == "$and" else " OR "
    return SQL("(" + joiner.join(p.text for p in parts) + ")", [x for p in parts for x in p.params])


_SQL_OPS = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def _regex(dialect: Dialect, expr: str) -> str:
    """``expr`` matches the pattern parameter (SQLite: the ``rw_regexp`` function each
    connection has, Python's ``re``; PostgreSQL: ``~``)."""
    return f"rw_regexp(?, {expr})" if dialect == "sqlite" else f"({expr}) ~ ?"


def _regex_params(dialect: Dialect, pattern: str, *expr_params: Any) -> list[Any]:
    return [pattern, *expr_params] if dialect == "sqlite" else [*expr_params, pattern]


def _tags_sql(c: Cond, d: Dialect) -> SQL:
    each = (
        "SELECT 1 FROM json_each(ri.tags) AS t WHERE t.value"
        if d == "sqlite"
        else "SELECT 1 FROM jsonb_array_elements_text(ri.tags) AS t(value) WHERE t.value"
    )
    length = "json_array_length(ri.tags)" if d == "sqlite" else "jsonb_array_length(ri.tags)"

    def has(tag: str | None) -> SQL:
        if tag is None:
            return SQL(f"{length} = 0", [])
        return SQL(f"EXISTS ({each} = ?)", [tag])

    if c.op in ("$eq", "$ne"):
        got = has(c.arg)
        return got if c.op == "$eq" else SQL(f"NOT ({got.text})", got.params)
    if c.op in ("$in", "$nin"):
        ors = [has(t) for t in c.arg] or [SQL("1 = 0", [])]
        text = "(" + " OR ".join(o.text for o in ors) + ")"
        params = [x for o in ors for x in o.params]
        return SQL(text, params) if c.op == "$in" else SQL(f"NOT {text}", params)
    if c.op == "$regex":
        if d == "sqlite":
            return SQL(
                "EXISTS (SELECT 1 FROM json_each(ri.tags) AS t WHERE rw_regexp(?, t.value))",
                [c.arg],
            )
        return SQL(
            "EXISTS (SELECT 1 FROM jsonb_array_elements_text(ri.tags) AS t(value) "
            "WHERE t.value ~ ?)",
            [c.arg],
        )
    return SQL(f"{length} > 0" if c.arg else f"{length} = 0", [])  # $exists


def _typed(field: Field, d: Dialect) -> tuple[str, str, list[Any], str]:
    """For a JSON field: (type expr, value expr, params of each, number type name)."""
    col = _COLUMN[field.kind]
    path = _json_path(d, field.path)
    if d == "sqlite":
        return f"json_type({col}, ?)", f"json_extract({col}, ?)", [path], "num"
    return (
        f"jsonb_typeof({col} #> CAST(? AS TEXT[]))",
        f"({col} #>> CAST(? AS TEXT[]))",
        [path],
        "num",
    )


def _value_sql(field: Field, d: Dialect, want: str) -> SQL:
    """An expression that is the field's value when it is of type ``want`` (num, text,
    true, false), else NULL; or, for ``want='present'``, whether it is present."""
    if field.kind in ("config", "summary", "cross"):
        t, v, p, _ = _typed(field, d)
        if d == "sqlite":
            types = {
                "num": "('integer', 'real')",
                "text": "('text')",
                "true": "('true')",
                "false": "('false')",
                "present": "('integer', 'real', 'text', 'true', 'false', 'array', 'object')",
            }[want]
            if want in ("true", "false", "present"):
                return SQL(f"COALESCE({t} IN {types}, FALSE)", p)
            return SQL(f"(CASE WHEN {t} IN {types} THEN {v} END)", p + p)
        pg = {"num": "number", "text": "string"}.get(want)
        if want == "present":
            return SQL(f"(COALESCE({t}, 'null') <> 'null')", p)
        if want in ("true", "false"):
            return SQL(f"COALESCE({t} = 'boolean' AND {v} = '{want}', FALSE)", p + p)
        cast = "::float8" if want == "num" else ""
        return SQL(f"(CASE WHEN {t} = '{pg}' THEN {v}{cast} END)", p + p)
    col = _COLUMN[field.kind]
    if field.kind == "created_at":
        if want == "num":
            return SQL(col, [])
        if want == "present":
            return SQL(f"({col} IS NOT NULL)", [])
        return SQL("NULL", [])
    # a text column: group, job_type, display_name
    if want == "text":
        return SQL(col, [])
    if want == "present":
        return SQL(f"({col} IS NOT NULL)", [])
    return SQL("NULL", [])


def _want(arg: Any) -> str:
    if isinstance(arg, bool):
        return "true" if arg else "false"
    if isinstance(arg, int | float):
        return "num"
    return "text"


def _eq_sql(field: Field, d: Dialect, arg: Any) -> SQL:
    if arg is None:
        got = _value_sql(field, d, "present")
        return SQL(f"NOT {got.text}", got.params)
    want = _want(arg)
    got = _value_sql(field, d, want)
    if got.text == "NULL":  # a column that never holds this type
        return SQL("1 = 0", [])
    if want in ("true", "false"):
        return got
    value = float(arg) if want == "num" and d == "postgres" else arg
    return SQL(f"COALESCE({got.text} = ?, FALSE)", [*got.params, value])


def _state_sql(c: Cond, d: Dialect) -> SQL:
    if c.op in ("$eq", "$ne"):
        text = "COALESCE(ri.state = ?, FALSE)"
        return SQL(text if c.op == "$eq" else f"NOT {text}", [c.arg])
    if c.op in ("$in", "$nin"):
        if not c.arg:
            return SQL("1 = 0" if c.op == "$in" else "1 = 1", [])
        text = f"ri.state IN ({', '.join('?' * len(c.arg))})"
        return SQL(text if c.op == "$in" else f"NOT ({text})", list(c.arg))
    if c.op == "$exists":
        return SQL("1 = 1" if c.arg else "1 = 0", [])
    return SQL(f"COALESCE({_regex(d, 'ri.state')}, FALSE)", _regex_params(d, c.arg))


def _cond_sql(c: Cond, d: Dialect) -> SQL:
    f = c.field
    if f.kind == "state":
        # ri.state is the state when the index row was made: final unless "running" (a
        # running run may be crashed by now), so a running row is kept for the caller
        # to check on the folded run (``matches``).
        inner = _state_sql(c, d)
        return SQL(f"(ri.state = 'running' OR {inner.text})", inner.params)
    if f.kind == "tags":
        return _tags_sql(c, d)
    if c.op == "$eq":
        return _eq_sql(f, d, c.arg)
    if c.op == "$ne":
        got = _eq_sql(f, d, c.arg)
        return SQL(f"NOT {got.text}", got.params)
    if c.op in ("$in", "$nin"):
        ors = [_eq_sql(f, d, a) for a in c.arg] or [SQL("1 = 0", [])]
        text = "(" + " OR ".join(o.text for o in ors) + ")"
        params = [x for o in ors for x in o.params]
        return SQL(text, params) if c.op == "$in" else SQL(f"NOT {text}", params)
    if c.op == "$exists":
        got = _value_sql(f, d, "present")
        return got if c.arg else SQL(f"NOT {got.text}", got.params)
    if c.op == "$regex":
        got = _value_sql(f, d, "text")
        if got.text == "NULL":
            return SQL("1 = 0", [])
        text = f"COALESCE({_regex(d, got.text)}, FALSE)"
        return SQL(text, _regex_params(d, c.arg, *got.params))
    want = _want(c.arg)
    got = _value_sql(f, d, want)
    if got.text == "NULL":
        return SQL("1 = 0", [])
    value = float(c.arg) if want == "num" and d == "postgres" else c.arg
    expr = got.text
    if want == "text" and d == "postgres":
        expr = f'({expr}) COLLATE "C"'
    return SQL(f"COALESCE({expr} {_SQL_OPS[c.op]} ?, FALSE)", [*got.params, value])


def order_sql(field: Field, d: Dialect) -> SQL:
    """An expression selecting ``field``'s raw value for sorting (JSON fields: the
    decoded JSON value; the caller sorts with ``sort_key_groups``)."""
    if field.kind in ("config", "summary", "cross"):
        col = _COLUMN[field.kind]
        path = _json_path(d, field.path)
        if d == "sqlite":
            # json_extract returns SQL values; true/false come back as 1/0: keep the type
            return SQL(
                f"CASE json_type({col}, ?) WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' "
                f"WHEN 'text' THEN json_quote(json_extract({col}, ?)) "
                f"WHEN 'integer' THEN json_extract({col}, ?) "
                f"WHEN 'real' THEN json_extract({col}, ?) "
                "ELSE NULL END",
                [path, path, path, path],
            )
        return SQL(f"({col} #> CAST(? AS TEXT[]))", [path])
    return SQL(_COLUMN.get(field.kind, "NULL"), [])


def order_by_sql(field: Field | None, d: Dialect, desc: bool, column: str | None = None) -> SQL:
    """``ORDER BY`` terms over ``run_index ri`` that sort as ``sort_key_groups`` sorts
    ``order_sql``'s values, ties by run id: missing always last; a JSON field's numbers,
    then strings (by code point), booleans, lists and objects, each ascending (``desc``:
    all of it reversed). ``column``: a column of ``run_index`` instead (``ri.steps``)."""
    way = " DESC" if desc else ""
    tie = 'ri.run_id COLLATE "C"' if d == "postgres" else "ri.run_id"
    if column is None and field is not None and field.kind in ("config", "summary", "cross"):
        col = _COLUMN[field.kind]
        p = _json_path(d, field.path)
        if d == "sqlite":
            t = f"json_type({col}, ?)"
            rank = (
                f"CASE {t} WHEN 'integer' THEN 0 WHEN 'real' THEN 0 WHEN 'text' THEN 1 "
                "WHEN 'true' THEN 2 WHEN 'false' THEN 2 WHEN 'array' THEN 3 "
                "WHEN 'object' THEN 3 ELSE 4 END"
            )
            num = f"CASE WHEN {t} IN ('integer', 'real') THEN json_extract({col}, ?) END"
            text = f"CASE WHEN {t} = 'text' THEN json_extract({col}, ?) END"
            boolean = f"CASE {t} WHEN 'true' THEN 1 WHEN 'false' THEN 0 END"
        else:
            t = f"jsonb_typeof({col} #> CAST(? AS TEXT[]))"
            v = f"({col} #>> CAST(? AS TEXT[]))"
            rank = (
                f"CASE {t} WHEN 'number' THEN 0 WHEN 'string' THEN 1 WHEN 'boolean' THEN 2 "
                "WHEN 'array' THEN 3 WHEN 'object' THEN 3 ELSE 4 END"
            )
            num = f"CASE WHEN {t} = 'number' THEN CAST({v} AS NUMERIC) END"
            text = f"(CASE WHEN {t} = 'string' THEN {v} END) COLLATE \"C\""
            boolean = f"CASE WHEN {t} = 'boolean' THEN CAST({v} AS BOOLEAN) END"
        terms = f"({rank}) = 4, ({rank}){way}, {num}{way}, {text}{way}, {boolean}{way}, {tie}"
        return SQL(terms, [p] * terms.count("?"))  # every placeholder is the path
    if column is None:
        column = _COLUMN.get(field.kind) if field is not None else "ri.updated"
        if column is None:
            raise ValueError(f"no column orders by {field}")
    if d == "postgres" and column in ("ri.name", "ri.grp", "ri.job_type"):
        column = f'{column} COLLATE "C"'
    return SQL(f"({column.split(' ')[0]} IS NULL), {column}{way}, {tie}", [])
