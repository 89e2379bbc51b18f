"""Read `schemata.toml` into plain values, refusing anything the initializer would not
compose safely. Every complaint names the table and the key it is about."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from domain.errors import SchedulerError

FILE_NAME = "schemata.toml"
# The canonical file sits at the root of a checkout; the package carries a copy
# (adapters/postgres/schemata.toml, a symbolic link to the root file in the repository,
# which a wheel build turns into a plain file).
_CHECKOUT = Path(__file__).resolve().parents[2]

IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
TYPE_NAMES = frozenset(
    {
        "uuid", "text", "jsonb", "json", "boolean", "bool", "smallint", "integer", "int",
        "bigint", "real", "double precision", "numeric", "decimal", "timestamptz",
        "timestamp with time zone", "timestamp", "date", "time", "interval", "bytea",
        "inet", "varchar", "character varying",
    }
)  # fmt: skip
_COLUMN = re.compile(
    r"^(?P<type>[a-z][a-z ]*?)(?P<size>\(\d+(?:\s*,\s*\d+)?\))?(?:\[\])?"
    r"(?:\s+NOT\s+NULL)?(?:\s+DEFAULT\s+(?P<default>.+))?$",
    re.IGNORECASE,
)
_LITERAL = r"(?:-?\d+(?:\.\d+)?|true|false|null|'[^'\\;]*')"
_DEFAULT = re.compile(
    rf"^(?:{_LITERAL}|now\(\)|current_timestamp|gen_random_uuid\(\))$", re.IGNORECASE
)
_CONDITION = re.compile(
    rf"^(?:NOT\s+)?(?P<column>[a-z_][a-z0-9_]*)"
    rf"(?:\s*(?:=|<>|!=|<=|>=|<|>)\s*{_LITERAL}|\s+IS\s+(?:NOT\s+)?NULL)?$",
    re.IGNORECASE,
)
_INDEX_COLUMN = re.compile(r"^(?P<column>[a-z_][a-z0-9_]*)(?:\s+(?P<order>ASC|DESC))?$", re.I)
INDEX_METHODS = frozenset({"btree", "gin", "gist", "hash", "brin"})
ON_DELETE = frozenset({"cascade", "restrict", "no action", "set null"})


class SchemataError(SchedulerError, ValueError):
    """`schemata.toml` says something the initializer does not accept."""

    def __init__(self, table: str, key: str, message: str) -> None:
        super().__init__(f"{FILE_NAME}: table {table!r}, key {key!r}: {message}")
        self.table = table
        self.key = key


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    definition: str  # validated SQL text: type [NOT NULL] [DEFAULT literal]


@dataclass(frozen=True, slots=True)
class IndexColumn:
    name: str
    descending: bool = False


@dataclass(frozen=True, slots=True)
class Index:
    name: str
    columns: tuple[IndexColumn, ...]
    unique: bool = False
    using: str = "btree"
    where: str | None = None  # validated SQL text


@dataclass(frozen=True, slots=True)
class ForeignKey:
    name: str
    columns: tuple[str, ...]
    table: str
    references: tuple[str, ...]
    on_delete: str = "no action"


@dataclass(frozen=True, slots=True)
class Partitioning:
    """Range partitions of a table by a timestamptz column, each `days` long (counted
    from Monday 1970-01-05 00:00 UTC), kept ready `ahead` partitions past the current
    one (adapters/postgres/partitions.py)."""

    column: str
    days: int = 7
    ahead: int = 1


@dataclass(frozen=True, slots=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]
    foreign_keys: tuple[ForeignKey, ...] = ()
    indexes: tuple[Index, ...] = ()
    partitions: Partitioning | None = None


def read_schemata(path: Path | None = None) -> list[Table]:
    """The tables `path` declares (default: the checkout's file, else the packaged one)."""
    if path is not None:
        text = path.read_text(encoding="utf-8")
    elif (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / FILE_NAME).is_file():
        text = (_CHECKOUT / FILE_NAME).read_text(encoding="utf-8")
    else:
        text = resources.files(__package__).joinpath(FILE_NAME).read_text(encoding="utf-8")
    return parse_schemata(text)


def parse_schemata(text: str) -> list[Table]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SchemataError("-", "-", f"is not valid TOML: {exc}") from None
    _only(data, {"tables"}, "-")
    entries = data.get("tables")
    if not isinstance(entries, list) or not entries:
        raise SchemataError("-", "tables", "must be a non-empty array of tables")
    tables: list[Table] = []
    for number, entry in enumerate(entries, start=1):
        label = f"#{number}"
        if not isinstance(entry, dict):
            raise SchemataError(label, "-", "must be a table")
        tables.append(_table(entry, label, {t.name: t for t in tables}))
    return tables


def _table(entry: dict[str, Any], label: str, earlier: dict[str, Table]) -> Table:
    name = entry.get("name")
    if not isinstance(name, str) or not IDENTIFIER.match(name):
        raise SchemataError(label, "name", "must be a lower-case SQL identifier")
    if name in earlier:
        raise SchemataError(name, "name", "is declared twice")
    _only(entry, {"name", "columns", "primary_key", "foreign_keys", "indexes", "partitions"}, name)
    columns = _columns(entry.get("columns"), name)
    known = {c.name for c in columns}
    primary = entry.get("primary_key")
    if not isinstance(primary, dict):
        raise SchemataError(name, "primary_key", "is required: a table with `columns`")
    _only(primary, {"columns"}, name, "primary_key.")
    pk = _names(primary.get("columns"), known, name, "primary_key.columns")
    fks = tuple(
        _foreign_key(fk, name, f"foreign_keys[{i}]", known, earlier)
        for i, fk in enumerate(_entries(entry, "foreign_keys", name))
    )
    indexes = tuple(
        _index(index, name, f"indexes[{i}]", known)
        for i, index in enumerate(_entries(entry, "indexes", name))
    )
    partitions = None
    if "partitions" in entry:
        partitions = _partitioning(entry["partitions"], name, columns, pk)
        if fks:
            raise SchemataError(name, "partitions", "a partitioned table has no foreign keys")
    return Table(name, columns, pk, fks, indexes, partitions)


def _partitioning(
    value: Any, table: str, columns: tuple[Column, ...], primary_key: tuple[str, ...]
) -> Partitioning:
    if not isinstance(value, dict):
        raise SchemataError(table, "partitions", "must be { column, days, ahead }")
    _only(value, {"column", "days", "ahead"}, table, "partitions.")
    column = value.get("column")
    definitions = {c.name: c.definition for c in columns}
    definition = definitions.get(column) if isinstance(column, str) else None
    if definition is None or not re.match(r"^timestamptz NOT NULL\b", definition, re.I):
        raise SchemataError(table, "partitions.column", "must name a timestamptz NOT NULL column")
    if column not in primary_key:
        # PostgreSQL's rule: a partitioned table's unique keys include the partition key.
        raise SchemataError(table, "partitions.column", "must be part of the primary key")
    numbers = {}
    for key, default, low, high in (("days", 7, 1, 366), ("ahead", 1, 1, 52)):
        number = value.get(key, default)
        if not isinstance(number, int) or isinstance(number, bool) or not low <= number <= high:
            raise SchemataError(table, f"partitions.{key}", f"must be an integer {low}-{high}")
        numbers[key] = number
    return Partitioning(str(column), numbers["days"], numbers["ahead"])


def _columns(value: Any, table: str) -> tuple[Column, ...]:
    if not isinstance(value, dict) or not value:
        raise SchemataError(table, "columns", "must map column names to SQL types")
    columns = []
    for name, definition in value.items():
        key = f"columns.{name}"
        if not IDENTIFIER.match(name):
            raise SchemataError(table, key, "is not a lower-case SQL identifier")
        if not isinstance(definition, str):
            raise SchemataError(table, key, "must be a string such as 'text NOT NULL'")
        definition = " ".join(definition.split())
        match = _COLUMN.match(definition)
        if match is None or " ".join(match["type"].lower().split()) not in TYPE_NAMES:
            raise SchemataError(
                table, key, f"{definition!r} is not 'TYPE [NOT NULL] [DEFAULT literal]'"
            )
        if match["default"] is not None and not _DEFAULT.match(match["default"]):
            raise SchemataError(table, key, f"default {match['default']!r} is not a literal")
        columns.append(Column(name, definition))
    return tuple(columns)


def _index(value: dict[str, Any], table: str, key: str, known: set[str]) -> Index:
    _only(value, {"name", "columns", "unique", "using", "where"}, table, key + ".")
    name = _identifier(value.get("name"), table, key + ".name")
    raw = value.get("columns")
    if not isinstance(raw, list) or not raw:
        raise SchemataError(table, key + ".columns", "must be a non-empty list")
    columns = []
    for item in raw:
        match = _INDEX_COLUMN.match(item) if isinstance(item, str) else None
        if match is None or match["column"] not in known:
            raise SchemataError(table, key + ".columns", f"{item!r} is not a column of {table}")
        columns.append(IndexColumn(match["column"], (match["order"] or "").upper() == "DESC"))
    unique = value.get("unique", False)
    if not isinstance(unique, bool):
        raise SchemataError(table, key + ".unique", "must be true or false")
    using = value.get("using", "btree")
    if using not in INDEX_METHODS:
        raise SchemataError(table, key + ".using", f"must be one of {sorted(INDEX_METHODS)}")
    where = value.get("where")
    if where is not None:
        where = _predicate(where, known, table, key + ".where")
    return Index(name, tuple(columns), unique, using, where)


def _predicate(value: Any, known: set[str], table: str, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SchemataError(table, key, "must be a predicate such as \"status = 'running'\"")
    predicate = " ".join(value.split())
    for part in re.split(r"\s+AND\s+", predicate, flags=re.IGNORECASE):
        match = _CONDITION.match(part)
        if match is None or match["column"] not in known:
            raise SchemataError(
                table, key, f"{part!r} is not 'column', 'NOT column' or 'column OP literal'"
            )
    return predicate


def _foreign_key(
    value: dict[str, Any], table: str, key: str, known: set[str], earlier: dict[str, Table]
) -> ForeignKey:
    _only(value, {"name", "columns", "references", "on_delete"}, table, key + ".")
    name = _identifier(value.get("name"), table, key + ".name")
    columns = _names(value.get("columns"), known, table, key + ".columns")
    ref = value.get("references")
    if not isinstance(ref, dict):
        raise SchemataError(table, key + ".references", "must be { table, columns }")
    _only(ref, {"table", "columns"}, table, key + ".references.")
    target = earlier.get(ref.get("table", ""))
    if target is None:
        raise SchemataError(
            table, key + ".references.table", "must name a table declared before this one"
        )
    ref_known = {c.name for c in target.columns}
    ref_columns = _names(ref.get("columns"), ref_known, table, key + ".references.columns")
    if len(ref_columns) != len(columns):
        raise SchemataError(table, key + ".references.columns", "must match `columns` in length")
    on_delete = value.get("on_delete", "no action")
    if on_delete not in ON_DELETE:
        raise SchemataError(table, key + ".on_delete", f"must be one of {sorted(ON_DELETE)}")
    return ForeignKey(name, columns, target.name, ref_columns, on_delete)


def _entries(entry: dict[str, Any], key: str, table: str) -> list[dict[str, Any]]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise SchemataError(table, key, f"must be an array of tables ([[tables.{key}]])")
    return value


def _names(value: Any, known: set[str], table: str, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise SchemataError(table, key, "must be a non-empty list of column names")
    for item in value:
        if item not in known:
            raise SchemataError(table, key, f"{item!r} is not a declared column")
    return tuple(value)


def _identifier(value: Any, table: str, key: str) -> str:
    if not isinstance(value, str) or not IDENTIFIER.match(value):
        raise SchemataError(table, key, "must be a lower-case SQL identifier")
    return str(value)


def _only(value: dict[str, Any], allowed: set[str], table: str, prefix: str = "") -> None:
    for key in value:
        if key not in allowed:
            raise SchemataError(table, prefix + key, f"is not a known key ({sorted(allowed)})")
