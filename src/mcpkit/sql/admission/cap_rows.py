"""Rewrite: cap the rows a query can return, in the query itself."""

from __future__ import annotations

from sqlglot import exp

__all__ = ["cap_rows"]


def _literal_int(node: exp.Expr | None) -> int | None:
    if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
        return int(node.this)
    return None


def cap_rows(tree: exp.Expr, limit: int | None = None) -> exp.Expr:
    """Make the database stop after `limit` rows, so a huge table costs a top-N, not a scan.

    A SELECT or set operation without a LIMIT gets `LIMIT limit` at its own level, so its ORDER BY
    stays where it is (MariaDB ignores ORDER BY in a derived table without LIMIT, and MySQL refuses
    duplicate column names there); a literal LIMIT n becomes LIMIT min(n, limit), the OFFSET kept.
    Anything else (FETCH FIRST, LIMIT ALL or an expression, VALUES) is wrapped:
    `SELECT * FROM (<q>) AS q LIMIT limit`.

    >>> import sqlglot
    >>> cap_rows(sqlglot.parse_one("SELECT a FROM t ORDER BY a"), 26).sql()
    'SELECT a FROM t ORDER BY a LIMIT 26'
    >>> cap_rows(sqlglot.parse_one("SELECT a FROM t LIMIT 5 OFFSET 2"), 26).sql()
    'SELECT a FROM t LIMIT 5 OFFSET 2'
    >>> cap_rows(sqlglot.parse_one("VALUES (1)", read="postgres"), 26).sql("postgres")
    'SELECT * FROM (VALUES (1)) AS q LIMIT 26'

    Args:
        tree: One admitted query.
        limit: Rows to allow (the row cap plus one, to tell whether more exist); None skips.

    Returns:
        The capped tree (a new root when wrapped).
    """
    if limit is None:
        return tree
    while isinstance(tree, exp.Subquery) and {k for k, v in tree.args.items() if v} == {"this"}:
        tree = tree.this
    if isinstance(tree, exp.Select | exp.SetOperation):
        current = tree.args.get("limit")
        if current is None:
            tree.set("limit", exp.Limit(expression=exp.Literal.number(limit)))
            return tree
        if isinstance(current, exp.Limit):
            n = _literal_int(current.expression)
            if n is not None:
                current.set("expression", exp.Literal.number(min(n, limit)))
                return tree
    if isinstance(tree, exp.Query):
        source = tree.subquery("q", copy=False)
    else:
        source = exp.Subquery(this=tree, alias=exp.TableAlias(this=exp.to_identifier("q")))
    wrapped: exp.Expr = exp.select("*").from_(source).limit(limit)
    return wrapped
