"""MySQL and MariaDB: the read-only session, the login's verification, the catalog, the estimate."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

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
from mcpkit.sql.profiles.mysql.account import connection_limit_findings, inspect_mysql
from mcpkit.sql.profiles.mysql.catalog_reads import mysql_catalog_routines, mysql_catalog_views
from mcpkit.sql.profiles.mysql.cost import mysql_cost
from mcpkit.sql.profiles.mysql.fingerprint import mysql_fingerprint
from mcpkit.sql.profiles.mysql.generated import grant_refusal as virtual_refusal
from mcpkit.sql.profiles.mysql.mask_routes import definer_views_left_out, masked_views
from mcpkit.sql.profiles.mysql.masks import (
    derived_masks,
    exact_ties,
    readable_masked_columns,
    scan_order_hints,
)
from mcpkit.sql.profiles.mysql.relations import MYSQL_RELATIONS
from mcpkit.sql.profiles.mysql.routine_names import mysql_routine_keys
from mcpkit.sql.profiles.mysql.routine_state import mysql_row_order_routines
from mcpkit.sql.profiles.mysql.scan_pins import mysql_scan_pins
from mcpkit.sql.profiles.mysql.session import MysqlSession
from mcpkit.sql.profiles.mysql.stats import mysql_table_stats
from mcpkit.sql.profiles.mysql.stored import mysql_primary_key, mysql_stored_queries
from mcpkit.sql.profiles.mysql.triggers import trigger_hints
from mcpkit.sql.profiles.mysql.views import grant_refusal
from mcpkit.sql.profiles.scan_order import ScanPin
from mcpkit.sql.profiles.stored import StoredQuery

__all__ = ["MysqlProfile", "mysql_cost"]

_ROWS: Final = "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_ROWS FROM information_schema.TABLES"
# A relation `grant` names: its type and, for a view, what start-up judges it by (`grant_refusal`).
_GRANTED: Final = (
    "SELECT t.TABLE_TYPE, v.SECURITY_TYPE, v.DEFINER, v.VIEW_DEFINITION"
    " FROM information_schema.TABLES t LEFT JOIN information_schema.VIEWS v"
    " ON v.TABLE_SCHEMA = t.TABLE_SCHEMA AND v.TABLE_NAME = t.TABLE_NAME"
    " WHERE t.TABLE_SCHEMA = :s AND t.TABLE_NAME = :t"
)


class MysqlProfile(MysqlSession):
    """MySQL 8 and MariaDB 10.6+ through pymysql."""

    forever_sql = "SELECT SLEEP(100000)"  # MariaDB caps recursive CTEs at max_recursive_iterations
    costed = True
    vector_kind = "json"  # no vector type in MariaDB 10.11
    plan_check = "EXPLAIN {}"
    exact_ties = staticmethod(exact_ties)
    ordered_object_aggregates = False  # JSON_OBJECTAGG takes no ORDER BY
    rollup_in_key_order = True  # a filesort or index order on the keys, always (red team v2 L2)
    bare_columns = True  # ONLY_FULL_GROUP_BY (set per call with masks) misses ORDER BY and windows
    time_based_uuid = True  # UUID() is version 1
    # RAND() is mysys my_rnd: s1 = (3*s1 + s2) % (2^30-1), s2 = (s1 + s2 + 33) % ..., value s1/M,
    # so three values give the next. RANDOM_BYTES (OpenSSL's CSPRNG) and UUID v4 stay answered.
    guessable_random = frozenset({"rand"})
    caseless_columns = True
    system_schemas = frozenset({"information_schema", "mysql", "performance_schema", "sys"})
    catalog_complete = False  # information_schema lists only what the account holds a privilege on
    relations_sql = MYSQL_RELATIONS  # re-verification compares them with start-up (`relcheck`)

    def name_path(self, conn: Connection) -> tuple[str, ...]:
        """The connection's database (`USE` is refused, so it never changes); none without one."""
        database = conn.execute(text("SELECT DATABASE()")).scalar()
        return (str(database),) if database is not None else ()

    def inspect(self, conn: Connection, url: URL, allowed: frozenset[str] = frozenset()) -> AccountReport:
        """Server-wide privileges, DEFINER routines it can execute, writable tables of the login."""
        return inspect_mysql(conn, allowed, self.function_policy)

    def catalog_fingerprint(self, dbapi: Any) -> str:
        """The account's grants and the routines and views it can see, also under each role granted
        to it (`profiles.mysql.fingerprint`)."""
        return mysql_fingerprint(dbapi)

    def connection_findings(self, conn: Connection, budget: ConnectionBudget) -> list[Finding]:
        """The login's MAX_USER_CONNECTIONS must bound what the server opens, with a small margin:
        it caps the server threads runaway string searches keep busy after their calls."""
        return connection_limit_findings(conn, budget)

    def derived_masks(self, conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[DerivedMask]:
        """Generated columns computed from masked ones (column privileges see only the column named)."""
        return derived_masks(conn, masked)

    def trigger_hints(self, conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[str]:
        """Triggers on masked tables (`profiles.mysql.triggers`)."""
        return trigger_hints(conn, masked)

    def scan_order_hints(self, conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[str]:
        """Indexes over masked columns (a PRIMARY KEY orders the rows themselves)."""
        return scan_order_hints(conn, masked)

    def scan_pins(
        self, conn: Connection, masked: Mapping[str, frozenset[str]], default_schema: str | None
    ) -> tuple[dict[str, ScanPin], list[Finding]]:
        """`USE INDEX` lists of visible indexes for masked tables (`profiles.mysql.scan_pins`)."""
        return mysql_scan_pins(conn, masked, default_schema)

    def use_masks(self, conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[Finding]:
        """The masked columns the calls' identity can still read (column privileges must withhold them),
        and the DEFINER views that read them for it. From here on every call's session runs with
        ONLY_FULL_GROUP_BY (a bare column beside GROUP BY would follow the scan order)."""
        self.full_group_by = True
        return readable_masked_columns(conn, masked) + masked_views(conn, masked)

    def mask_left_out(
        self, conn: Connection, masked: Mapping[str, frozenset[str]]
    ) -> list[tuple[str | None, str, str]]:
        """DEFINER views that read a masked column, through routines they call too (`mask_routes`)."""
        return [(s, n, f"runs as its definer: {why}") for s, n, why in definer_views_left_out(conn, masked)]

    def primary_key(self, conn: Connection, schema: str | None, table: str) -> list[str]:
        """A table's primary key columns as the reader sees them (`masking.view_order`)."""
        return mysql_primary_key(conn, schema, table)

    def stored_queries(self, conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[StoredQuery]:
        """Views and allowed stored functions over masked tables (`profiles.mysql.stored`)."""
        return mysql_stored_queries(conn, masked, self.function_policy)

    def catalog_routines(self, conn: Connection) -> dict[tuple[str, str], str]:
        """Functions the account can execute whose body reads the catalog (`mysql.catalog_reads`)."""
        return mysql_catalog_routines(conn)

    def catalog_stored(self, conn: Connection) -> dict[tuple[str, str, str], str]:
        """Views whose definition reads the catalog, INVOKER ones too (`mysql.catalog_reads`)."""
        return {("view", s, n): f"view {s}.{n} {why}" for (s, n), why in mysql_catalog_views(conn).items()}

    def row_order_routines(self, conn: Connection) -> dict[tuple[str, str], str]:
        """Every stored function, whatever its label or body (`profiles.mysql.routine_state`)."""
        return mysql_row_order_routines(conn, self.function_policy)

    accent_blind_routines = True

    def routine_keys(self, conn: Connection, names: Iterable[str]) -> frozenset[str]:
        """Each name and the server's accent-blind weight of it (`profiles.mysql.routine_names`)."""
        return mysql_routine_keys(conn, names)

    def readable(self, conn: Connection) -> Readable:
        """`information_schema.TABLES` lists exactly what the login can see."""
        rows = conn.execute(text(_ROWS)).all()
        return {(s, n): (int(e) if e is not None else None) for s, n, e in rows}

    def explain(self, sql: str) -> str:
        """`EXPLAIN FORMAT=JSON`."""
        return "EXPLAIN FORMAT=JSON " + sql

    def cost(self, document: Any) -> float:
        """MySQL's cost, MariaDB's estimated rows examined (`mysql_cost`)."""
        return mysql_cost(document)

    def grant(
        self,
        conn: Connection,
        role: str,
        tables: Sequence[str],
        password: str,
        budget: ConnectionBudget | None = None,
    ) -> list[str]:
        """CREATE USER with the connection limit start-up checks, and SELECT on each table (SHOW
        VIEW too on a view: start-up reads its definition): no EXECUTE, so no DEFINER routine is
        reachable."""
        quote_role(role)
        default = conn.execute(text("SELECT DATABASE()")).scalar()
        limit = (budget or ConnectionBudget(DEFAULT_POOL_SIZE)).recommended
        script = [f"CREATE USER '{role}'@'%' IDENTIFIED BY '{password}' WITH MAX_USER_CONNECTIONS {limit}"]
        for name in tables:
            schema, _, table = name.rpartition(".")
            schema = schema or str(default or "")
            found = conn.execute(text(_GRANTED), {"s": schema, "t": table}).first()
            if found is None:
                raise SqlConfigError(f"no table or view {schema}.{table}")
            if found[0] == "VIEW":
                why = grant_refusal(found[1], found[2], schema, table, found[3])
            else:
                why = virtual_refusal(conn, schema, table)
            if why is not None:  # what start-up would refuse is left out, as PostgreSQL's trial does
                script.append(f"-- left out: {why}; no grant on it")
                continue
            script.append(f"GRANT SELECT ON `{schema}`.`{table}` TO '{role}'@'%'")
            if found[0] == "VIEW":  # a line of its own: `--mask` rewrites the SELECT lines
                script.append(f"GRANT SHOW VIEW ON `{schema}`.`{table}` TO '{role}'@'%'")
        return script

    def role_setup(self, role: str) -> str | None:
        """None: each role has its own login, from the secrets store."""
        quote_role(role)
        return None

    def table_stats(self, conn: Connection, schema: str | None, table: str) -> TableStats:
        """Index cardinality from information_schema (see `profiles.mysql.stats`)."""
        return mysql_table_stats(conn, schema, table)
