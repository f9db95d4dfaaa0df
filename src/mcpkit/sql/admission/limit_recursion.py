"""Pass: at most a few recursive CTEs per query where the engine's memory grows with their count.

MariaDB 10.11 plans a `WITH RECURSIVE` whose CTEs recurse with memory that doubles per such CTE
(red team my14 F4: twelve trivial ones took 170 MB, fifteen 1.6 GB, twenty the whole 24 GB host,
and the server was OOM-killed), before `max_session_mem_used`, `max_statement_time` or KILL stop
it. One recursive CTE referenced many times, or many plain CTEs, grow nothing.
"""

from __future__ import annotations

from typing import Final

from sqlglot import exp

from mcpkit.sql.errors import refuse

__all__ = ["MAX_RECURSIVE_CTES", "limit_recursion"]

MAX_RECURSIVE_CTES: Final = {"mysql": 4}
"""Recursive CTEs one query may hold, by sqlglot dialect (absent: no limit)."""


def _recursive_ctes(with_: exp.With) -> int:
    names = {cte.alias_or_name.casefold() for cte in with_.expressions}
    count = 0
    for cte in with_.expressions:
        body = cte.this
        if any(not t.db and t.name.casefold() in names for t in body.find_all(exp.Table)):
            count += 1  # reads itself or another CTE of its WITH: may recurse
    return count


def limit_recursion(tree: exp.Expr, dialect: str) -> exp.Expr:
    """Refuse more than `MAX_RECURSIVE_CTES[dialect]` recursive CTEs in one query.

    >>> import sqlglot
    >>> one = "t{0}(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t{0} WHERE n < 3)"
    >>> sql = "WITH RECURSIVE " + ", ".join(one.format(i) for i in range(4)) + " SELECT 1"
    >>> limit_recursion(sqlglot.parse_one(sql, read="mysql"), "mysql").sql("mysql")[:25]
    'WITH RECURSIVE t0(n) AS ('

    Args:
        tree: One parsed statement.
        dialect: The target's sqlglot dialect.

    Returns:
        `tree`, unchanged.

    Raises:
        Refused: reason `too_complex`.
    """
    limit = MAX_RECURSIVE_CTES.get(dialect)
    if limit is None:
        return tree
    count = sum(_recursive_ctes(w) for w in tree.find_all(exp.With) if w.args.get("recursive"))
    if count > limit:
        refuse(
            "too_complex",
            f"This database answers at most {limit} recursive CTEs in one query (each one more can double"
            " the memory it takes); split the query, or compute the series in fewer CTEs.",
        )
    return tree
