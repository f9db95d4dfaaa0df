"""Pass: at most a few aggregates per query that keep their whole input in the database's memory.

PostgreSQL's string_agg, array_agg, json_agg, jsonb_agg (and `ARRAY(SELECT ...)`) hold every value
of their group in the backend until it ends: neither work_mem nor a spill to disk bounds them, and
PostgreSQL has no per-backend memory cap. Each took the backend about 90-230 MB over the same 50 MB
column, so one query of eight took 1.4 GB (`bench/sql_aggregates.py`); over a larger table each
holds up to its 1 GB value limit, or more (array_agg's and jsonb_agg's states have none). Identical
calls of one SELECT share one state in PostgreSQL and count once; in another SELECT they count again.
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
    found = {
        _state(_whole(call.node), writer) for call in function_calls(tree, dialect) if call.names & names
    }
    found |= {
        _state(node, writer)
        for node in tree.find_all(exp.Array)
        if any(isinstance(e, exp.Query) for e in node.expressions)
    }
    if len(found) > MAX_COLLECTING:
        refuse(
            "too_complex",
            f"A query here may hold at most {MAX_COLLECTING} aggregates that collect their whole input"
            " (string_agg, array_agg, json_agg, jsonb_agg, ARRAY(SELECT ...), ...): each keeps every"
            " value in the database's memory. Collect several columns in one of them"
            " (json_agg(json_build_object('a', a, 'b', b))), or run one query per aggregate.",
        )
    return tree
