"""PostgreSQL 15: the expressions its parser copies an operand of (`admission.limit_expansion`).

Measured on 15.20 by the size of `EXPLAIN VERBOSE` per nesting level (docs/security.md):
`a BETWEEN SYMMETRIC b AND c` becomes `(a >= b AND a <= c) OR (a >= c AND a <= b)`, `a BETWEEN b
AND c` becomes `a >= b AND a <= c` (NOT BETWEEN likewise), and `a IN (i1, ..., ik)` becomes `a = i1
OR ... OR a = ik` for each item that reads a column, plus one `a = ANY(ARRAY[...])` for the others
(every item for a row, `(a, b) IN (...)` or `ROW(a, b) IN (...)`). Nesting the copied operand
multiplies per level: eleven levels of BETWEEN SYMMETRIC (700 bytes) took a backend to 10.8 GB, in
parse analysis and planning, where neither the statement timeout nor a cancel is seen (red team
pg17 F6). Row comparisons, IS DISTINCT FROM, NULLIF, CASE x WHEN and `op ANY/ALL (array)` copy
nothing (measured flat).
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

__all__ = ["copies"]


def _reads_columns(item: exp.Expr) -> bool:
    return any(True for _ in item.find_all(exp.Column, exp.Query))


def copies(node: exp.Expr) -> Mapping[str, int]:
    """How many times PostgreSQL's parser copies each operand of `node`, by argument name
    (an operand not named is copied once)."""
    if isinstance(node, exp.Between):
        return {"this": 4, "low": 2, "high": 2} if node.args.get("symmetric") else {"this": 2}
    if isinstance(node, exp.In) and node.expressions:
        items = node.expressions
        row = isinstance(node.this, exp.Anonymous) and node.this.name.lower() == "row"
        if isinstance(node.this, exp.Tuple) or row:  # a row is compared with each item in turn
            return {"this": len(items)}
        reading = sum(1 for i in items if _reads_columns(i))
        return {"this": reading + (reading < len(items))}
    return {}
