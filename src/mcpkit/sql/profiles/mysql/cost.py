"""The MySQL family's planner estimate, read from `EXPLAIN FORMAT=JSON` (never `EXPLAIN ANALYZE`).

MySQL states a cost. MariaDB's `EXPLAIN FORMAT=JSON` states none (its
`Last_query_cost` is 0 for unions and correlated subqueries, so a ceiling on it is a hole), so
there the estimate is the rows the plan examines: the nested-loop prefix products of each block,
plus what its derived tables and subqueries examine, a correlated subquery once per outer row.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["mysql_cost"]

# Wrappers MariaDB puts around a table inside a nested loop.
_TABLE_WRAPPERS = ("block-nl-join", "read_sorted_file", "filesort", "temporary_table", "duplicates_removal")


def mysql_cost(document: Any) -> float:
    """MySQL's `query_cost`, else (MariaDB) the rows the plan examines, from `EXPLAIN FORMAT=JSON`.

    >>> mysql_cost('{"query_block": {"cost_info": {"query_cost": "12.50"}}}')
    12.5
    >>> mysql_cost('{"query_block": {"nested_loop": [{"table": {"rows": 100}},'
    ...            ' {"block-nl-join": {"table": {"rows": 50, "filtered": 10}}}]}}')
    5100.0
    """
    plan = json.loads(document) if isinstance(document, str | bytes) else document
    block = plan.get("query_block", {}) if isinstance(plan, Mapping) else {}
    cost = block.get("cost_info", {}).get("query_cost") if isinstance(block, Mapping) else None
    if cost is not None:
        return float(cost)
    return _block_rows(block)


def _block_rows(block: Any) -> float:
    """Rows one execution of a MariaDB query block examines."""
    if not isinstance(block, Mapping):
        return 0.0
    union = block.get("union_result")
    if isinstance(union, Mapping):
        specs = union.get("query_specifications", [])
        return sum(_block_rows(s.get("query_block")) for s in specs if isinstance(s, Mapping))
    examined, outer = 0.0, 1.0
    for table in _tables(block):
        outer *= max(_number(table.get("rows"), 1.0), 1.0)
        examined += outer
        outer *= min(max(_number(table.get("filtered"), 100.0), 0.0), 100.0) / 100.0
        outer = max(outer, 1.0)
        materialized = table.get("materialized")
        if isinstance(materialized, Mapping):
            examined += _block_rows(materialized.get("query_block"))
    for sub in block.get("subqueries", []) or []:
        if not isinstance(sub, Mapping):
            continue
        cached = sub.get("expression_cache")
        if isinstance(cached, Mapping):  # correlated: run per outer row (the cache may save some)
            examined += outer * _block_rows(cached.get("query_block"))
        else:
            examined += _block_rows(sub.get("query_block"))
    return examined


def _tables(block: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """The tables of a block's nested loop, in join order."""
    entries = block.get("nested_loop")
    if not isinstance(entries, list):
        entries = [block]
    for entry in entries:
        yield from _unwrap(entry)


def _unwrap(entry: Any) -> Iterator[Mapping[str, Any]]:
    if not isinstance(entry, Mapping):
        return
    table = entry.get("table")
    if isinstance(table, Mapping) and "message" not in table:
        yield table
    for wrapper in _TABLE_WRAPPERS:
        inner = entry.get(wrapper)
        if isinstance(inner, Mapping):
            yield from _unwrap(inner)
        if isinstance(inner, list):
            for item in inner:
                yield from _unwrap(item)
    nested = entry.get("nested_loop")
    if isinstance(nested, list):
        for item in nested:
            yield from _unwrap(item)


def _number(value: Any, default: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return default
    try:
        return float(value)
    except ValueError:
        return default
