"""Functions whose own settings undo what each call pins (independent red team rt21 F7).

`CREATE FUNCTION ... SET max_parallel_workers_per_gather = 4` (or `SET work_mem = '2GB'`,
`statement_timeout = 0`, ...) applies the setting while the function runs, over the call's own
`set_config` (`session.PINNED_SETTINGS`): an allowed function with that clause got parallel
workers, each a process with a memory limit of its own, and a Parallel Hash's dynamic shared
memory, which no process limit counts. So every function the role can make PostgreSQL run whose
`proconfig` sets one of `CALL_SETTINGS` is refused at start-up: one admission lets queries call
(the function policy), or one reached from what the role can use (a view, operator, cast, type,
operator family, an aggregate's components: `routes`), or any executable one where an allowed
function has a body PostgreSQL does not track (plpgsql, non-atomic SQL), which may call it.
`search_path` is left alone: it changes only how the function's own body resolves names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.admission.policy import FunctionPolicy
from mcpkit.sql.profiles.base import Finding
from mcpkit.sql.profiles.postgres.routes import _ENTRIES, _graph, _reached
from mcpkit.sql.profiles.postgres.session import PINNED_SETTINGS

__all__ = ["CALL_SETTINGS", "config_findings"]

_PINNED: Final = "a setting each call pins"
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

_CONFIGURED: Final = """
SELECT p.oid, n.nspname, p.proname, p.oid::regprocedure::text, c.setting,
  has_function_privilege(p.oid, 'EXECUTE') AND has_schema_privilege(n.oid, 'USAGE')
FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace,
  unnest(p.proconfig) AS c(setting)
WHERE lower(split_part(c.setting, '=', 1)) = ANY(CAST(:names AS text[]))
ORDER BY 4, 5
"""
# Executable functions the policy may allow whose body PostgreSQL does not track (the walk cannot
# see what they call).
_UNTRACKED: Final = """
SELECT p.oid, n.nspname, p.proname, l.lanname FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace JOIN pg_catalog.pg_language l ON l.oid = p.prolang
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND p.prokind IN ('f', 'w')
  AND l.lanname NOT IN ('c', 'internal') AND p.prosqlbody IS NULL
  AND has_function_privilege(p.oid, 'EXECUTE') AND has_schema_privilege(n.oid, 'USAGE')
"""
_EXECUTABLE: Final = """
SELECT p.oid, n.nspname, p.proname FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND p.prokind <> 'p'
  AND has_function_privilege(p.oid, 'EXECUTE') AND has_schema_privilege(n.oid, 'USAGE')
"""


def _allows(policy: FunctionPolicy, schema: str, name: str) -> bool:
    return policy.allows_name(name, schema) or policy.allows_name(name)


def _runnable(conn: Connection, policy: FunctionPolicy) -> tuple[dict[int, str], dict[int, bool], str | None]:
    """The functions queries may call (-> why), those reached from what the role can use (-> whether
    some route runs it with no EXECUTE check), and, where an allowed body is untracked, which."""
    allowed = {
        int(o): "queries may call it"
        for o, s, n in conn.execute(text(_EXECUTABLE))
        if _allows(policy, str(s), str(n))
    }
    untracked = next(
        (f"{s}.{n} ({lang})" for o, s, n, lang in conn.execute(text(_UNTRACKED)) if int(o) in allowed), None
    )
    graph = dict(_graph(conn))
    starts = [("fn", oid) for oid in allowed]
    starts += [(str(k), int(o)) for k, o, _, _ in conn.execute(text(_ENTRIES))]
    graph[("start", 0)] = [("start", node) for node in starts]
    reached: dict[int, bool] = {}
    for (kind, oid), via in _reached(graph, ("start", 0)):
        if kind == "fn":
            reached[oid] = reached.get(oid, False) or via is not None
    return allowed, reached, untracked


def config_findings(
    conn: Connection, allowed: frozenset[str], policy: FunctionPolicy | None = None
) -> list[Finding]:
    """One finding per setting of `CALL_SETTINGS` a function the role can make run sets for
    itself, with `ALTER FUNCTION ... RESET` and the opt-in `function-config:S.F`.

    Args:
        conn: A connection in the role's read-only session (`search_path` pg_catalog: qualified names).
        allowed: The `--allow` opt-ins (an accepted finding is still returned: it is warned about).
        policy: What admission lets queries call (None: the dialect's default).
    """
    rows = conn.execute(text(_CONFIGURED), {"names": sorted(CALL_SETTINGS)}).all()
    if not rows:
        return []
    allowed_fns, reached, untracked = _runnable(conn, policy or FunctionPolicy.for_dialect("postgres"))
    found = []
    for oid, schema, name, signature, setting, executable in rows:
        why = allowed_fns.get(int(oid))
        if why is None and int(oid) in reached and (executable or reached[int(oid)]):
            why = "a view, operator, cast, type or aggregate the role can use runs it" + (
                "" if executable else " with no EXECUTE check"
            )
        if why is None and untracked is not None and executable:
            why = f"an allowed function whose body PostgreSQL does not track may call it: {untracked}"
        if why is None:
            continue
        key, _, value = str(setting).partition("=")
        message = (
            f"function {signature} sets {key} = {value} for itself, over {CALL_SETTINGS[key.lower()]} ({why})"
        )
        fix = f"ALTER FUNCTION {signature} RESET {key}"
        found.append(Finding("function-config", message, fix, f"function-config:{schema}.{name}"))
    return found
