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

from typing import Final, NamedTuple

import sqlglot
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlglot import exp
from sqlglot.tokenizer_core import TokenType

from mcpkit.sql.profiles.postgres.body_settings import foreign_settings

__all__ = ["postgres_row_order_routines"]

_USER: Final = """
SELECT n.nspname, p.proname, l.lanname, p.provolatile,
       coalesce(pg_catalog.pg_get_function_sqlbody(p.oid), p.prosrc), p.proconfig, p.pronargdefaults
FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
JOIN pg_catalog.pg_language l ON l.oid = p.prolang
WHERE p.prokind IN ('f', 'w') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%'
"""
# Operators and casts whose function is not C (red team rt32 F1: `$1 + 'x'::text` over a user
# operator whose function counts rows): a body using one cannot be shown to keep no state.
_USER_SYMBOLS: Final = """
SELECT o.oprname FROM pg_catalog.pg_operator o JOIN pg_catalog.pg_proc p ON p.oid = o.oprcode
WHERE o.oprnamespace <> 'pg_catalog'::regnamespace AND p.prolang NOT IN (12, 13)
UNION ALL SELECT '::' FROM pg_catalog.pg_cast c JOIN pg_catalog.pg_proc p ON p.oid = c.castfunc
WHERE p.pronamespace <> 'pg_catalog'::regnamespace AND p.prolang NOT IN (12, 13)
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


class Steady(NamedTuple):
    """pg_catalog function names with no VOLATILE overload; user operator and cast symbols."""

    names: frozenset[str]
    symbols: tuple[str, ...]


Overload = tuple[str, str, str, str, int]  # language, volatility, body, foreign settings, defaults


def _reason(name: str, kinds: dict[str, list[Overload]], steady: Steady,
            stack: tuple[str, ...], memo: dict[str, str | None]) -> str | None:  # fmt: skip
    """Why every overload of user function `name` may keep state; None when each is proven stateless."""
    if name in memo:
        return memo[name]
    if name in stack:
        return "it calls itself through other functions, which this check does not follow"
    found: str | None = None
    for language, volatility, body, settings, defaults in kinds[name]:
        if defaults:  # evaluated at each call, in the caller (red team rt32 F3: a set_config counter)
            found = "its parameter defaults run at each call, which this check does not read"
        elif settings:
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


def _body_reason(body: str, kinds: dict[str, list[Overload]], steady: Steady,
                 stack: tuple[str, ...], memo: dict[str, str | None]) -> str | None:  # fmt: skip
    try:
        trees = [t for t in sqlglot.parse(body, read="postgres") if t is not None]
        tokens = sqlglot.Dialect.get_or_raise("postgres").tokenize(body)
    except (sqlglot.errors.SqlglotError, RecursionError, ValueError):
        return "its body does not parse here, so it cannot be shown to keep no state"
    for i, token in enumerate(tokens[:-1]):
        # as written: sqlglot renders `ifnull(x, 0)` as COALESCE, PostgreSQL calls the user's `ifnull`
        written = token.text.casefold()
        if tokens[i + 1].token_type == TokenType.L_PAREN and written in kinds:
            inner = _reason(written, kinds, steady, stack, memo)
            if inner:
                return f"it calls function {written}, which may keep state ({inner})"
    used = [s for s in steady.symbols if s in body]
    if used:
        return f"it uses {used[0]}, an operator or cast whose function this check does not read"
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
            elif (isinstance(func, exp.Anonymous) and called not in steady.names) or (
                not isinstance(func, exp.Anonymous) and (called in _FICKLE or isinstance(func, exp.Rand))
            ):
                return f"it calls {called}, which may change from call to call"
    return None


def postgres_row_order_routines(conn: Connection) -> dict[Routine, str]:
    """Each user function (schema, name) whose calls may change from row to row, with why."""
    rows = [
        (str(s), str(n), str(lang), str(v), str(b or ""), foreign_settings(c), int(d or 0))
        for s, n, lang, v, b, c, d in conn.execute(text(_USER))
    ]
    steady = Steady(
        frozenset(str(n) for n in conn.execute(text(_STEADY)).scalars()),
        tuple(sorted({str(n) for n in conn.execute(text(_USER_SYMBOLS)).scalars()})),
    )
    kinds: dict[str, list[Overload]] = {}
    for _, name, language, volatility, body, settings, defaults in rows:
        kinds.setdefault(name.casefold(), []).append((language, volatility, body, settings, defaults))
    memo: dict[str, str | None] = {}
    out: dict[Routine, str] = {}
    for schema, name, *_ in rows:
        found = _reason(name.casefold(), kinds, steady, (), memo)
        if found:
            out[(schema, name)] = found
    return out
