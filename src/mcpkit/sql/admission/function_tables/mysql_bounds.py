"""MariaDB 10.11 (and MySQL 8): the searches and value-growing calls admission bounds by their
operands' size (`admission.bound_searches`), with the SQL of their guards."""

from __future__ import annotations

from typing import Final

from sqlglot import exp

from mcpkit.sql.admission.function_tables import PATHS_BOUND_MARKER, GrowthBound, SearchBounds, SizeBound

__all__ = ["SIZE_BOUNDS"]


def _byte_length(operand: exp.Expr) -> exp.Expr:
    return exp.Anonymous(this="OCTET_LENGTH", expressions=[operand])


def _fail(cond: exp.Expr, marker: str) -> exp.Expr:
    # error 1690 (BIGINT UNSIGNED out of range); its text quotes this expression, marker first (the
    # server cuts its messages at 512 bytes)
    marked = exp.Anonymous(this="OCTET_LENGTH", expressions=[exp.Literal.string(marker)])
    step = exp.Anonymous(this="LEAST", expressions=[marked, cond])
    overflow = exp.Add(this=exp.Literal.number(18446744073709551615), expression=step)
    return exp.EQ(this=exp.paren(overflow, copy=False), expression=exp.Literal.number(0))


def _match_limit(pattern: str, subject_bytes: exp.Expr) -> exp.Expr:
    # PCRE2 counts its match limit per start position, and an in-pattern (*LIMIT_MATCH=n) can only
    # lower the library's: n = budget / the subject's bytes caps the whole match, KILL or not. Past
    # it MariaDB answers "no match" with warning 1139, which `run` turns into a resource failure.
    if isinstance(subject_bytes, exp.Literal):
        return exp.Literal.string(f"(*LIMIT_MATCH={_MATCHES // max(int(subject_bytes.this), 1)}){pattern}")
    at_least_one = exp.Anonymous(this="GREATEST", expressions=[subject_bytes, exp.Literal.number(1)])
    per_start = exp.IntDiv(this=exp.Literal.number(_MATCHES), expression=at_least_one)
    parts = [
        exp.Literal.string("(*LIMIT_MATCH="),
        per_start,
        exp.Literal.string(f"){pattern}"),
        _compiled(pattern),
    ]
    return exp.Anonymous(this="CONCAT", expressions=parts)


def _compiled(pattern: str) -> exp.Expr:
    # '' (empty): MariaDB compiles a constant pattern when it prepares the statement (an invalid one
    # is error 1139), but answers an invalid pattern built per row with NULL and no warning. The
    # pattern above is built per row, so `t REGEXP '('` answered NULL (review R3): the pattern as
    # written, constant here, is compiled (over '': no backtracking) and fails the call first.
    check = exp.RegexpLike(this=exp.Literal.string(""), expression=exp.Literal.string(pattern))
    return exp.Anonymous(this="LEFT", expressions=[check, exp.Literal.number(0)])


def _converted_length(needle: exp.Expr, haystack: exp.Expr) -> exp.Expr:
    # CONCAT takes the haystack's character set (a literal needle coerces to it): ' ' is 4 bytes
    # beside a utf32 value, 1 beside utf8mb4
    empty = exp.Anonymous(this="LEFT", expressions=[haystack, exp.Literal.number(0)])
    return _byte_length(exp.Anonymous(this="CONCAT", expressions=[empty, needle]))


def _collation_cost(value: exp.Expr) -> exp.Expr:
    # Measured on MariaDB 10.11, LOCATE at a haystack x needle product of 4.9e7 (docs/security.md):
    # binary and *_bin 0.01-0.02 s; general_ci, unicode(_520)_ci, uca1400_ai_ci, 8-bit and language
    # *_ci up to 4x that (2-byte characters under general_ci); uca1400 *_as_*, *_cs, *_w2 (accent- or
    # case-sensitive, multi-level weights) 30-50x. A name this does not know costs the most.
    name = exp.Anonymous(this="COLLATION", expressions=[value])

    def like(pattern: str) -> exp.Expr:
        return exp.Like(this=name.copy(), expression=exp.Literal.string(pattern))

    binary = exp.or_(exp.EQ(this=name.copy(), expression=exp.Literal.string("binary")), like("%\\_bin"))
    plain = exp.and_(like("%\\_ci"), exp.Not(this=like("%\\_as\\_%")))
    return exp.Case(
        ifs=[
            exp.If(this=binary, true=exp.Literal.number(1)),
            exp.If(this=plain, true=exp.Literal.number(4)),
        ],
        default=exp.Literal.number(32),
    )


def _cost_factor(haystack: exp.Expr, needle: exp.Expr) -> exp.Expr:
    # each operand's own collation: the call compares in the one of them that wins coercion; a
    # literal needle (coercible) never wins over the haystack
    if isinstance(needle, exp.Literal) and needle.is_string:
        return _collation_cost(haystack)
    return exp.Anonymous(this="GREATEST", expressions=[_collation_cost(haystack), _collation_cost(needle)])


def _json_indent_factor(call: exp.Expr) -> exp.Expr | None:
    # JSON_DETAILED writes each value on its own line indented by depth x tab (tab at most 8): a
    # 3-byte `{},` becomes two lines, so each input byte yields at most (2/3)(8 depth + 1) + 1
    # bytes; 6 depth + 2 bounds that (measured: 161x at depth 31, tab 8). JSON_DEPTH is NULL for
    # a document that is not JSON, and JSON_DETAILED then answers NULL too.
    if not call.expressions:
        return None
    depth = exp.Anonymous(this="JSON_DEPTH", expressions=[call.expressions[0].copy()])
    per_level = exp.Mul(this=exp.Literal.number(6), expression=depth)
    return exp.Add(this=per_level, expression=exp.Literal.number(2))


def _json_extract_factor(call: exp.Expr) -> exp.Expr | None:
    # JSON_EXTRACT answers every value its paths match, with no size check: one path without `**`
    # at most the document (re-spaced: `[1,2]` as `[1, 2]`); each further path the document again;
    # a `**` path (or one computed at run time) each match's subtree, which holds the deeper
    # matches, so up to JSON_DEPTH copies of a byte (measured: 3.6 MB into 63 MB).
    paths = [p for p in (call.args.get("expression"), *call.expressions) if p is not None]
    wild = any(not isinstance(p, exp.JSONPath | exp.Literal) or "**" in p.sql("mysql") for p in paths)
    if len(paths) <= 1 and not wild:
        return None
    factor: exp.Expr = exp.Literal.number(2 * len(paths))
    if wild:
        depth = exp.Anonymous(this="JSON_DEPTH", expressions=[call.this.copy()])
        factor = exp.Mul(
            this=factor, expression=exp.paren(exp.Add(this=depth, expression=exp.Literal.number(1)))
        )
    return factor


def _search_paths_factor(call: exp.Expr) -> exp.Expr | None:
    # JSON_SEARCH(doc, 'all', ...) answers the path of every match, and a path holds every key above
    # its match: a 1-byte pattern over a 50 KB document under one 10 KB key answered 100 MB. A match
    # takes at least 3 bytes of the document and its path at most the document's keys plus an index
    # per level (MariaDB nests 32 deep), so matches x path <= bytes/3 x (bytes + 400). 'one' answers
    # one path.
    mode = call.expressions[1] if len(call.expressions) > 1 else None
    if isinstance(mode, exp.Literal) and mode.is_string and mode.this.casefold() == "one":
        return None
    document = call.expressions[0].copy()
    padded = exp.Add(this=_byte_length(document), expression=exp.Literal.number(400))
    return exp.IntDiv(this=exp.paren(padded, copy=False), expression=exp.Literal.number(3))


def _format_factor(call: exp.Expr) -> exp.Expr:
    # DATE_FORMAT and TIME_FORMAT answer each 2-byte specifier as up to a month or day name in the
    # session's lc_time_names, with no size check (a 10 MB format of `%W` answered 40 MB).
    return exp.Literal.number(16)


def _respaced_factor(call: exp.Expr) -> exp.Expr:
    # JSON_NORMALIZE writes numbers in full and JSON_LOOSE adds a space after each separator:
    # about 2.2x measured, with no size check
    return exp.Literal.number(3)


def _escaped_factor(call: exp.Expr) -> exp.Expr:
    # JSON_SET/INSERT/REPLACE/ARRAY_APPEND/ARRAY_INSERT, JSON_MERGE* and JSON_QUOTE answer their
    # arguments together, a string escaped (`"` as `\"`: twice its bytes), with no size check:
    # nested, each level doubles (four levels of JSON_MERGE_PRESERVE over 8 MB built 128 MB past
    # max_session_mem_used).
    return exp.Literal.number(2)


# Measured on MariaDB 10.11 (docs/security.md): LOCATE/INSTR/POSITION, SUBSTRING_INDEX and REPLACE's
# search about 2e9 compares/s, LIKE and JSON_SEARCH's LIKE match about 2e8, REPLACE's moves about
# 6e9 haystack^2/s, TRIM(TRAILING)'s rescans about 1e9 haystack^2/needle per s; none checks
# max_statement_time or KILL inside its loop.
_SEARCH: Final = 500_000_000
_LIKE: Final = 50_000_000
_TRIM: Final = 250_000_000
_PACKET: Final = 16 * 1024 * 1024  # max_allowed_packet's default: what REPEAT, CONCAT, CONVERT may build
_REGEX: Final = 250_000_000  # PCRE rescanning the rest of the subject: about 1e9 byte pairs/s
# PCRE2 backtracking steps (calls of its match(), about 44 ns each: 0.22 s) one regular expression
# may take over one subject
_MATCHES: Final = 5_000_000
_TRIM_BOUND: Final = SizeBound("this", "expression", _TRIM, removal=True)
_REGEX_BOUND: Final = SizeBound("this", "expression", _REGEX, pattern=True)
_JSON_DETAILED: Final = GrowthBound("#0", _json_indent_factor, _PACKET)
_JSON_JOINED: Final = GrowthBound("*", _escaped_factor, _PACKET)
_JSON_GROWTHS: Final = {
    "json_detailed": _JSON_DETAILED,
    "json_pretty": _JSON_DETAILED,
    "json_extract": GrowthBound("this", _json_extract_factor, _PACKET, PATHS_BOUND_MARKER),
    "json_quote": GrowthBound("#0", _escaped_factor, _PACKET),
    "json_normalize": GrowthBound("#0", _respaced_factor, _PACKET),  # rt16 F9: 14 MB into 31 MB
    "json_loose": GrowthBound("#0", _respaced_factor, _PACKET),
    "json_search": GrowthBound("#0", _search_paths_factor, _PACKET),
    "date_format": GrowthBound("format", _format_factor, _PACKET),
    "time_format": GrowthBound("#1", _format_factor, _PACKET),
    "make_set": GrowthBound("*", _escaped_factor, _PACKET),
    **dict.fromkeys(
        [
            "json_set",
            "json_insert",
            "json_replace",
            "json_array_append",
            "json_array_insert",
            "json_merge",
            "json_merge_preserve",
            "json_merge_patch",
        ],
        _JSON_JOINED,
    ),
}
SIZE_BOUNDS: Final = SearchBounds(
    calls={
        "locate": SizeBound("this", "substr", _SEARCH, collated=True),  # LOCATE, INSTR, POSITION(... IN ...)
        "replace": SizeBound(
            "this", "expression", _SEARCH, growth="replacement", growth_budget=1_500_000_000
        ),
        "substring_index": SizeBound("this", "delimiter", _SEARCH),
        "json_search": SizeBound("#0", "#2", _LIKE, collated=True),
        "trim": _TRIM_BOUND,  # TRIM([BOTH | TRAILING] ...); LEADING is cheap
        "rtrim": _TRIM_BOUND,
        "regexp_like": _REGEX_BOUND,  # REGEXP, RLIKE, NOT REGEXP
        "regexp_instr": _REGEX_BOUND,
        "regexp_substr": _REGEX_BOUND,
    },
    like=SizeBound("this", "expression", _LIKE, collated=True),
    ilike=None,
    byte_length=_byte_length,
    fail=_fail,
    varying=frozenset(["rand", "uuid", "uuid_short", "sysdate", "random_bytes", "sys_guid"]),
    growths=_JSON_GROWTHS,
    converted_length=_converted_length,
    cost_factor=_cost_factor,
    match_limit=_match_limit,
)
"""The string searches admission bounds (`mcpkit.sql.admission.bound_searches`)."""
