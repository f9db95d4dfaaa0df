"""PostgreSQL user functions: each counts as a per-row one over masked reads (red teams rt29, rt31,
rt32, rt34).

A function called once per row over a masked read, with an index (or CLUSTER) on the masked
column, can number the rows in the masked order: a STABLE SQL function counting with `set_config`
did (rt29 F2). Its label is only a claim, and three rounds of red teams (rt29, rt31, rt32) got a
counter past every proof of a body's statelessness (a parameter DEFAULT, `ifnull` rendered as
COALESCE, a user operator, a domain CHECK). So no body is read: every function initdb did not
create counts, in pg_catalog too (a superuser may create one there, rt34 F3), and only `--allow
function-order:S.N` accepts one. An aggregate counts too (its transition function sees the rows in
scan order; intagg's `int_array_aggregate`, rt34 F5), and so does a C or internal function:
isn's `isn_weak` is a setter of process-global state labelled IMMUTABLE (rt34 F1), and an
`internal` function may alias any built-in C function. The one exception is
`STATELESS_EXTENSIONS`: a function a superuser owns of an extension reviewed to keep no state across
calls (but the few left out of the review), unless it is VOLATILE or in a procedural language
(plpgsql added to the extension, rt34 F7), or a SQL member whose string body calls a function by an
unqualified name, which the caller's search_path may resolve to a user function (rt35a F2,
`ext_bodies`).
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.postgres.catalog_path import catalog_path
from mcpkit.sql.profiles.postgres.ext_bodies import open_members

__all__ = ["PER_ROW", "REVIEWED", "STATELESS_EXTENSIONS", "postgres_row_order_routines", "reviewed_params"]
__all__ += ["postgres_user_aggregates"]

PER_ROW: Final = (
    "it is a user function, whose value may change from row to row (only --allow function-order:"
    " accepts one over masked reads)"
)
# Extensions (contrib) whose non-VOLATILE functions were reviewed (PostgreSQL 15 sources) to keep no
# state from one call to the next, each with the functions left out of the review (they count); names
# are compared without schema, so without this citext's `replace` would make every built-in `replace`
# call a per-row one. A setter they have is VOLATILE (pg_trgm's `set_limit`, uuid-ossp's generators,
# pgcrypto's `gen_random_*`) and counts. isn's `isn_weak(boolean)` sets a C static (weak input mode,
# read by isn's input functions) under an IMMUTABLE label (rt34 F1): left out, with its getter. Not
# reviewed, so counting whole: tablefunc (`crosstab` runs SQL text), dblink, postgres_fdw, pageinspect,
# pg_stat_statements and every other extension.
STATELESS_EXTENSIONS: Final[dict[str, frozenset[str]]] = {
    "btree_gin": frozenset(),  # operator-class support only
    "btree_gist": frozenset(),  # operator-class support only
    "citext": frozenset(),  # case-insensitive text: comparisons, replace/strpos/regexp_*, min/max
    "cube": frozenset(),  # cube arithmetic and GiST support
    "earthdistance": frozenset(),  # SQL functions over cube
    "fuzzystrmatch": frozenset(),  # soundex, levenshtein, metaphone: pure
    "hstore": frozenset(),  # key/value type and operators
    "intarray": frozenset(),  # int[] operators and GiST support
    "isn": frozenset({"isn_weak"}),  # EAN/ISBN types; isn_weak is the setter (and getter) of a static
    "ltree": frozenset(),  # label tree type and operators
    "pg_trgm": frozenset(),  # similarity (reads a GUC only set_limit, VOLATILE, sets)
    "pgcrypto": frozenset(),  # digests and ciphers; random ones are VOLATILE
    "unaccent": frozenset(),  # dictionary lookup, STABLE
    "uuid-ossp": frozenset(),  # name-based UUIDs; time/random ones are VOLATILE
}
# A function a superuser owns of a reviewed extension (its own code: `catalog_reads` exempts it too),
# but a SQL member whose body calls a function by an unqualified name (`ext_bodies`, rt35a F2).
REVIEWED: Final = """(o.rolsuper AND l.lanname IN ('c', 'internal', 'sql') AND EXISTS (
      SELECT 1 FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid
      WHERE d.classid = 'pg_catalog.pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
        AND d.refclassid = 'pg_catalog.pg_extension'::regclass AND e.extname = ANY(:stateless)
        AND NOT e.extname || '.' || p.proname = ANY(:left_out))
    AND NOT p.oid = ANY(CAST(:open AS oid[])))"""
_USER: Final = (
    """
SELECT n.nspname, p.proname
FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
JOIN pg_catalog.pg_roles o ON o.oid = p.proowner
JOIN pg_catalog.pg_language l ON l.oid = p.prolang
WHERE p.prokind IN ('f', 'w', 'a') AND p.oid >= 16384
  AND NOT (p.provolatile <> 'v' AND """
    + REVIEWED
    + """)
"""
)


def postgres_row_order_routines(conn: Connection) -> dict[tuple[str, str], str]:
    """Each user function (schema, name) whose calls may change from row to row, with why."""
    with catalog_path(conn):  # `p.oid >= 16384` is no user operator's (`catalog_path`)
        rows = conn.execute(text(_USER), reviewed_params(conn)).all()
    return {(str(s), str(n)): PER_ROW for s, n in rows}


# A user aggregate's name no function of another kind has (a built-in `md5` beside a user aggregate
# `md5` would make every `md5(x)` call one): lower(), as sqlglot's names are matched case-folded.
_AGGREGATES: Final = """
SELECT DISTINCT lower(p.proname) FROM pg_catalog.pg_proc p
WHERE p.prokind = 'a' AND p.oid >= 16384 AND NOT EXISTS (
  SELECT 1 FROM pg_catalog.pg_proc q WHERE lower(q.proname) = lower(p.proname) AND q.prokind <> 'a')
"""


def postgres_user_aggregates(conn: Connection) -> frozenset[str]:
    """The names of the user's aggregates (`Profile.user_aggregates`)."""
    with catalog_path(conn):  # `lower`, `>=`, `=`: pg_catalog's
        return frozenset(str(n).casefold() for (n,) in conn.execute(text(_AGGREGATES)))


def reviewed_params(conn: Connection) -> dict[str, list[str]]:
    """The bind parameters of `REVIEWED`, read in `conn` (its open SQL members: `ext_bodies`)."""
    left_out = [f"{e}.{n}" for e, names in STATELESS_EXTENSIONS.items() for n in names]
    params: dict[str, list[str]] = {"stateless": list(STATELESS_EXTENSIONS), "left_out": left_out}
    with catalog_path(conn):
        params["open"] = [str(oid) for oid in sorted(open_members(conn, params))]
    return params
