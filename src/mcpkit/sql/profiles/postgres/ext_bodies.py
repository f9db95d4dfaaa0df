"""SQL functions of reviewed extensions whose string body calls a function by an unqualified name
(red team rt35a F2).

A `LANGUAGE sql` body stored as text is parsed when it runs, under the caller's search_path:
earthdistance's `sec_to_gc` calls `earth()`, `pi()`, `asin(...)` unqualified, so with the extension
in a schema of its own a user `public.earth()` ran once per row through it (a counter numbering the
rows in a masked scan order). Such a member is no reviewed code: it counts as a user function
(`routine_state`). A member stays reviewed only when its body cannot reach a function the
extension did not bring: a SQL-standard body (BEGIN ATOMIC / RETURN, its callees bound when it was
created), a `SET search_path` of its own naming only `pg_catalog` and the extension's schema, or a
string body whose every call is qualified with `pg_catalog` or the extension's own schema (citext's
members). Fail closed: a body this scan cannot
read plainly (a quoted name, a dollar quote, a comment, a dot it does not know) counts as open.
Operators and type names in such a body resolve on the caller's path too (citext's `$3 || 'i'`
runs a user `public.||(text, text)` under `search_path = public, pg_catalog`; an exact-type user
operator beats pg_catalog's coercion match on any path), but no body is read for them: every user
operator's, cast's, domain CHECK's and type I/O function counts as reached already (`implicit`).
"""

from __future__ import annotations

import re
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

__all__ = ["open_members", "unqualified_calls"]

# Keywords PostgreSQL's grammar follows with a parenthesis, none of them a function looked up by name.
_KEYWORDS: Final = frozenset(
    {"all", "and", "any", "array", "as", "between", "case", "cast", "coalesce", "else", "end", "exists"}
    | {"extract", "from", "greatest", "in", "is", "least", "not", "nullif", "or", "over", "overlay"}
    | {"position", "row", "select", "some", "substring", "then", "trim", "values", "when", "where"}
)
_STRING: Final = re.compile(r"[Ee]'(?:[^'\\]|\\.|'')*'|'(?:[^'])*'(?:'[^']*')*")
_UNREADABLE: Final = re.compile(r"[\"'`]|\$[A-Za-z_]*\$|--|/\*|[Uu]&")
_CALL: Final = re.compile(r"(?P<name>[A-Za-z_][\w$]*)\s*\(")
_QUALIFIED: Final = re.compile(r"(?P<qual>[A-Za-z_][\w$]*)\s*\.\s*[A-Za-z_][\w$]*")
_NUMBER: Final = re.compile(r"(?<![\w$])(?:\d+\.\d*|\.\d+)")
_MEMBERS: Final = """
SELECT p.oid, e.extname, n.nspname, p.prosrc,
       (SELECT substr(c, strpos(c, '=') + 1) FROM unnest(p.proconfig) c
        WHERE lower(split_part(c, '=', 1)) = 'search_path' LIMIT 1)
FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_language l ON l.oid = p.prolang
JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_proc'::regclass AND d.objid = p.oid
 AND d.deptype = 'e' AND d.refclassid = 'pg_catalog.pg_extension'::regclass
JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid
WHERE l.lanname = 'sql' AND p.prosqlbody IS NULL AND e.extname = ANY(:stateless)
"""


def unqualified_calls(body: str, own: str) -> frozenset[str] | None:
    """The names `body` calls without `pg_catalog.` or `own.` (lower-cased), None when the body
    cannot be read plainly (then every call counts as open).

    >>> sorted(unqualified_calls("SELECT CASE WHEN $1 < 0 THEN 0 ELSE 2*earth()*asin($1) END", "ext"))
    ['asin', 'earth']
    >>> unqualified_calls("SELECT pg_catalog.strpos(pg_catalog.lower($1::pg_catalog.text), 'c')", "ext")
    frozenset()
    >>> unqualified_calls('SELECT "earth"()', "ext") is None
    True
    """
    plain = _STRING.sub(" ", body)
    if _UNREADABLE.search(plain):
        return None
    allowed = {"pg_catalog", own.lower()}
    if any(q["qual"].lower() not in allowed for q in _QUALIFIED.finditer(plain)):
        return None  # a call or type of another schema, or attribute notation `x.f`
    bare = _NUMBER.sub("0", _QUALIFIED.sub("0", plain))
    if "." in bare:
        return None  # a dot this scan does not place (`$1.earth`, `($1).earth`)
    return frozenset(c["name"].lower() for c in _CALL.finditer(bare)) - _KEYWORDS


def _pinned(path: str, own: str) -> bool:
    """Whether a `search_path` setting names only pg_catalog and `own` (quoted names keep their case).

    >>> _pinned('pg_catalog, "ext"', "ext"), _pinned("ext, public", "ext"), _pinned("$user", "ext")
    (True, False, False)
    """
    names = [e.strip() for e in path.split(",")]
    folded = [
        n[1:-1].replace('""', '"') if n.startswith('"') and n.endswith('"') else n.lower() for n in names
    ]
    return all(n in ("pg_catalog", own) for n in folded)


def open_members(
    conn: Connection, params: dict[str, list[str]]
) -> dict[int, tuple[str, frozenset[str] | None]]:
    """Each SQL member of a reviewed extension (`params`: `routine_state.reviewed_params`'s
    `stateless`) whose body may call a function by an unqualified name: oid -> (extension, the
    names it calls unqualified, None when its body cannot be read plainly)."""
    out: dict[int, tuple[str, frozenset[str] | None]] = {}
    for oid, ext, schema, body, path in conn.execute(text(_MEMBERS), {"stateless": params["stateless"]}):
        if path is not None and _pinned(str(path), str(schema)):
            continue  # its own path holds pg_catalog and the extension's schema only
        calls = unqualified_calls(str(body or ""), str(schema))
        if calls is None or calls:
            out[int(oid)] = (str(ext), calls)
    return out
