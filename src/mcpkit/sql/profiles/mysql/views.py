"""MySQL and MariaDB: views whose definition calls a function queries may not call.

Admission sees a view's name only, and the server runs every function in the view's definition
in the caller's session whatever its SQL SECURITY (red team rt15my F3: an INVOKER view over
`GET_LOCK('x', 0)` took a server-wide named lock for `SELECT g FROM v_lock`). So every view the
login can read must have a definition that passes the function policy admission applies to query
text: the operator's, as configured (`--functions`, `--allow-function`).
`information_schema.VIEWS.VIEW_DEFINITION` is blank for a view the login neither defined nor holds
SHOW VIEW on (MariaDB 10.11): such a view is refused, its fix the SHOW VIEW grant.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from sqlglot import exp

from mcpkit.errors import Refused
from mcpkit.sql.admission import FunctionPolicy, parse_statement, run_passes
from mcpkit.sql.admission.regex_cost import PatternTooComplex, pattern_cost
from mcpkit.sql.admission.reject_functions import reject_functions
from mcpkit.sql.profiles.base import Finding
from mcpkit.sql.profiles.mysql.roles import quote_name

__all__ = ["VIEW_BODIES", "ViewBodies", "collect_bodies", "grant_refusal", "in_database"]
__all__ += ["view_body_findings"]

VIEW_BODIES: Final = (
    "SELECT TABLE_SCHEMA, TABLE_NAME, VIEW_DEFINITION FROM information_schema.VIEWS ORDER BY 1, 2"
)
"""Every view the login holds a privilege on, with its definition (blank without SHOW VIEW)."""

ViewBodies = dict[tuple[str, str], tuple[str, str | None]]
"""(schema, view) -> (definition, or '' where unreadable; the role it was seen under, None: as is)."""


def collect_bodies(bodies: ViewBodies, rows: Sequence[tuple[object, ...]], role: str | None) -> None:
    """Add `VIEW_BODIES` rows read under `role`; a definition read anywhere is kept."""
    for schema, name, definition in rows:
        key, body = (str(schema), str(name)), str(definition or "")
        if key not in bodies or (body and not bodies[key][0]):
            bodies[key] = (body, bodies[key][1] if key in bodies else role)


def in_database(policy: FunctionPolicy, schema: str) -> FunctionPolicy:
    """The policy for a view of database `schema`: MariaDB stores a call of a stored function of the
    view's own database unqualified, so the operator's exact `schema.f` admits the bare `f` there
    (red team rtg L2: `--allow-function db.f` refused db's view calling it; only the bare `f`, which
    allows that name in every database, passed). A built-in function's name stays as the function
    table has it: a view's bare call of it is the built-in's, a stored one of that name is called
    qualified (review R11)."""
    prefix = f"{schema.lower()}."
    chosen = policy.only if policy.only is not None else policy.extra
    bare = {
        n.removeprefix(prefix)
        for n in chosen
        if n.startswith(prefix) and "." not in n.removeprefix(prefix) and "*" not in n
    }
    bare = {n for n in bare if policy.table.lookup(n) is None}
    if not bare:
        return policy
    if policy.only is not None:
        return dataclasses.replace(policy, only=policy.only | bare)
    return dataclasses.replace(policy, extra=policy.extra | bare)


def _refusal(definition: str, functions: FunctionPolicy) -> str | None:
    """Why admission would refuse the definition's function calls, None if it passes."""
    try:
        tree = parse_statement(definition, "mysql")
        run_passes(tree, (reject_functions,), dialect="mysql", functions=functions)
    except Refused as exc:
        return exc.message
    except RecursionError:
        return "its definition is nested too deeply to check"
    for regex in tree.find_all(exp.RegexpLike, exp.RegexpILike, exp.RegexpInstr, exp.RegexpSubstr):
        if not _plain(regex.expression):
            return (
                "a regular expression that is not a plain search: a view's runs as stored, without the"
                " match limit queries carry (red team my18 F9)"
            )
    return None


def grant_refusal(security: str, definer: str, schema: str, name: str, definition: str) -> str | None:
    """Why start-up would refuse a new reader's SELECT on this view, as `mcpkit sql grant` reads it
    (an administrator, who sees every definition), or None (red team rtJ L1: grant printed the
    GRANT of a DEFINER view, and of one calling a refused function, that doctor then refused)."""
    if security.upper() == "DEFINER":
        return (
            f"view {schema}.{name} runs as its definer {definer} (SQL SECURITY DEFINER: its tables, columns"
            f" and functions are checked against the definer), which start-up refuses (or --allow"
            f" view:{schema}.{name} after review)"
        )
    why = _refusal(definition, in_database(FunctionPolicy.for_dialect("mysql"), schema))
    if why is None:
        return None
    return (
        f"view {schema}.{name}'s definition calls what a query may not (it runs in the caller's session"
        f" whatever its SQL SECURITY): {why.rstrip('.')}"
    )


def _plain(pattern: exp.Expr | None) -> bool:
    if not (isinstance(pattern, exp.Literal) and pattern.is_string):
        return False
    try:
        return pattern_cost(pattern.this).plain
    except PatternTooComplex:
        return False


def view_body_findings(
    bodies: Mapping[tuple[str, str], tuple[str, str | None]],
    current: str,
    account: str,
    revokes: Callable[[str], list[str]],
    skip: Callable[[str, str], bool],
    shown: Callable[[str, str], bool],
    functions: FunctionPolicy | None = None,
) -> list[Finding]:
    """One finding per readable view whose definition calls a refused function or cannot be read;
    several unreadable views of one database make one finding, its fix one SHOW VIEW grant on it.

    Args:
        bodies: What `VIEW_BODIES` read, as the session is and under each granted role.
        current: CURRENT_USER(), for the messages.
        account: The login as `'user'@'host'`, for the fixes.
        revokes: The REVOKE statements that take SELECT on a backquoted view away (`_revokes`).
        skip: Views already refused otherwise or opted in (`view:db.name`).
        shown: Whether the login holds SHOW VIEW on a view: MariaDB shows a definition to who holds
            both SHOW VIEW and SELECT, so a blank one beside SHOW VIEW is a view it cannot SELECT.
        functions: The policy queries are admitted under (`--functions`, `--allow-function`); None:
            the dialect's default.
    """
    policy = functions or FunctionPolicy.for_dialect("mysql")
    found = []
    hidden: dict[str, list[tuple[str, str | None, Finding]]] = {}  # schema -> unreadable views
    for (schema, name), (definition, role) in bodies.items():
        if skip(schema, name):
            continue
        quoted = f"`{schema}`.`{name}`"
        revoke = "; ".join(revokes(quoted) or [f"REVOKE SELECT ON {quoted} FROM {account}"])
        via = f" through role {quote_name(role)}" if role is not None else ""
        if not definition and shown(schema, name):
            continue
        if not definition:
            hidden.setdefault(schema, []).append(
                (
                    name,
                    role,
                    Finding(
                        "unreadable-view",
                        f"{current} can read view {schema}.{name}{via} but not its definition (it holds"
                        " no SHOW VIEW on it), so the functions the view calls in each query's session"
                        " cannot be checked",
                        f"GRANT SHOW VIEW ON {quoted} TO {account}; or {revoke}",
                        f"view:{schema}.{name}",
                    ),
                )
            )
            continue
        why = _refusal(definition, in_database(policy, schema))
        if why is not None:
            found.append(
                Finding(
                    "view-function",
                    f"{current} can read view {schema}.{name}{via}, whose definition calls what a query may"
                    f" not (it runs in the caller's session whatever its SQL SECURITY): {why.rstrip('.')}",
                    f"{revoke}; or redefine the view without it",
                    f"view:{schema}.{name}",
                )
            )
    return found + [
        f for schema, views in hidden.items() for f in _unreadable(schema, views, current, account)
    ]


def _unreadable(
    schema: str, views: list[tuple[str, str | None, Finding]], current: str, account: str
) -> list[Finding]:
    """One view's own finding, or for several (SELECT granted on the database, say) one finding
    whose fix is one grant: a database of 40 views printed 40 lines."""
    if len(views) == 1:
        return [views[0][2]]
    names = [name for name, _, _ in views]
    shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
    roles = {role for _, role, _ in views}
    role = roles.pop() if len(roles) == 1 else None
    via = f" through role {quote_name(role)}" if role is not None else ""
    quoted = "`" + schema.replace("`", "``") + "`"
    message = (
        f"{current} can read {len(names)} views in {schema} ({shown}){via} but not their definitions (it"
        " holds no SHOW VIEW on them), so the functions they call in each query's session cannot be"
        f" checked (or --allow view:{schema}.NAME for each)"
    )
    return [Finding("unreadable-view", message, f"GRANT SHOW VIEW ON {quoted}.* TO {account}")]
