"""Admission: the one entry point that turns model-written SQL into SQL safe to send.

    raw text --check_lexical--> --parse_statement--> CHECKS --> REWRITES --> regenerate
             --check_lexical--> --parse_statement--> CHECKS  (what is sent is what was checked)

Each pass is `(tree, **named) -> tree`; the loop hands a pass only the keyword arguments it
names (`dialect`, `functions`, `catalog`, `limit`), as sqlglot's optimizer does with its rules,
and checks the analysis `deadline` between passes.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sqlglot import exp
from sqlglot.errors import ErrorLevel, UnsupportedError

from mcpkit.sql.admission.bound_fts_queries import bound_fts_queries
from mcpkit.sql.admission.bound_searches import bound_searches
from mcpkit.sql.admission.budget import DEFAULT_BUDGET, AnalysisBudget
from mcpkit.sql.admission.cap_rows import cap_rows
from mcpkit.sql.admission.compute_once import compute_once
from mcpkit.sql.admission.drop_from_dual import drop_from_dual
from mcpkit.sql.admission.interruptible_calls import interruptible_calls
from mcpkit.sql.admission.lexical import check_lexical
from mcpkit.sql.admission.limit_aggregates import limit_aggregates
from mcpkit.sql.admission.limit_expansion import limit_expansion
from mcpkit.sql.admission.limit_recursion import limit_recursion
from mcpkit.sql.admission.parse import parse_statement
from mcpkit.sql.admission.policy import FunctionPolicy
from mcpkit.sql.admission.regex_cost import costs_read_once
from mcpkit.sql.admission.reject_attribute_calls import reject_attribute_calls
from mcpkit.sql.admission.reject_functions import reject_functions
from mcpkit.sql.admission.reject_locks import reject_locks
from mcpkit.sql.admission.reject_parameters import reject_parameters
from mcpkit.sql.admission.reject_relations import reject_relations
from mcpkit.sql.admission.reject_volatile_functions import FunctionCatalog, reject_volatile_functions
from mcpkit.sql.admission.reject_writes import reject_writes
from mcpkit.sql.admission.require_query import require_query
from mcpkit.sql.dialects import sent_dialect
from mcpkit.sql.errors import refuse

_EXPRESSION: Final = re.compile(r"for expression '(\w+)'")

__all__ = ["CHECKS", "PASSES", "REWRITES", "Admitted", "Pass", "admit", "run_passes"]

Pass = Callable[..., exp.Expr]

CHECKS: Final[tuple[Pass, ...]] = (
    reject_writes,  # first, so a DELETE is refused as a write, not as "not a query"
    require_query,
    reject_locks,
    reject_parameters,
    reject_attribute_calls,
    reject_functions,
    reject_relations,
    reject_volatile_functions,
    limit_recursion,
    limit_expansion,
    bound_fts_queries,
)
# limit_aggregates counts the aggregates the query as written holds: it runs before the guards are
# written in, which copy a subquery operand into their condition (their cost is the guard's, and
# the text sent is checked again by CHECKS, not by it).
REWRITES: Final[tuple[Pass, ...]] = (
    limit_aggregates,
    drop_from_dual,
    bound_searches,
    compute_once,
    interruptible_calls,
    cap_rows,
)
PASSES: Final[tuple[Pass, ...]] = CHECKS + REWRITES


@dataclass(frozen=True)
class Admitted:
    """An admitted query: `sql` is the regenerated text to send, `tree` its own parse."""

    sql: str
    tree: exp.Expr


@functools.lru_cache(maxsize=256)
def _parameters(step: Pass) -> frozenset[str]:
    """The keyword names a pass takes (cached: `inspect.signature` costs more than most passes)."""
    return frozenset(inspect.signature(step).parameters)


def run_passes(tree: exp.Expr, passes: Sequence[Pass], **named: Any) -> exp.Expr:
    """Run `passes` in order, each with only the keyword arguments it names.

    >>> import sqlglot
    >>> run_passes(sqlglot.parse_one("SELECT 1"), [cap_rows], limit=3, dialect="sqlite").sql()
    'SELECT 1 LIMIT 3'
    """
    deadline = named.get("deadline")
    for step in passes:
        AnalysisBudget.check_deadline(deadline)
        wanted = _parameters(step)
        tree = step(tree, **{k: v for k, v in named.items() if k in wanted})
    return tree


def admit(
    sql: str,
    dialect: str,
    *,
    limit: int | None = None,
    functions: FunctionPolicy | None = None,
    catalog: FunctionCatalog | None = None,
    budget: AnalysisBudget | None = DEFAULT_BUDGET,
    deadline: float | None = None,
) -> Admitted:
    """Admit exactly one read-only query and return the SQL to send in its place.

    >>> admit("select region, sum(units) from sales group by region;", "sqlite", limit=26).sql
    'SELECT region, SUM(units) FROM sales GROUP BY region LIMIT 26'

    Args:
        sql: The model's query text.
        dialect: The target's sqlglot dialect (`postgres`, `mysql`, `sqlite`, ...).
        limit: Row limit to build into the query (row cap + 1); None leaves it uncapped.
        functions: Function policy; the dialect's denylist when omitted.
        catalog: PostgreSQL volatility lookup; None skips that check.
        budget: Size limits on the analysis (None: unlimited, for trusted text only).
        deadline: `time.thread_time()` by which the analysis must be done (default: the budget's).

    Returns:
        The regenerated SQL and its tree.

    Raises:
        Refused: with a one-sentence message and a stable `data.reason`.
    """
    named: dict[str, Any] = {
        "dialect": dialect,
        "functions": functions or FunctionPolicy.for_dialect(dialect),
        "catalog": catalog,
        "limit": limit,
        "deadline": deadline if deadline is not None or budget is None else budget.deadline(),
    }
    try:
        with costs_read_once():
            return _admit(sql, dialect, named, budget)
    except RecursionError:  # sqlglot recurses per nesting level
        refuse("too_long", "The query is nested too deeply; flatten it (CTEs instead of nested subqueries).")
    except ValueError as exc:  # int() past 4,300 digits: numbers are capped where read, this is the net
        if "integer string conversion" not in str(exc):
            raise
        refuse("too_long", "A number in the query has too many digits; write a shorter one.")


# Dialects naming an unaliased result column after its text as sent, with the length they keep.
_NAMED_BY_TEXT: Final = {"mysql": 255, "sqlite": None}


def _text(node: exp.Expr, dialect: str) -> str:
    return node.sql(dialect=sent_dialect(dialect), normalize_functions=False, comments=False)


def _item_names(tree: exp.Expr, dialect: str) -> dict[int, str]:
    """The names of the outermost select's unaliased expressions, where the engine names by text."""
    if dialect not in _NAMED_BY_TEXT or not isinstance(tree, exp.Select):
        return {}
    plain = (exp.Alias, exp.Column, exp.Star, exp.Literal)
    return {i: _text(e, dialect) for i, e in enumerate(tree.expressions) if not isinstance(e, plain)}


def _keep_item_names(tree: exp.Expr, names: dict[int, str], dialect: str) -> None:
    """Name a result column the rewrites changed (a guard around it) as it was written (red team v3
    F4: MariaDB answered kilobytes of the guard's SQL as the column's name)."""
    if not names or not isinstance(tree, exp.Select):
        return
    keep = _NAMED_BY_TEXT[dialect]
    for i, name in names.items():
        item = tree.expressions[i] if i < len(tree.expressions) else None
        if item is not None and not isinstance(item, exp.Alias) and _text(item, dialect) != name:
            item.replace(exp.alias_(item.copy(), name[:keep] if keep else name, quoted=True))


def _admit(sql: str, dialect: str, named: dict[str, Any], budget: AnalysisBudget | None) -> Admitted:
    tokens = check_lexical(sql, dialect)
    if budget is not None:
        budget.check_tokens(len(tokens))
    parsed = parse_statement(sql, dialect)
    if budget is not None:
        budget.check_tree(parsed)
    names = _item_names(parsed, dialect)
    tree = run_passes(parsed, PASSES, **named)
    _keep_item_names(tree, names, dialect)
    if budget is not None:
        budget.check_sent(tree)
    AnalysisBudget.check_deadline(named["deadline"])
    text = _regenerate(tree, dialect)
    AnalysisBudget.check_deadline(named["deadline"])  # a slow short text queues before the second look
    # Second look: the database receives `text`, so `text` is what must pass.
    check_lexical(text, dialect)
    again = run_passes(parse_statement(text, dialect), CHECKS, **named)
    return Admitted(sql=text, tree=again)


def _regenerate(tree: exp.Expr, dialect: str) -> str:
    """The text sent: refused where sqlglot would write something that means another thing.

    sqlglot drops what the target cannot say (a format argument, a modifier) with only a warning:
    MariaDB's `TO_CHAR(d, 'YYYY')` was sent as `CAST(d AS CHAR)` and answered the whole date (red
    team my11 F4). MariaDB's `INTERVAL(N, N1, ...)` is read as an interval of a tuple.
    """
    for node in tree.find_all(exp.ToChar):  # MariaDB's TO_CHAR(d) became CAST(d AS CHAR), unwarned
        if not node.sql(dialect=sent_dialect(dialect)).upper().startswith("TO_CHAR("):
            refuse(
                "function",
                "TO_CHAR cannot be sent here as written; use the database's own date formatting"
                " (DATE_FORMAT on MariaDB/MySQL, strftime on SQLite).",
            )
    if any(isinstance(node.this, exp.Tuple) for node in tree.find_all(exp.Interval)):
        refuse("function", "INTERVAL(N, N1, ...) is not supported here; write it as a CASE expression.")
    try:
        return tree.sql(
            dialect=sent_dialect(dialect),
            normalize_functions=False,
            comments=False,
            unsupported_level=ErrorLevel.RAISE,
        )
    except UnsupportedError as exc:
        found = _EXPRESSION.search(str(exc))
        kind = getattr(exp, found.group(1), None) if found else None
        what = f" ({kind.sql_name()})" if isinstance(kind, type) and issubclass(kind, exp.Func) else ""
        refuse(
            "function",
            f"The query uses a form{what} this server cannot send to the database without changing its"
            " meaning; write it with another function.",
        )
