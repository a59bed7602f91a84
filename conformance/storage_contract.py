"""The contract checks on storage: the v10 structure, and the boot epoch kept out of it.

The structure of a host's database is compared with ``schemas/storage/v10.sql`` through
SQLite's own description of it (``table_xinfo``, ``index_list``/``index_xinfo``,
``foreign_key_list``), never as SQL text: a host may write its DDL however it likes. The
two things SQLite does not describe, ``CHECK`` constraints and the ``WHERE`` of a partial
index, are compared after normalising their tokens (case of names and keywords, quoting,
whitespace, comments). Column order and object names (of indexes and constraints) are not
part of the structure.

The boot epoch (§4) is checked on its own: no stored name speaks of one, and a restart with
nothing to recover changes no stored value.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from pi_contract import schemas_dir

EPOCH_NAME = re.compile(r"epoch|boot", re.IGNORECASE)
"""Names that speak of a process's boot (a column, a table, a setting key)."""

_TOKEN = re.compile(
    r"""
      (?P<space>\s+)
    | (?P<line_comment>--[^\n]*)
    | (?P<block_comment>/\*.*?\*/)
    | (?P<string>'(?:[^']|'')*')
    | (?P<quoted>"(?:[^"]|"")*"|`(?:[^`]|``)*`|\[[^\]]*\])
    | (?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|0[xX][0-9a-fA-F]+)
    | (?P<word>[A-Za-z_][A-Za-z0-9_$]*)
    | (?P<operator><=|>=|<>|!=|==|\|\||<<|>>|[-+*/%<>=&|~!(),.;?:@$])
    """,
    re.VERBOSE | re.DOTALL,
)


def sql_tokens(sql: str) -> list[str]:
    """The tokens of ``sql`` in a normal form: names and keywords lower case and unquoted,
    string literals kept as written, whitespace and comments gone."""
    tokens: list[str] = []
    for match in _TOKEN.finditer(sql):
        kind = match.lastgroup
        text = match.group()
        if kind in ("space", "line_comment", "block_comment"):
            continue
        if kind == "quoted":
            inner = text[1:-1]
            if text[0] == '"':
                inner = inner.replace('""', '"')
            elif text[0] == "`":
                inner = inner.replace("``", "`")
            tokens.append(inner.lower())
        elif kind == "word":
            tokens.append(text.lower())
        else:
            tokens.append(text)
    return tokens


def normalised(tokens: Sequence[str]) -> str:
    """Tokens joined in one canonical spelling."""
    return " ".join(tokens)


def _balanced(tokens: Sequence[str], opening: int) -> int:
    """The index of the ``)`` that closes the ``(`` at ``opening``."""
    depth = 0
    for index in range(opening, len(tokens)):
        if tokens[index] == "(":
            depth += 1
        elif tokens[index] == ")":
            depth -= 1
            if depth == 0:
                return index
    raise ValueError("unbalanced parentheses")


def check_clauses(create_table_sql: str) -> list[str]:
    """Every ``CHECK (...)`` of a CREATE TABLE statement, column or table level alike,
    normalised and sorted."""
    tokens = sql_tokens(create_table_sql)
    found: list[str] = []
    index = 0
    while index < len(tokens) - 1:
        if tokens[index] == "check" and tokens[index + 1] == "(":
            end = _balanced(tokens, index + 1)
            found.append(normalised(tokens[index + 2 : end]))
            index = end
        index += 1
    return sorted(found)


def partial_where(create_index_sql: str | None) -> str | None:
    """The normalised ``WHERE`` of a partial index, or None for a full one."""
    if not create_index_sql:
        return None
    tokens = sql_tokens(create_index_sql)
    opening = tokens.index("(")
    end = _balanced(tokens, opening)
    rest = tokens[end + 1 :]
    if rest and rest[0] == "where":
        return normalised([t for t in rest[1:] if t != ";"])
    return None


# -- the structure ----------------------------------------------------------------------


@dataclass(frozen=True)
class ColumnShape:
    """One column as SQLite describes it."""

    name: str
    declared_type: str
    not_null: bool
    default: str | None
    primary_key: int  # position in the primary key, 0 when not part of it
    hidden: int

    def describe(self) -> str:
        """``'status TEXT NOT NULL DEFAULT 'x''``."""
        parts = [self.name, self.declared_type or "(no type)"]
        if self.not_null:
            parts.append("NOT NULL")
        if self.default is not None:
            parts.append(f"DEFAULT {self.default}")
        if self.primary_key:
            parts.append(f"PRIMARY KEY#{self.primary_key}")
        if self.hidden:
            parts.append(f"hidden={self.hidden}")
        return " ".join(parts)


@dataclass(frozen=True)
class IndexShape:
    """An index by what it does, not by its name: keys, uniqueness, partial WHERE."""

    keys: tuple[tuple[str, bool, str], ...]  # (column or '<expr>', descending, collation)
    unique: bool
    where: str | None

    def describe(self, table: str) -> str:
        """``'UNIQUE INDEX ON turns (session_id) WHERE state = 'active''``."""
        keys = ", ".join(
            name + (" DESC" if desc else "") + ("" if coll == "binary" else f" COLLATE {coll}")
            for name, desc, coll in self.keys
        )
        head = "UNIQUE INDEX" if self.unique else "INDEX"
        tail = f" WHERE {self.where}" if self.where else ""
        return f"{head} ON {table} ({keys}){tail}"


@dataclass(frozen=True, order=True)
class ForeignKeyShape:
    """A foreign key: columns, the referenced table and columns, and its actions."""

    columns: tuple[str, ...]
    table: str
    references: tuple[str, ...]
    on_update: str
    on_delete: str
    match: str

    def describe(self) -> str:
        """``'(session_id) REFERENCES sessions (id)'`` with non-default actions."""
        text = f"({', '.join(self.columns)}) REFERENCES {self.table} ({', '.join(self.references)})"
        if self.on_update != "no action":
            text += f" ON UPDATE {self.on_update}"
        if self.on_delete != "no action":
            text += f" ON DELETE {self.on_delete}"
        return text


@dataclass(frozen=True)
class TableShape:
    """One table: columns by name, indexes, foreign keys, CHECKs and table options."""

    name: str
    columns: dict[str, ColumnShape]
    indexes: tuple[IndexShape, ...]
    foreign_keys: tuple[ForeignKeyShape, ...]
    checks: tuple[str, ...]
    without_rowid: bool
    strict: bool


@dataclass(frozen=True)
class SchemaShape:
    """Every table of a database, and the views and triggers (by name)."""

    tables: dict[str, TableShape]
    others: tuple[str, ...] = field(default=())  # 'view v', 'trigger t'


def _rows(conn: sqlite3.Connection, query: str, args: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in conn.execute(query, tuple(args)).fetchall()]


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _table_options(conn: sqlite3.Connection) -> dict[str, tuple[bool, bool]]:
    """table -> (WITHOUT ROWID, STRICT) (empty when SQLite predates ``table_list``)."""
    try:
        listed = _rows(conn, "PRAGMA main.table_list")
    except sqlite3.DatabaseError:
        return {}
    return {str(r[1]).lower(): (bool(r[4]), bool(r[5])) for r in listed if r[2] == "table"}


def _primary_key(conn: sqlite3.Connection, table: str) -> tuple[str, ...]:
    columns = _rows(conn, f"PRAGMA main.table_xinfo({_quoted(table)})")
    keyed = sorted((r[5], str(r[1]).lower()) for r in columns if r[5])
    return tuple(name for _position, name in keyed)


def _index_shapes(conn: sqlite3.Connection, table: str) -> tuple[IndexShape, ...]:
    shapes: list[IndexShape] = []
    for _seq, name, unique, _origin, _partial in _rows(
        conn, f"PRAGMA main.index_list({_quoted(table)})"
    ):
        keys = tuple(
            (str(column).lower() if column is not None else "<expr>", bool(desc), str(coll).lower())
            for _seqno, _cid, column, desc, coll, key in _rows(
                conn, f"PRAGMA main.index_xinfo({_quoted(name)})"
            )
            if key
        )
        sql = _rows(
            conn, "SELECT sql FROM main.sqlite_schema WHERE type = 'index' AND name = ?", (name,)
        )
        where = partial_where(sql[0][0]) if sql else None
        shapes.append(IndexShape(keys, bool(unique), where))
    return tuple(sorted(shapes, key=_index_order))


def _index_order(index: IndexShape) -> tuple[Any, ...]:
    return (index.keys, index.unique, index.where or "")


def _foreign_keys(conn: sqlite3.Connection, table: str) -> tuple[ForeignKeyShape, ...]:
    grouped: dict[int, list[tuple[Any, ...]]] = {}
    for row in _rows(conn, f"PRAGMA main.foreign_key_list({_quoted(table)})"):
        grouped.setdefault(int(row[0]), []).append(row)
    shapes: list[ForeignKeyShape] = []
    for rows in grouped.values():
        rows.sort(key=lambda r: r[1])
        parent = str(rows[0][2]).lower()
        references = tuple(str(r[4]).lower() for r in rows if r[4] is not None)
        if not references:  # REFERENCES parent: the parent's primary key
            references = _primary_key(conn, parent)
        shapes.append(
            ForeignKeyShape(
                columns=tuple(str(r[3]).lower() for r in rows),
                table=parent,
                references=references,
                on_update=str(rows[0][5]).lower(),
                on_delete=str(rows[0][6]).lower(),
                match=str(rows[0][7]).lower(),
            )
        )
    return tuple(sorted(shapes))


def describe(conn: sqlite3.Connection) -> SchemaShape:
    """The structure of the database behind ``conn``."""
    options = _table_options(conn)
    tables: dict[str, TableShape] = {}
    others: list[str] = []
    for kind, name, sql in _rows(
        conn,
        "SELECT type, name, sql FROM main.sqlite_schema "
        "WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY type, name",
    ):
        if kind in ("view", "trigger"):
            others.append(f"{kind} {str(name).lower()}")
        if kind != "table":
            continue
        columns = {
            str(r[1]).lower(): ColumnShape(
                name=str(r[1]).lower(),
                declared_type=" ".join(str(r[2]).upper().split()),
                not_null=bool(r[3]),
                default=_default(r[4]),
                primary_key=int(r[5]),
                hidden=int(r[6]),
            )
            for r in _rows(conn, f"PRAGMA main.table_xinfo({_quoted(name)})")
        }
        without_rowid, strict = options.get(str(name).lower(), (False, False))
        tables[str(name).lower()] = TableShape(
            name=str(name).lower(),
            columns=columns,
            indexes=_index_shapes(conn, name),
            foreign_keys=_foreign_keys(conn, name),
            checks=tuple(check_clauses(sql or "")),
            without_rowid=without_rowid,
            strict=strict,
        )
    return SchemaShape(tables, tuple(sorted(others)))


def _default(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    if text.startswith("'"):
        return text
    return normalised(sql_tokens(text))


@cache
def published_v10() -> SchemaShape:
    """The structure ``schemas/storage/v10.sql`` creates (read once; never changed)."""
    with closing(sqlite3.connect(":memory:")) as conn:
        conn.executescript((schemas_dir() / "storage" / "v10.sql").read_text(encoding="utf-8"))
        return describe(conn)


def differences(expected: SchemaShape, found: SchemaShape) -> list[str]:
    """Each way ``found`` differs from ``expected``, in words; empty when equal."""
    problems: list[str] = []
    for name in sorted(set(expected.tables) - set(found.tables)):
        problems.append(f"missing table {name}")
    for name in sorted(set(found.tables) - set(expected.tables)):
        problems.append(f"extra table {name}")
    for name in sorted(set(expected.tables) & set(found.tables)):
        problems.extend(_table_differences(expected.tables[name], found.tables[name]))
    for other in sorted(set(found.others) - set(expected.others)):
        problems.append(f"extra {other}")
    for other in sorted(set(expected.others) - set(found.others)):
        problems.append(f"missing {other}")
    return problems


def _table_differences(expected: TableShape, found: TableShape) -> Iterator[str]:
    table = expected.name
    for name in sorted(set(expected.columns) - set(found.columns)):
        yield f"table {table}: missing column {expected.columns[name].describe()}"
    for name in sorted(set(found.columns) - set(expected.columns)):
        yield f"table {table}: extra column {found.columns[name].describe()}"
    for name in sorted(set(expected.columns) & set(found.columns)):
        want, have = expected.columns[name], found.columns[name]
        if want != have:
            yield f"table {table}: column {want.describe()} is {have.describe()}"
    for index in sorted(set(expected.indexes) - set(found.indexes), key=_index_order):
        yield f"table {table}: missing {index.describe(table)}"
    for index in sorted(set(found.indexes) - set(expected.indexes), key=_index_order):
        yield f"table {table}: extra {index.describe(table)}"
    for key in sorted(set(expected.foreign_keys) - set(found.foreign_keys)):
        yield f"table {table}: missing foreign key {key.describe()}"
    for key in sorted(set(found.foreign_keys) - set(expected.foreign_keys)):
        yield f"table {table}: extra foreign key {key.describe()}"
    for check in sorted(set(expected.checks) - set(found.checks)):
        yield f"table {table}: missing CHECK ({check})"
    for check in sorted(set(found.checks) - set(expected.checks)):
        yield f"table {table}: extra CHECK ({check})"
    if expected.without_rowid != found.without_rowid:
        yield f"table {table}: WITHOUT ROWID is {found.without_rowid}"
    if expected.strict != found.strict:
        yield f"table {table}: STRICT is {found.strict}"


# -- the boot epoch (§4) ------------------------------------------------------------------


def epoch_names(shape: SchemaShape) -> list[str]:
    """Tables and columns whose names speak of a boot epoch."""
    named: list[str] = []
    for table in shape.tables.values():
        if EPOCH_NAME.search(table.name):
            named.append(table.name)
        named += [f"{table.name}.{c}" for c in table.columns if EPOCH_NAME.search(c)]
    return named


StoredValues = dict[str, dict[str, tuple[Any, ...]]]
"""table -> row key -> row: every stored value, rows keyed by their primary key."""


def stored_values(conn: sqlite3.Connection) -> StoredValues:
    """Every row of every table, keyed by primary key (or by the whole row without one)."""
    values: StoredValues = {}
    for (name,) in _rows(
        conn,
        "SELECT name FROM main.sqlite_schema WHERE type = 'table' "
        "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
    ):
        key_columns = _primary_key(conn, name)
        cursor = conn.execute(f"SELECT * FROM main.{_quoted(name)}")
        columns = [str(d[0]).lower() for d in cursor.description]
        positions = [columns.index(c) for c in key_columns if c in columns]
        rows: dict[str, tuple[Any, ...]] = {}
        for row in cursor.fetchall():
            key_values = [row[p] for p in positions] if positions else list(row)
            key = ", ".join(f"{columns[p]}={row[p]!r}" for p in positions) or repr(tuple(row))
            rows[key if positions else repr(tuple(key_values))] = (*zip(columns, row, strict=True),)
        values[str(name).lower()] = rows
    return values


def changed_values(before: StoredValues, after: StoredValues) -> list[str]:
    """What changed from ``before`` to ``after``: rows added or removed, cells changed."""
    changes: list[str] = []
    for table in sorted(set(before) | set(after)):
        old, new = before.get(table, {}), after.get(table, {})
        for key in sorted(set(new) - set(old)):
            changes.append(f"{table}: a row appeared ({key})")
        for key in sorted(set(old) - set(new)):
            changes.append(f"{table}: a row disappeared ({key})")
        for key in sorted(set(old) & set(new)):
            for (column, was), (_, now) in zip(old[key], new[key], strict=False):
                if was != now:
                    changes.append(f"{table}[{key}].{column} changed from {was!r} to {now!r}")
    return changes
