"""Rewrite: in a SQLite query of many calls, each call is followed by a jump the engine stops at.

SQLite checks `sqlite3_interrupt` (the watchdog's, a second past the deadline) and its progress
handler only at jump opcodes; the calls of one row's expression run back to back with none between
them, each a pass over its argument (red team v3 F8, the open rt35c F2 class: 300 `json_valid(t)`
over a 6.9 MB value answered a 2 s call after 12 s, 300 `length(upper(t))` over 30 MB ran 10 s of
CPU). `CASE WHEN 1 THEN f(x) END` is coded as the call and a Goto, where the interrupt is checked:
the row stops within one call of it. Only in a query of more than `MANY_CALLS` calls over
non-literal values (below that, their passes are about a second at most), and never around a CAST
(its affinity would be lost), a COLLATE or a table-valued call; an unaliased select item keeps its
name.

An aggregate's own step runs in the scan loop, its result only after it: a CASE around the aggregate
is coded after the loop and puts no jump between the rows' steps, so an aggregate is never wrapped,
while the calls in its arguments run per row and are (`SUM(CASE WHEN 1 THEN length(x) END)`).
COUNT's step is constant work per row whatever the value, so a COUNT is not one of the calls counted
(`COUNT(*)`, `COUNT(x)` of the describe tool's profile); COUNT(DISTINCT x) copies and compares the
value for its distinct index, and SUM, AVG, MIN, MAX and the others read or compare it: they count.

Passes nest and are not all calls (red team rtC F2-F4): every run of passes with no jump between
them holds at most `MANY_CALLS`, the outermost passes inside a run over it wrapped in turn (at most
`MAX_NESTED` deep). A comparison of two values and a `||` are passes, a JSON call one per path; a
comparison of bare columns and literals in a condition keeps its index: past `MANY_CALLS` the last
written are followed by a jump, `x = y AND CASE WHEN 1 THEN 1 ELSE x = y END` (`_followed`; wrapped
in a CASE, no index term: red team rtI L2, 30-table key joins timed out); a seek runs no comparison,
else the CASE's Goto follows it. A run that cannot be split is refused.
"""

from __future__ import annotations

from typing import Final

from sqlglot import exp

from mcpkit.sql.errors import refuse

__all__ = ["INTERRUPTIBLE_DIALECTS", "MANY_CALLS", "interruptible_calls"]

INTERRUPTIBLE_DIALECTS: Final = frozenset(["sqlite"])
"""The sqlglot dialects whose engine checks its interrupt only at jumps (SQLite's VM)."""
MANY_CALLS: Final = 16
"""Calls over non-literal values a query may hold as written: 16 passes over 32 MiB, about a second."""
# A CAST's affinity, a CASE's branches and a COLLATE (no call: a compound's ORDER BY term must stay
# a result column with its collation, which a CASE around it is not)
_KEPT: Final = (exp.Cast, exp.TryCast, exp.Case, exp.Collate)


MAX_NESTED: Final = 4
"""Jumps around jumps: SQLite's parser stack (about 100 deep) held 11 nested CASEs, 8 around calls."""
_COMPARED: Final = (
    *(exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Is, exp.NullSafeEQ, exp.NullSafeNEQ),
    *(exp.Like, exp.ILike, exp.Glob, exp.Between, exp.In),
)
# Values that are truth values already: no conversion when tested
_TRUTH: Final = (
    *(exp.Predicate, exp.Connector, exp.Not, exp.Boolean, exp.Paren, exp.Literal, exp.Null, *_COMPARED),
)
# JSON calls of many paths: arguments per path after the document (a path and its value)
_ARITHMETIC: Final = (
    *(exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.IntDiv, exp.Neg, exp.BitwiseNot),
    *(exp.BitwiseAnd, exp.BitwiseOr, exp.BitwiseXor, exp.BitwiseLeftShift, exp.BitwiseRightShift),
)
_PATH_ARGUMENTS: Final = {
    "json_extract": 1,
    "json_remove": 1,
    "json_set": 2,
    "json_insert": 2,
    "json_replace": 2,
}
# SQLite's aggregates sqlglot does not parse as one (`AggFunc`)
_AGGREGATE_NAMES: Final = frozenset(["total", "json_group_object"])
# SQLite's calls that answer anew each time they run (sqlglot's `Rand` is random())
_VOLATILE_NAMES: Final = frozenset(["random", "randomblob", "changes", "total_changes", "last_insert_rowid"])
_VOLATILE_BASE: Final = (
    f"In a query of over {MANY_CALLS} calls or comparisons per row, a CASE value WHEN ... is run as one"
    " comparison per WHEN, which would compute a random value again for each; split the query or compare"
    " the random value outside such a CASE."
)


def _counted(call: exp.Func) -> bool:
    """Whether `call` is a pass over a value per row (COUNT's step is not)."""
    if isinstance(call, _KEPT) or isinstance(call.parent, exp.Table | exp.Window | exp.Filter):
        return False
    if isinstance(call, exp.If) and isinstance(call.parent, exp.Case):
        return False  # a CASE's WHEN ... THEN is an `If` node, no call; its base and ELSE hold calls
    # over literals too: `hex(randomblob(16000000))` builds 32 MB with no column (red team rtC F9)
    return not (isinstance(call, exp.Count) and not isinstance(call.this, exp.Distinct))


def _aggregate(call: exp.Expr) -> bool:
    if isinstance(call, exp.Anonymous):
        return call.name.lower() in _AGGREGATE_NAMES
    return isinstance(call, exp.AggFunc)


def _holds_value(node: exp.Expr) -> bool:
    return any(isinstance(n, exp.Column | exp.Query) for n in node.walk())


def _operands(node: exp.Expr) -> list[exp.Expr]:
    found = [v for k, v in node.args.items() if isinstance(v, exp.Expr) and k != "escape"]
    return found + [e for e in node.expressions if isinstance(e, exp.Expr)]


def _paths(call: exp.Func) -> int:
    """JSON paths a call looks up, a pass over its document each, literal or not (red team rtC F2)."""
    if isinstance(call, exp.Least | exp.Greatest):  # scalar min/max: a comparison per argument (rtN F1)
        return max(1, _comparison(_operands(call)))
    name = call.name if isinstance(call, exp.Anonymous) else call.sql_name()
    step = _PATH_ARGUMENTS.get(name.lower())
    if step is None:
        return 1
    arguments = [v for v in call.args.values() if isinstance(v, exp.Expr)] + call.expressions
    return max(1, (len(arguments) - 1 + step - 1) // step)


def _weight(node: exp.Expr) -> int:
    """Passes over a value `node` makes in one row: a call's, a comparison's, a `||`, and the reading
    of its value as a number or type by the CAST or arithmetic around it (`t + 0` over 30 MB of
    digits: 0.4 s), counted on the operand: a jump after it comes before the conversion."""
    return _own_weight(node) + _converted(node)


def _own_weight(node: exp.Expr) -> int:
    if isinstance(node, exp.Connector):  # AND, OR: sqlglot's calls, SQLite's jumps
        return 0
    if isinstance(node, exp.Func):
        if _stepped(node):  # its step's pass is counted on its arguments (`_converted`)
            return 0
        return _paths(node) if _counted(node) else 0
    if isinstance(node, exp.DPipe):
        return int(_holds_value(node))
    if isinstance(node, _COMPARED):
        return _comparison(_operands(node))
    return 0


def _comparison(operands: list[exp.Expr]) -> int:
    if any(isinstance(o.unnest(), exp.Tuple) for o in operands):
        return _pairs(operands)
    values = sum(_holds_value(o) for o in operands)
    if any(isinstance(o.unnest(), exp.Null) for o in operands):
        return max(values - 1, 0)  # `x IS NULL` reads no value
    return max(values - 1, min(values, 1))  # against a number, a text value is read as one


def _pairs(operands: list[exp.Expr]) -> int:
    """A row-value comparison compares each pair of the rows, with no jump between (red team rtf F2)."""
    first, rest = operands[0].unnest(), [o.unnest() for o in operands[1:]]
    left = first.expressions if isinstance(first, exp.Tuple) else [first]
    count = 0
    for other in rest:
        right = other.expressions if isinstance(other, exp.Tuple) else [other] * len(left)
        count += sum(_holds_value(a) or _holds_value(b) for a, b in zip(left, right, strict=False))
    return count


def _searched(case: exp.Case) -> None:
    """`CASE x WHEN y THEN ...` as `CASE WHEN x = y THEN ...`: the same comparison (SQLite compares
    the base and each WHEN as `=` does), written out so that a jump can follow it (red team rtf F1)."""
    base = case.args["this"]
    for branch in case.args.get("ifs") or []:
        branch.set("this", exp.EQ(this=_operand(base.copy()), expression=_operand(branch.this)))
    case.set("this", None)


def _operand(node: exp.Expr) -> exp.Expr:
    return node if isinstance(node, exp.Column | exp.Literal | exp.Paren | exp.Null) else exp.paren(node)


def _volatile(node: exp.Expr) -> bool:
    return any(
        isinstance(n, exp.Rand) or (isinstance(n, exp.Anonymous) and n.name.lower() in _VOLATILE_NAMES)
        for n in node.walk()
    )


def _refuse_volatile_base(tree: exp.Expr, case: exp.Case) -> None:
    """A simple CASE evaluates its base once; written out (`_searched`), once per WHEN: refused where
    the base may change between them: a random call in it, or a column of a query that projects one
    (SQLite flattens the subquery into the CASE, computing it at each reading; review R1)."""
    base, own = case.args["this"], case.find_ancestor(exp.Select)
    projected = base.find(exp.Column) is not None and any(
        s is not own and any(_volatile(e) for e in s.expressions) for s in tree.find_all(exp.Select)
    )
    if projected or _volatile(base):
        refuse("too_complex", _VOLATILE_BASE)


def _simple_cases(tree: exp.Expr) -> list[exp.Case]:
    """CASEs with a base, innermost first; each WHEN of one compares a value to the base."""
    cases = [c for c in tree.find_all(exp.Case) if c.args.get("this") is not None]
    return sorted(cases, key=lambda c: -_depth(c))


def _implicit(case: exp.Case) -> int:
    base = case.args["this"]
    return sum(_comparison([base, b.this]) for b in case.args.get("ifs") or [])


def _stepped(call: exp.Expr) -> bool:
    """An aggregate whose step reads its arguments' values (not COUNT's), outside a window."""
    return isinstance(call, exp.Func) and _aggregate(call) and _counted(call)


def _converted(node: exp.Expr) -> int:
    if isinstance(node, exp.Paren):
        return 0
    above = node.parent
    while isinstance(above, exp.Paren | exp.Distinct):
        above = above.parent
    if above is not None and _stepped(above) and not isinstance(node, exp.Distinct):
        # an aggregate's steps run back to back in the scan loop: the jump goes after each argument
        # (`SUM(CASE WHEN 1 THEN x END)`), before the step reads it (red team rtf F5)
        return int(_holds_value(node))
    if isinstance(above, exp.Cast | exp.TryCast):  # a CAST keeps its affinity: its operand is wrapped
        return int(above.this.unnest() is node and _holds_value(node))
    if _truth_tested(node):
        return int(_holds_value(node) and not isinstance(node, _TRUTH))
    # a scalar subquery's value too (red team rtf F7: 60 `(SELECT d FROM t) + ...` over 30 MB of digits)
    return int(isinstance(above, _ARITHMETIC) and isinstance(node, exp.Column | exp.Subquery))


def _truth_tested(node: exp.Expr) -> bool:
    """Whether SQLite reads `node`'s value as a truth value: a pass over a text (red team rtf F3)."""
    top = node
    while isinstance(top.parent, exp.Paren):
        top = top.parent
    above = top.parent
    if isinstance(above, exp.Connector | exp.Not):
        return True
    if isinstance(above, exp.If):  # a WHEN's condition; in a CASE with a base, a value compared to it
        case = above.parent
        simple = isinstance(case, exp.Case) and case.args.get("this") is not None
        return top.arg_key == "this" and not simple
    if isinstance(above, exp.Where | exp.Having):
        return top.arg_key == "this"
    return isinstance(above, exp.Join) and top.arg_key == "on"


def _in_conjunct(node: exp.Expr) -> bool:
    parent = node.parent
    while isinstance(parent, exp.And | exp.Or | exp.Paren | exp.Not):
        parent = parent.parent
    return isinstance(parent, exp.Where | exp.Having | exp.Join)


def _wrappable(node: exp.Expr, keep_index: bool = True) -> bool:
    if isinstance(node, exp.Func):
        if _aggregate(node) or isinstance(node.parent, exp.Table | exp.Window | exp.Filter):
            return False
    elif (
        keep_index
        and isinstance(node, _COMPARED)
        and _in_conjunct(node)
        and all(isinstance(o.unnest(), exp.Column | exp.Literal | exp.Query) for o in _operands(node))
    ):
        return False  # `a.x = b.y`, `id = 1`, `id IN (SELECT ...)` keep their index
    order = node.find_ancestor(exp.Order)  # a compound's ORDER BY term stays a result column
    return not (order is not None and isinstance(order.parent, exp.SetOperation))


def _regions(tree: exp.Expr, wrapped: set[int]) -> dict[int, list[exp.Expr]]:
    """The passes of each run with no jump between: the statement's (with every aggregate's
    arguments), and each wrapped node's, up to the wrapped nodes inside it."""
    regions: dict[int, list[exp.Expr]] = {id(tree): []}
    todo: list[tuple[exp.Expr, int]] = [(tree, id(tree))]
    while todo:
        node, key = todo.pop()
        for child in node.iter_expressions():
            inner = id(child) if id(child) in wrapped else id(tree) if _aggregate(child) else key
            if _weight(child):
                regions.setdefault(id(child) if id(child) in wrapped else key, []).append(child)
            todo.append((child, inner))
    return regions


def _outer(node: exp.Expr, members: set[int], key: int) -> bool:
    """No other pass of its run holds `node`: up to the aggregate whose argument it is."""
    for above in _up(node)[1:]:
        if id(above) == key or _aggregate(above):
            return True
        if id(above) in members:
            return False
    return True


def _unindexed(run: list[exp.Expr], key: int, place: dict[int, int]) -> set[int]:
    """Conditions kept for their index to wrap all the same, until the run is within the limit:
    comparisons of two values first, then those with a literal (`id = 1`), the last written first."""
    kept = [n for n in run if id(n) != key and _wrappable(n, keep_index=False)]
    kept.sort(key=lambda n: (any(isinstance(o.unnest(), exp.Literal) for o in _operands(n)), -place[id(n)]))
    left, chosen = sum(map(_weight, run)), set()
    for node in kept:
        if left <= MANY_CALLS:
            break
        chosen.add(id(node))
        left -= _weight(node)
    return chosen


def _plan(tree: exp.Expr) -> tuple[list[exp.Expr], set[int]]:
    """The nodes to follow by a jump so that no run passes `MANY_CALLS` (refused where none can), and
    which of them are conditions kept for their index (`_unindexed`: followed, not wrapped).

    An aggregate's step is never wrapped: a run over the limit by its aggregates alone is left.
    """
    wrapped: dict[int, exp.Expr] = {}
    kept: set[int] = set()
    place = {id(n): i for i, n in enumerate(tree.walk(bfs=False))}
    grown = True
    while grown:
        grown = False
        for key, run in _regions(tree, set(wrapped)).items():
            if sum(map(_weight, run)) <= MANY_CALLS:
                continue
            members = {id(n) for n in run if _wrappable(n) and id(n) != key}
            if not members:  # only conditions kept for their index: past the limit some lose it (review R6)
                members = _unindexed(run, key, place)
                kept |= members
            split = [n for n in run if id(n) in members and _outer(n, members, key)]
            if split and all(sum(id(a) in wrapped for a in _up(n)) < MAX_NESTED for n in split):
                wrapped.update((id(n), n) for n in split)
                grown = True
            elif sum(_weight(n) for n in run if not _aggregate(n)) > MANY_CALLS:
                refuse(
                    "too_complex",
                    f"One row of this query makes over {MANY_CALLS} calls or comparisons of column values"
                    " back to back (a JSON path counts as one); split the expression or the query.",
                )
    return list(wrapped.values()), kept


def _followed(condition: exp.Expr) -> None:
    """`x = y` as `(x = y AND CASE WHEN 1 THEN 1 ELSE x = y END)`: the same truth value, the condition
    still an index term, and a Goto (the interrupt's check) right after it; the copy never runs and
    names the same tables, so SQLite tests both at the same loop."""
    jump = exp.Case(
        ifs=[exp.If(this=exp.Literal.number(1), true=exp.Literal.number(1))], default=condition.copy()
    )
    condition.replace(placeholder := exp.Null())
    placeholder.replace(exp.paren(exp.and_(condition, jump, copy=False), copy=False))


def interruptible_calls(tree: exp.Expr, dialect: str) -> exp.Expr:
    """Follow each call by a jump (`CASE WHEN 1 THEN f(x) END`) in a query of over `MANY_CALLS` calls.

    >>> import sqlglot
    >>> sql = "SELECT " + ", ".join(f"upper(a{i})" for i in range(17)) + " FROM t"
    >>> interruptible_calls(sqlglot.parse_one(sql, read="sqlite"), "sqlite").sql("sqlite")[:55]
    'SELECT CASE WHEN 1 THEN UPPER(a0) END AS "UPPER(a0)", C'

    Args:
        tree: One admitted query.
        dialect: The target's sqlglot dialect (rewritten only in `INTERRUPTIBLE_DIALECTS`).

    Returns:
        `tree`, each call over a non-literal value followed by a jump when there are many.
    """
    if dialect not in INTERRUPTIBLE_DIALECTS:
        return tree
    cases = _simple_cases(tree)
    if sum(map(_weight, tree.walk())) + sum(map(_implicit, cases)) <= MANY_CALLS:
        return tree
    # the name SQLite gives an unaliased select item: its text as sent (`admit`'s options)
    named = [
        (select, i, item, item.sql(dialect=dialect, normalize_functions=False, comments=False))
        for select in tree.find_all(exp.Select)
        for i, item in enumerate(select.expressions)
        if not isinstance(item, exp.Alias | exp.Column | exp.Star)
    ]
    for case in cases:
        _refuse_volatile_base(tree, case)
    for case in cases:
        _searched(case)
    calls, kept = _plan(tree)
    holding = {id(node) for c in [*calls, *cases] for node in _up(c)}
    items = [(select, i, name) for select, i, item, name in named if id(item) in holding]
    for call in sorted(calls, key=lambda c: -_depth(c)):  # innermost first: an outer call moves them
        if id(call) in kept and call.find(exp.Query) is None:
            _followed(call)
            continue
        call.replace(placeholder := exp.Null())
        placeholder.replace(exp.Case(ifs=[exp.If(this=exp.Literal.number(1), true=call)]))
    for select, i, name in items:  # the item now in that place: the CASE around a call
        item = select.expressions[i]
        item.replace(exp.alias_(item.copy(), name, quoted=True))
    return tree


def _up(node: exp.Expr) -> list[exp.Expr]:
    found = [node]
    while (parent := found[-1].parent) is not None:
        found.append(parent)
    return found


def _depth(node: exp.Expr) -> int:
    return len(_up(node))
