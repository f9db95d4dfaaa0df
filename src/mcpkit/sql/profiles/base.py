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
from sqlglot import exp

from mcpkit.sql.admission.function_tables import PATHS_BOUND_MARKER, SEARCH_BOUND_MARKER, SIZE_BOUND_MARKER
from mcpkit.sql.errors import PATHS_TOO_LARGE, SEARCH_TOO_LARGE, VALUE_TOO_LARGE, FailureKind, SqlConfigError
from mcpkit.sql.profiles.budget import CONNECTION_MARGIN, ConnectionBudget
from mcpkit.sql.profiles.capabilities import Capabilities
from mcpkit.sql.profiles.findings import Finding, merge_findings
from mcpkit.sql.profiles.statistics import ColumnStats, TableStats

if TYPE_CHECKING:
    from mcpkit.sql.admission import FunctionCatalog, FunctionPolicy
    from mcpkit.sql.engines.base import Engine

__all__ = [
    "CONNECTION_MARGIN",
    "ROLE_NAME",
    "AccountReport",
    "ColumnStats",
    "ConnectionBudget",
    "DerivedMask",
    "Finding",
    "Outcome",
    "Profile",
    "Readable",
    "TableStats",
    "merge_findings",
    "quote_role",
    "safe_call_id",
]

Outcome = FailureKind | Literal["timeout"]

Readable = Mapping[tuple[str | None, str], int | str | None]
"""(schema, name) -> row estimate of every relation the account can read: a count, None when the
database has none, or why it is not shown (a whole-table count of rows the account cannot see)."""

_CALL_ID = re.compile(r"[^A-Za-z0-9._:-]")
# The marker a bounded call's guard raises (`admission.bound_searches`) -> the agent's sentence.
_BOUND_SENTENCES: Final = (
    (SEARCH_BOUND_MARKER, SEARCH_TOO_LARGE),
    (SIZE_BOUND_MARKER, VALUE_TOO_LARGE),
    (PATHS_BOUND_MARKER, PATHS_TOO_LARGE),  # MariaDB's JSON_EXTRACT of several paths
)
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
class DerivedMask:
    """Columns that hold a masked column's values under another name, masked as well.

    `key` names the table the way `Profile.use_masks` resolves it; `schema` (None: the default
    one) and `table` are for the masking policy; `why` is for the operator's log. No `columns`: its
    reads count as masked reads (a PostgreSQL inheritance parent: `MaskPolicy.readers`)."""

    key: str
    schema: str | None
    table: str
    columns: frozenset[str]
    why: str


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
    warnings: list[Finding] = field(default_factory=list)
    """What the operator is told but start-up does not refuse (a PostgreSQL login without a
    connection limit); `ensure_safe_account` logs them, `doctor` prints them as `warn`."""
    fingerprint: str | None = None
    """The catalog fingerprint read in the same session, when asked for (`mcpkit.sql.reverify`)."""


class Profile(Capabilities):
    """One database backend. Subclasses override what their database does differently.

    The base class is the generic profile: no database-enforced read-only session or timeout is
    known, the watchdog cancels through the driver, errors are unclassified, and the account's
    grants are the only guard (`mcpkit sql doctor` says so). `Capabilities` holds the rest of the
    generic answers (re-verification, clipping, roles, vectors, reports, masking).

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
    extra_errors: tuple[type[BaseException], ...] = ()
    """What the driver raises besides its `Error` classes for a failed statement (sqlite3 raises
    `MemoryError` when SQLite's heap limit is reached); the engine classifies these too."""
    policy_generation: int = 0
    """Bumped when per-connection enforcement changes (SQLite's authorizer policy): the engine
    then closes its pooled connections, so none opened under an earlier policy serves a call."""
    function_policy: FunctionPolicy | None = None
    """The policy queries are admitted under (`use_function_policy`); None: the dialect's default.
    What the engine runs besides query text (MariaDB's view definitions) is checked against it too."""
    identities: frozenset[str] = frozenset()
    """The `--role-map` roles (`use_identities`): each is checked as an identity of its own, so the
    account's check does not inspect them again as roles one `SET ROLE` away."""

    def __init__(self, dialect: str) -> None:
        self.dialect = dialect

    # --- session ---------------------------------------------------------------------------

    def engine_options(self, url: URL) -> dict[str, Any]:
        """Extra `create_engine` keyword arguments (connect args, creator)."""
        return {}

    def use_pool(self, owner: object, pool_size: int) -> None:
        """The engine `owner` keeps up to `pool_size` connections (0: one per call) until
        `release_pool(owner)` (its `close`) or until it is gone."""

    def release_pool(self, owner: object) -> None:
        """The engine `owner` was closed: what `use_pool` set for it is undone."""

    def begin(self, dbapi: Any, timeout_s: float, call_id: str) -> None:
        """Open a read-only transaction on a fresh connection and arm the database's own timeout."""

    def begin_statements(self, dbapi: Any, timeout_s: float, call_id: str) -> list[str]:
        """`begin` as statements the caller sends ahead of its first one, in the same round trip.

        A profile that cannot defer its begin runs it here and returns no statement (the default).
        """
        self.begin(dbapi, timeout_s, call_id)
        return []

    def run(self, cursor: Any, sql: str, call_id: str, tree: exp.Expr | None = None) -> None:
        """Execute one statement exactly as given (no parameter processing); `tree`, where known,
        is admission's parse of the query `sql` sends (clipped or not)."""
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
        """Roll back; called before a connection is closed (or instead `reset`, when it is kept)."""
        dbapi.rollback()

    def reset(self, dbapi: Any, url: URL) -> None:
        """Return a connection to its state at login before the pool hands it out again.

        Everything a call could leave in its session that a rollback does not undo must go
        (locks, prepared statements, temporary objects, settings, variables). It also ends the
        call's transaction: after a clean call the engine calls it instead of `end`, to save a
        round trip. Raising closes the connection instead; the generic profile knows no reset, so
        it is not pooled.
        """
        raise NotImplementedError(f"{self.name}: no session reset is known")

    def classify(self, exc: BaseException) -> Outcome:
        """Map a driver exception to a failure kind or `timeout`."""
        return "other"

    def failure_message(self, exc: BaseException) -> str | None:
        """The sentence for an error mcpkit's own SQL raised on purpose, or None: the failure kind's
        sentence. A bounded call's guard (`admission.bound_searches`): `SEARCH_TOO_LARGE` for a
        string search, `VALUE_TOO_LARGE` for a value-growing call, `PATHS_TOO_LARGE` for JSON_EXTRACT's
        paths; `classify` makes it `resource`."""
        return next((text for marker, text in _BOUND_SENTENCES if self.bound_marker(exc, marker)), None)

    def bound_marker(self, exc: BaseException, marker: str) -> bool:
        """Whether `exc` is the error the engine raises for a guard written with `marker`
        (`SearchBounds.fail`); no engine here writes guards."""
        return False

    def bounded(self, exc: BaseException) -> bool:
        """Whether `exc` came from a bounded call's guard (any marker): a `resource` failure."""
        return any(self.bound_marker(exc, marker) for marker, _ in _BOUND_SENTENCES)

    def use_function_policy(self, policy: FunctionPolicy) -> None:
        """Enforce the function policy inside the engine too, where the database allows it."""
        self.function_policy = policy

    def use_identities(self, roles: frozenset[str]) -> None:
        """The roles `--role-map` checks as identities of their own (`identities`)."""
        self.identities = roles

    # --- verification ----------------------------------------------------------------------

    def inspect(self, conn: Connection, url: URL, allowed: frozenset[str] = frozenset()) -> AccountReport:
        """Describe the execution identity from inside a call's session, with its findings.

        Args:
            conn: A connection in a call's read-only session (the role the calls run as).
            url: The engine's URL.
            allowed: Object opt-ins (`function:schema.name`, ...) that need no finding.
        """
        return AccountReport(self.dialect, "unknown", "unknown", False, None, [], read_only_enforced=False)

    def catalog_fingerprint(self, dbapi: Any) -> str | None:
        """A digest of what the verification depends on, read in a call's session (`reverify`);
        None: unknown here, so only `--reverify-interval` verifies again."""
        return None

    def connection_findings(self, conn: Connection, budget: ConnectionBudget) -> list[Finding]:
        """Whether the database bounds the login's concurrent connections to what `budget` opens.

        Where a statement can outlive its call (MariaDB's string searches ignore every kill until
        they return), the login's connection limit is what bounds the server threads the calls can
        keep busy. The generic profile knows no such limit and finds nothing.
        """
        return []

    def connection_warnings(self, conn: Connection, budget: ConnectionBudget) -> list[Finding]:
        """Like `connection_findings`, where the database's limit is advised, not required (none here)."""
        return []

    def withheld_relations(self) -> frozenset[str]:
        """Relations the database refuses whole under the masks `use_masks` installed (none here)."""
        return frozenset()

    def derived_masks(self, conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[DerivedMask]:
        """Columns that carry masked values under other names (generated columns, partitions,
        inheritance children, full-text indexes), to be masked like the columns they come from.

        Args:
            conn: A connection in a call's read-only session (or an administrator's, for grant).
            masked: Table -> its masked columns, in the schema queries resolve in.
        """
        return []

    def scan_order_hints(self, conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[str]:
        """Where the scan order may follow a masked column (warnings: docs/masking.md).

        Args:
            conn: A connection in a call's read-only session.
            masked: Table -> its masked columns, in the schema queries resolve in.
        """
        from mcpkit.sql.profiles.scan_order import index_hints

        return index_hints(conn, masked)

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

    def mask_withheld(
        self, conn: Connection, masked: Mapping[str, frozenset[str]]
    ) -> list[tuple[str | None, str]]:
        """(schema, table) of the tables no column of which a reader may read by name under these
        masks (PostgreSQL's partitions below a key over a masked column); `grant --mask` grants
        nothing on them; `masked` as for `use_masks`. None here."""
        return []

    def mask_left_out(
        self, conn: Connection, masked: Mapping[str, frozenset[str]]
    ) -> list[tuple[str | None, str, str]]:
        """(schema, view, why) of views that read masked values whatever the reader's column grants
        (MariaDB DEFINER views); `grant --mask` grants nothing on them and says why. None here."""
        return []

    def mask_preparation(self, conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[str]:
        """Statements an administrator runs before the masked grants, for masked values the database
        keeps outside the columns (PostgreSQL's `attmissingval`); `masked` as for `use_masks`. None here."""
        return []

    # --- catalog ---------------------------------------------------------------------------

    def readable(self, conn: Connection) -> Readable | None:
        """The relations the account can read, with row estimates; None: whatever is listed."""
        return None

    def function_catalog(self, engine: Engine) -> FunctionCatalog | None:
        """The catalog admission asks which functions may change state, if the database says."""
        return None

    def table_stats(self, conn: Connection, schema: str | None, table: str) -> TableStats:
        """The database's statistics of one table, as far as the calls' identity may read its rows.

        Statistics hold values (most common values, bounds): a profile returns them only for
        columns and rows the identity could select itself. The generic profile knows none.
        """
        return TableStats()

    def sample_clause(self, percent: float, seed: int, *, pages: bool = True) -> str | None:
        """A clause after a table name that samples about `percent` % of it (`TABLESAMPLE`): whole
        pages without a scan, or with `pages` False each row (a scan, for small tables); None
        where the database has none."""
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

    def grant(
        self,
        conn: Connection,
        role: str,
        tables: Sequence[str],
        password: str,
        budget: ConnectionBudget | None = None,
    ) -> list[str]:
        """The SQL an administrator runs to create a reader `role` for `tables` that starts clean.

        Args:
            conn: An administrator's connection (nothing is committed).
            role: The new role or login name.
            tables: `schema.table` or `table` names.
            password: The login's password.
            budget: The connections `serve` will open as it, where the database bounds them.

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
