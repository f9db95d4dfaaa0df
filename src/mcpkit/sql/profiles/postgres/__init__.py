"""PostgreSQL: the read-only session, the role's verification, the catalog, the planner's cost."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Final

from sqlalchemy import text
from sqlalchemy.engine import URL, Connection

from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.profiles.base import (
    AccountReport,
    ConnectionBudget,
    DerivedMask,
    Finding,
    Readable,
    TableStats,
    quote_role,
)
from mcpkit.sql.profiles.budget import DEFAULT_POOL_SIZE
from mcpkit.sql.profiles.digest import digest
from mcpkit.sql.profiles.postgres.account import (
    connection_limit_warnings,
    error_log_warnings,
    inspect_postgres,
    temp_file_warnings,
)
from mcpkit.sql.profiles.postgres.capture import capture_findings
from mcpkit.sql.profiles.postgres.catalog import PostgresCatalog
from mcpkit.sql.profiles.postgres.catalog_path import catalog_path, pinned, pinned_fetch, reader_schemas
from mcpkit.sql.profiles.postgres.catalog_reads import postgres_catalog_routines, postgres_catalog_stored
from mcpkit.sql.profiles.postgres.fingerprint import pg_fingerprint
from mcpkit.sql.profiles.postgres.grant import postgres_grant
from mcpkit.sql.profiles.postgres.index_reach import postgres_index_reach
from mcpkit.sql.profiles.postgres.masks import (
    derived_masks,
    exact_ties,
    masked_routes,
    readable_masked_columns,
    scan_order_hints,
)
from mcpkit.sql.profiles.postgres.memory import MEMORY_FIX, MEMORY_SETUP, memory_bounded, url_hosts
from mcpkit.sql.profiles.postgres.missing import catalog_value_findings, catalog_value_tables
from mcpkit.sql.profiles.postgres.order_optins import postgres_accepted_bodies, postgres_order_accepted
from mcpkit.sql.profiles.postgres.orderless import orderless
from mcpkit.sql.profiles.postgres.params import DECLARED, untyped_parameter
from mcpkit.sql.profiles.postgres.partitions import bound_partitions, partition_findings
from mcpkit.sql.profiles.postgres.relations import PG_RELATIONS
from mcpkit.sql.profiles.postgres.roles import login_problems, shared_login_problems
from mcpkit.sql.profiles.postgres.routine_state import postgres_row_order_routines, postgres_user_aggregates
from mcpkit.sql.profiles.postgres.rowtypes import row_type_copies
from mcpkit.sql.profiles.postgres.scan_pins import postgres_scan_pins
from mcpkit.sql.profiles.postgres.session import PostgresSession
from mcpkit.sql.profiles.postgres.stats import ROW_FILTERED, ROW_FILTERED_NOTE, postgres_table_stats
from mcpkit.sql.profiles.postgres.stored import postgres_primary_key, postgres_stored_queries
from mcpkit.sql.profiles.postgres.switch import switched_masked_columns
from mcpkit.sql.profiles.postgres.triggers import trigger_hints
from mcpkit.sql.profiles.postgres.unchecked import unchecked_definer_findings
from mcpkit.sql.profiles.postgres.views import row_filtered_views
from mcpkit.sql.profiles.scan_order import IndexReach, ScanPin
from mcpkit.sql.profiles.stored import StoredQuery

if TYPE_CHECKING:
    from mcpkit.sql.admission import FunctionCatalog
    from mcpkit.sql.engines.base import Engine
    from mcpkit.sql.engines.engine import SqlEngine

__all__ = ["PostgresCatalog", "PostgresProfile"]

_READABLE: Final = (
    f"SELECT n.nspname, c.relname, c.reltuples::bigint, {ROW_FILTERED} FROM pg_catalog.pg_class c"
    " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
    " WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND has_schema_privilege(n.oid, 'USAGE')"
    " AND (has_table_privilege(c.oid, 'SELECT') OR has_any_column_privilege(c.oid, 'SELECT'))"
)


_ROW_FILTERED_TABLES: Final = (
    "SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname) FROM pg_catalog.pg_class c"
    " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
    f" WHERE c.relkind IN ('r', 'p') AND {ROW_FILTERED}"
    " AND (has_table_privilege(c.oid, 'SELECT') OR has_any_column_privilege(c.oid, 'SELECT'))"
    " ORDER BY 1 LIMIT 20"
)


MIN_VERSION: Final = 14
"""The oldest major version the start-up checks can read the catalog of."""


class PostgresProfile(PostgresSession):
    """PostgreSQL 14+ through psycopg 3 (tested on 15 and 16; 13 and older refused at start-up, see
    docs/security.md "Supported PostgreSQL versions").

    Every catalog answer is read with pg_catalog alone on the search_path (`@pinned`,
    `catalog_path`): no operator, function or type on the reader's path answers a check's query.
    """

    forever_sql = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r"
    costed = True
    switches_roles = True
    user_sets = True  # RETURNS SETOF (rt27 F8, F9)
    vector_kind = "typed"  # pgvector's vector/halfvec, or float arrays
    plan_check = "EXPLAIN {}"
    compile_check = "EXPLAIN (COSTS OFF) {}"  # the planner folds constants, reads no table's rows
    builtin_schema = "pg_catalog"
    # random() (and 16's random_normal()) is pg_prng's xoroshiro128**, 52 of 64 bits shown: two
    # values give the state. gen_random_uuid() reads pg_strong_random (the OS CSPRNG): answered.
    guessable_random = frozenset({"rand", "random", "random_normal"})
    exact_ties = staticmethod(exact_ties)
    orderless = staticmethod(orderless)
    ordered_sums = True  # `masking.sums`
    parameter_casts = DECLARED  # a parameter only tested for NULL has no type (`profiles.postgres.params`)
    system_schemas = frozenset({"information_schema", "pg_catalog", "pg_toast"})
    relations_sql = PG_RELATIONS  # re-verification compares them with start-up (`relcheck`)

    def catalog_reads(self, conn: Connection) -> AbstractContextManager[None]:
        """`catalog_path`: pg_catalog alone on the search_path for the block."""
        return catalog_path(conn)

    def name_path(self, conn: Connection) -> tuple[str, ...]:
        """`current_schemas(false)`: the search_path as this role resolves it (existing schemas it
        may use; pg_catalog, searched first unless placed, is not a place for tables)."""
        return tuple(reader_schemas(conn, implicit=False))

    @pinned
    def row_filtered_tables(self, conn: Connection) -> list[str]:
        """Tables with row-level security active for this role that it may select from, whole or
        some columns (the planner uses their statistics, gathered over every row, under any
        operator marked leakproof)."""
        return [str(n) for n in conn.execute(text(_ROW_FILTERED_TABLES)).scalars()]

    @pinned
    def row_filtered_views(self, conn: Connection) -> list[str]:
        """Owner-rights views over the owner's row-level security or filtering on the current user
        (`profiles.postgres.views.row_filtered_views`)."""
        return row_filtered_views(conn)

    @pinned
    def usable_schemas(self, conn: Connection) -> list[str]:
        """Schemas this role holds USAGE on (a name in any other is refused by the database)."""
        sql = "SELECT nspname FROM pg_catalog.pg_namespace WHERE has_schema_privilege(oid, 'USAGE')"
        return [str(s) for s in conn.execute(text(sql)).scalars()]

    @pinned
    def inspect(self, conn: Connection, url: URL, allowed: frozenset[str] = frozenset()) -> AccountReport:
        """Role attributes, predefined roles, ownership, CREATE, and every route to a hazardous
        function (`routes.audit_routes`) of the role the calls run as."""
        info = conn.dialect.server_version_info
        if info is not None and int(info[0]) < MIN_VERSION:  # the audit reads pg_proc.prosqlbody (14+)
            raise SqlConfigError(
                f"PostgreSQL {MIN_VERSION} or later is required; the server is {'.'.join(map(str, info))}"
            )
        report = inspect_postgres(conn, allowed, self.identities, self.function_policy)
        report.findings += capture_findings(conn)  # user operators over catalog types (`capture`)
        return report

    def catalog_fingerprint(self, dbapi: Any) -> str:
        """Row counts and `xmin` sums of the catalogs a change lives in, and the login's roles
        (`profiles.postgres.fingerprint`)."""
        return digest(pinned_fetch(dbapi, pg_fingerprint(dbapi.info.server_version)))

    memory_fix = MEMORY_FIX
    memory_setup = MEMORY_SETUP

    def memory_bounded(self, dbapi: Any, budget: int) -> bool:
        """One allocation of `budget` bytes in this backend (`postgres.memory`)."""
        return memory_bounded(dbapi, budget)

    def memory_hosts(self, host: str | None, query: Mapping[str, Any]) -> tuple[str, ...]:
        """libpq's hosts for the URL: a list, a failover or load-balanced set (`postgres.memory`)."""
        return url_hosts(host, query)

    @pinned
    def connection_warnings(self, conn: Connection, budget: ConnectionBudget) -> list[Finding]:
        """The login's CONNECTION LIMIT against `budget` (superusers ignore it) and the role's
        temp_file_limit and log_min_messages: warnings, not refusals."""
        return connection_limit_warnings(conn, budget) + temp_file_warnings(conn) + error_log_warnings(conn)

    @pinned
    def derived_masks(self, conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[DerivedMask]:
        """Generated columns computed from masked ones; partitions and inheritance children; columns
        typed by a masked table's row (`profiles.postgres.rowtypes`)."""
        return derived_masks(conn, masked) + row_type_copies(conn, masked)

    @pinned
    def use_masks(self, conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[Finding]:
        """The masked columns the calls' identity can still read (column privileges must withhold them),
        the views and SECURITY DEFINER functions that read them for it with their owner's rights, and
        those PostgreSQL runs with no EXECUTE check (`profiles.postgres.unchecked`), the masked values
        `pg_attribute` holds (`attmissingval`, readable by every login); roles one
        SET ROLE away count (`profiles.postgres.switch`); a partition below a key over a masked
        column must not be readable at all (`profiles.postgres.partitions`)."""
        found = (
            readable_masked_columns(conn, masked)
            + switched_masked_columns(conn, masked)
            + masked_routes(conn, masked)
            + unchecked_definer_findings(conn, masked)
            + catalog_value_findings(conn, masked)
        )
        return partition_findings(conn, masked, found)

    @pinned
    def primary_key(self, conn: Connection, schema: str | None, table: str) -> list[str]:
        """A table's primary key columns as the reader sees them (`masking.view_order`)."""
        return postgres_primary_key(conn, schema, table)

    @pinned
    def stored_queries(self, conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[StoredQuery]:
        """Views and executable functions over masked tables (`profiles.postgres.stored`)."""
        return postgres_stored_queries(conn, masked)

    @pinned
    def mask_withheld(
        self, conn: Connection, masked: Mapping[str, frozenset[str]]
    ) -> list[tuple[str | None, str]]:
        """Partitions below a key over a masked column (`profiles.postgres.partitions`)."""
        return [(p.schema, p.table) for p in bound_partitions(conn, masked)]

    @pinned
    def mask_preparation(self, conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[str]:
        """`VACUUM FULL` of each masked table whose catalog holds a masked value
        (`profiles.postgres.missing`)."""
        return [f"VACUUM FULL {name}" for name, _ in catalog_value_tables(conn, masked)]

    @pinned
    def trigger_hints(self, conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[str]:
        """Row triggers on masked tables (`profiles.postgres.triggers`)."""
        return trigger_hints(conn, masked)

    @pinned
    def scan_pins(
        self, conn: Connection, masked: Mapping[str, frozenset[str]], default_schema: str | None
    ) -> tuple[dict[str, ScanPin], list[Finding]]:
        """No hints: masked calls run without index scans (an index over a masked column created
        while serving must not order them either); a table CLUSTERed on one is a finding
        (`profiles.postgres.scan_pins`)."""
        _, findings = postgres_scan_pins(conn, masked)
        self.index_scans_off = True
        return {}, findings

    @pinned
    def index_reach(
        self, conn: Connection, masked: Mapping[str, frozenset[str]], default_schema: str | None
    ) -> IndexReach:
        """What a masked call must reach to run without index scans (`profiles.postgres.index_reach`)."""
        return postgres_index_reach(conn, masked)

    @pinned
    def scan_order_hints(self, conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[str]:
        """Indexes over masked columns, CLUSTER on one, and `pg_stats.correlation` near +-1."""
        return scan_order_hints(conn, masked)

    @pinned
    def readable(self, conn: Connection) -> Readable:
        """Relations the role can read (or read some columns of), with `reltuples` estimates, except
        where row-level security hides rows from the role (the estimate counts them)."""
        return {
            (s, n): ROW_FILTERED_NOTE if hidden else (int(e) if e is not None and e >= 0 else None)
            for s, n, e, hidden in conn.execute(text(_READABLE)).all()
        }

    @pinned
    def catalog_routines(self, conn: Connection) -> dict[tuple[str, str], str]:
        """Functions the role can execute whose body reads the catalog (`postgres.catalog_reads`)."""
        return postgres_catalog_routines(conn)

    @pinned
    def catalog_stored(self, conn: Connection) -> dict[tuple[str, str, str], str]:
        """Views and policies whose query reads the catalog (`postgres.catalog_reads`)."""
        return postgres_catalog_stored(conn)

    @pinned
    def order_accepted(self, conn: Connection, allow: Collection[str]) -> frozenset[tuple[str, str]]:
        """Per-row functions whose every overload `--allow function-order:` accepts (`order_optins`)."""
        return postgres_order_accepted(conn, allow)

    @pinned
    def accepted_bodies(self, conn: Connection, allow: Collection[str]) -> dict[str, str]:
        """A digest of each function `function-order:` accepts, to compare while serving."""
        return postgres_accepted_bodies(conn, allow)

    @pinned
    def row_order_routines(self, conn: Connection) -> dict[tuple[str, str], str]:
        """Every user function, whatever its label or body (`profiles.postgres.routine_state`)."""
        return postgres_row_order_routines(conn)

    @pinned
    def user_aggregates(self, conn: Connection) -> frozenset[str]:
        """User aggregates whose name no other function has (`routine_state`)."""
        return postgres_user_aggregates(conn)

    def function_catalog(self, engine: Engine) -> FunctionCatalog:
        """Volatility from `pg_proc`."""
        return PostgresCatalog(engine)

    def explain(self, sql: str) -> str:
        """`EXPLAIN (FORMAT JSON)`."""
        return "EXPLAIN (FORMAT JSON) " + sql

    def cost(self, document: Any) -> float:
        """Total cost of the top plan node.

        >>> PostgresProfile().cost('[{"Plan": {"Total Cost": 12.5}}]')
        12.5
        """
        plan = json.loads(document) if isinstance(document, str) else document
        return float(plan[0]["Plan"]["Total Cost"])

    def grant(
        self,
        conn: Connection,
        role: str,
        tables: Sequence[str],
        password: str,
        budget: ConnectionBudget | None = None,
    ) -> list[str]:
        """CREATE ROLE with a CONNECTION LIMIT for `budget`, USAGE and SELECT grants, and the
        fixes the start-up check asks for."""
        limit = (budget or ConnectionBudget(DEFAULT_POOL_SIZE)).recommended
        return postgres_grant(conn, role, tables, password, limit)

    def role_setup(self, role: str) -> str | None:
        """`SET LOCAL ROLE "<role>"` inside the call's read-only transaction."""
        return f"SET LOCAL ROLE {quote_role(role)}"

    def untyped_parameter(self, exc: BaseException) -> int | None:
        """From SQLSTATE 42P18/42P08's "parameter $n" (`profiles.postgres.params`)."""
        return untyped_parameter(exc)

    def identity_catalog(self, engine: SqlEngine, catalog: FunctionCatalog | None) -> FunctionCatalog:
        """`DefinerCatalog`: SECURITY DEFINER functions, and those with a `SET role` clause, refused."""
        from mcpkit.sql.definers import DefinerCatalog

        return DefinerCatalog(engine, catalog)

    @pinned
    def shared_login_problems(self, conn: Connection, roles: Collection[str]) -> list[str]:
        """Each role exists, cannot bypass row-level security and is the account's to SET; the
        account inherits no role's rights (NOINHERIT; PostgreSQL 16+: no grant WITH INHERIT TRUE)
        (`profiles.postgres.roles`)."""
        return shared_login_problems(conn, roles)

    @pinned
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
        """Membership in another principal's login or in the server's account; `warn`: the policy
        roles it belongs to are logged (`profiles.postgres.roles`)."""
        return login_problems(conn, role, user, others, account, warn=warn)

    @pinned
    def table_stats(self, conn: Connection, schema: str | None, table: str) -> TableStats:
        """`pg_stats`, as far as the role may select the columns and no row-level policy applies."""
        return postgres_table_stats(conn, schema, table)

    def sample_clause(self, percent: float, seed: int, *, pages: bool = True) -> str | None:
        """`TABLESAMPLE SYSTEM (p) REPEATABLE (seed)` (whole pages, no scan), or BERNOULLI."""
        method = "SYSTEM" if pages else "BERNOULLI"
        return f"TABLESAMPLE {method} ({percent:.6f}) REPEATABLE ({seed})"
