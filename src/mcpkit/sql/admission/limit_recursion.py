"""Pass: at most a few recursive CTEs per query where the engine's memory grows with their count,
and none that deduplicates its rows where that takes memory no limit reaches.

MariaDB 10.11 plans a `WITH RECURSIVE` whose CTEs recurse with memory that doubles per such CTE
(red team my14 F4: twelve trivial ones took 170 MB, fifteen 1.6 GB, twenty the whole 24 GB host,
and the server was OOM-killed), before `max_session_mem_used`, `max_statement_time` or KILL stop
it. One recursive CTE referenced many times, or many plain CTEs, grow nothing.

PostgreSQL 15 answers a recursive CTE written with UNION (not UNION ALL) by keeping every distinct
row found so far in a hash table in memory, which neither `work_mem` nor `temp_file_limit`
bounds (red team rt15pg F7: 850 MB in 5 s, 1.7 GB by a 30 s timeout; docs/security.md). UNION ALL
keeps its rows in a tuplestore that spills to temporary files, which `temp_file_limit` caps.
"""

from __future__ import annotations

from typing import Final

from sqlglot import exp

from mcpkit.sql.errors import refuse

__all__ = ["DISTINCT_RECURSION_REFUSED", "MAX_RECURSIVE_CTES", "limit_recursion"]

MAX_RECURSIVE_CTES: Final = {"mysql": 4}
"""Recursive CTEs one query may hold, by sqlglot dialect (absent: no limit)."""
DISTINCT_RECURSION_REFUSED: Final = frozenset(["postgres"])
"""The sqlglot dialects whose recursive UNION (distinct) holds its rows in memory without limit."""


def _recursive_ctes(with_: exp.With) -> list[exp.CTE]:
    names = {cte.alias_or_name.casefold() for cte in with_.expressions}
    return [  # each reading itself or another CTE of its WITH: may recurse
        cte
        for cte in with_.expressions
        if any(not t.db and t.name.casefold() in names for t in cte.this.find_all(exp.Table))
    ]


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
    recursive = [c for w in tree.find_all(exp.With) if w.args.get("recursive") for c in _recursive_ctes(w)]
    if dialect in DISTINCT_RECURSION_REFUSED:
        for cte in recursive:
            body = cte.this.unnest()
            if isinstance(body, exp.Union) and body.args.get("distinct"):
                refuse(
                    "too_complex",
                    "A recursive CTE with UNION keeps every row it has seen in memory with no limit; write"
                    " UNION ALL and stop the recursion with a depth column (WHERE depth < n), or skip"
                    " rows already seen with the CYCLE clause.",
                )
    limit = MAX_RECURSIVE_CTES.get(dialect)
    if limit is None:
        return tree
    count = len(recursive)
    if count > limit:
        refuse(
            "too_complex",
            f"This database answers at most {limit} recursive CTEs in one query (each one more can double"
            " the memory it takes); split the query, or compute the series in fewer CTEs.",
        )
    return tree
