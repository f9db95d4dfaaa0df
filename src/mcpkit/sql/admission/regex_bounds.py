"""A regular expression's search bound (`bound_searches`): its cost read off the literal
(`regex_cost`, the early refusal) and the engine's own limit written into it (`match_limit`)."""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from mcpkit.sql.admission.function_tables import SearchBounds, SizeBound
from mcpkit.sql.admission.operands import operand
from mcpkit.sql.admission.regex_cost import (
    MAX_DEGREE,
    MAX_PATHS,
    MAX_REPEAT,
    PatternCost,
    PatternTooComplex,
    pattern_cost,
)
from mcpkit.sql.errors import refuse

__all__ = ["limit_matches", "regex_cost"]


def regex_cost(regex: exp.Expr) -> PatternCost:
    """What a regular expression may cost (`regex_cost`); a computed or exponential one is refused."""
    if not (isinstance(regex, exp.Literal) and regex.is_string):
        refuse(
            "too_complex",
            "A regular expression is answered only when written as a literal here (what a computed"
            " one costs cannot be bounded); write the pattern out.",
        )
    try:
        return pattern_cost(regex.this)
    except PatternTooComplex:
        refuse(
            "too_complex",
            f"The regular expression could take exponential time (more than {MAX_DEGREE - 1} unbounded"
            f" quantifiers, more than {MAX_PATHS} ways through its groups and repetitions, a quantifier"
            f" on a group, a repetition count over {MAX_REPEAT}, a (*verb), recursion, a back-reference, \\X"
            " or extended mode); simplify it, or"
            " filter with LIKE first.",
        )


def limit_matches(
    call: exp.Expr, bound: SizeBound, bounds: SearchBounds, length: Callable[[exp.Expr], exp.Expr]
) -> None:
    """Write into a regular expression with quantifiers or groups the engine's limit on how far it
    backtracks over this subject (`SearchBounds.match_limit`, sized by `length`, the SQL of the
    subject's bytes): what the cost model misjudges stops there (issue 10 F1: `(a?){22}` was
    counted 2 ways, not 2^22, and ran past KILL)."""
    hay, regex = operand(call, bound.haystack), operand(call, bound.needle)
    limit = bounds.match_limit
    if limit is None or hay is None or regex is None or isinstance(hay, exp.Null) or regex_cost(regex).plain:
        return
    regex.replace(limit(regex.this, length(hay)))
