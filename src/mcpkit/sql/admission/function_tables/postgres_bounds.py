"""PostgreSQL 15: the searches and comparisons admission bounds by their operands' size
(`admission.bound_searches`), with the SQL of their guards."""

from __future__ import annotations

from typing import Final

from sqlglot import exp

from mcpkit.sql.admission.function_tables import GrowthBound, SearchBounds, SizeBound
from mcpkit.sql.admission.function_tables.postgres_builders import builders
from mcpkit.sql.admission.function_tables.postgres_collections import (
    SORTED_ELEMENTS,
    element_pairs,
    key_text,
    recorded_matches,
    sort_in_a_cast,
    sorted_elements,
    split_elements,
)
from mcpkit.sql.admission.function_tables.postgres_echoed import ECHOED, echo_excluded
from mcpkit.sql.admission.stored_column import stored_column

__all__ = ["SIZE_BOUNDS"]


def _byte_length(operand: exp.Expr) -> exp.Expr:
    # octet_length is int4: the product of two would overflow it
    return exp.cast(exp.Anonymous(this="octet_length", expressions=[operand]), "BIGINT")


def _value_bytes(value: exp.Expr) -> exp.Expr:
    # a string by its text (a compressed column counts whole); any other type up to four times
    # its text, as an array of bigint takes 8 bytes an element for its 2 of text ('1,')
    text = _byte_length(exp.cast(value.copy(), "TEXT"))
    other = exp.Mul(this=exp.Literal.number(4), expression=text.copy())
    return exp.Case(ifs=[exp.If(this=_type_is(value.copy(), "text"), true=text)], default=other)


def _extra_bytes(operand: exp.Expr) -> exp.Expr:
    # a character of n bytes adds n - 1: at least one per non-ASCII character
    octets = exp.Anonymous(this="octet_length", expressions=[operand])
    chars = exp.Anonymous(this="char_length", expressions=[operand.copy()])
    return exp.cast(exp.Sub(this=octets, expression=chars), "BIGINT")


# Fixed in pg_type.dat; an OID compare costs nothing per row. "text": text, varchar, bpchar, name
# and unknown (a literal), and every user type (OID 16384 and up), as citext and a domain over text
# reach pg_trgm's `text % text` by an implicit cast (measured by their text form). "input": what a
# cast parses as text, json as well (json::jsonb parses it again).
_TEXT_OIDS: Final = (25, 1043, 1042, 19, 705)
_TYPE_OIDS: Final = {
    "jsonb": (3802,),
    "text": _TEXT_OIDS,
    "input": (*_TEXT_OIDS, 114),
    # what an echoing call quotes (`postgres_echoed`): text, json, jsonb, text[], varchar[], name[], bpchar[]
    "echoed": (*_TEXT_OIDS, 114, 3802, 1009, 1015, 1003, 1014),
}
_FIRST_USER_OID: Final = 16384


def _type_is(operand: exp.Expr, name: str) -> exp.Expr:
    typed = exp.cast(
        exp.Anonymous(this="pg_typeof", expressions=[operand]), exp.DataType.build("oid", dialect="postgres")
    )
    oids = [exp.Literal.number(oid) for oid in _TYPE_OIDS[name]]
    test: exp.Expr = exp.EQ(this=typed, expression=oids[0]) if len(oids) == 1 else typed.isin(*oids)
    if name in ("text", "input", "echoed"):
        test = exp.or_(test, exp.GTE(this=typed.copy(), expression=exp.Literal.number(_FIRST_USER_OID)))
    return test


def _fail(cond: exp.Expr, marker: str) -> exp.Expr:
    # 22P02 on a marked text; built from `cond`, so constant folding cannot raise it while `cond` is false
    marked = exp.DPipe(this=exp.Literal.string(f"{marker} "), expression=exp.cast(cond, "TEXT"))
    return exp.EQ(this=exp.cast(marked, "INT"), expression=exp.Literal.number(0))


# Measured on PostgreSQL 15 (docs/security.md): text_position (strpos, position, replace, split_part,
# string_to_array/table) about 3e9 compares/s, LIKE/ILIKE about 8e8, translate about 1.5e8 pairs/s;
# none checks for interrupts inside its loop.
_SEARCH: Final = 500_000_000
_CALLS: Final = {
    "position": SizeBound("this", "substr", _SEARCH),  # strpos, position(... IN ...)
    "replace": SizeBound("this", "expression", _SEARCH),
    "split_part": SizeBound("this", "delimiter", _SEARCH),
    "string_to_array": SizeBound("this", "expression", _SEARCH),
    "string_to_table": SizeBound("#0", "#1", _SEARCH, wrap_argument=True),
    "translate": SizeBound("this", "from_", 30_000_000),
    # btrim/ltrim/rtrim(s, chars), TRIM(... chars FROM s): a scan of `chars` per character
    # trimmed, about 3e8 pairs/s (red team pg13 F8, pg14 F11: 6 MB x 5 KB ran 90 s past 2 s)
    "trim": SizeBound("this", "expression", 100_000_000),
    # pg_trgm (allowed above): word_similarity matches each trigram window of one string against
    # the other, about 1.4e9 pairs/s; similarity is near-linear but sorts both trigram sets
    # (red team pg14 F5: word_similarity over 660 KB ran 310 s past a 2 s timeout)
    "word_similarity": SizeBound("#0", "#1", 300_000_000),
    "strict_word_similarity": SizeBound("#0", "#1", 300_000_000),
    "similarity": SizeBound("#0", "#1", 100_000_000_000),
    # normalize(s[, form]), is_normalized(s[, form]): combining marks out of canonical order are
    # sorted by swapping neighbours, about 1e8 (extra bytes)^2/s; only non-ASCII characters are
    # marks (red team F6: 40,000 marks, 80 KB, ran 8 s past a 1 s timeout)
    "normalize": SizeBound("this", "this", 30_000_000, multibyte=True),
    "is_normalized": SizeBound("#0", "#0", 30_000_000, multibyte=True),
    # regexp_split_to_array/_table record every match of the whole text before answering, and a
    # pattern may match at every character ('', '.', 'a' over 'aaa...'): about 75 and 15 bytes of
    # memory per character, 40M characters/s with no interrupt check (red team rt15pg F9: 100M
    # characters took 780 MB and ran 6 s past the answer). Bounded by the text's bytes, squared.
    "regexp_split_to_array": SizeBound("#0", "#0", 2_000_000**2),
    "regexp_split_to_table": SizeBound("#0", "#0", 10_000_000**2, wrap_argument=True),
}
_LIKE: Final = SizeBound("this", "expression", 150_000_000)
# Array and jsonb containment, overlap and key tests compare element by element in nested loops
# and check no interrupt (red team pg14 F5: jsonb @> over 100,000 elements ran 72 s past a 2 s
# timeout; arrays && 20 s): measured on their text form, about 7e9 byte pairs/s. One compare's
# cost is the element type's, which bytes do not show (issue 10): `{0,...,0,1} @> {1,...,1}`
# compares about 1e8 int4 pairs/s, 1e7 of text or numeric, 1.6e7 of a jsonb array's scalars,
# 2.2e6 of jsonb[] or record[] (2 bytes of text an element: 2e9 byte pairs were minutes of jsonb[]).
# So element pairs (commas in the text form, plus one) are capped too, weighted per compare.
_PAIRS: Final = 25_000_000  # about half a second at each weight (`postgres_collections.element_pairs`)
_CONTAINMENT: Final = SizeBound("this", "expression", 2_000_000_000, as_text=True, elements=_PAIRS)


def _trigram(function: str, typed: str | None = None) -> SizeBound:
    # an operator of pg_trgm runs its function's search: the function's budget, on the text form
    return SizeBound("this", "expression", _CALLS[function].budget, as_text=True, typed=typed)


# Operators by name, whatever their schema (pg_trgm's sits where its extension was created): the
# bound of the search each one runs, or None when reviewed as cheap. `OPERATOR(s.op)` of another
# name outside pg_catalog is refused (red team: pg_trgm's `<<->` ran minutes past the timeout).
_OPERATORS: Final[dict[str, SizeBound | None]] = {
    **dict.fromkeys(["~~", "!~~", "~~*", "!~~*"], _LIKE),  # LIKE and ILIKE (red team pg14 F10)
    **dict.fromkeys(["@>", "<@", "&&", "?&", "?|"], _CONTAINMENT),
    # jsonb - text[] compares every key of the object with every element of the array, no interrupt
    # check (red team F2: 60,000 x 60,000 ran 4.8 s past a 2 s timeout); `-` on anything else is left
    "-": SizeBound("this", "expression", 2_000_000_000, as_text=True, typed="jsonb", elements=_PAIRS),
    # pg_trgm: `%` and `<->` are similarity (and modulo, geometric or vector distance on other types)
    "%": _trigram("similarity", "text"),
    "<->": _trigram("similarity", "text"),
    **dict.fromkeys(["<%", "%>", "<<->", "<->>"], _trigram("word_similarity")),
    **dict.fromkeys(["<<%", "%>>", "<<<->", "<->>>"], _trigram("strict_word_similarity")),
    # pgvector's distances (similar_rows writes them as OPERATOR(schema.op)): linear in the dimensions
    **dict.fromkeys(["<=>", "<#>", "<+>", "<~>", "<%>"], None),
}
# The operators sqlglot parses into nodes of their own.
_INFIX: Final[dict[type[exp.Expr], str]] = {
    exp.ArrayContainsAll: "@>",
    exp.ArrayContainedBy: "<@",
    exp.ArrayOverlaps: "&&",
    exp.JSONBContainsAllTopKeys: "?&",
    exp.JSONBContainsAnyTopKeys: "?|",
    exp.Sub: "-",
    exp.Mod: "%",
    exp.Distance: "<->",
}
# Casts of text whose input function parses with no interrupt check (red team rt15pg F8; measured
# in docs/security.md): about a quarter second of each, in bytes of the text cast. jsonb and
# hstore sort and dedupe their keys (a 52 MB object ran 5 s past a 1 s timeout); a range or
# multirange leaks about 5 KB per range parsed (370 times its text: 70 MB took 20 GB, OOM-killed);
# xml (libxml) about 20 MB/s and 35 times its text; arrays about 100 MB/s; json 250 MB/s.
_SORTED_KEYS: Final = 2_000_000
_RANGES: Final = 256_000
_CAST_BUDGETS: Final = {
    exp.DataType.Type.JSONB: _SORTED_KEYS,
    exp.DataType.Type.HSTORE: _SORTED_KEYS,
    exp.DataType.Type.JSON: 64_000_000,
    exp.DataType.Type.XML: 4_000_000,
    exp.DataType.Type.ARRAY: 25_000_000,
    **{t: _RANGES for t in exp.DataType.Type if t.name.endswith("RANGE")},  # and MULTIRANGE
}
# User types known cheap to parse (citext is text; pgvector's are capped at 16,000 dimensions); any
# other (hstore by a qualified name, tsquery, a domain over jsonb) gets the sorted-keys budget. The
# cheap ones still quote their input when it fails: guarded at 1 MB like any other (below).
_CHEAP_USER_TYPES: Final = frozenset(["citext", "vector", "halfvec", "sparsevec", "tsvector"])


# A failed input conversion quotes its whole input in the error, which libpq and psycopg copy
# about eight times in the client: `repeat('x', 50000000)::int` took the mcpkit process from 33 MB
# to 495 MB (red team rt15pg F5; 200 MB: 1.7 GB). Every built-in type's input function but a
# string's quotes its input, or json's bad token (measured over pg_type: oid, point, regtype,
# macaddr, interval, tsquery, ...; red team pg17 F3), and no valid text of a type that is not a
# string is near 1 MB (a numeric's longest is about 147 KB): a computed text past it is refused
# before it is parsed, whatever the type. A column of a table is left as written: an expression
# index on `col::date` must still match (a column of a CTE or derived table is computed text).
_QUOTED_INPUT: Final = 1_000_000
_STRINGS: Final = frozenset(
    {*exp.DataType.TEXT_TYPES, exp.DataType.Type.BPCHAR, exp.DataType.Type.VARBINARY}  # and bytea
)
_STRING_USER_TYPES: Final = frozenset(["citext", "refcursor"])


def _user_type(to: exp.DataType) -> str:
    kind = to.args.get("kind")
    name = kind.name if isinstance(kind, exp.Expr) else str(kind or "")
    return name.rpartition(".")[2].lower()


def _parse_budget(to: exp.DataType, value: exp.Expr) -> int | None:
    """The budget of a type whose input function itself is slow, or None."""
    if to.this == exp.DataType.Type.USERDEFINED:
        return None if _user_type(to) in _CHEAP_USER_TYPES else _SORTED_KEYS
    budget = _CAST_BUDGETS.get(to.this)
    for element in to.expressions if to.this == exp.DataType.Type.ARRAY else ():
        inner = _parse_budget(element, value) if isinstance(element, exp.DataType) else None
        if budget is not None and inner is not None:  # each element is parsed as its own type
            budget = min(budget, inner)
    return budget


def _cast_budget(to: exp.Expr, value: exp.Expr) -> int | None:
    if not isinstance(to, exp.DataType):  # oid, regclass, regtype, ...: sqlglot's ObjectIdentifier
        return None if stored_column(value) else _QUOTED_INPUT
    parsed = _parse_budget(to, value)
    if parsed is not None:
        return min(parsed, _QUOTED_INPUT)
    if to.this in _STRINGS or (
        to.this == exp.DataType.Type.USERDEFINED and _user_type(to) in _STRING_USER_TYPES
    ):
        return None
    return None if stored_column(value) else _QUOTED_INPUT


# A call of one argument named after a type is a cast to it, run through the type's input function
# for a text (PostgreSQL's "function-style cast", Type Conversion: Functions): `int4(repeat('x',
# 5e7))` put its 50 MB input in the error (mcpkit 512 MB), `xml(repeat(...))` took a backend to
# 2.8 GB (red team pg15 F3). Each is sized as the CAST it is. (`interval`, `time`, `timestamp` are
# callable so only when quoted.)
_FUNCTION_CASTS: Final = frozenset(
    [
        "bool",
        "int2",
        "int4",
        "int8",
        "float4",
        "float8",
        "numeric",
        "date",
        "time",
        "timetz",
        "timestamp",
        "timestamptz",
        "interval",
        "money",
        "bit",
        "varbit",
        "uuid",
        "inet",
        "cidr",
        "macaddr",
        "macaddr8",
        "xml",
        "json",
        "jsonb",
        "hstore",
        "tsvector",
        "tsquery",
        "int4range",
        "int8range",
        "numrange",
        "tsrange",
        "tstzrange",
        "daterange",
        "int4multirange",
        "int8multirange",
        "nummultirange",
        "tsmultirange",
        "tstzmultirange",
        "datemultirange",
    ]
)

# Calls that build a value many times their arguments: PostgreSQL caps a value at 1 GB, but every
# value a row builds stays until the row is done, so several add up (red team rt16 F8:
# array_to_string(array_fill(big, ARRAY[900]), '') took a backend to 3.8 GB, three such terms
# 3.2 GB against 1.3 GB for one; repeat(big, 900) 1 GB). Each is capped at 64 MB before it runs.
_BUILT: Final = 64 * 1024 * 1024


def _bigint(value: exp.Expr) -> exp.Expr:
    return exp.Greatest(this=exp.cast(value.copy(), "BIGINT"), expressions=[exp.Literal.number(0)])


def _times(call: exp.Expr) -> exp.Expr | None:
    times = call.args.get("times")
    if isinstance(times, exp.Literal) and times.is_int:
        return exp.Literal.number(max(int(times.this), 0))
    return _bigint(times) if isinstance(times, exp.Expr) else None


def _padded(call: exp.Expr) -> exp.Expr | None:
    # lpad/rpad answer `n` characters, up to 4 bytes each
    n = call.args.get("expression")
    if isinstance(n, exp.Literal) and n.is_int:
        return exp.Literal.number(4 * max(int(n.this), 0))
    return exp.Mul(this=exp.Literal.number(4), expression=_bigint(n)) if isinstance(n, exp.Expr) else None


def _filled(call: exp.Expr) -> exp.Expr | None:
    # array_fill(value, dims): one copy of value per element, its text and up to 8 bytes (a
    # bigint's 1 is one character of text, 8 in the array; a text element has a 4-byte header)
    if len(call.expressions) < 2:
        return None
    value, dims = call.expressions[0], call.expressions[1]
    if isinstance(dims, exp.Cast):
        dims = dims.this
    size = exp.Anonymous(this="octet_length", expressions=[exp.cast(value.copy(), "TEXT")])
    count: exp.Expr = exp.Literal.number(1)
    for dim in dims.expressions if isinstance(dims, exp.Array) else [dims]:
        step: exp.Expr = exp.Literal.number(1 << 27)  # computed: as large as a dimension may be
        if isinstance(dim, exp.Literal) and dim.is_int:
            step = exp.Literal.number(max(int(dim.this), 0))
        count = exp.Mul(this=count, expression=step)
    each = exp.paren(exp.Add(this=exp.cast(size, "BIGINT"), expression=exp.Literal.number(8)), copy=False)
    return exp.Mul(this=each, expression=exp.paren(count, copy=False))


def _replaced(call: exp.Expr) -> exp.Expr | None:
    # each match (at least one character) becomes the replacement; regexp_replace with 'g' and an
    # empty pattern matches at every position
    replacement = call.args.get("replacement")
    if not isinstance(replacement, exp.Expr):
        return None
    if isinstance(call, exp.RegexpReplace):  # without 'g', one match only
        flags = call.args.get("modifiers")
        if flags is None or (isinstance(flags, exp.Literal) and "g" not in flags.this):
            return None
    if isinstance(replacement, exp.Literal) and replacement.is_string and len(replacement.this.encode()) <= 1:
        return None if isinstance(call, exp.Replace) else exp.Literal.number(2)
    length = exp.cast(exp.Anonymous(this="octet_length", expressions=[replacement.copy()]), "BIGINT")
    return exp.Add(this=length, expression=exp.Literal.number(1))


_GROWTHS: Final = {
    "string_to_array": GrowthBound("this", split_elements, _BUILT),
    "regexp_matches": GrowthBound("#0", recorded_matches, _BUILT, wrap_argument=True),
    "regexp_count": GrowthBound("this", recorded_matches, _BUILT),
    "regexp_instr": GrowthBound("this", recorded_matches, _BUILT),
    "regexp_substr": GrowthBound("this", recorded_matches, _BUILT),
    "jsonb_object": GrowthBound("", sorted_elements, SORTED_ELEMENTS),
    "hstore": GrowthBound("", key_text, _SORTED_KEYS, any_schema=True),  # in its extension's schema
    "repeat": GrowthBound("this", _times, _BUILT),
    "lpad": GrowthBound("", _padded, _BUILT),
    "rpad": GrowthBound("", _padded, _BUILT),
    "array_fill": GrowthBound("", _filled, _BUILT),
    "replace": GrowthBound("this", _replaced, _BUILT),
    "regexp_replace": GrowthBound("this", _replaced, _BUILT),
    **builders(_BUILT),
}


SIZE_BOUNDS: Final = SearchBounds(
    calls=_CALLS,
    growths=_GROWTHS,
    like=_LIKE,
    ilike=_LIKE,
    byte_length=_byte_length,
    extra_bytes=_extra_bytes,
    type_is=_type_is,
    fail=_fail,
    operators=_OPERATORS,
    infix=_INFIX,
    builtin_schema="pg_catalog",
    # pgvector's types, which sqlglot reads as user-defined: a cast to one is no string
    not_text=frozenset(["vector", "halfvec", "sparsevec"]),
    cast_budget=_cast_budget,
    function_casts=_FUNCTION_CASTS,
    echoed_inputs=ECHOED,
    echoed_budget=_QUOTED_INPUT,
    echo_excluded=echo_excluded,
    chain_budget=_BUILT,
    holds_operands=True,
    value_bytes=_value_bytes,
    element_pairs=element_pairs,
    rewrite=sort_in_a_cast,
    folds_constants=True,
    varying=frozenset(
        [
            "random",
            "random_normal",
            "clock_timestamp",
            "timeofday",
            "gen_random_uuid",
            "gen_random_bytes",
            "uuid_generate_v1",
            "uuid_generate_v1mc",
            "uuid_generate_v4",
        ]
    ),
)
"""The string searches admission bounds (`mcpkit.sql.admission.bound_searches`)."""
