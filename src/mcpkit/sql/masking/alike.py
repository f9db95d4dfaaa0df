"""Which values of an expression print alike whenever they compare equal (red teams rt35a F4, F5; rt35b F5).

Where a database keeps one representative of values that compare equal (min/max, DISTINCT, GROUP
BY, UNION, percentile_disc, mode), it keeps the first or last one scanned; if equal values can
print differently (PostgreSQL numeric 1.0 = 1.00, interval '1 day' = '24:00:00', float8 -0 = 0,
citext; MariaDB's collations ignoring case, accents and trailing spaces), the printed answer names
a row by its place in the scan, which can follow a masked column. `alike` says when that cannot
happen; `stored` marks a column read straight from a table that is left as it is: on PostgreSQL
only of a type whose equal values print alike (a join lets the agent pick whose numeric 1.0 or 1.00
a group keeps, rtA F5), on MariaDB any (its collations: the documented residual).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from sqlglot import exp

from mcpkit.sql.dialects import sent_dialect
from mcpkit.sql.masking.defining import defining, set_branches
from mcpkit.sql.masking.jumps import unjumped
from mcpkit.sql.masking.taint import REF
from mcpkit.sql.masking.ties import plain_type
from mcpkit.sql.profiles import profile_class

__all__ = [
    "Facts",
    "Sources",
    "alike",
    "covered",
    "defining",
    "facts_of",
    "set_branches",
    "sources",
    "stored",
]


@dataclass(frozen=True)
class Facts:
    """Per engine: which results print alike when equal."""

    numbers_alike: bool
    """Every number prints alike when equal: MariaDB gives an expression one static scale, and
    prints float -0 as 0; PostgreSQL's numeric keeps each value's scale, its float8 prints -0."""
    text_casts: re.Pattern[str]
    """Cast targets whose equal values are byte-equal (PostgreSQL's text in its default,
    deterministic collation; MariaDB's BINARY)."""
    ordered_picks: bool
    """min/max take an ORDER BY, which then picks the representative of ties (PostgreSQL)."""
    casts_keep_collation: bool = False
    """A text cast keeps its input's collation, maybe nondeterministic (PostgreSQL, rt36 F5)."""
    signed_zeros: bool = False
    """Numbers alike hold for integers and decimals only: a double (a literal with an exponent, a
    float column, POW, ...) has -0 = 0, which ATAN2 tells apart (MariaDB; red team rtB F4)."""
    stored_types: re.Pattern[str] | None = None
    """The declared types of a column read from a table whose equal values print alike; None:
    every such column counts as alike (MariaDB's collations: the documented residual)."""
    binary_text: re.Pattern[str] = re.compile(r"(?!)")
    """Declared types of a column that `x COLLATE BINARY` makes byte-exact (SQLite: text affinity)."""


# SQLite columns as `sqlite_collations.stored_forms` reflects them: not COLLATE NOCASE/RTRIM, BLOB
# affinity (no type: 1 and 1.0 kept as written) nor ANY
_SQLITE: Final = re.compile(
    r"(?!.*\bCOLLATE\s+\"?(?!BINARY\b))(?!\s*ANY\b)(?=.*(INT|CHAR|CLOB|TEXT|REAL|FLOA|DOUB)|(?!.*BLOB)\s*\S)",
    re.IGNORECASE,
)
# SQLite's text affinity (no INT before CHAR, CLOB or TEXT): only text, blobs or NULL are stored
_TEXT: Final = re.compile(r"(?!.*INT)(?=.*(CHAR|CLOB|TEXT))", re.IGNORECASE)
# Per engine (`Profile.name`); an engine not listed gets the strictest facts.
_FACTS: Final = {
    "PostgreSQL": Facts(
        False,
        re.compile(r"(text|varchar|character varying|name)\b", re.IGNORECASE),
        True,
        casts_keep_collation=True,
        # not numeric (1.0 = 1.00), float (-0 = 0), interval, jsonb, citext, a domain, an unknown type:
        # a join picks which row's value stands for its equals (red team rtA F5)
        # and not under a collation other than C, POSIX or the default: a nondeterministic one makes
        # 'a' = 'A' (review R15: the same join picked which customer's row the group kept)
        stored_types=re.compile(
            r"(?!.*\bCOLLATE\b(?!\s+(pg_catalog\.)?(?-i:\"?(C|POSIX|ucs_basic|default)\"?)\s*$))"
            r"\s*(text|varchar|character varying|character|char|name|uuid|bytea|money|inet|cidr|macaddr8?"
            r"|bit|bit varying|varbit|time|oid)\b(?![-$])",
            re.IGNORECASE,
        ),
    ),
    "MySQL/MariaDB": Facts(True, re.compile(r"(var)?binary\b", re.IGNORECASE), False, signed_zeros=True),
    # 1 = 1.0, -0.0 = 0.0, 'b' = 'B' (NOCASE), 'b' = 'b ' (RTRIM): min/max kept the first scanned (rth
    # F4); a BLOB cast is byte-exact; a stored column only of a type with an affinity and no collation
    "SQLite": Facts(
        False, re.compile(r"blob\b", re.I), False, signed_zeros=True, stored_types=_SQLITE, binary_text=_TEXT
    ),
}
_STRICT: Final = Facts(False, re.compile(r"(?!)"), False)
_NUMERIC_TYPE: Final = re.compile(r"\s*(decimal|numeric|float|double|real|dec\b|fixed)", re.IGNORECASE)
_INTEGRAL_FUNCS: Final = (
    exp.Count, exp.Length, exp.Year, exp.Month, exp.Day, exp.DateDiff, exp.Sign, exp.Ascii,
    exp.DateTrunc, exp.TimestampTrunc, exp.Date, exp.CurrentDate, exp.Week, exp.Quarter,
    exp.DayOfWeek, exp.DayOfYear, exp.DayOfMonth, exp.UnixToTime, exp.BitLength, exp.CurrentTimestamp,
)  # fmt: skip
_NUMBERS: Final = (
    exp.Count, exp.Length, exp.Year, exp.Month, exp.Day, exp.DateDiff, exp.Sign, exp.Ascii, exp.Week,
    exp.Quarter, exp.DayOfWeek, exp.DayOfYear, exp.DayOfMonth, exp.BitLength, exp.Extract,
)  # fmt: skip
_NUMBER_FUNCS: Final = (
    exp.Round, exp.Abs, exp.Floor, exp.Ceil, exp.Sum, exp.Avg, exp.Ln, exp.Log, exp.Exp, exp.Sqrt, exp.Pow,
    exp.Div, exp.Stddev, exp.StddevPop, exp.StddevSamp, exp.Variance, exp.VariancePop,
)  # fmt: skip
_DOUBLE_FUNCS: Final = (
    exp.Ln, exp.Log, exp.Exp, exp.Sqrt, exp.Pow, exp.Stddev, exp.StddevPop, exp.StddevSamp, exp.Variance,
    exp.VariancePop,
)  # fmt: skip
_DOUBLE_TYPE: Final = re.compile(r"\s*(float|double|real)", re.IGNORECASE)
_ARITHMETIC: Final = (exp.Add, exp.Sub, exp.Mul, exp.Mod, exp.Neg, exp.Paren, exp.BitwiseAnd, exp.BitwiseOr)
_BRANCHING: Final = (exp.Case, exp.Coalesce, exp.If, exp.Greatest, exp.Least, exp.Nullif)


@dataclass(frozen=True)
class Sources:
    """What the columns of a query are, by marker (`taint.REF`)."""

    declared: Mapping[int, str]
    """Column marker -> declared type, for the columns read straight from a table."""
    integral: frozenset[int] = frozenset()
    """Markers of derived-table or CTE columns whose every definition is `_integral` (rt36 F9: only
    such a column may stand among others, e.g. as a CASE branch)."""
    scaled: frozenset[int] = frozenset()
    """Markers of derived-table or CTE columns of one definition of one display scale (`_scaled`)."""
    whole: frozenset[int] = frozenset()
    """Markers of derived-table or CTE columns alike on their own only: one constant, or exact casts."""
    copies: frozenset[int] = frozenset()
    """Markers of columns of a derived table or CTE that copy a column read from a table."""

    def get(self, marker: object) -> str | None:
        """The declared type of the column `marker`, if read straight from a table."""
        return self.declared.get(marker) if isinstance(marker, int) else None


def covered(dialect: str) -> bool:
    """Whether the engine's facts are known (`_FACTS`; others are left open, docs/masking.md)."""
    return profile_class(dialect).name in _FACTS


def facts_of(dialect: str) -> Facts:
    """The engine's facts (`_FACTS`)."""
    return _FACTS.get(profile_class(dialect).name, _STRICT)


def stored(node: exp.Expr, types: Sources, dialect: str) -> bool:
    """A column read straight from a table (or a copy of one) whose equal-but-different values are
    left as the data's (`Facts.stored_types`): on PostgreSQL only a type whose equal values print
    alike, since a join to any readable table holding 1.0 and 1.00 lets the agent choose which
    row's value a group keeps (red team rtA F5: the whole e-mail ranking in 65 calls)."""
    node = unjumped(node)
    marker = node.meta.get(REF) if isinstance(node, exp.Column) else None
    if marker in types.copies:
        return True  # checked where the copy was made (`sources`)
    if marker not in types.declared:
        return False
    pattern = facts_of(dialect).stored_types
    return pattern is None or bool(pattern.match(types.get(marker) or ""))


def _branches(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.Case):
        return [i.args["true"] for i in node.args.get("ifs") or []] + [
            d for d in [node.args.get("default")] if d is not None
        ]
    if isinstance(node, exp.If):
        return [v for v in (node.args.get("true"), node.args.get("false")) if v is not None]
    if isinstance(node, exp.Nullif):
        return [node.this]
    return [node.this, *node.expressions]


def _integral(node: exp.Expr, types: Sources, facts: Facts) -> bool:
    """Values of one kind that print one way: integers, booleans, dates and timestamps."""
    if isinstance(node, exp.Null | exp.Boolean):
        return True
    if isinstance(node, exp.Literal):
        return node.is_int or (facts.numbers_alike and node.is_number and not _double_literal(node, facts))
    if isinstance(node, exp.Column):
        if node.meta.get(REF) in types.integral:
            return True
        declared = types.get(node.meta.get(REF))
        if facts.signed_zeros and _DOUBLE_TYPE.match(declared or ""):
            return False
        return plain_type(declared) or (facts.numbers_alike and bool(_NUMERIC_TYPE.match(declared or "")))
    if isinstance(node, exp.Cast):
        return isinstance(node.this, exp.Null) or plain_type(node.to.sql("postgres"))
    if isinstance(node, exp.UnixToTime) and node.args.get("format") is not None:
        return False  # MariaDB FROM_UNIXTIME(x, format) is text (rt36 F6)
    if isinstance(node, exp.DateTrunc | exp.TimestampTrunc):
        # the result's type follows the argument's: date_trunc of an interval keeps '1 day' (rt36 F1)
        return _integral(node.this, types, facts) and not _timespan(node.this)
    if (
        isinstance(node, exp.Sub)
        and not facts.numbers_alike
        and (_temporal(node.this, types) or _temporal(node.expression, types))
    ):
        return False  # timestamp - timestamp is an interval: '1 day' = '24:00:00' (rt36 F10)
    if isinstance(node, _INTEGRAL_FUNCS):
        return True
    if facts.numbers_alike and isinstance(node, _NUMBER_FUNCS):
        if not facts.signed_zeros:
            return True
        double = isinstance(node, _DOUBLE_FUNCS)  # a double, or one where its argument is (rtB F4)
        return not double and all(_integral(a, types, facts) for a in node.iter_expressions())
    if isinstance(node, _ARITHMETIC):
        if facts.numbers_alike and not facts.signed_zeros:
            return True  # arithmetic is numeric whatever its operands
        return all(_integral(a, types, facts) for a in (node.this, node.args.get("expression")) if a)
    if isinstance(node, exp.Extract):
        # PostgreSQL's extract is numeric, its scale following the source type (rt36 F2)
        return facts.numbers_alike
    if isinstance(node, _BRANCHING):
        return all(_integral(b, types, facts) for b in _branches(node))
    return False


_SCALED_TYPE: Final = re.compile(r"\s*(numeric|decimal)\s*\(\s*\d+\s*,\s*\d+\s*\)", re.IGNORECASE)
_BARE_NUMERIC: Final = re.compile(r"\s*(numeric|decimal)\s*$", re.IGNORECASE)


_TEMPORAL_TYPE: Final = re.compile(r"\s*(date|time|timestamp|datetime|interval)", re.IGNORECASE)


def _temporal(node: exp.Expr, types: Sources) -> bool:
    """A date, time, timestamp or interval (or not surely none): its difference is no integer."""
    if isinstance(node, exp.Paren):
        return _temporal(node.this, types)
    if isinstance(node, exp.Literal | exp.Null):
        return False
    if isinstance(node, exp.Column):
        marker = node.meta.get(REF)
        return marker not in types.declared or bool(_TEMPORAL_TYPE.match(types.get(marker) or ""))
    if isinstance(node, exp.Cast):
        return bool(_TEMPORAL_TYPE.match(node.to.sql("postgres")))
    if isinstance(node, _ARITHMETIC):
        return any(_temporal(a, types) for a in (node.this, node.args.get("expression")) if a)
    if isinstance(node, _BRANCHING):
        return any(_temporal(b, types) for b in _branches(node))
    return not isinstance(node, _NUMBERS)


def _timespan(node: exp.Expr) -> bool:
    return isinstance(node, exp.Interval) or (
        isinstance(node, exp.Cast) and node.to.sql("postgres").lower().startswith("interval")
    )


def _double_literal(node: exp.Literal, facts: Facts) -> bool:
    """A number literal the engine reads as a double (MariaDB: `1e0`, `-1e0 * 0e0` is -0)."""
    return facts.signed_zeros and node.is_number and "e" in node.name.casefold()


def _scaled(node: exp.Expr, types: Sources, facts: Facts) -> bool:
    """Numbers of one display scale for every row (PostgreSQL numeric: a literal, a declared scale,
    integers, and + - * over those; not / nor round(x, n), whose scale follows the values)."""
    if isinstance(node, exp.Literal):
        return node.is_number and not _double_literal(node, facts)
    if isinstance(node, exp.Column) and (
        node.meta.get(REF) in types.scaled or _SCALED_TYPE.match(types.get(node.meta.get(REF)) or "")
    ):
        return True
    if isinstance(node, exp.Cast):
        to = node.to.sql("postgres")
        if _BARE_NUMERIC.match(to):  # numeric keeps the scale it is given
            return _scaled(node.this, types, facts)
        return bool(_SCALED_TYPE.match(to))
    if isinstance(node, exp.Add | exp.Sub | exp.Mul):
        return _scaled(node.this, types, facts) and _scaled(node.expression, types, facts)
    if isinstance(node, exp.Neg | exp.Paren):
        return _scaled(node.this, types, facts)
    return _integral(node, types, facts)


def _uncollated(col: exp.Column, types: Sources, facts: Facts) -> bool:
    """A column of a type without a collation (a number, a date), so no text under a cast is collated."""
    marker = col.meta.get(REF)
    return (
        marker in types.integral
        or marker in types.scaled
        or _integral(col, types, facts)
        or (bool(_NUMERIC_TYPE.match(types.get(marker) or "")))
    )


def alike(node: exp.Expr, dialect: str, types: Sources) -> bool:
    """Whether equal values of `node` always print alike (no representative can tell rows apart).

    A constant; an integer, boolean, date or timestamp (column, cast, count, length, date_trunc of
    one, integer arithmetic and CASE over those); a number of one display scale (`_scaled`); on
    MariaDB any number; a cast to a byte-exact type with no COLLATE under it; a derived column by
    the reason its definition is alike (`Sources`). Unknown result types are not alike (rt36).
    A column read from a table of another type is not: see `stored`.
    """
    facts = facts_of(dialect)
    node = unjumped(node)
    if isinstance(node, exp.Literal):
        return True  # one constant: no other row prints it differently
    if isinstance(node, exp.Column) and node.meta.get(REF) in types.whole:
        return True
    if isinstance(node, exp.Cast) and facts.text_casts.match(node.to.sql(sent_dialect(dialect))):
        # the cast keeps an explicit COLLATE or a text column's collation, maybe nondeterministic (rt36 F5)
        return not facts.casts_keep_collation or (
            node.this.find(exp.Collate) is None
            and all(_uncollated(c, types, facts) for c in node.this.find_all(exp.Column))
        )
    if isinstance(node, exp.Collate) and node.expression.name.upper() == "BINARY":  # rtL L1
        column = unjumped(node.this.unnest())
        return isinstance(column, exp.Column) and bool(
            facts.binary_text.match(types.get(column.meta.get(REF)) or "")
        )
    if isinstance(node, exp.Paren):
        return alike(node.this, dialect, types)
    return _scaled(node, types, facts)


def sources(qualified: exp.Expr, dialect: str, declared: Mapping[int, str]) -> Sources:
    """The `Sources` of a qualified tree: columns of derived tables are traced to their definition."""
    integral: set[int] = set()
    scaled: set[int] = set()
    whole: set[int] = set()
    copies: set[int] = set()
    known = Sources(declared)
    # Innermost first: a derived column's definition may itself read a derived column.
    for col in reversed(list(qualified.find_all(exp.Column))):
        marker = col.meta.get(REF)
        if not isinstance(marker, int) or marker in declared:
            continue
        found = defining(col)
        facts = facts_of(dialect)
        # why a definition prints one way decides where its column may stand (rt36 F9)
        if found and all(_integral(d, known, facts) for d in found):
            integral.add(marker)
        elif len(found) == 1 and _scaled(found[0], known, facts):
            scaled.add(marker)
        elif len(found) == 1 and alike(found[0], dialect, known):
            whole.add(marker)
        elif found and all(stored(d, known, dialect) for d in found):
            copies.add(marker)
        known = Sources(declared, frozenset(integral), frozenset(scaled), frozenset(whole), frozenset(copies))
    return known
