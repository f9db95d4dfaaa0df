"""The database profile: everything mcpkit knows about one backend, behind one interface.

A profile answers, for its database: how a call's session is opened read-only with its deadline,
run, interrupted and closed; how a driver error is classified; how the execution identity is
verified at start-up; what the catalog says (readable tables, function volatility); what the
planner's estimate is; how a principal's role is taken on. `SqlEngine`, the start-up checks,
`doctor`, reflection, the cost ceiling and identities ask the profile instead of branching on a
dialect name. The base class is the generic behaviour (any other SQLAlchemy backend, best effort).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

from sqlalchemy.engine import URL, Connection

from mcpkit.sql.errors import FailureKind, SqlConfigError

if TYPE_CHECKING:
    from mcpkit.sql.admission import FunctionCatalog, FunctionPolicy
    from mcpkit.sql.engines.base import Engine

__all__ = [
    "ROLE_NAME",
    "AccountReport",
    "Finding",
    "Outcome",
    "Profile",
    "Readable",
    "quote_role",
    "safe_call_id",
]

Outcome = FailureKind | Literal["timeout"]

Readable = Mapping[tuple[str | None, str], int | None]
"""(schema, name) -> row estimate of every relation the account can read."""

_CALL_ID = re.compile(r"[^A-Za-z0-9._:-]")
ROLE_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,62}")
"""A plain role name: the only kind a role map may name."""


def safe_call_id(call_id: str) -> str:
    """The call id reduced to characters safe in a comment, a setting or a log line.

    >>> safe_call_id("abc-1; DROP */")
    'abc-1DROP'
    """
    return _CALL_ID.sub("", call_id)[:64] or "call"


def quote_role(role: str) -> str:
    """A validated role name as a quoted identifier.

    >>> quote_role("analyst_emea")
    '"analyst_emea"'

    Raises:
        SqlConfigError: not a plain role name.
    """
    if not ROLE_NAME.fullmatch(role):
        raise SqlConfigError(f"role {role!r} is not a plain name (letters, digits, _ and $)")
    return f'"{role}"'


@dataclass(frozen=True)
class Finding:
    """One thing the execution identity can do that a reader must not, and how to take it away.

    `opt_in` names the `--allow` value that accepts it (with a warning), where a careful operator
    may want it; None: it must be removed.
    """

    code: str
    message: str
    fix: str
    opt_in: str | None = None

    def line(self) -> str:
        """One line for the operator: what, then the SQL that removes it."""
        accept = f" (or --allow {self.opt_in})" if self.opt_in else ""
        return f"{self.message}: {self.fix}{accept}"


@dataclass
class AccountReport:
    """Who the server connects as, what that account could change, and what it must not hold."""

    dialect: str
    version: str
    user: str
    superuser: bool
    superuser_reason: str | None = None
    writable: list[str] = field(default_factory=list)
    read_only_enforced: bool = True
    findings: list[Finding] = field(default_factory=list)


class Profile:
    """One database backend. Subclasses override what their database does differently.

    The base class is the generic profile: no database-enforced read-only session or timeout is
    known, the watchdog cancels through the driver, errors are unclassified, and the account's
    grants are the only guard (`mcpkit sql doctor` says so).

    Args:
        dialect: The sqlglot dialect name (subclasses fix it).
    """

    name: str = "SQL"
    read_only_enforced: bool = False
    has_accounts: bool = True
    """False where the database has no logins (SQLite: the process reads a file)."""
    forever_sql: str | None = None
    """A query that never ends, for the doctor's timeout probe."""
    poolable: bool = False
    """Whether `reset` returns a connection to its state at login, so it may be pooled."""
    policy_generation: int = 0
    """Bumped when per-connection enforcement changes (SQLite's authorizer policy): the engine
    then closes its pooled connections, so none opened under an earlier policy serves a call."""

    def __init__(self, dialect: str) -> None:
        self.dialect = dialect

    # --- session ---------------------------------------------------------------------------

    def engine_options(self, url: URL) -> dict[str, Any]:
        """Extra `create_engine` keyword arguments (connect args, creator)."""
        return {}

    def begin(self, dbapi: Any, timeout_s: float, call_id: str) -> None:
        """Open a read-only transaction on a fresh connection and arm the database's own timeout."""

    def run(self, cursor: Any, sql: str, call_id: str) -> None:
        """Execute one statement exactly as given (no parameter processing)."""
        cursor.execute(sql)

    def type_names(self, dbapi: Any, description: Sequence[Any]) -> list[str | None]:
        """The database's type name per result column, where the driver tells."""
        return [None for _ in description]

    def interrupt(self, dbapi: Any, url: URL) -> None:
        """Stop the running statement from another thread (the watchdog's backstop)."""
        for name in ("cancel", "interrupt"):
            method = getattr(dbapi, name, None)
            if callable(method):
                method()
                return

    def end(self, dbapi: Any) -> None:
        """Roll back; called in every case, before the connection is closed."""
        dbapi.rollback()

    def reset(self, dbapi: Any, url: URL) -> None:
        """Return a connection to its state at login before the pool hands it out again.

        Everything a call could leave in its session that a rollback does not undo must go
        (locks, prepared statements, temporary objects, settings, variables). Raising closes the
        connection instead; the generic profile knows no reset, so it is not pooled.
        """
        raise NotImplementedError(f"{self.name}: no session reset is known")

    def classify(self, exc: BaseException) -> Outcome:
        """Map a driver exception to a failure kind or `timeout`."""
        return "other"

    def use_function_policy(self, policy: FunctionPolicy) -> None:
        """Enforce the function policy inside the engine too, where the database allows it."""

    # --- verification ----------------------------------------------------------------------

    def inspect(self, conn: Connection, url: URL, allowed: frozenset[str] = frozenset()) -> AccountReport:
        """Describe the execution identity from inside a call's session, with its findings.

        Args:
            conn: A connection in a call's read-only session (the role the calls run as).
            url: The engine's URL.
            allowed: Object opt-ins (`function:schema.name`, ...) that need no finding.
        """
        return AccountReport(self.dialect, "unknown", "unknown", False, None, [], read_only_enforced=False)

    def use_masks(self, conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[Finding]:
        """Have the database itself withhold the masked columns, or say where it does not.

        Args:
            conn: A connection in a call's read-only session (the role the calls run as).
            masked: Table -> its masked columns, in the schema queries resolve in.

        Returns:
            One finding per masked column the calls' identity can still read (start-up refuses);
            the generic profile knows no way to check, so masking rests on the analysis alone.
        """
        return []

    # --- catalog ---------------------------------------------------------------------------

    def readable(self, conn: Connection) -> Readable | None:
        """The relations the account can read, with row estimates; None: whatever is listed."""
        return None

    def function_catalog(self, engine: Engine) -> FunctionCatalog | None:
        """The catalog admission asks which functions may change state, if the database says."""
        return None

    # --- cost ------------------------------------------------------------------------------

    costed: bool = False
    """Whether the planner states an estimate `--max-cost` can compare against."""

    def explain(self, sql: str) -> str:
        """The statement that returns the plan of `sql` as one document (never EXPLAIN ANALYZE)."""
        raise SqlConfigError(f"{self.name}: the planner states no estimate")

    def cost(self, document: Any) -> float:
        """The estimate in the plan document `explain` returned."""
        raise SqlConfigError(f"{self.name}: the planner states no estimate")

    # --- administration -----------------------------------------------------------------

    def grant(self, conn: Connection, role: str, tables: Sequence[str], password: str) -> list[str]:
        """The SQL an administrator runs to create a reader `role` for `tables` that starts clean.

        Args:
            conn: An administrator's connection (nothing is committed).
            role: The new role or login name.
            tables: `schema.table` or `table` names.
            password: The login's password.

        Raises:
            SqlConfigError: this database has no roles, or the names are unusable.
        """
        raise SqlConfigError(f"{self.name}: mcpkit cannot write grants for this database")

    # --- identities ------------------------------------------------------------------------

    def role_setup(self, role: str) -> str | None:
        """The statement each call runs first to act as `role` (None: the login carries the role).

        Raises:
            SqlConfigError: this database has no roles per principal.
        """
        raise SqlConfigError(f"database roles per principal are not supported on {self.dialect}")
