"""Pass: no statement other than a query anywhere in the tree (writes, DDL, commands, INTO)."""

from __future__ import annotations

from typing import Final

from sqlglot import exp

from mcpkit.sql.admission.require_query import NOT_A_QUERY
from mcpkit.sql.errors import refuse

__all__ = ["COMMAND_NODES", "WRITE_NODES", "reject_writes"]


def _classes(*names: str) -> tuple[type[exp.Expr], ...]:
    # Tolerate a class missing from a future sqlglot instead of failing at import.
    return tuple(c for c in (getattr(exp, n, None) for n in names) if isinstance(c, type))


# Changes data or schema wherever it sits (data-modifying CTEs, SELECT INTO, sequences).
WRITE_NODES: Final = _classes(
    "DML",  # Insert, Update, Delete, Merge, Copy
    "DDL",  # Create (and CREATE TABLE AS)
    "Drop",
    "Alter",
    "TruncateTable",
    "Into",
    "Returning",
    "OnConflict",
    "MultitableInserts",
    "LoadData",
    "NextValueFor",
    "Undrop",
    "SwapTable",
    "Put",
    "Export",
    "Comment",
    "Grant",
    "Revoke",
    "Analyze",
    "Refresh",
    "Cache",
    "Uncache",
)

# Statements that are not queries, nested or not.
COMMAND_NODES: Final = _classes(
    "Command",
    "Set",
    "Transaction",
    "Commit",
    "Rollback",
    "Pragma",
    "Attach",
    "Detach",
    "Use",
    "Describe",
    "Show",
    "Kill",
    "Execute",
    "ExecuteSql",
    "Declare",
    "Block",
    "IfBlock",
    "WhileBlock",
    "LoopBlock",
    "RepeatBlock",
    "StoredProcedure",
    "Summarize",
    "LockingStatement",
    "Install",
    "Get",
    "AlterSession",
    "ConnectTo",
    "Disconnect",
    "EndStatement",
)

WRITE_MESSAGE: Final = (
    "This server is read-only: send a plain SELECT with no INSERT, UPDATE, DELETE, MERGE, DDL, "
    "COPY, sequence changes or SELECT INTO anywhere in it."
)


def reject_writes(tree: exp.Expr) -> exp.Expr:
    """Refuse writes and non-query statements anywhere in the tree.

    Catches data-modifying CTEs (`WITH d AS (DELETE ... RETURNING *) SELECT ...`), SELECT INTO,
    MySQL `INTO @var`, and commands sqlglot could only read as `exp.Command`.

    >>> import sqlglot
    >>> reject_writes(sqlglot.parse_one("WITH a AS (SELECT 1) SELECT * FROM a")).sql()
    'WITH a AS (SELECT 1) SELECT * FROM a'

    Args:
        tree: One parsed statement.

    Returns:
        `tree`, unchanged.

    Raises:
        Refused: reason `write` or `not_a_query`.
    """
    for node in tree.find_all(*WRITE_NODES, *COMMAND_NODES):
        if isinstance(node, WRITE_NODES):
            refuse("write", WRITE_MESSAGE)
        refuse("not_a_query", NOT_A_QUERY)
    return tree
