"""Pass: at most a few aggregates per query that keep their whole input in the database's memory.

PostgreSQL's string_agg, array_agg, json_agg, jsonb_agg (and `ARRAY(SELECT ...)`) hold every value
of their group in the backend until it ends: neither work_mem nor a spill to disk bounds them, and
PostgreSQL has no per-backend memory cap. Each took the backend about 90-230 MB over the same 50 MB
column, so one query of eight took 1.4 GB (`bench/sql_aggregates.py`); over a larger table each
holds up to its 1 GB value limit, or more (array_agg's and jsonb_agg's states have none). Identical
calls of one SELECT share one state in PostgreSQL and count once; in another SELECT they count again.
Under ROLLUP, CUBE or GROUPING SETS a call keeps one state per grouping set (a rollup of five
levels took 2.1 GB for one string_agg), and a CTE that PostgreSQL inlines is computed once per
reference (NOT MATERIALIZED, read five times: 3.2 GB): each counts that many times.
"""

from __future__ import annotations

from typing import Final

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect

from mcpkit.sql.admission.function_tables.tables import COLLECTING_AGGREGATES
from mcpkit.sql.admission.functions import function_calls
from mcpkit.sql.errors import refuse
from mcpkit.sql.grammar import sent_dialect

__all__ = ["MAX_COLLECTING", "limit_aggregates"]

MAX_COLLECTING: Final = 2
"""Distinct collecting aggregates one query may hold."""


def _whole(node: exp.Expr) -> exp.Expr:
    # the call with its FILTER and OVER: `array_agg(x) FILTER (WHERE c)` is a state of its own
    while isinstance(node.parent, exp.Filter | exp.Window):
        node = node.parent
    return node


def _grouping_sets(select: exp.Expr | None) -> int:
    """How many grouping sets the SELECT's GROUP BY forms: one, or per ROLLUP/CUBE/GROUPING SETS."""
    group = select.args.get("group") if isinstance(select, exp.Select) else None

    def sets(item: exp.Expr) -> int:
        if isinstance(item, exp.Rollup):
            return len(item.expressions) + 1
        if isinstance(item, exp.Cube):
            return int(2 ** len(item.expressions))
        if isinstance(item, exp.GroupingSets):
            return sum(sets(e) for e in item.expressions)
        return 1

    count = 1
    for item in group.expressions if isinstance(group, exp.Group) else ():
        count *= sets(item)  # GROUP BY a, ROLLUP(b, c): the cross product of the sets
    return count


def _copies(node: exp.Expr) -> int:
    """How many times PostgreSQL computes `node`: once per reference of each CTE around it that
    it inlines (NOT MATERIALIZED, or read once and not MATERIALIZED), else once."""
    cte = node.find_ancestor(exp.CTE)
    if cte is None or not isinstance(cte.parent, exp.With) or cte.parent.parent is None:
        return 1
    with_, owner = cte.parent, cte.parent.parent
    refs = [
        t
        for t in owner.find_all(exp.Table)
        if not t.db and t.name.lower() == cte.alias_or_name.lower() and t.find_ancestor(exp.CTE) is not cte
    ]
    inlined = not with_.args.get("recursive") and (
        cte.args.get("materialized") is False or (len(refs) == 1 and cte.args.get("materialized") is None)
    )
    if not inlined or not refs:
        return _copies(owner)
    return sum(_copies(ref) for ref in refs)


def _state(node: exp.Expr, writer: str | Dialect) -> tuple[int, str]:
    """One aggregate state: the call's text within the SELECT that computes it."""
    return id(node.find_ancestor(exp.Select)), node.sql(dialect=writer)


def limit_aggregates(tree: exp.Expr, dialect: str) -> exp.Expr:
    """Refuse more than `MAX_COLLECTING` distinct collecting aggregates in one query.

    >>> import sqlglot
    >>> sql = "SELECT string_agg(a, ','), array_agg(b), array_agg(b) FROM t"
    >>> limit_aggregates(sqlglot.parse_one(sql, read="postgres"), "postgres").sql("postgres")[:20]
    'SELECT STRING_AGG(a,'

    Args:
        tree: One parsed statement.
        dialect: The target's sqlglot dialect; one without `COLLECTING_AGGREGATES` is not limited.

    Returns:
        `tree`, unchanged.

    Raises:
        Refused: reason `too_complex`.
    """
    names = COLLECTING_AGGREGATES.get(dialect)
    if not names:
        return tree
    writer = sent_dialect(dialect)
    # PostgreSQL shares one state between identical calls of one SELECT only: the same call in
    # eight scalar subqueries was eight states, 1.7 GB (red team rt16 F6)
    nodes = [_whole(call.node) for call in function_calls(tree, dialect) if call.names & names]
    # ARRAY(SELECT ...) collects its rows; ARRAY[(SELECT ...), ...] holds one value per item
    nodes += [
        n
        for n in tree.find_all(exp.Array)
        if not n.args.get("bracket_notation") and any(isinstance(e, exp.Query) for e in n.expressions)
    ]
    found: dict[tuple[int, str], int] = {}
    for node in nodes:
        select = node.find_ancestor(exp.Select)
        found[_state(node, writer)] = _copies(node) * _grouping_sets(select)
    if sum(found.values()) > MAX_COLLECTING:
        refuse(
            "too_complex",
            f"A query here may hold at most {MAX_COLLECTING} aggregates that collect their whole input"
            " (string_agg, array_agg, json_agg, jsonb_agg, ARRAY(SELECT ...), ...): each keeps every"
            " value in the database's memory, once per grouping set of a ROLLUP, CUBE or GROUPING SETS and"
            " once per reference of a CTE computed again. Collect several columns in one of them"
            " (json_agg(json_build_object('a', a, 'b', b))), or run one query per aggregate.",
        )
    return tree
