"""PostgreSQL 15: more calls that build a value many times their arguments, each capped like
repeat and lpad (`postgres_bounds._GROWTHS`) before it runs (red team pg17 F1).

format pads to a width with no interrupt check (`format('%*s', 900000000, 'x')` took a backend to
1.7 GB, three summed 3.4 GB and 11.6 s past a 5 s timeout); encode writes hex at twice its bytes,
base64 at 4/3 and escape at up to four times, so nested through convert_to it grew 60 MB to 1.3 GB;
to_json escapes a control character in six bytes; to_char keeps about 30 bytes per byte of its
template; quote_literal and quote_ident double every quote.
"""

from __future__ import annotations

import re
from typing import Final

from sqlglot import exp

from mcpkit.sql.admission.function_tables import GrowthBound

__all__ = ["builders"]


def _bytes(value: exp.Expr) -> exp.Expr:
    """An argument's bytes in its text form (format writes each argument by its output function)."""
    if isinstance(value, exp.Literal):
        return exp.Literal.number(len(value.this.encode()))
    text = exp.Anonymous(this="octet_length", expressions=[exp.cast(value.copy(), "TEXT")])
    return exp.func("coalesce", exp.cast(text, "BIGINT"), exp.Literal.number(0))


def _width(value: exp.Expr) -> exp.Expr:
    if isinstance(value, exp.Literal) and value.is_int:
        return exp.Literal.number(abs(int(value.this)))
    width = exp.Abs(this=exp.cast(value.copy(), "BIGINT"))  # a negative width pads on the right
    return exp.func("coalesce", width, exp.Literal.number(0))


def _sum(terms: list[exp.Expr]) -> exp.Expr:
    known = sum(int(t.this) for t in terms if isinstance(t, exp.Literal))
    total: exp.Expr = exp.Literal.number(known)
    for term in terms:
        if not isinstance(term, exp.Literal):
            total = exp.Add(this=total, expression=term)
    return total


# %[n$][-][width | * | *n$]{s,I,L}, or %%
_SPEC: Final = re.compile(r"%(?:%|(?:(\d+)\$)?-*(?:(\d+)|(\*)(?:(\d+)\$)?)?([sIL]))")
# A computed template: a width of this many digits, or one taken from an argument, is refused
_WIDE: Final = "[*]|[0-9]{6}"
_NARROW: Final = 100_000
_DIGITS: Final = 12  # more digits are past PostgreSQL's int width (and int() of 4,300+ digits fails)


def _count(digits: str) -> int:
    """A width or position written in the template; one of more than `_DIGITS` digits is read as
    `10**_DIGITS`, past any budget (red team rt26 F4: int() of 5,000 digits raised)."""
    return int(digits) if len(digits) <= _DIGITS else 10**_DIGITS


def _formatted(call: exp.Expr) -> exp.Expr | None:
    # each specifier writes its argument (I and L: quotes doubled, plus three), padded to its
    # width; a positional argument (%1$s) may be written any number of times
    template, args = call.this, call.expressions
    variadic = any(isinstance(a, exp.Variadic) for a in args)  # VARIADIC arr: the array's text
    args = [a.this if isinstance(a, exp.Variadic) else a for a in args]
    if variadic or not (isinstance(template, exp.Literal) and template.is_string):
        # at most one specifier per two bytes, each as wide as _NARROW and any argument
        each = _sum([exp.Mul(this=exp.Literal.number(2), expression=_bytes(a)) for a in args])
        per = exp.paren(exp.Add(this=each, expression=exp.Literal.number(_NARROW + 3)), copy=False)
        wide = exp.RegexpLike(this=template.copy(), expression=exp.Literal.string(_WIDE))
        refused = exp.Case(
            ifs=[exp.If(this=wide, true=exp.Literal.number(1 << 40))], default=exp.Literal.number(0)
        )
        return exp.Add(this=exp.Mul(this=_bytes(template), expression=per), expression=refused)
    terms: list[exp.Expr] = [exp.Literal.number(len(template.this.encode()))]
    following, written = 0, []
    for spec in _SPEC.finditer(template.this):
        position, digits, star, star_at, kind = spec.groups()
        if kind is None:  # %%
            continue
        if digits is not None:
            terms.append(exp.Literal.number(_count(digits)))
        elif star:
            at = _count(star_at) - 1 if star_at else following
            following = at + 1
            written.append(-1)  # a width from an argument
            if at < len(args):
                terms.append(_width(args[at]))
        at = _count(position) - 1 if position else following
        following = at + 1
        written.append(at if kind == "s" else -1)
        if at < len(args):
            size = _bytes(args[at])
            if kind != "s":
                size = exp.Add(
                    this=exp.Mul(this=exp.Literal.number(2), expression=size),
                    expression=exp.Literal.number(3),
                )
            terms.append(size)
    total = _sum(terms)
    widths = sum(int(t.this) for t in terms if isinstance(t, exp.Literal))
    if isinstance(total, exp.Add) and len(set(written)) == len(written) and -1 not in written:
        # each argument written once, plainly: as large as the arguments, padded by the literal
        return exp.Literal.number(widths)
    return total


def _encoded(call: exp.Expr) -> exp.Expr | None:
    form = call.args.get("charset")
    name = form.this.lower() if isinstance(form, exp.Literal) and form.is_string else ""
    return exp.Literal.number(2 if name in ("hex", "base64") else 4)  # base64: 4/3, a newline per 76


def builders(budget: int) -> dict[str, GrowthBound]:
    """The builders above, each capped at `budget` bytes, by the name `function_calls` reports."""

    def times(n: int) -> GrowthBound:  # every argument's text form, n times
        return GrowthBound("*", lambda _call: exp.Literal.number(n), budget, as_text=True)

    jsons = ["to_json", "to_jsonb", "array_to_json", "row_to_json"]
    jsons += [f"{kind}_build_{what}" for kind in ("json", "jsonb") for what in ("array", "object")]
    return {
        "format": GrowthBound("", _formatted, budget),
        "encode": GrowthBound("this", _encoded, budget),
        # to_char keeps a parsed node (16 bytes) and 12 bytes of answer per byte of its template
        "to_char": GrowthBound("format", lambda _call: exp.Literal.number(32), budget),
        **{name: times(6) for name in jsons},  # a control character is escaped as \u0001
        **{name: times(2) for name in ("quote_literal", "quote_ident", "quote_nullable")},
        # ROW(...): its text doubles each quote and backslash (red team v3 F2: 20 x 20 MB, 1.5 GB)
        "row": times(2),
    }
