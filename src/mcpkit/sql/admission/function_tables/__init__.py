"""The reviewed function tables: per engine, the built-in functions an analyst gets, and why not the rest.

Each engine's table is a list of families. A family has a verdict and the reason for it:

- `allowed`: on the default allowlist. Exact names only, so the list is exactly what was reviewed.
- `absent`: reviewed and left out (no analytical use, server internals, catalog reading that
  `describe_table` covers, ...). The reason is what the refusal says; the operator may allow such a
  function by name (`--allow-function NAME`).
- `never`: breaks a promise the server makes (runs SQL from text, writes, burns transaction ids,
  reads other sessions' activity, signals, sleeps, locks, touches files, changes session settings).
  Names or `*` patterns. No option allows these: a server that ran them could not keep its
  read-only, no-side-effect promise.

Candidates were derived from the engines' own catalogs (PostgreSQL 15 `pg_proc`, MariaDB 10.11
`information_schema.SQL_FUNCTIONS` and its help tables, SQLite 3.40 `pragma_function_list`) and then
reviewed family by family; `tests/sql/test_sql_function_tables.py` checks every table against the
live catalogs (every catalog function is classified, every allowed name exists).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Final, Literal

from sqlglot import exp

__all__ = [
    "PATHS_BOUND_MARKER",
    "SEARCH_BOUND_MARKER",
    "SIZE_BOUND_MARKER",
    "Family",
    "FunctionTable",
    "GrowthBound",
    "RelationRule",
    "SearchBounds",
    "SizeBound",
    "Verdict",
    "family",
    "matches",
    "relation_rule",
]

Verdict = Literal["allowed", "absent", "never"]


def matches(name: str, patterns: Iterable[str]) -> bool:
    """Whether a lower-case function name is in a list of names and `prefix*` patterns.

    >>> matches("pg_sleep_for", ["pg_sleep*"])
    True
    >>> matches("lower", ["lo_*"])
    False
    >>> matches("pg_create_logical_replication_slot", ["pg_create_*_replication_slot"])
    True
    """
    return any(fnmatchcase(name, p) if "*" in p else name == p for p in patterns)


@dataclass(frozen=True)
class Family:
    """Functions reviewed together: `names` (lower case; `*` patterns outside `allowed`)."""

    name: str
    verdict: Verdict
    why: str
    names: frozenset[str]
    in_catalog: bool = True  # False: SQL syntax or a function of an optional extension

    def covers(self, name: str) -> bool:
        """Whether `name` belongs to this family."""
        return matches(name, self.names)


def family(name: str, verdict: Verdict, why: str, names: str, *, in_catalog: bool = True) -> Family:
    """A family from whitespace-separated names (the tables read like the review they are)."""
    members = frozenset(names.split())
    if verdict == "allowed" and any(n.endswith("*") for n in members):
        raise ValueError(f"allowed family {name!r} lists a pattern; allowlists name each function")
    return Family(name, verdict, why, members, in_catalog)


_DECIDED: Final = 4_096
_ORDER: Final[dict[Verdict, int]] = {"never": 0, "allowed": 1, "absent": 2}


@dataclass(frozen=True)
class FunctionTable:
    """One engine's reviewed families; `lookup` answers never first, then allowed, then absent."""

    engine: str
    families: tuple[Family, ...]
    _decided: dict[str, Family | None] = field(default_factory=dict, compare=False, repr=False)

    def lookup(self, name: str) -> Family | None:
        """The family that decides `name` (a lower-case, unqualified name), or None if unreviewed."""
        # Cached: a query's calls repeat their names, and a scan matches every pattern of every
        # family (the guards of a 60-branch UNION made 4,000 lookups, 2 s of the second pass).
        if name in self._decided:
            return self._decided[name]
        found = self._scan(name)
        if len(self._decided) < _DECIDED:  # names are the model's: keep at most this many
            self._decided[name] = found
        return found

    def _scan(self, name: str) -> Family | None:
        for verdict in ("never", "allowed", "absent"):
            for fam in self.families:
                if fam.verdict == verdict and fam.covers(name):
                    return fam
        return None

    @functools.cached_property
    def allowed(self) -> frozenset[str]:
        """Every name on the default allowlist."""
        return frozenset().union(*(f.names for f in self.families if f.verdict == "allowed"))

    @functools.cached_property
    def never(self) -> frozenset[str]:
        """Every never-allowed name and pattern."""
        return frozenset().union(*(f.names for f in self.families if f.verdict == "never"))

    def by_verdict(self) -> list[Family]:
        """The families, never first (for documentation)."""
        return sorted(self.families, key=lambda f: _ORDER[f.verdict])


@dataclass(frozen=True)
class RelationRule:
    """Relations no query may read: `names` (lower case, `prefix*` patterns, `*` for the whole
    schema) in `schema` (None: whatever the schema, qualified or not), and why."""

    schema: str | None
    names: frozenset[str]
    why: str

    def refuses(self, schema: str | None, name: str) -> bool:
        """Whether `schema.name` (lower case; schema None when unqualified) is refused.

        >>> RelationRule(None, frozenset({"pg_locks"}), "x").refuses("pg_catalog", "pg_locks")
        True
        >>> RelationRule("sys", frozenset({"*"}), "x").refuses(None, "sessions")
        False
        """
        if self.schema is not None and schema != self.schema:
            return False
        return matches(name, self.names)


def relation_rule(schema: str | None, why: str, names: str) -> RelationRule:
    """A rule from whitespace-separated names."""
    return RelationRule(schema, frozenset(names.split()), why)


@dataclass(frozen=True)
class ValueRule:
    """Columns of a readable relation that hold values, not names: no query may read them, by
    name, through `*`, a whole-row reference or a column alias list renaming them.

    `schemas`: where the relation counts (None in it: unqualified too); `relations` and `columns`
    lower case."""

    schemas: frozenset[str | None]
    relations: frozenset[str]
    columns: frozenset[str]
    why: str

    def covers(self, schema: str | None, name: str) -> bool:
        """Whether a FROM item `schema.name` (lower case) is one of the relations.

        >>> rule = ValueRule(frozenset({None, "pg_catalog"}), frozenset({"pg_type"}), frozenset(), "x")
        >>> rule.covers(None, "pg_type"), rule.covers("public", "pg_type")
        (True, False)
        """
        return schema in self.schemas and name in self.relations


SEARCH_BOUND_MARKER: Final = "mcpkit_search_bound"
"""Text in the error a bounded search raises on purpose, so the profile can tell it from others."""
SIZE_BOUND_MARKER: Final = "mcpkit_size_bound"
"""Text in the error a bounded value-growing call (`GrowthBound`) raises on purpose."""
PATHS_BOUND_MARKER: Final = "mcpkit_paths_bound"
"""The same for a call that grows with its paths (MariaDB's JSON_EXTRACT): one path per call is
the fix the agent is told."""


@dataclass(frozen=True)
class SizeBound:
    """A string search the engine cannot interrupt, whose work grows with the product of the byte
    lengths of two operands (every position of `haystack` compared with `needle`).

    Operands are argument keys of the sqlglot node, or `#n` for the n-th positional argument of a
    call sqlglot does not model. `budget` caps the product: about a quarter of a second of the
    engine's measured worst case (docs/security.md). `wrap_argument` guards the haystack instead of
    the call (a set-returning function cannot sit inside a CASE). `growth` names the replacement
    of a REPLACE that moves the rest of the string at each match (MariaDB): when its length
    differs from the needle's, haystack^2 / needle is capped by `growth_budget` as well.
    `removal` marks a trim from the end that scans the haystack from its start again after each
    needle it removes (MariaDB's TRIM(TRAILING|BOTH), RTRIM, in a multi-byte character set):
    haystack^2 / needle is capped by `budget` whenever the needle, in the haystack's character
    set, is longer than one byte (one byte is a fast path); `default` is the needle when the
    call names none (a space); a `position` of LEADING is cheap and left as written.
    """

    haystack: str
    needle: str
    budget: int
    wrap_argument: bool = False
    growth: str | None = None
    growth_budget: int = 0
    as_text: bool = False
    """The operands are arrays or JSON: measured by the byte length of their text form."""
    multibyte: bool = False
    """The operands are measured by their bytes beyond one per character (`SearchBounds.extra_bytes`):
    the work grows with the non-ASCII characters only (Unicode normalization reorders combining marks)."""
    typed: str | None = None
    """The operator is costly only on this left-operand type (`SearchBounds.type_is`, checked at run
    time): PostgreSQL's `-` is a quadratic key delete on `jsonb - text[]` and arithmetic elsewhere;
    `%` and `<->` are pg_trgm's similarity on strings ("text") and modulo or a distance elsewhere."""
    removal: bool = False
    default: str = " "
    pattern: bool = False
    """`needle` is a regular expression (MariaDB's PCRE): what it may cost is read off its literal
    text (`admission.regex_cost`: haystack^(quantifiers + 1) x its groups' paths, capped by
    `budget`) and the engine's own limit is written into it (`SearchBounds.match_limit`); a literal
    without metacharacters is a search, a computed one is refused."""
    collated: bool = False
    """The call compares in the operands' collation (MariaDB's LOCATE, LIKE, JSON_SEARCH): under a
    slow one (`SearchBounds.cost_factor`) even a short literal needle is guarded."""
    elements: int = 0
    """Also caps the two operands' element pairs, weighted by what one compare of their type costs
    (`SearchBounds.element_pairs`), at this budget: bytes do not show it (0: not capped)."""


@dataclass(frozen=True)
class GrowthBound:
    """A call whose result can be many times its arguments and which checks no size limit on it
    (MariaDB's JSON_DETAILED indents every line to its depth; JSON_MERGE, JSON_SET and JSON_EXTRACT
    build past max_allowed_packet, twice per nesting level): `factor(call)` is the SQL of an upper
    bound on result bytes per byte of `argument` (`"*"`: every argument's bytes summed; `""`: the
    factor is the result's bytes itself, as for a count of characters), or None where this call
    cannot outgrow its arguments; bytes x factor is capped by `budget` before the call runs.
    `marker` is the one its guard's error carries (`SIZE_BOUND_MARKER`, `PATHS_BOUND_MARKER`)."""

    argument: str
    factor: Callable[[exp.Expr], exp.Expr | None]
    budget: int
    marker: str = SIZE_BOUND_MARKER
    wrap_argument: bool = False
    """Guard `argument` instead of the call (a set-returning function cannot sit inside a CASE)."""
    any_schema: bool = False
    """The call is bounded whatever schema it is written in (an extension's function)."""
    as_text: bool = False
    """`argument` is measured by its text form (a row or an array has no byte length of its own)."""


@dataclass(frozen=True)
class SearchBounds:
    """One engine's bounded string searches and how its SQL writes the guard.

    Args:
        calls: By the name `function_calls` reports for the call.
        like: LIKE (and NOT LIKE, `~~`); None: not bounded.
        ilike: ILIKE; None: not bounded.
        byte_length: The SQL of an operand's byte length, as a 64-bit integer.
        fail: A boolean expression over `cond` (true when evaluated) that raises the engine error
            carrying the marker given (`SEARCH_BOUND_MARKER`, `SIZE_BOUND_MARKER`); it depends on
            `cond` so no planner folds it early.
        varying: Functions whose value differs per evaluation: an operand holding one is refused,
            since the guard and the search would each evaluate it.
        operators: By name, as written in `OPERATOR(schema.name)` whatever the schema: the bound of
            the search the operator runs (PostgreSQL's LIKE, array and jsonb containment, pg_trgm's
            similarity), or None for one reviewed as cheap. Another name outside `builtin_schema`
            is refused.
        infix: The sqlglot node types of operators written as such (`a @> b`), by name.
        builtin_schema: The schema of the built-in operators (`OPERATOR(pg_catalog.+)`).
        not_text: User-defined types (by name) that are no string: a `typed="text"` operand cast
            to one is left as written.
        extra_bytes: The SQL of an operand's bytes beyond one per character, as a 64-bit integer
            (what a `multibyte` bound measures).
        type_is: The SQL testing that an operand's run-time type is the named one (a `typed` bound).
        growths: Calls whose result may be many times their argument, by name.
        converted_length: The SQL of the byte length of a needle (first) once converted to the
            character set of a haystack (second), for `SizeBound.removal`.
        cost_factor: The SQL of how many times slower than a binary compare a search over the
            haystack (first) and needle (second) runs in their collations, evaluated at run time;
            None: every search compares bytes.
        cast_budget: The byte budget of the text a cast to this type (first) of this value
            (second) parses (its input function runs with no interrupt check, or quotes its whole
            input when it fails), or None when such a cast is cheap.
    """

    calls: Mapping[str, SizeBound]
    like: SizeBound | None
    ilike: SizeBound | None
    byte_length: Callable[[exp.Expr], exp.Expr]
    fail: Callable[[exp.Expr, str], exp.Expr]
    varying: frozenset[str]
    operators: Mapping[str, SizeBound | None] = field(default_factory=dict)
    infix: Mapping[type[exp.Expr], str] = field(default_factory=dict)
    builtin_schema: str | None = None
    not_text: frozenset[str] = frozenset()
    extra_bytes: Callable[[exp.Expr], exp.Expr] | None = None
    type_is: Callable[[exp.Expr, str], exp.Expr] | None = None
    growths: Mapping[str, GrowthBound] = field(default_factory=dict)
    converted_length: Callable[[exp.Expr, exp.Expr], exp.Expr] | None = None
    cost_factor: Callable[[exp.Expr, exp.Expr], exp.Expr] | None = None
    cast_budget: Callable[[exp.DataType, exp.Expr], int | None] | None = None
    match_limit: Callable[[str, exp.Expr], exp.Expr] | None = None
    """The SQL of a regular expression (its text, first) that the engine itself stops once it has
    backtracked its budget over a subject of this many bytes (second); None: not enforced."""
    function_casts: frozenset[str] = frozenset()
    """Type names a call of one argument casts to (`int4(x)`: PostgreSQL's function-style cast),
    whose argument `cast_budget` sizes as a CAST's."""
    echoed_inputs: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """Calls by the engine's name whose error quotes the arguments at these positions (from 0, over
    every overload) whole: each is sized as a cast's quoted input, up to `echoed_budget` bytes of
    its text (`admission.operands.echoed_inputs` finds them in sqlglot's reading of the call)."""
    echoed_budget: int = 0
    echo_excluded: Callable[[str, exp.Expr], bool] | None = None
    """Whether a call of this name (first) cannot quote an argument given its literal ones (second,
    the call as sqlglot reads it): its `echoed_inputs` are left as written."""
    rewrite: Callable[[exp.Expr], None] | None = None
    """Rewrites the tree before the guards are placed (a call whose cost no guard can precede
    becomes an equivalent one whose cost a guard bounds)."""
    value_bytes: Callable[[exp.Expr], exp.Expr] | None = None
    """The SQL of a value's bytes whatever its type, as a 64-bit integer (an array's in memory,
    not its text); None: `byte_length`."""
    holds_operands: bool = False
    """A builder's computed operands are computed once, in a subquery (`admission.built_values`):
    the engine takes outer references in a derived table."""
    chain_budget: int | None = None
    """Bytes the intermediate values of one concatenation chain may hold (`admission.chains`);
    None: not bounded."""
    element_pairs: Callable[[exp.Expr, exp.Expr], exp.Expr] | None = None
    """The SQL of how many element compares two arrays or JSON values (an `elements` bound) may make,
    weighted by their run-time type's cost per compare, as a 64-bit integer."""
    folds_constants: bool = False
    """The engine evaluates an immutable call over constants while planning, whatever CASE holds
    it, unless a condition before it folds first (PostgreSQL): a guard that tests a run-time type
    makes such operands subqueries, which it does not fold."""
