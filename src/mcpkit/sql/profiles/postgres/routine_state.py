"""PostgreSQL user functions that may keep state from one call to the next (red team rt29 F2 analogue).

A SQL function declared IMMUTABLE or STABLE may still run `set_config('rt.c', ...)` as a counter
(its label is only a claim, `fnpath.volatile_names`): called once per row over a masked read, with
an index on the masked column, it numbered the rows in the masked order. The stored-body check
already counts every user function (not C) it does not read; here each one a call may use counts
as a per-row function (`Capabilities.row_order_functions`) unless proven stateless: a SQL-language
body that parses, whose every call is a pg_catalog function with no VOLATILE overload (set_config,
nextval, random, clock_timestamp are) or another user function proven stateless the same way.
Anything else counts: PL/pgSQL and other procedural bodies, a body that does not parse, a call of
an unknown function, a cycle. C and internal functions count by their label (extensions).
A function with a setting of its own outside `body_settings.READ_ALIKE` counts whatever its body
(the setting holds for every body parsed while it runs: red team rt31 F5), and so does a body
spelling a name with Unicode escapes (`U&"..."`, which the parse here misreads: rt31 F7).
"""

from __future__ import annotations

from typing import Final

import sqlglot
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlglot import exp

from mcpkit.sql.profiles.postgres.body_settings import foreign_settings

__all__ = ["postgres_row_order_routines"]

_USER: Final = """
SELECT n.nspname, p.proname, l.lanname, p.provolatile,
       coalesce(pg_catalog.pg_get_function_sqlbody(p.oid), p.prosrc), p.proconfig
FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
JOIN pg_catalog.pg_language l ON l.oid = p.prolang
WHERE p.prokind IN ('f', 'w') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%'
"""
_STEADY: Final = """
SELECT lower(p.proname) FROM pg_catalog.pg_proc p
WHERE p.pronamespace = 'pg_catalog'::regnamespace
GROUP BY lower(p.proname) HAVING bool_and(p.provolatile <> 'v')
"""

# Built-ins sqlglot parses to a node of its own whose value changes from call to call (PostgreSQL's
# VOLATILE ones among them); an unknown name is checked against pg_catalog (`_STEADY`).
_FICKLE: Final = frozenset(
    {"random", "random_normal", "setseed", "nextval", "setval", "lastval", "currval", "set_config"}
    | {"clock_timestamp", "timeofday", "statement_timestamp", "gen_random_uuid", "uuid", "uuidv7"}
)

Routine = tuple[str, str]
Overload = tuple[str, str, str, str]  # language, volatility, body, foreign settings


def _reason(name: str, kinds: dict[str, list[Overload]], steady: frozenset[str],
            stack: tuple[str, ...], memo: dict[str, str | None]) -> str | None:  # fmt: skip
    """Why every overload of user function `name` may keep state; None when each is proven stateless."""
    if name in memo:
        return memo[name]
    if name in stack:
        return "it calls itself through other functions, which this check does not follow"
    found: str | None = None
    for language, volatility, body, settings in kinds[name]:
        if settings:
            found = f"its own setting {settings} may make PostgreSQL read the bodies it runs otherwise"
        elif language in ("c", "internal"):
            found = "it is declared VOLATILE" if volatility == "v" else None
        elif language != "sql":
            found = f"it is written in {language}, whose body this check does not read"
        elif 'u&"' in body.lower():
            found = 'its body spells a name with Unicode escapes (U&"..."), which this check does not read'
        else:
            found = _body_reason(body, kinds, steady, (*stack, name), memo)
        if found:
            break
    memo[name] = found
    return found


def _body_reason(body: str, kinds: dict[str, list[Overload]], steady: frozenset[str],
                 stack: tuple[str, ...], memo: dict[str, str | None]) -> str | None:  # fmt: skip
    try:
        trees = [t for t in sqlglot.parse(body, read="postgres") if t is not None]
    except (sqlglot.errors.SqlglotError, RecursionError, ValueError):
        return "its body does not parse here, so it cannot be shown to keep no state"
    for tree in trees:
        if tree.find(exp.Command):  # `CALL p()`, `DO ...`: kept as text, never read here
            return "its body holds a statement this check does not read (CALL, DO, ...)"
        for func in tree.find_all(exp.Func):
            if isinstance(func, exp.Anonymous):
                called = func.name.casefold()
            else:
                called = func.sql(dialect="postgres").split("(", 1)[0].strip().casefold()
            if called in kinds:
                inner = _reason(called, kinds, steady, stack, memo)
                if inner:
                    return f"it calls function {called}, which may keep state ({inner})"
            elif (isinstance(func, exp.Anonymous) and called not in steady) or (
                not isinstance(func, exp.Anonymous) and (called in _FICKLE or isinstance(func, exp.Rand))
            ):
                return f"it calls {called}, which may change from call to call"
    return None


def postgres_row_order_routines(conn: Connection) -> dict[Routine, str]:
    """Each user function (schema, name) whose calls may change from row to row, with why."""
    rows = [
        (str(s), str(n), str(lang), str(v), str(b or ""), foreign_settings(c))
        for s, n, lang, v, b, c in conn.execute(text(_USER))
    ]
    steady = frozenset(str(n) for n in conn.execute(text(_STEADY)).scalars())
    kinds: dict[str, list[Overload]] = {}
    for _, name, language, volatility, body, settings in rows:
        kinds.setdefault(name.casefold(), []).append((language, volatility, body, settings))
    memo: dict[str, str | None] = {}
    out: dict[Routine, str] = {}
    for schema, name, *_ in rows:
        found = _reason(name.casefold(), kinds, steady, (), memo)
        if found:
            out[(schema, name)] = found
    return out
