"""Rewrite: a string search the engine cannot interrupt, or a call whose result outgrows every
limit, fails fast when its operands are too large.

Searches (MariaDB's LOCATE/REPLACE/LIKE/..., PostgreSQL's strpos/replace/LIKE/translate/...) check no
timeout or cancel inside their loop: one call with large operands runs minutes past its deadline. Each
such call becomes `CASE WHEN CASE WHEN <cost> > <budget> THEN <fail> END THEN NULL ELSE <call> END`:
`cost` is the product of the operands' byte lengths, computed in SQL (times the collations' slowdown
where the engine says, `SearchBounds.cost_factor`; or element pairs, `SizeBound.elements`), and `fail`
raises an engine error carrying a marker, which the profile classifies as `resource`; NULL, the THEN
branch, gives the CASE the call's type. A short literal needle or literal-prefix LIKE (which keep an
index) stays as written, unless it compares in a collation the engine may make slow (`collated`). A
call whose result may be many times its arguments (`GrowthBound`), a cast that parses a text, a call
whose error quotes an argument (`echoed_inputs`) and a concatenation chain get the same guard.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from sqlglot import exp

from mcpkit.sql.admission import held_operands as once
from mcpkit.sql.admission.built_values import answer_bound, answer_roots, hold
from mcpkit.sql.admission.chains import chain_cost, chain_roots, leaf_length, unfold_constants
from mcpkit.sql.admission.compute_once import refuse_row_copies
from mcpkit.sql.admission.function_tables import (
    SEARCH_BOUND_MARKER,
    SIZE_BOUND_MARKER,
    GrowthBound,
    SearchBounds,
    SizeBound,
)
from mcpkit.sql.admission.function_tables.tables import SIZE_BOUNDS
from mcpkit.sql.admission.functions import function_calls
from mcpkit.sql.admission.operands import (
    CastTarget,
    arguments,
    depth,
    echoed_inputs,
    function_cast,
    is_ascii,
    operand,
    parses_text,
    prefix_pattern,
    refuse_qualified_bounded,
    row_constructors,
    scalar_operands,
    static_chars,
    static_length,
)
from mcpkit.sql.admission.operators import bound_of, spread_quantified
from mcpkit.sql.admission.regex_bounds import limit_matches, regex_cost
from mcpkit.sql.admission.search_budget import SHORT_LITERAL, exceeds, fail_when, many_short, share, short
from mcpkit.sql.admission.slots import queue_if_slow
from mcpkit.sql.admission.unfoldable import unfoldable
from mcpkit.sql.errors import refuse

__all__ = ["MAX_BOUNDED", "MAX_PATTERNS", "SHORT_LITERAL", "bound_searches"]  # SHORT_LITERAL: search_budget

MAX_PATTERNS: Final = 16
"""Regular expressions with quantifiers one query may hold (MariaDB): each may run to PCRE's match
limit, about 0.1 s, however short its subject (400 in one row ran 35 s past a 2 s call)."""
MAX_BOUNDED: Final = 64
"""Bounded searches one query may hold: each may run up to its budget between interrupt checks."""
_MAX_COPIED: Final = 4_000  # syntax nodes the guards may copy (nested searches copy the inner guards)


@dataclass(frozen=True)
class _CastBound:
    budget: int  # bytes of the text a cast parses (`SearchBounds.cast_budget`)
    key: str = "this"  # the operand cast: `this` of a CAST, the argument of `int4(x)`
    typed: str = "input"  # the run-time types it parses (`SearchBounds.type_is`); "echoed": quotes
    wrap_argument: bool = False  # guard the operand, not the call (set-returning, or in FROM)


@dataclass(frozen=True)
class _ChainBound:
    budget: int  # bytes a concatenation chain's intermediate values may hold (`admission.chains`)


@dataclass(frozen=True)
class _Target:
    node: exp.Expr  # the call, or what replaces it in the tree (LIKE ... ESCAPE)
    call: exp.Expr  # the node holding the operands
    bound: SizeBound | GrowthBound | _CastBound | _ChainBound


def _targets(tree: exp.Expr, dialect: str, bounds: SearchBounds) -> list[_Target]:
    found: list[_Target] = []
    operators = tuple(bounds.infix)
    casts: list[CastTarget] = [(c, c, c.to, "this", c.this) for c in tree.find_all(exp.Cast)]
    for call in function_calls(tree, dialect):
        compared_row = call.name == "row" and isinstance(call.node.parent, exp.Predicate)  # builds no value
        if isinstance(call.node, operators) or compared_row:  # sqlglot may name `a @> b` after a function
            continue
        for bound in (bounds.calls.get(call.name), bounds.growths.get(call.name)):  # JSON_SEARCH: both
            anywhere = isinstance(bound, GrowthBound) and bound.any_schema
            if bound is not None and (anywhere or call.schema in (None, "pg_catalog")):
                dot = call.node.parent  # `schema.f(...)`: the guard replaces the whole
                whole = dot if isinstance(dot, exp.Dot) and dot.expression is call.node else call.node
                found.append(_Target(whole, call.node, bound))
        refuse_qualified_bounded(call, bounds, dialect)  # pg_catalog.repeat(...): bound it bare
        if (cast := function_cast(call, bounds, dialect)) is not None:  # `int4(x)` is `CAST(x AS int4)`
            casts.append(cast)
    if (row := bounds.growths.get("row")) is not None:  # ARRAY[...] and (a, b) build as ROW(...) does
        found.extend(_Target(n, n, row) for n in row_constructors(tree))
    for node, held, key, wrap in echoed_inputs(tree, bounds, dialect):
        found.append(_Target(node, held, _CastBound(bounds.echoed_budget, key, "echoed", wrap)))
    for node in tree.find_all(exp.Like, exp.ILike, exp.Operator, *operators):
        bound = bound_of(node, bounds)
        if bound is None or isinstance(node.args.get("expression"), exp.Any | exp.All):  # ARRAY[] is left
            continue
        outer = parent if isinstance(parent := node.parent, exp.Escape) and parent.this is node else node
        found.append(_Target(outer, node, bound))
    for node, call_node, to, key, value in casts:
        budget = bounds.cast_budget(to, value) if bounds.cast_budget is not None else None
        if budget is not None and parses_text(value, bounds):
            found.append(_Target(node, call_node, _CastBound(budget, key)))
    if bounds.chain_budget is not None:
        found.extend(_Target(root, root, _ChainBound(bounds.chain_budget)) for root in chain_roots(tree))
        found.extend(_Target(r, r, answer_bound(bounds)) for r in answer_roots(tree, bounds))
    return sorted(found, key=lambda t: -depth(t.node))  # innermost first: an outer guard copies inner ones


class _Builder:
    def __init__(self, bounds: SearchBounds, targets: list[_Target]) -> None:
        self.bounds = bounds
        self.copied = 0
        self.guard_short = many_short([(t.call, t.bound) for t in targets], bounds)  # a row runs them in turn

    def length(self, value: exp.Expr, bound: SizeBound | None = None, *, as_text: bool = False) -> exp.Expr:
        if bound is not None and bound.multibyte:
            return self._extra_bytes(value)
        static = static_length(value)
        if static is not None:
            return exp.Literal.number(static)
        self._check_operand(value, varying_ok=as_text)
        copied = value.copy()
        as_text = as_text or (bound is not None and bound.as_text)
        return self.bounds.byte_length(exp.cast(copied, "TEXT") if as_text else copied)

    def _extra_bytes(self, value: exp.Expr) -> exp.Expr:
        if isinstance(value, exp.Literal) and value.is_string:
            return exp.Literal.number(len(value.this.encode()) - len(value.this))
        assert self.bounds.extra_bytes is not None, "a multibyte bound needs its engine's extra_bytes"
        self._check_operand(value)
        return self.bounds.extra_bytes(value.copy())

    def _check_operand(self, value: exp.Expr, *, varying_ok: bool = False) -> None:
        for node in value.walk():
            self.copied += 1
            if self.copied > _MAX_COPIED:
                refuse(
                    "too_complex",
                    "The query nests string searches (LIKE, position, replace, ...) too deeply to bound"
                    " them; compute the inner ones in a CTE or split the query.",
                )
            names: set[str] = set()
            if isinstance(node, exp.Anonymous):
                names.add(node.name.lower())
            elif isinstance(node, exp.Func):
                names.update(n.lower() for n in (node.sql_name(), *getattr(type(node), "_sql_names", ())))
            varying = [] if varying_ok else sorted(names & self.bounds.varying)
            if varying or isinstance(node, exp.TableSample):
                name = f"{varying[0]}()" if varying else "a sample"
                refuse(
                    "function",
                    f"A string search (LIKE, position, replace, ...) over a value computed from {name} cannot"
                    " be bounded, since it changes each time it is computed; compute it in a CTE first.",
                )


def _growth_cost(call: exp.Expr, bound: GrowthBound, builder: _Builder) -> exp.Expr | None:
    factor = bound.factor(call)
    if factor is None:
        return None
    if not bound.argument:  # the factor is the whole size (a count of characters, of elements)
        known = isinstance(factor, exp.Literal) and int(factor.this) <= bound.budget
        return None if known else exceeds(factor, bound.budget)
    if bound.argument == "*":
        sized = [a for a in arguments(call) if not isinstance(a, exp.Null)]
    else:
        one = operand(call, bound.argument)
        sized = [] if one is None or isinstance(one, exp.Null) else [one]
    if not sized:
        return None
    static = [static_length(a) for a in sized]
    if isinstance(factor, exp.Literal) and None not in static:  # literals only: known now
        return None if sum(n or 0 for n in static) * int(factor.this) <= bound.budget else exp.true()
    size = builder.length(sized[0], as_text=bound.as_text)
    for each in sized[1:]:
        size = exp.Add(this=size, expression=builder.length(each, as_text=bound.as_text))
    if len(sized) > 1:
        size = exp.paren(size, copy=False)
    if isinstance(factor, exp.Binary):
        factor = exp.paren(factor, copy=False)
    return exceeds(exp.Mul(this=size, expression=factor), bound.budget)


def _removal_cost(call: exp.Expr, bound: SizeBound, builder: _Builder) -> exp.Expr | None:
    """hay^2 / needle over the budget, when the needle in the haystack's character set passes a byte."""
    position = call.args.get("position")
    hay = operand(call, bound.haystack)
    converted = builder.bounds.converted_length
    if (position or "").upper() == "LEADING" or hay is None or isinstance(hay, exp.Null) or converted is None:
        return None
    static = static_length(hay)
    if static is not None and (4 * static) ** 2 <= bound.budget:  # even as utf32
        return None
    needle = operand(call, bound.needle) or exp.Literal.string(bound.default)
    if isinstance(needle, exp.Null):
        return None
    builder.length(needle)  # checks the operand like any other
    needle_bytes = converted(needle.copy(), hay.copy())
    hay_len = builder.length(hay)
    if not isinstance(needle, exp.Literal):  # a literal takes the haystack's character set
        # both in the call's: a latin1 haystack trimmed of a utf32 needle is four times its bytes
        hay_len = converted(hay.copy(), needle.copy())
    rescans = exp.IntDiv(this=exp.Mul(this=hay_len, expression=hay_len.copy()), expression=needle_bytes)
    longer = exp.GT(this=needle_bytes.copy(), expression=exp.Literal.number(1))
    return exp.and_(longer, exceeds(rescans, bound.budget, shared=True), copy=False)


def _cost(target: _Target, builder: _Builder) -> exp.Expr | None:
    """The condition under which the call must not run, or None when it is always cheap."""
    bound = target.bound
    if isinstance(bound, _ChainBound):

        def sized(leaf: exp.Expr) -> exp.Expr:
            return leaf_length(leaf, lambda v: builder.length(v, as_text=True), builder.bounds.not_text)

        return chain_cost(target.call, sized, bound.budget)
    if isinstance(bound, _CastBound):  # only text (or json, a user type) is parsed: a value's own type is not
        value = operand(target.call, bound.key)
        assert value is not None, "a cast bound's operand is found before it is targeted"
        builder.length(value)  # checks the operand like any other
        assert builder.bounds.type_is is not None, "a cast bound needs its engine's type_is"
        size = builder.bounds.byte_length(exp.cast(value.copy(), "TEXT"))
        typed = builder.bounds.type_is(value.copy(), bound.typed)
        return exp.and_(typed, exceeds(size, bound.budget), copy=False)
    if isinstance(bound, GrowthBound):
        return _growth_cost(target.call, bound, builder)
    if bound.removal:
        return _removal_cost(target.call, bound, builder)
    hay, needle = operand(target.call, bound.haystack), operand(target.call, bound.needle)
    if hay is None or needle is None or isinstance(hay, exp.Null) or isinstance(needle, exp.Null):
        return None
    if scalar_operands(bound.typed, hay, needle, builder.bounds.not_text):
        return None
    if bound.pattern:
        cost = regex_cost(needle)
        if not cost.plain:
            static = static_length(hay)
            if static is not None:  # a literal subject: known now (issue 10 F4)
                return None if static**cost.degree * cost.paths <= bound.budget else exp.true()
            steps = builder.length(hay)
            for _ in range(cost.degree - 1):
                steps = exp.Mul(this=steps, expression=builder.length(hay))
            if cost.paths > 1:
                steps = exp.Mul(this=steps, expression=exp.Literal.number(cost.paths))
            return exceeds(steps, bound.budget, shared=True)
    conds: list[exp.Expr] = []
    # a slow collation makes a short needle costly too (LOCATE, 64 bytes, 10 MB, uca1400_as_cs: 5.6 s)
    slow = bound.collated and builder.bounds.cost_factor is not None
    is_short = short(needle) and not slow and not builder.guard_short
    if not is_short and not (isinstance(target.call, exp.Like | exp.ILike) and prefix_pattern(needle)):
        product = exp.Mul(this=builder.length(hay, bound), expression=builder.length(needle, bound))
        if builder.bounds.cost_factor is not None:  # MariaDB: a UCA collation compares 30x slower
            product = exp.Mul(this=product, expression=builder.bounds.cost_factor(hay.copy(), needle.copy()))
        over = exceeds(product, bound.budget, shared=True)
        if bound.elements and (pairs := builder.bounds.element_pairs) is not None:  # jsonb[] @>: issue 10
            over = exp.or_(over, exceeds(pairs(hay.copy(), needle.copy()), bound.elements, True), copy=False)
        if bound.typed:
            assert builder.bounds.type_is is not None, "a typed bound needs its engine's type_is"
            over = exp.and_(builder.bounds.type_is(hay.copy(), bound.typed), over, copy=False)
        conds.append(over)
    replacement = operand(target.call, bound.growth) if bound.growth else None
    if replacement is not None and not isinstance(replacement, exp.Null):
        # Literals are sized in characters: a haystack's character set may take fewer bytes for
        # them than UTF-8 ('é' is one latin1 byte, so 'é' -> 'ab' grows in a latin1 haystack).
        n_needle, n_repl = static_chars(needle), static_chars(replacement)
        same = n_needle is not None and n_needle == n_repl and is_ascii(needle) and is_ascii(replacement)
        if n_needle != 0 and not same:
            hay_len = builder.length(hay)
            divisor = (
                exp.Literal.number(n_needle)
                if n_needle is not None
                else exp.Greatest(this=builder.length(needle), expressions=[exp.Literal.number(1)])
            )
            moves = exceeds(
                exp.IntDiv(this=exp.Mul(this=hay_len, expression=hay_len.copy()), expression=divisor),
                bound.growth_budget,
                shared=True,
            )
            if n_needle is None or n_repl is None:
                sizes = [builder.length(replacement), builder.length(needle)]
                converted = builder.bounds.converted_length
                if converted is not None:  # in the haystack's character set, as the call compares
                    sizes = [converted(replacement.copy(), hay.copy()), converted(needle.copy(), hay.copy())]
                moves = exp.and_(exp.NEQ(this=sizes[0], expression=sizes[1]), moves, copy=False)
            conds.append(moves)
    return None if not conds else exp.or_(*conds, copy=False) if len(conds) > 1 else conds[0]


def _held_pairs(target: _Target, bounds: SearchBounds) -> list[exp.Expr]:
    # an `elements` bound copies its operands often: computed ones are computed once
    if not (isinstance(bound := target.bound, SizeBound) and bound.elements and bounds.holds_operands):
        return []
    values = [operand(target.call, key) for key in (bound.haystack, bound.needle)]
    return once.hold([v for v in values if once.costly(v, bounds.growths)], bounds.varying, target.node)


def bound_searches(tree: exp.Expr, dialect: str) -> exp.Expr:
    """Guard each string search the engine cannot interrupt with a cost check in the SQL itself.

    >>> import sqlglot
    >>> tree = sqlglot.parse_one("SELECT strpos(a, b) FROM t", read="postgres")
    >>> bound_searches(tree, "postgres").sql()[:65]
    'SELECT CASE WHEN CASE WHEN CAST(OCTET_LENGTH(a) AS BIGINT) * CAST'
    >>> bound_searches(sqlglot.parse_one("SELECT a FROM t WHERE a LIKE 'ab%'"), "postgres").sql()
    "SELECT a FROM t WHERE a LIKE 'ab%'"

    Args:
        tree: One admitted query.
        dialect: The target's sqlglot dialect; one without `SIZE_BOUNDS` is left as it is.

    Returns:
        `tree`, each costly search in it guarded.

    Raises:
        Refused: `too_complex` past `MAX_BOUNDED` guards or nested too deeply; `function` when an
            operand changes per evaluation (random(), a sample), so its guard could not hold, or
            for `OPERATOR(schema.op)` of an operator outside the built-in schema whose cost is unknown.
    """
    bounds = SIZE_BOUNDS.get(dialect)
    if bounds is None:
        return tree
    if bounds.holds_operands:
        refuse_row_copies(tree)  # the row guards' holds hide rows of rows from compute_once
    if bounds.rewrite is not None:
        bounds.rewrite(tree)
    spread_quantified(tree, bounds)
    targets = _targets(tree, dialect, bounds)
    builder, guarded, searches, patterns = _Builder(bounds, targets), 0, 0, 0
    for target in targets:
        queue_if_slow()  # a short text slow to guard takes its slot here (rtC F10), not after the pass
        if isinstance(target.bound, SizeBound) and target.bound.pattern:
            regex = operand(target.call, target.bound.needle)
            patterns += regex is not None and not regex_cost(regex).plain
            if patterns > MAX_PATTERNS:
                refuse(
                    "too_complex",
                    f"The query has more than {MAX_PATTERNS} regular expressions with quantifiers or"
                    " classes; split it into smaller queries.",
                )
        cast = target.bound if isinstance(target.bound, _CastBound) and bounds.holds_operands else None
        value = (
            operand(target.call, cast.key) if cast and not cast.wrap_argument else None
        )  # held, then sized
        held = once.hold([value], bounds.varying) if once.costly(value, bounds.growths) else []
        cond = _cost(target, builder)
        if isinstance(target.bound, SizeBound) and target.bound.pattern:
            limit_matches(target.call, target.bound, bounds, builder.length)
        if cond is None:
            continue
        if not held and (held := _held_pairs(target, bounds) or hold(target.call, target.bound, bounds)):
            cond = _cost(target, builder) or cond
        if isinstance(target.bound, _ChainBound) and bounds.folds_constants:
            unfold_constants(target.call, bounds.varying)
            cond = _cost(target, builder) or cond
        guarded += 1
        searches += isinstance(target.bound, SizeBound)
        if guarded > MAX_BOUNDED:
            refuse(
                "too_complex",
                f"The query has more than {MAX_BOUNDED} string searches (LIKE, position, replace, ...) over"
                " computed values, each bounded at run time; split it into smaller queries.",
            )
        bound = target.bound
        marker = SIZE_BOUND_MARKER if isinstance(bound, _ChainBound) else SEARCH_BOUND_MARKER
        marker = bound.marker if isinstance(bound, GrowthBound) else marker
        if isinstance(bound, SizeBound | GrowthBound | _CastBound) and bound.wrap_argument:
            key = bound.key if isinstance(bound, _CastBound) else getattr(bound, "haystack", "")
            hay = operand(target.call, getattr(bound, "argument", key))
            if hay is not None:
                placeholder = exp.Null()
                hay.replace(placeholder)
                placeholder.replace(fail_when(hay, cond, bounds, marker))
            continue
        typed = isinstance(bound, _CastBound) or (isinstance(bound, SizeBound) and bound.typed)
        if bounds.folds_constants and typed and isinstance(bound, SizeBound | _CastBound) and not held:
            keys = (bound.key,) if isinstance(bound, _CastBound) else (bound.haystack, bound.needle)
            unfoldable(target.call, keys)
        target.node.replace(placeholder := exp.Null())
        placeholder.replace(once.wrap(fail_when(target.node, cond, bounds, marker), held))
    share(tree, searches)
    return tree
