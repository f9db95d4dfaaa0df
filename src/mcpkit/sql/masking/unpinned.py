"""Which columns' stored spelling a representative may keep as data when a scan cannot be pinned.

A hint (`masking.scan_pins`) cannot reach inside a view: MariaDB reads an INVOKER or DEFINER view's
body, MERGE or TEMPTABLE, along any index, a covering one over a masked column too (red team rth F5:
`MIN(name)` of `Paris`/`paris` through a view answered the spelling of the lower masked score). So in
a query that reads such a view, `unpinned_data` keeps the representatives (`masking.representatives`)
from taking a column's spelling as data where equal values may print differently.

Only views the profile says may follow a masked column count (`ScanPin.follows`: they read, maybe
through other views, a masked table an index over a masked column may order; or what the check cannot
see into); a view it does not describe counts too. A column the profile lists as byte-exact
(`ScanPin.exact`: a binary string, a `*_nopad_bin` collation) stays data.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sqlglot import exp

from mcpkit.sql.masking.alike import Sources, alike, facts_of
from mcpkit.sql.masking.taint import REF, Taint
from mcpkit.sql.profiles.scan_order import ScanPin, pin_key

__all__ = ["column_sources", "unpinned_data"]

Resolve = Callable[[exp.Table], str | None]


def column_sources(taint: Taint, qualified: exp.Expr) -> dict[int, tuple[exp.Table, str, str]]:
    """Markers of the columns read straight from a base table (or view) column: the table read,
    the column's real name and its declared type."""
    out = {}
    for col in qualified.find_all(exp.Column):
        if REF not in col.meta or not col.table:
            continue
        scope = taint.by_expr.get(id(col.find_ancestor(exp.Select)))
        while scope is not None and col.table not in scope.sources and scope.parent is not None:
            scope = scope.parent  # a correlated column is its outer block's (rtB F1)
        source = scope.sources.get(col.table) if scope is not None else None
        if isinstance(source, exp.Table) and isinstance(source.this, exp.Identifier):
            found = {k.casefold(): v for k, v in taint._visible_columns(source).items()}.get(
                col.name.casefold()
            )
            if found:
                out[col.meta[REF]] = (source, found[0], found[1])
    return out


def _pin(table: exp.Table, pins: Mapping[str, ScanPin], resolve: Resolve) -> ScanPin | None:
    return pins.get(pin_key(table.db or resolve(table), table.name))


def _follows(table: exp.Table, views: frozenset[str], pins: Mapping[str, ScanPin], resolve: Resolve) -> bool:
    """Whether reading `table` may follow a masked column unpinned: a view named so (any database)
    that the profile does not describe as reading none."""
    if table.name.casefold() not in views or not isinstance(table.this, exp.Identifier):
        return False
    pin = _pin(table, pins, resolve)
    return pin is None or pin.follows


def unpinned_data(
    qualified: exp.Expr,
    declared: Mapping[int, tuple[exp.Table, str, str]],
    views: frozenset[str],
    pins: Mapping[str, ScanPin],
    resolve: Resolve,
    dialect: str,
) -> dict[int, str]:
    """`declared` (`column_sources`) as marker -> declared type, less the columns whose equal values
    may print differently (text under a collation ignoring case, accents or trailing spaces; a
    double's -0), when the query reads a view that may follow a masked column on an engine whose
    pins are written into references (`pins`): the view's scan, and the join order it may drive,
    are not pinned, so which row's spelling a min/max, GROUP BY or DISTINCT keeps may follow a
    masked column. Those columns are then treated like computed values: exact forms added, or
    refused. Integers, decimals, dates, binary strings and byte-exact collations stay.
    """
    out = {marker: type_text for marker, (_, _, type_text) in declared.items()}
    if not pins or not any(_follows(t, views, pins, resolve) for t in qualified.find_all(exp.Table)):
        return out
    facts = facts_of(dialect)
    typed = Sources(out)
    kept = {}
    for col in qualified.find_all(exp.Column):
        marker = col.meta.get(REF)
        if marker not in out:
            continue
        table, real, type_text = declared[marker]
        pin = _pin(table, pins, resolve)
        exact = pin is not None and real.casefold() in pin.exact
        if exact or alike(col, dialect, typed) or facts.text_casts.match(type_text):
            kept[marker] = type_text
    return kept
