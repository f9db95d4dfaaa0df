"""The jump SQLite's `interruptible_calls` puts around calls, seen through by the masking analysis."""

from __future__ import annotations

from sqlglot import exp

__all__ = ["unjumped"]


def unjumped(node: exp.Expr) -> exp.Expr:
    """`node` without the jumps `interruptible_calls` puts around calls on SQLite (`CASE WHEN 1 THEN
    x END` is x: judged as x, or the profile's own MIN of a column in a wide table was refused)."""
    while (
        isinstance(node, exp.Case)
        and node.this is None
        and node.args.get("default") is None
        and len(ifs := node.args.get("ifs") or []) == 1
        and isinstance(cond := ifs[0].this, exp.Literal)
        and cond.is_int
        and cond.name == "1"
    ):
        node = ifs[0].args["true"]
    return node
