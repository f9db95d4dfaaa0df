"""MySQL/MariaDB stored functions that may keep state from one row to the next (red team rt29 F1, F2).

`RETURN (@c := COALESCE(@c, 0) + 1)` is accepted under a DETERMINISTIC label (the label is the
routine's own claim, never verified by the server): called once per row it numbers the rows in the
order the scan reads them, and over a table with `KEY(email, id)` that order is the masked
e-mail's ranking, through a view or called directly. So the label is not trusted: a function counts
as a per-row order function (`Capabilities.row_order_functions`, per call and in stored bodies)
unless its body is proven stateless here. Proven stateless: a body `RETURN expr` the account can
read, whose text neither reads nor assigns a user or system variable (`@x`, `@x := ...`,
`@@...`), and whose every call is a reviewed built-in (`FunctionPolicy`) that is not itself a
per-row one (`masking.shapes.row_order_call`, sequences, locks, `ROW_COUNT()`...) or another
function proven stateless the same way. Anything else counts: a hidden body, a compound
BEGIN ... END body (loops, cursors, handlers, SET, SELECT ... INTO), `NEXT VALUE FOR`, a body that
does not parse, a call of an unknown or unproven routine, a cycle of calls. A NOT DETERMINISTIC
function counts whatever its body (red team rt27 F5).
"""

from __future__ import annotations

import re
from typing import Final

import sqlglot
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlglot import exp
from sqlglot.tokenizer_core import TokenType

from mcpkit.sql.admission.policy import FunctionPolicy
from mcpkit.sql.profiles.mysql.body_modes import foreign_routines
from mcpkit.sql.profiles.mysql.mask_routes import _SYSTEM

__all__ = ["NOT_DETERMINISTIC", "mysql_row_order_routines"]

NOT_DETERMINISTIC: Final = "it is not declared DETERMINISTIC"

_FUNCTIONS: Final = (
    "SELECT routine_schema, routine_name, routine_definition, is_deterministic"
    f" FROM information_schema.ROUTINES WHERE routine_type = 'FUNCTION' AND routine_schema NOT IN {_SYSTEM}"
)
_RETURN: Final = re.compile(r"^\s*RETURN\b(?P<expr>.*)$", re.IGNORECASE | re.DOTALL)
# Built-ins whose value follows the calls before it in the statement or the session, beyond the
# profile's row_order_functions (which `row_order_call` reads).
_STATEFUL: Final = frozenset(
    {
        *("last_insert_id", "row_count", "found_rows", "get_lock", "release_lock", "release_all_locks"),
        *("is_used_lock", "is_free_lock", "sleep", "benchmark", "uuid", "sys_guid", "rand"),
        *("nextval", "lastval", "setval", "sysdate"),
    }
)
_VARIABLES: Final = (TokenType.PARAMETER, TokenType.SESSION_PARAMETER, TokenType.COLON_EQ)

Routine = tuple[str, str]


def _call_name(func: exp.Func) -> tuple[str | None, str]:
    """(database or None, case-folded name) of a call."""
    name = func.name.casefold() if isinstance(func, exp.Anonymous) else func.sql_name().casefold()
    parent = func.parent
    if isinstance(parent, exp.Dot) and parent.expression is func:
        return parent.this.name.casefold(), name
    return None, name


class _Prover:
    def __init__(
        self, bodies: dict[Routine, str], labels: dict[Routine, bool], foreign: dict[Routine, str]
    ) -> None:
        self.bodies, self.labels, self.foreign = bodies, labels, foreign
        self.policy = FunctionPolicy.for_dialect("mysql")
        self.reasons: dict[Routine, str | None] = {}

    def reason(self, key: Routine, stack: tuple[Routine, ...] = ()) -> str | None:
        if key in self.reasons:
            return self.reasons[key]
        if key in stack:
            return "it calls itself through other functions, which this check does not follow"
        found = self._reason(key, (*stack, key))
        self.reasons[key] = found
        return found

    def _reason(self, key: Routine, stack: tuple[Routine, ...]) -> str | None:
        from mcpkit.sql.masking.shapes import row_order_call  # masking imports the profiles

        if not self.labels.get(key, False):
            return NOT_DETERMINISTIC
        body = self.bodies.get(key, "")
        if key in self.foreign:  # the server reads its text otherwise than this check (rt30 F4)
            return f"its body is stored under sql_mode {self.foreign[key]}, which this check does not read"
        if not body:
            return "its body is hidden from the account, so it cannot be shown to keep no state"
        returned = _RETURN.match(body)
        if returned is None:
            return "its body is a compound statement this check does not read (it may keep state)"
        expr = returned["expr"].strip().rstrip(";")
        try:
            tokens = sqlglot.Dialect.get_or_raise("mysql").tokenize(expr)
            tree = sqlglot.parse_one(f"SELECT {expr}", read="mysql")
        except (sqlglot.errors.SqlglotError, RecursionError, ValueError):
            return "its body does not parse here, so it cannot be shown to keep no state"
        if any(t.token_type in _VARIABLES for t in tokens):
            return "its body reads or assigns a user or system variable, which can count the rows"
        # Calls as written: sqlglot renders `len(x)` as LENGTH, but MariaDB has no built-in `len`
        # and calls the stored function of that name (red team rt32 F2: a counter behind it).
        for i, token in enumerate(tokens[:-1]):
            written = (key[0], token.text.casefold())
            called = tokens[i + 1].token_type == TokenType.L_PAREN and (i == 0 or tokens[i - 1].text != ".")
            if called and written != key and (written in self.bodies or written in self.labels):
                inner = self.reason(written, stack)
                if inner is not None:
                    return f"it calls function {written[0]}.{written[1]}, which may keep state ({inner})"
        for func in tree.find_all(exp.Func):
            database, name = _call_name(func)
            target = (database or key[0], name)
            if target in self.bodies or target in self.labels:
                inner = self.reason(target, stack)
                if inner is not None:
                    return f"it calls function {target[0]}.{target[1]}, which may keep state ({inner})"
                continue
            per_row = row_order_call(func, "mysql")
            if per_row is not None or name in _STATEFUL:
                return f"it calls {per_row or name}, whose value changes from call to call"
            if isinstance(func, exp.Anonymous) and (database or not self.policy.allows_name(name)):
                return f"it calls {name}, which this check does not know"
        return None


def mysql_row_order_routines(conn: Connection) -> dict[Routine, str]:
    """Each stored function (database, name as stored) the account can see whose body is not
    proven stateless (see the module), with why."""
    rows = [(str(s), str(n), str(b or ""), str(d)) for s, n, b, d in conn.execute(text(_FUNCTIONS))]
    folded = {(s.casefold(), n.casefold()): (s, n) for s, n, _, _ in rows}
    prover = _Prover(
        {(s.casefold(), n.casefold()): b for s, n, b, _ in rows},
        {(s.casefold(), n.casefold()): d.upper() == "YES" for s, n, _, d in rows},
        foreign_routines(conn),
    )
    out: dict[Routine, str] = {}
    for key, shown in folded.items():
        found = prover.reason(key)
        if found is not None:
            out[shown] = found
    return out
