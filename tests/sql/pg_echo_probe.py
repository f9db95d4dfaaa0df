"""Which allowlisted PostgreSQL functions quote a text argument whole in their error (red team rt33a F1).

A function whose error (or notice) holds a computed text argument whole makes libpq and psycopg copy
that text several times in the client: `encode('a'::bytea, repeat('x', 60000000))` took the mcpkit
process from 138 MB to 607 MB. `probe` calls every overload of the given functions in `pg_catalog`
(or an extension) with a distinctive marker in one argument position at a time, as a computed value of
the type a computed text reaches there (text, a text array, bytea, or json holding it), the other
arguments filled with plausible valid values, each call in its own savepoint under a 1 s timeout, and
reports the positions whose message, DETAIL, HINT, CONTEXT or notice held the marker whole.
`postgres_echoed.ECHOED` is this probe's answer over the allowlist (`bench/pg_echoed_inputs.py`
prints it; `test_sql_pg_echo_table.py` checks it still is).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import psycopg
from psycopg import sql

MARKS = ("zq§MARK§qz", "zqmarkqz", "zq MARK(§!qz")  # a lexer's stop character, a plain word, malformed
_POLY_TEXT = {"any", "anyelement", "anynonarray", "anycompatible", "anycompatiblenonarray", "unknown"}
_POLY_ARRAY = {"anyarray", "anycompatiblearray"}
# Plausible valid values by type name, tried in turn (variant k takes the k-th, cycling).
_TEXT_FILLS = ("a", "hex", "UTF8", "simple", "1", "day", "UTC", "pg_class", "YYYY", "postgres", "$.a")
_FILLS: dict[str, tuple[str, ...]] = {
    "smallint": ("1",),
    "integer": ("1", "0", "2"),
    "bigint": ("1",),
    "numeric": ("1",),
    "real": ("1",),
    "double precision": ("1",),
    "oid": ("1",),
    "boolean": ("false", "false", "true"),
    "date": ("2020-01-01",),
    "timestamp without time zone": ("2020-01-01",),
    "timestamp with time zone": ("2020-01-01",),
    "time without time zone": ("01:00",),
    "time with time zone": ("01:00+00",),
    "interval": ("1 day",),
    "bytea": ("\\x61", "\\x7b7d"),
    "json": ('{"a":1}', "[1]", '"a"', '{"b":1}'),
    "jsonb": ('{"a":1}', "[1]", '"a"', '{"b":1}'),
    "jsonpath": ("$", "$.a", "$.a.datetime()", "$.a", "$"),
    "regconfig": ("simple",),
    "regclass": ("pg_class",),
    "regdictionary": ("simple",),
    "inet": ("10.0.0.1",),
    "cidr": ("10.0.0.0/8",),
    "macaddr": ("08:00:2b:01:02:03",),
    "macaddr8": ("08:00:2b:01:02:03:04:05",),
    "point": ("(1,1)",),
    "box": ("((0,0),(1,1))",),
    "circle": ("<(0,0),1>",),
    "lseg": ("[(0,0),(1,1)]",),
    "line": ("{1,1,1}",),
    "path": ("((0,0),(1,1))",),
    "polygon": ("((0,0),(1,1),(1,0))",),
    "tsvector": ("a",),
    "tsquery": ("a",),
    "uuid": ("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",),
    "money": ("1",),
    "bit": ("1",),
    "bit varying": ("1",),
    "xml": ("<a/>",),
    '"char"': ("a",),
    "text[]": ("{a}", "{a,b}"),
    "integer[]": ("{1}",),
    "anyrange": ("[1,2)",),
    "anymultirange": ("{[1,2)}",),
    "record": ("(1)",),
}
_POLY_CONCRETE = {"anyrange": "int4range", "anymultirange": "int4multirange", "record": "record"}


@dataclass(frozen=True)
class Overload:
    """One `pg_proc` row: where it lives, its name and argument types (format_type names)."""

    schema: str
    name: str
    args: tuple[str, ...]
    reachable: tuple[str, ...]  # per argument: "text", "array", "bytea", "json" or "" (no computed text)
    returns_record: bool


def overloads(conn: psycopg.Connection, names: Iterable[str]) -> list[Overload]:
    """The functions and aggregates named, in `pg_catalog` or an extension (not a user's own)."""
    rows = conn.execute(
        """
        SELECT n.nspname, p.proname,
               array(SELECT format_type(t, NULL) FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY u(t, i)
                     ORDER BY i),
               array(SELECT CASE
                   WHEN ty.typname IN ('bytea') THEN 'bytea'
                   WHEN ty.typname IN ('json', 'jsonb') THEN 'json'
                   WHEN ty.typcategory = 'S' OR ty.typname = ANY(%(poly)s)
                        OR EXISTS (SELECT 1 FROM pg_cast c WHERE c.castsource = 'text'::regtype
                                   AND c.casttarget = t AND c.castcontext = 'i') THEN 'text'
                   WHEN ty.typname = ANY(%(polyarr)s) OR (ty.typcategory = 'A' AND EXISTS (
                        SELECT 1 FROM pg_type e WHERE e.oid = ty.typelem AND e.typcategory = 'S'))
                   THEN 'array'
                   ELSE '' END
                   FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY u(t, i) JOIN pg_type ty ON ty.oid = t
                   ORDER BY i),
               p.prorettype = 'record'::regtype AND p.proallargtypes IS NULL
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE p.proname = ANY(%(names)s) AND p.prokind IN ('f', 'a')
          AND (n.nspname = 'pg_catalog' OR EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid =
               'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'))
        ORDER BY 2, 1, 3
        """,
        {"names": sorted(names), "poly": sorted(_POLY_TEXT), "polyarr": sorted(_POLY_ARRAY)},
    ).fetchall()
    return [Overload(s, n, tuple(a), tuple(r), bool(rec)) for s, n, a, r, rec in rows]


def _marked(kind: str, arg: str, mark: str, shape: int) -> sql.Composable:
    text = sql.Literal(mark)
    if kind == "text":
        return sql.SQL("{}::text").format(text)
    if kind == "array":
        return sql.SQL("ARRAY[{}::text]").format(text)
    if kind == "bytea":
        return sql.SQL("convert_to({}, 'UTF8')").format(text)
    built = ("to_jsonb({}::text)", "jsonb_build_object('a', {0}, 'oid', {0})", "jsonb_build_array({})")
    return sql.SQL("({})::{}").format(sql.SQL(built[shape % 3]).format(text), sql.SQL(arg))


def _fill(overload: Overload, position: int, variant: int) -> sql.Composable:
    arg = overload.args[position]
    if overload.name.endswith("populate_record") and position == 0:  # a row type with an oid column
        return sql.SQL("NULL::pg_catalog.pg_namespace")
    if arg in _POLY_TEXT or overload.reachable[position] == "text":
        values = _TEXT_FILLS
        typed = "text" if arg in _POLY_TEXT else arg
    elif arg in _POLY_ARRAY:
        values, typed = _FILLS["text[]"], "text[]"
    else:
        values = _FILLS.get(arg, ("1",))
        typed = _POLY_CONCRETE.get(arg, arg)
    value = values[variant % len(values)]
    return sql.SQL("{}::{}").format(sql.Literal(value), sql.SQL(typed))


def _call(overload: Overload, position: int, mark: str, variant: int) -> sql.Composable:
    args = [
        _marked(overload.reachable[i], overload.args[i], mark, variant)
        if i == position
        else _fill(overload, i, variant)
        for i in range(len(overload.args))
    ]
    call = sql.SQL("{}.{}({})").format(
        sql.Identifier(overload.schema), sql.Identifier(overload.name), sql.SQL(", ").join(args)
    )
    if overload.returns_record:
        return sql.SQL("SELECT * FROM {} AS x(a int, oid int)").format(call)
    return sql.SQL("SELECT {}").format(call)


_VARIANTS = 11  # as many as the longest fill list


def _echoes(text: str, mark: str) -> bool:
    low = text.lower()
    return mark.lower() in low or mark.encode().hex() in low


def probe(conn: psycopg.Connection, found: list[Overload]) -> dict[str, dict[int, tuple[int, ...]]]:
    """By function name and argument count, the argument positions whose marker came back whole.

    `conn` must not be in autocommit; everything runs in one transaction rolled back at the end."""
    notices: list[str] = []
    conn.add_notice_handler(
        lambda d: notices.append(
            " ".join(filter(None, [d.message_primary, d.message_detail, d.message_hint, d.context]))
        )
    )
    echoed: dict[str, dict[int, set[int]]] = {}
    conn.execute("SET LOCAL statement_timeout = '1s'")
    try:
        for overload in found:
            for position, kind in enumerate(overload.reachable):
                if kind and _position_echoes(conn, overload, position, notices):
                    echoed.setdefault(overload.name, {}).setdefault(len(overload.args), set()).add(position)
    finally:
        conn.rollback()
    return {n: {a: tuple(sorted(p)) for a, p in sorted(by.items())} for n, by in sorted(echoed.items())}


def _position_echoes(conn: psycopg.Connection, overload: Overload, position: int, notices: list[str]) -> bool:
    variants = (
        _VARIANTS
        if any(
            overload.reachable[i] or overload.args[i] in _FILLS
            for i in range(len(overload.args))
            if i != position
        )
        else 3
    )
    for mark in MARKS:
        for variant in range(variants):
            notices.clear()
            conn.execute("SAVEPOINT probe")
            try:
                conn.execute(_call(overload, position, mark, variant))
                said = " ".join(notices)
            except psycopg.Error as exc:
                d = exc.diag
                said = " ".join(
                    filter(None, [d.message_primary, d.message_detail, d.message_hint, d.context, *notices])
                )
            conn.execute("ROLLBACK TO SAVEPOINT probe")
            if _echoes(said, mark):
                return True
    return False
