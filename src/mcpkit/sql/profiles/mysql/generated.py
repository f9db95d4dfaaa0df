"""MySQL and MariaDB: VIRTUAL generated columns, whose expression runs in the reader's session.

A VIRTUAL column is computed each time a row is read, in the caller's session and inside its
read-only transaction, so its expression is SQL the query text never names (red team rtJ F1/F2):
MariaDB 10.11 accepts `@v := ...`, `UUID()`, `SYS_GUID()` (the host's MAC address),
`CONNECTION_ID()`, `USER()` there, and reading `s varchar(64) AS (@v := CONCAT('seen', a))` set a
user variable for the session, and crashed mariadbd (SIGSEGV in `update_hash`) inside the read-only
transaction. So each readable VIRTUAL column's expression must pass what admission applies to a
query: the function policy (as for view definitions, `views`) and the refusal of variables.
STORED (PERSISTENT) columns are computed when a row is written and read as data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.errors import Refused
from mcpkit.sql.admission import FunctionPolicy, parse_statement, run_passes
from mcpkit.sql.admission.reject_functions import reject_functions
from mcpkit.sql.admission.reject_parameters import reject_parameters
from mcpkit.sql.profiles.base import Finding
from mcpkit.sql.profiles.mysql.roles import quote_name
from mcpkit.sql.profiles.mysql.views import in_database

__all__ = ["VIRTUAL_COLUMNS", "grant_refusal", "virtual_column_findings"]

VIRTUAL_COLUMNS: Final = (
    "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, GENERATION_EXPRESSION FROM information_schema.COLUMNS"
    " WHERE COALESCE(GENERATION_EXPRESSION, '') <> '' AND LOCATE('STORED', UPPER(EXTRA)) = 0"
    " AND LOCATE('PERSISTENT', UPPER(EXTRA)) = 0"
    " AND TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')"
    " ORDER BY 1, 2, 3"
)
"""Every VIRTUAL generated column the login holds a privilege on, with its expression (MySQL 8 has
no IS_GENERATED and writes '' where MariaDB writes NULL; no `%`: the driver formats a statement sent
with `exec_driver_sql`)."""


def _refusal(expression: str, policy: FunctionPolicy) -> str | None:
    """Why admission would refuse the expression in a query, None if it passes."""
    try:
        tree = parse_statement(f"SELECT {expression}", "mysql")
        run_passes(tree, (reject_parameters, reject_functions), dialect="mysql", functions=policy)
    except Refused as exc:
        return exc.message
    except RecursionError:
        return "its expression is nested too deeply to check"
    return None


def grant_refusal(conn: Connection, schema: str, table: str) -> str | None:
    """Why start-up would refuse a new reader's SELECT on this table for its VIRTUAL columns, as
    `mcpkit sql grant` (an administrator) reads them, or None."""
    rows = conn.execute(
        text(VIRTUAL_COLUMNS.replace(" ORDER BY", " AND TABLE_SCHEMA = :s AND TABLE_NAME = :t ORDER BY")),
        {"s": schema, "t": table},
    ).all()
    policy = in_database(FunctionPolicy.for_dialect("mysql"), schema)
    reasons = [f"{c}: {why.rstrip('.')}" for _, _, c, e in rows if (why := _refusal(str(e or ""), policy))]
    if not reasons:
        return None
    return (
        f"table {schema}.{table}'s VIRTUAL generated column runs in each reader's session what a query may"
        f" not ({'; '.join(reasons)}), which start-up refuses (or --allow relation:{schema}.{table})"
    )


def virtual_column_findings(
    columns: Iterable[tuple[Sequence[object], str | None]],
    current: str,
    account: str,
    revokes: Callable[[str], list[str]],
    allowed: frozenset[str],
    functions: FunctionPolicy | None = None,
) -> list[Finding]:
    """One finding per readable table whose VIRTUAL columns' expressions a query could not say.

    Args:
        columns: `VIRTUAL_COLUMNS` rows, each with the role it was seen under (None: as is).
        current: CURRENT_USER(), for the messages.
        account: The login as `'user'@'host'`, for the fixes.
        revokes: The REVOKE statements that take SELECT on a backquoted table away.
        allowed: The `--allow` opt-ins (`relation:db.table` accepts a reviewed table).
        functions: The policy queries are admitted under (None: the dialect's default).
    """
    policy = functions or FunctionPolicy.for_dialect("mysql")
    bad: dict[tuple[str, str], tuple[list[str], str | None]] = {}
    for (schema, table, column, expression), role in columns:
        key = (str(schema), str(table))
        if f"relation:{key[0]}.{key[1]}" in allowed:
            continue
        why = _refusal(str(expression or ""), in_database(policy, key[0]))
        if why is not None:
            names, _ = bad.setdefault(key, ([], role))
            if f"{column}: {why}" not in names:
                names.append(f"{column}: {why.rstrip('.')}")
    found = []
    for (schema, table), (reasons, role) in bad.items():
        quoted = f"`{schema}`.`{table}`"
        revoke = "; ".join(revokes(quoted) or [f"REVOKE SELECT ON {quoted} FROM {account}"])
        via = f" through role {quote_name(role)}" if role is not None else ""
        found.append(
            Finding(
                "virtual-column",
                f"{current} can read table {schema}.{table}{via}, whose VIRTUAL generated column runs in"
                f" each reader's session what a query may not ({'; '.join(reasons)})",
                f"{revoke}; or redefine the column as STORED or without it",
                f"relation:{schema}.{table}",
            )
        )
    return found
