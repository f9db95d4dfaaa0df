"""What else a profile answers for the modules around the engine: the generic behaviour.

`Profile` inherits these (`base.py` holds the session, verification, catalog and cost); an
engine's profile overrides the ones its database does differently. Callers ask the profile
instead of testing a dialect name.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection
    from sqlglot import exp

    from mcpkit.sql.admission import FunctionCatalog
    from mcpkit.sql.clipping import Clipping
    from mcpkit.sql.engines.engine import SqlEngine

__all__ = ["ROW_ORDER_FUNCTIONS", "Capabilities", "VectorKind"]

# Value differs per row in evaluation order (time-based, sequential, positional), any engine's
# spelling: a user's function of such a name elsewhere counts too (fail closed).
ROW_ORDER_FUNCTIONS: frozenset[str] = frozenset(
    {
        "clock_timestamp",
        "timeofday",
        "uuidv7",
        "uuid_v7",
        "uuidv1",
        "uuid_v1",
        "uuid_generate_v1",
        "uuid_generate_v1mc",
        "sys_guid",
        "sysdate",
        "nextval",
        "setval",
        "lastval",
        "uuid_short",
        "rownum",
        "sqlite_offset",
    }
)

VectorKind = Literal["sqlite_vec", "typed", "json"]
"""How `similar_rows` finds embeddings: `sqlite_vec` (the extension reads JSON-text or float32-blob
columns), `typed` (the column's type says: pgvector, or a float array), `json` (JSON array text,
its table found through information_schema, which shows column grants)."""


class Capabilities:
    """The generic answers: nothing to undo, no clipping in SQL, no role switching, no vectors."""

    # --- re-verification ----------------------------------------------------------------

    @contextmanager
    def undone(self, conn: Connection) -> Iterator[None]:
        """Run a block (the re-verification inside a call's session) whose session changes are
        undone after, so none reaches the call's SQL. Generic: the checks change nothing."""
        yield

    def catalog_reads(self, conn: Connection) -> AbstractContextManager[None]:
        """Run a block of the checks' own catalog queries where nothing of the reader's names
        answers them (PostgreSQL: `search_path` pg_catalog, `postgres.catalog_path`). Generic:
        as the session is."""
        return nullcontext()

    # --- clipping -------------------------------------------------------------------------

    def clipping(self) -> Clipping | None:
        """How cells are clipped inside the SQL sent (`mcpkit.sql.clipping`); None: not known here."""
        return None

    # --- engine limits ---------------------------------------------------------------------

    memory_fix: str | None = None
    """How the operator bounds a database process's memory where `memory_bounded` can prove it."""
    memory_setup: tuple[str, ...] = ()
    """The same for `mcpkit sql grant`'s script, as comment lines (it is not SQL)."""

    def memory_bounded(self, dbapi: Any, budget: int) -> bool | None:
        """Whether the database process that runs the calls fails to allocate `budget` bytes (True)
        or holds them (False), inside a call's session; None: no such proof here (generic)."""
        return None

    def memory_hosts(self, host: str | None, query: Mapping[str, Any]) -> tuple[str, ...]:
        """The database hosts a URL's connections may reach: `memory_bounded` proves the one it
        reached, so more than one is refused (generic: one)."""
        return ()

    # --- identities (role maps) -----------------------------------------------------------

    switches_roles: bool = False
    """A login can take on another role inside its session (`SET ROLE`): one shared account may
    then switch to each principal's role per call (`--allow shared-login`, `role_setup`), and a
    principal's own login must be shown to reach no other principal's role (`login_problems`).
    Generic: each principal has a login of its own, which cannot switch."""

    def identity_catalog(self, engine: SqlEngine, catalog: FunctionCatalog | None) -> FunctionCatalog | None:
        """The catalog admission asks when calls run as principals' roles: where a function can run
        with another role's rights, one that refuses those too. Generic: `catalog` as it is."""
        return catalog

    def shared_login_problems(self, conn: Connection, roles: Collection[str]) -> list[str]:
        """Why the server's account (`conn`) cannot safely switch to `roles`, one sentence each."""
        return []

    def login_problems(
        self,
        conn: Connection,
        role: str,
        user: str,
        others: Sequence[str],
        account: str,
        *,
        warn: bool = False,
    ) -> list[str]:
        """What a principal's own login (`conn`, as `user`; a shared login's role after its
        `role_setup`) reaches that is not its own: another principal's login among `others`, or
        the server's `account`; one sentence each. `warn` (start-up): also log what it reaches that
        is allowed but worth knowing; while serving the check stays quiet."""
        return []

    # --- similar_rows ---------------------------------------------------------------------

    vector_kind: VectorKind | None = None
    """How `similar_rows` ranks rows here; None: no vector support mcpkit can use."""

    def use_vectors(self) -> str | None:
        """Prepare every later connection for `similar_rows`. Returns a query answering 2 once
        that worked, to check now; None: nothing to prepare (or prepared before)."""
        return None

    # --- reports --------------------------------------------------------------------------

    plan_check: str = "SELECT * FROM ({}) AS q WHERE 1 = 0"
    """A statement around a report's SQL (`{}`) that makes the database check it without
    reading rows, at load."""

    compile_check: str | None = None
    """A statement around a query (`{}`) that plans it without evaluating any expression over a
    row: a failure of the query that this statement does not repeat was raised by a row
    (`masking.failures`). None: the database may evaluate rows while it plans."""

    parameter_casts: Mapping[str, str] = {}
    """A report parameter's declared type -> the SQL type it is cast to where the database can
    infer none (`untyped_parameter`). Empty: the database types every parameter, no probe is run."""

    def untyped_parameter(self, exc: BaseException) -> int | None:
        """The 1-based number of the parameter the database could not type, from its error; None:
        any other error."""
        return None

    def report_value(self, value: Any) -> Any:
        """A report parameter's value as the database binds it (generic: as validated)."""
        return value

    # --- cost ------------------------------------------------------------------------------

    def row_filtered_tables(self, conn: Connection) -> list[str]:
        """Tables this session may select from whose rows the database filters per role (row-level
        security): the planner's estimates over them come from statistics of every row, hidden
        ones included, so a cost refusal would tell about rows the role cannot read. Generic: none."""
        return []

    def row_filtered_views(self, conn: Connection) -> list[str]:
        """Views this session may select from that read with their owner's rights rows filtered for
        it (the owner's row-level security, a filter on the current user), each with why: the
        planner estimates over the base table's statistics, every row's. Generic: none."""
        return []

    def trigger_hints(self, conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[str]:
        """One warning per row trigger (BEFORE or AFTER) on a table with masked columns, naming the
        tables its body writes where readable (`profiles.triggers`). Generic: none."""
        return []

    # --- masking: how names resolve --------------------------------------------------------

    system_schemas: frozenset[str] = frozenset()
    """Schemas (databases) of the server's own catalog, which masking never reflects."""

    catalog_complete: bool = True
    """Whether the catalog shows every table and column name to any account (a literal mask rule
    that names none is then a typo: `masking.literals`); MySQL/MariaDB list only granted ones."""

    namespace_names: frozenset[str] = frozenset()
    """With one namespace: the qualifiers that name it (SQLite's `main`); a table qualified by any
    other name is unknown to masking (refused while masks are on). Generic: none."""

    def name_path(self, conn: Connection) -> tuple[str, ...] | None:
        """Where the session resolves an unqualified table name, in order (empty: nowhere, so only
        qualified names resolve); None: the database has one namespace (masking then reflects that
        one alone). Generic: one namespace."""
        return None

    def usable_schemas(self, conn: Connection) -> list[str] | None:
        """The schemas this session may read tables in; None: every schema the inspector lists."""
        return None

    name_pin: tuple[str, ...] = ()
    index_scans_off = False  # PostgreSQL with masks: masked calls scan no index (`postgres.scan_pins`)
    """The path `pin_name_path` set (an engine for another login of the same server takes it on)."""

    def pin_name_path(self, path: Sequence[str]) -> None:
        """Make every later call's session resolve unqualified names through `path` (the path the
        masking analysis resolved them through). Generic: the namespace cannot change."""
        self.name_pin = tuple(path)

    # --- masking: the database's semantics that make an answer follow the scan order ------
    # Read from the class (`profiles.profile_class`): the masking passes know only the dialect.

    @staticmethod
    def exact_ties(node: exp.Expr) -> list[exp.Expr]:
        """Tie-breakers that tell apart values of `node` which compare equal but print differently
        (a collation ignoring case, 1.0 = 1.00): ordered by the value alone, such rows keep the
        scan order. Generic: none known."""
        return []

    @staticmethod
    def orderless(node: exp.Expr, type_text: str | None = None) -> bool:
        """Whether output `node` (declared `type_text`) may have a type the database cannot order,
        so masking orders it by its text form (`exact_ties`), not its ordinal. Generic: none."""
        return False

    ordered_aggregates: bool = True
    """A concatenating aggregate (string_agg, GROUP_CONCAT, json_agg) takes an ORDER BY, which
    masking adds; False: the aggregate is refused over a masked read."""
    ordered_object_aggregates: bool = True
    """Likewise for the aggregates that build a JSON object."""
    ordered_sums: bool = False
    """sum, avg, stddev, corr ... take an ORDER BY, which masking adds where they add in scan order
    (floating point, interval, money: `masking.sums`); False: left as they are (a residual)."""
    float_sums: frozenset[str] = frozenset()
    """Aggregates sqlglot does not know that add in doubles whatever their argument (SQLite `total`)."""
    sum_overflows: bool = False
    """An integer `sum` fails when a partial sum overflows (SQLite): masking sends it in halves."""
    float_round: bool = False
    """`round(x)` answers a double whatever x's type (SQLite), so a sum of it is not exact."""
    rollup_in_key_order: bool = False
    """`GROUP BY ... WITH ROLLUP` sorts its groups by their keys (it is computed over sorted rows), so
    masking adds no ORDER BY to such a block without one (MariaDB refuses one there: error 1221)."""
    bare_columns: bool = False
    """The database answers a bare column beside GROUP BY (its value follows the scan order), so
    masking refuses it. Generic: not checked."""
    caseless_columns: bool = False
    """Column names and aliases match in any case, quoted or not, while table names may not;
    sqlglot reads them case-sensitively, so masking folds the columns."""
    user_sets: bool = False
    """A user's function may return a set of rows (PostgreSQL `RETURNS SETOF`), in a select list as
    in FROM, in the order its scan meets them: masking counts each call of one as such (rt27 F8, F9)."""
    builtin_schema: str | None = None
    """The schema of the built-in functions (`pg_catalog.f(...)` is `f(...)` to masking)."""
    time_based_uuid: bool = False
    """UUID() is time-based, so its values follow the order rows are read (refused when masking)."""
    row_order_functions: frozenset[str] = ROW_ORDER_FUNCTIONS
    """Functions whose value changes from row to row in the order rows are read (per-row clocks,
    time-based UUIDs, sequences, positions): they number the rows in scan order. Masking refuses
    them in a call over a masked read (`masking.shapes`) and in a stored body over a masked table
    (`masking.view_order`), with `guessable_random`, from this one list."""

    def row_order_routines(self, conn: Connection) -> dict[tuple[str, str], str]:
        """The user's functions (schema, name) the account can see whose value may change from row
        to row, whatever they are declared (every user function: red teams rt29, rt31, rt32 got a
        counter past each proof of a body), with why: masking counts a call of one like
        `row_order_functions` unless `--allow function-order:S.N` accepts it. Generic: none known."""
        return {}

    def user_aggregates(self, conn: Connection) -> frozenset[str]:
        """The names (case-folded) of the user's aggregates no other function of the database shares:
        masking treats a call of one as an aggregate (red team v1 L3). Generic: none known."""
        return frozenset()

    accent_blind_routines: bool = False
    """The server finds a routine by a case- and accent-blind name (MariaDB: `tíck(x)` calls `tick`,
    red team rt34 F6): masking counts a call whose name is not ASCII as a per-row one."""

    def routine_keys(self, conn: Connection, names: Iterable[str]) -> frozenset[str]:
        """The case-folded spellings a call may name each of `names` (stored functions) by, as the
        server compares routine names (`KnownSchema.per_row`). Generic: the names case-folded."""
        return frozenset(n.casefold() for n in names)

    guessable_random: frozenset[str] = frozenset()
    """Unseeded generators (`rand` is sqlglot's RAND()/random()) of a public non-cryptographic
    recurrence: each value gives the state, so the values chain into the order the rows were
    read in; per-row counters, refused when masking like a seeded RAND(n) (red team rt20mask F3)."""
