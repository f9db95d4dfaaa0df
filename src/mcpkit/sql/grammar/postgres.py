"""PostgreSQL as the server reads it, where sqlglot's own dialect refuses or rewrites what analysts write.

- `ORDER BY x USING ~<~` (an ordering operator instead of ASC/DESC; in ORDER BY, window and
  aggregate ORDER BY): sqlglot has no grammar for it. Only the built-in comparison operators are
  read; `USING OPERATOR(...)` and any other operator stay a syntax error.
- `TABLESAMPLE method (arg) REPEATABLE (seed)`: sqlglot reads only a number as the seed;
  PostgreSQL takes any expression for both.
- `INTERVAL '1 day 02:00:00'`: sqlglot keeps the first `number unit` pair of the string and drops
  the rest (`INTERVAL '1 DAY'`, a silently different answer); such a string is kept as written.
- `ARRAY[(SELECT 1), 2]`: sqlglot writes an `ARRAY[...]` whose first item is a subquery as the
  subquery form `ARRAY((SELECT 1))` and drops the other items (a silently different answer; with
  one item, a subquery of several rows is an error in brackets but an array in parentheses). The
  bracket form is marked when read and written back as brackets.
- `date_add(ts, interval, zone)` (PostgreSQL 16): sqlglot reads it as MySQL's DATE_ADD, the third
  argument as a unit, and writes `ts + interval` without the time zone (a silently different answer
  across a daylight-saving change); it is read as the call it is and sent as written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Final

from sqlglot import exp
from sqlglot.dialects.dialect import inline_array_sql
from sqlglot.dialects.postgres import Postgres
from sqlglot.generators.postgres import PostgresGenerator
from sqlglot.parsers.postgres import PostgresParser
from sqlglot.tokenizer_core import TokenType

__all__ = ["ORDERING_OPERATORS", "OrderedUsing", "PostgresFamily"]

ORDERING_OPERATORS: Final = frozenset({"<", ">", "<=", ">=", "~<~", "~>~", "~<=~", "~>=~"})
_OPERATOR_CHARS: Final = frozenset("<>=~!@#%^&|`?+-*/")


class OrderedUsing(exp.Ordered):
    """`expr USING op [NULLS FIRST|LAST]`: `using` holds the operator text, `nulls` FIRST or LAST."""

    arg_types: ClassVar[dict[str, bool]] = {
        "this": True,
        "using": True,
        "nulls": False,
        "desc": False,
        "nulls_first": False,
        "with_fill": False,
    }


class _Parser(PostgresParser):
    FUNCTIONS: ClassVar[dict[str, Callable[..., exp.Expr]]] = {
        k: v for k, v in PostgresParser.FUNCTIONS.items() if k != "DATE_ADD"
    }

    def _parse_ordered(self, parse_method: Callable[[], exp.Expr | None] | None = None) -> exp.Ordered | None:
        start = self._index
        this = parse_method() if parse_method else self._parse_disjunction()
        if this is None or not self._match(TokenType.USING):
            self._retreat(start)
            return super()._parse_ordered(parse_method)
        text, end = "", None
        while (
            self._curr
            and set(self._curr.text) <= _OPERATOR_CHARS
            and (end is None or self._curr.start == end + 1)
        ):
            text, end = text + self._curr.text, self._curr.end
            self._advance()
        if text not in ORDERING_OPERATORS:
            self.raise_error("ORDER BY ... USING takes a comparison operator such as < or ~<~")
        nulls = None
        if self._match_text_seq("NULLS", "FIRST"):
            nulls = "FIRST"
        elif self._match_text_seq("NULLS", "LAST"):
            nulls = "LAST"
        return self.expression(OrderedUsing(this=this, using=text, nulls=nulls))

    def _parse_interval_span(self, this: exp.Expr, parse_function_unit: bool = True) -> exp.Interval:
        interval = super()._parse_interval_span(this, parse_function_unit)
        if isinstance(this, exp.Literal) and this.is_string:
            text = this.name
            parts = exp.INTERVAL_STRING_RE.findall(text)
            if len(parts) == 1 and not exp.INTERVAL_STRING_RE.fullmatch(text):
                interval.set("this", exp.Literal.string(text))
                interval.set("unit", None)
        return interval

    def _parse_table_sample(self, as_modifier: bool = False) -> exp.TableSample | None:
        if not self._match(TokenType.TABLE_SAMPLE):
            return None
        method = self._parse_var(upper=True)
        args = self._parse_wrapped_csv(self._parse_assignment)
        if len(args) != 1:
            self.raise_error("TABLESAMPLE takes one argument")
        seed = self._parse_wrapped(self._parse_assignment) if self._match_text_seq("REPEATABLE") else None
        return self.expression(exp.TableSample(method=method, percent=args[0], seed=seed))


def _ordered_using(gen: PostgresGenerator, node: OrderedUsing) -> str:
    nulls = node.args.get("nulls")
    return f"{gen.sql(node, 'this')} USING {node.args['using']}" + (f" NULLS {nulls}" if nulls else "")


class PostgresFamily(Postgres):
    """PostgreSQL 13+ (the dialect mcpkit reads and writes for PostgreSQL servers)."""

    Parser = _Parser
    # marks `ARRAY[...]` (`bracket_notation`) apart from `ARRAY(SELECT ...)` when read
    HAS_DISTINCT_ARRAY_CONSTRUCTORS = True

    class Generator(PostgresGenerator):
        TRANSFORMS: ClassVar[dict[type[exp.Expr], Any]] = {
            **PostgresGenerator.TRANSFORMS,
            OrderedUsing: _ordered_using,
        }

        def array_sql(self, expression: exp.Array) -> str:
            # sqlglot writes any array whose first item is a query as `ARRAY(query)` (the check
            # came with tobymao/sqlglot#7765), dropping the other items of `ARRAY[(SELECT 1), 2]`
            items = expression.expressions
            if expression.args.get("bracket_notation") or len(items) != 1:
                return f"{self.normalize_func('ARRAY')}{inline_array_sql(self, expression)}"
            return super().array_sql(expression)
