"""MySQL 8 and MariaDB 10.11 as the servers read them, where sqlglot's MySQL dialect writes SQL they refuse.

- `x REGEXP y` / `RLIKE`: sqlglot writes REGEXP_LIKE(), which MariaDB does not have.
- `MEDIAN(x) OVER (...)` (MariaDB): sqlglot writes PERCENTILE_CONT(x, 0.5), which neither reads.
- `GROUP_CONCAT(x ORDER BY y SEPARATOR s LIMIT n)`: sqlglot could not read SEPARATOR before LIMIT,
  and wrote LIMIT before SEPARATOR, which both servers refuse.
- `VALUES (1), (2)` as a statement (MariaDB's table value constructor): sqlglot read `VALUES(...)`
  as the old ON DUPLICATE KEY function; it is now a query (sent as SELECT ... UNION ALL ...).
- `DATE_FORMAT(d, CONCAT('%W ', x))`: sqlglot reads a computed format as written but translated
  the specifiers in its SQL text when writing it (`%W`, the weekday name, became `%u`, the week
  number: a wrong answer); only a literal format is translated now, both ways.
- `t FOR SYSTEM_TIME AS OF x` (MariaDB's system-versioned tables): sqlglot wrote `FOR TIMESTAMP`,
  and `BETWEEN a AND b` / `FROM a TO b` as a tuple; MariaDB refused all three.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlglot import exp
from sqlglot.dialects.mysql import MySQL
from sqlglot.generator import Generator
from sqlglot.generators.mysql import MySQLGenerator
from sqlglot.parsers.mysql import MySQLParser
from sqlglot.tokenizer_core import TokenType

__all__ = ["MySQLFamily"]


class _Parser(MySQLParser):
    def _parse_statement(self) -> exp.Expr | None:
        starts_values = self._curr is not None and self._curr.token_type == TokenType.VALUES
        if (
            starts_values
            and self._next
            and (self._next.token_type == TokenType.L_PAREN or self._next.text.upper() == "ROW")
        ):
            return self._parse_query_modifiers(self._parse_set_operations(self._parse_select()))
        return super()._parse_statement()

    def _parse_group_concat(self) -> exp.Expr | None:
        node = super()._parse_group_concat()
        if isinstance(node, exp.GroupConcat) and self._match(TokenType.LIMIT, advance=False):
            node.set("this", self._parse_limit(this=node.args.get("this")))
        return node


def _regexp(gen: Generator, node: exp.RegexpLike) -> str:
    if node.args.get("flag") is not None:  # only the function takes match flags (MySQL 8)
        return gen.func("REGEXP_LIKE", node.this, node.expression, node.args.get("flag"))
    return f"({gen.binary(node, 'REGEXP')})"  # parenthesised: REGEXP binds looser than + or ||


def _group_concat(gen: Generator, node: exp.GroupConcat) -> str:
    this = node.this
    limit = ""
    if isinstance(this, exp.Limit):
        offset = this.args.get("offset")
        skip = f"{gen.sql(offset)}, " if offset else ""  # the form this parser reads back
        limit = f" LIMIT {skip}{gen.sql(this, 'expression')}"
        this = this.this
    separator = gen.sql(node, "separator") or "','"
    return f"GROUP_CONCAT({gen.sql(this)} SEPARATOR {separator}{limit})"


def _system_time(gen: Generator, node: exp.Version) -> str:
    kind = node.text("kind")
    period = node.args.get("expression")
    if kind in ("FROM", "BETWEEN") and isinstance(period, exp.Tuple) and len(period.expressions) == 2:
        start, end = period.expressions
        return f"FOR SYSTEM_TIME {kind} {gen.sql(start)} {'TO' if kind == 'FROM' else 'AND'} {gen.sql(end)}"
    if kind in ("ALL", "AS OF"):
        return f"FOR SYSTEM_TIME {kind} {gen.sql(period)}".rstrip()
    return gen.version_sql(node)  # CONTAINED IN: not MariaDB's; the server refuses it


class MySQLFamily(MySQL):
    """MySQL as MySQL 8 and MariaDB both read it (the dialect mcpkit reads and writes for them)."""

    Parser = _Parser

    class Generator(MySQLGenerator):
        TRANSFORMS: ClassVar[dict[type[exp.Expr], Any]] = {
            **MySQLGenerator.TRANSFORMS,
            exp.RegexpLike: _regexp,
            exp.GroupConcat: _group_concat,
            exp.Median: lambda gen, node: gen.func("MEDIAN", node.this),
            exp.Version: _system_time,
        }

        def format_time(
            self,
            expression: exp.Expr,
            inverse_time_mapping: dict[str, str] | None = None,
            inverse_time_trie: dict[str, Any] | None = None,
        ) -> str | None:
            fmt = expression.args.get("format")
            if fmt is not None and not (isinstance(fmt, exp.Literal) and fmt.is_string):
                return self.sql(expression, "format")  # read as written: written as read
            return super().format_time(expression, inverse_time_mapping, inverse_time_trie)
