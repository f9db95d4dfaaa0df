"""Functions whose own settings undo what each call pins (independent red team rt21 F7).

`CREATE FUNCTION ... SET max_parallel_workers_per_gather = 4` (or `SET work_mem = '2GB'`,
`statement_timeout = 0`, ...) applies the setting while the function runs, over the call's own
`set_config` (`session.PINNED_SETTINGS`): an allowed function with that clause got parallel
workers, each a process with a memory limit of its own, and a Parallel Hash's dynamic shared
memory, which no process limit counts. So every function the role can make PostgreSQL run whose
`proconfig` sets one of `CALL_SETTINGS` is refused at start-up: every function the role holds
EXECUTE on, whatever the function policy and its schema's USAGE say (attribute notation `o.f`, an
operator, a cast, a view's stored call, an aggregate run it without admission seeing its name, and a
call stored in a view needs no USAGE: red team rt23 F1, F7), and every one reached with no EXECUTE
check from what the role can use (an aggregate's components, a type's I/O, an operator family,
an estimator: `routes`).
`search_path` is left alone here: it changes only how the function's own body resolves names, which
the masked-order check resolves with it (`fnpath`, red team rt27 F2).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.admission.policy import FunctionPolicy
from mcpkit.sql.profiles.base import Finding
from mcpkit.sql.profiles.postgres.overloads import OptIns
from mcpkit.sql.profiles.postgres.routes import _ENTRIES, _graph, _reached
from mcpkit.sql.profiles.postgres.session import PINNED_SETTINGS

__all__ = ["CALL_SETTINGS", "config_findings"]

_PINNED: Final = "a setting each call pins"
_PLACEHOLDER: Final = (
    "a pooled connection's reset: it defines the custom setting {key} for the connection's life, and"
    " a later call reading current_setting('{key}', true) tells '' from a fresh connection's NULL"
)
CALL_SETTINGS: Final[Mapping[str, str]] = {
    **dict.fromkeys(sorted(PINNED_SETTINGS - {"application_name", "search_path"}), _PINNED),
    "transaction_read_only": "the read-only transaction",
    "work_mem": "the memory of each sort and hash",
    "hash_mem_multiplier": "the memory of each hash",
    "maintenance_work_mem": "maintenance memory",
    "temp_buffers": "temporary-table memory",
    "temp_file_limit": "the temporary files of a call",
    "max_parallel_workers": "parallel workers",
    "max_parallel_maintenance_workers": "parallel workers",
    "debug_parallel_query": "parallel workers",
    "force_parallel_mode": "parallel workers",
    "role": "the role calls run as",
    "session_authorization": "the role calls run as",
}
"""Setting -> what it bounds: what each call sets (`PostgresSession`) and what bounds a call's
memory, disk, workers and identity."""

# Procedures aside: CALL is no query admission lets through.
_CONFIGURED: Final = """
SELECT p.oid, n.nspname, p.proname, p.oid::regprocedure::text, c.setting,
  has_function_privilege(p.oid, 'EXECUTE')
FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace,
  unnest(p.proconfig) AS c(setting)
WHERE (lower(split_part(c.setting, '=', 1)) = ANY(CAST(:names AS text[]))
    OR (:custom AND strpos(split_part(c.setting, '=', 1), '.') > 0)) AND p.prokind <> 'p'
ORDER BY 4, 5
"""
# Every executable function is a starting point of the walk, USAGE on its schema or not: a view
# stores the call by OID.
_EXECUTABLE: Final = """
SELECT p.oid FROM pg_catalog.pg_proc p
WHERE p.oid >= 16384 AND p.prokind <> 'p' AND has_function_privilege(p.oid, 'EXECUTE')
"""


def _allows(policy: FunctionPolicy, schema: str, name: str) -> bool:
    return policy.allows_name(name, schema) or policy.allows_name(name)


def _unchecked(conn: Connection) -> frozenset[int]:
    """The functions some route from what the role can use runs with no EXECUTE check."""
    graph = dict(_graph(conn))
    starts = [("fn", int(oid)) for (oid,) in conn.execute(text(_EXECUTABLE))]
    starts += [(str(k), int(o)) for k, o, _, _ in conn.execute(text(_ENTRIES))]
    graph[("start", 0)] = [("start", node) for node in starts]
    return frozenset(oid for (kind, oid), via in _reached(graph, ("start", 0)) if kind == "fn" and via)


def config_findings(
    conn: Connection,
    allowed: frozenset[str],
    policy: FunctionPolicy | None = None,
    settings: Mapping[str, str] = CALL_SETTINGS,
    custom: bool = False,
) -> list[Finding]:
    """One finding per setting of `settings` a function the role can make run sets for itself,
    with `ALTER FUNCTION ... RESET` and the opt-in `function-config:S.F`.

    With `custom`, a custom setting (`app.x`, a dotted name) counts too: running the function
    defines its placeholder for the backend's life, which no reset drops (red team rtg F2), so a
    later call on the pooled connection would tell it from a fresh one.

    Args:
        conn: A connection in the role's read-only session (`search_path` pg_catalog: qualified names).
        allowed: The `--allow` opt-ins (an accepted finding is still returned: it is warned about).
        policy: What admission lets queries call (None: the dialect's default).
        settings: Setting (lower case) -> what it bounds.
        custom: Count custom settings too (the start-up check; not the masked-order pins).
    """
    rows = conn.execute(text(_CONFIGURED), {"names": sorted(settings), "custom": custom}).all()
    if not rows:
        return []
    policy = policy or FunctionPolicy.for_dialect("postgres")
    unchecked = _unchecked(conn)
    opt = OptIns.read(conn, allowed)
    found = []
    for oid, schema, name, signature, setting, executable in rows:
        if executable:
            why = (
                "queries may call it"
                if _allows(policy, str(schema), str(name))
                else "the role may run it: attribute notation, an operator, a cast, a view or another"
                " function calls it with EXECUTE alone"
            )
        elif int(oid) in unchecked:
            why = "a view, operator, cast, type or aggregate the role can use runs it with no EXECUTE check"
        else:
            continue
        key, _, value = str(setting).partition("=")
        over = settings.get(key.lower()) or _PLACEHOLDER.format(key=key)
        message = f"function {signature} sets {key} = {value} for itself, over {over} ({why})"
        fix = f"ALTER FUNCTION {signature} RESET {key}"
        opt_in = opt.opt_in("function-config", int(oid), str(schema), str(name), str(signature))
        found.append(Finding("function-config", message, fix, opt_in))
    return found
