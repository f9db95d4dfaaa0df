"""Parameters in pattern positions: LIKE with literal wildcards, and no caller-written patterns elsewhere.

A value bound into `col LIKE :p` is still a pattern: `%` matches everything. So a parameter may
stand in a LIKE/ILIKE pattern only when it declares `like:` (prefix, suffix, contains, exact or
wildcards), only as the whole pattern (`col LIKE :p`), and the report then sends
`col LIKE :p ESCAPE '!'` with `%`, `_` and `!` in the value escaped (for `wildcards`, only the
escape character is, so the caller's `%` and `_` keep their meaning and nothing else does). The
escape is explicit because the engines differ without one: PostgreSQL and MySQL escape with
`\\`, SQLite has no escape at all.

Parameters in the well-known other pattern languages (regular expressions, `SIMILAR TO`, `GLOB`,
full-text queries) get a message naming them here; the check that decides is `positions`, an
allowlist of the places a plain parameter may stand, which refuses every reader not named here too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from sqlglot import exp

__all__ = ["ESCAPE", "LIKE_MODES", "like_problems", "like_value", "with_escape"]

LIKE_MODES: Final = ("prefix", "suffix", "contains", "exact", "wildcards")
ESCAPE: Final = "!"
_REGEXP_NODES: Final = tuple(
    cls for name, cls in vars(exp).items() if name.startswith("Regexp") and isinstance(cls, type)
)
_PATTERN_NODES: Final = (exp.SimilarTo, exp.Glob, exp.Match, exp.MatchAgainst, *_REGEXP_NODES)
_PATTERN_FUNCTIONS: Final = re.compile(
    r"(?i)regexp|rlike|glob|similar|match|^(?:websearch_)?to_tsquery$|^ts_rewrite$"
)


def like_value(mode: str, value: Any) -> Any:
    """The value to bind for a `like:` parameter (None stays None).

    >>> like_value("prefix", "50%_off!"), like_value("contains", "a"), like_value("wildcards", "a!%")
    ('50!%!_off!!%', '%a%', 'a!!%')
    """
    if not isinstance(value, str):
        return value
    escaped = value.replace(ESCAPE, ESCAPE * 2)
    if mode == "wildcards":
        return escaped
    escaped = escaped.replace("%", ESCAPE + "%").replace("_", ESCAPE + "_")
    return {"prefix": f"{escaped}%", "suffix": f"%{escaped}", "contains": f"%{escaped}%"}.get(mode, escaped)


def _placeholders(node: exp.Expr | None) -> list[str]:
    if node is None:
        return []
    found = [node] if isinstance(node, exp.Placeholder) else []
    return [p.name for p in (*found, *node.find_all(exp.Placeholder))]


def _is_like(node: exp.Expr) -> bool:
    return isinstance(node, exp.Like | exp.ILike)


def like_problems(tree: exp.Expr, like: Mapping[str, str]) -> list[str]:
    """Every misuse of a parameter in a pattern position (empty when the SQL is fine).

    >>> import sqlglot
    >>> t = sqlglot.parse_one("SELECT 1 FROM t WHERE a LIKE :p || '%' AND b ~ :q", read="postgres")
    >>> [problem[:45] for problem in like_problems(t, {})]
    ["parameter 'p' is used in a LIKE pattern: decl", "parameter 'q' is used in a regular-expression"]
    """
    problems: list[str] = []
    proper: set[int] = set()
    for node in tree.find_all(exp.Like, exp.ILike):
        pattern = node.expression
        escaped = isinstance(node.parent, exp.Escape)
        if escaped:
            problems += [
                f"parameter {name!r} is used in an ESCAPE clause" for name in _placeholders(node.parent)
            ]
        if isinstance(pattern, exp.Placeholder) and pattern.name in like:
            if escaped:
                problems.append(
                    f"parameter {pattern.name!r}: remove the ESCAPE clause; mcpkit adds ESCAPE '{ESCAPE}'"
                )
            proper.add(id(pattern))
            continue
        for name in _placeholders(pattern):
            if name in like:
                problems.append(
                    f"parameter {name!r} must be the whole pattern: write col LIKE :{name} "
                    "(mcpkit adds the % and the ESCAPE clause)"
                )
            else:
                problems.append(
                    f"parameter {name!r} is used in a LIKE pattern: declare it with like: prefix, suffix, "
                    f"contains, exact or wildcards, and write col LIKE :{name}"
                )
    other: list[exp.Expr] = [
        n
        for n in tree.find_all(exp.Expr)
        if isinstance(n, _PATTERN_NODES)
        or (isinstance(n, exp.Anonymous) and _PATTERN_FUNCTIONS.search(str(n.this)))
    ]
    for found in other:
        subject = found.this if isinstance(found, exp.Binary) or found.args.get("expression") else None
        inside = [
            name
            for arg, value in found.args.items()
            if not (subject is not None and arg == "this")
            for child in (value if isinstance(value, list) else [value])
            if isinstance(child, exp.Expr)
            for name in _placeholders(child)
        ]
        problems += [
            f"parameter {name!r} is used in a regular-expression, SIMILAR TO, GLOB or full-text pattern, "
            "which a caller could fill with wildcards; compare with = or use a like: parameter in LIKE"
            for name in dict.fromkeys(inside)
        ]
    for holder in tree.find_all(exp.Placeholder):
        if holder.name in like and id(holder) not in proper:
            problems.append(
                f"parameter {holder.name!r} is declared like: {like[holder.name]}, so it may only be the "
                f"pattern of LIKE or ILIKE: col LIKE :{holder.name}"
            )
    return list(dict.fromkeys(problems))


def with_escape(tree: exp.Expr, like: Mapping[str, str]) -> exp.Expr:
    """`tree` with `ESCAPE '!'` added to each `col LIKE :p` of a `like:` parameter.

    >>> import sqlglot
    >>> with_escape(sqlglot.parse_one("SELECT 1 FROM t WHERE a LIKE :p"), {"p": "prefix"}).sql()
    "SELECT 1 FROM t WHERE a LIKE :p ESCAPE '!'"
    """

    def add(node: exp.Expr) -> exp.Expr:
        if (
            _is_like(node)
            and isinstance(node.expression, exp.Placeholder)
            and node.expression.name in like
            and not isinstance(node.parent, exp.Escape)
        ):
            return exp.Escape(this=node.copy(), expression=exp.Literal.string(ESCAPE))
        return node

    return tree.transform(add)
