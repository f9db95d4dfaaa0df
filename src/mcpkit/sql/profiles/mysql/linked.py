"""Storage engines whose rows live in other tables or on other servers: one table of them.

A table of these engines holds no rows of its own: each read returns another table's rows, local
or remote, under the linked table's own privileges, and the link is one `ALTER TABLE` away while
serving (`ALTER TABLE m UNION=(masked)`, red team rt31 F9; `ALTER TABLE f CONNECTION=...`). The
link is in the table's definition (`SHOW CREATE TABLE`), in no information_schema table. Used by
the catalog fingerprint (`fingerprint`: the definition of each one is digested) and the mask
checks (`masks.derived_masks`: MERGE columns by position, every column of the others).
"""

from __future__ import annotations

from typing import Final

__all__ = ["LINKED_ENGINES", "LINKED_TABLES", "MERGE", "engine_is_linked", "linked_filter"]

MERGE: Final = "MRG_MYISAM"

# information_schema.TABLES.ENGINE, upper-cased -> where the link is (the table option that moves it)
LINKED_ENGINES: Final[dict[str, str]] = {
    MERGE: "UNION=(...): identical MyISAM tables of this server (ENGINE=MERGE is its alias)",
    "FEDERATED": "CONNECTION='mysql://user:pw@host/db/table' or a CREATE SERVER name (FederatedX too)",
    "FEDERATEDX": "CONNECTION=..., as FEDERATED (the plugin's other name)",
    "CONNECT": "TABLE_TYPE=MYSQL/ODBC/JDBC/PROXY/TBL/XCOL/PIVOT/OCCUR with TABNAME=, TABLE_LIST=, SRCDEF=",
    "SPIDER": "COMMENT='server ..., table ...' or CONNECTION=..., per partition too",
    "OQGRAPH": "DATA_TABLE=, ORIGID=, DESTID=: the edges are another table's rows",
    "SPHINX": "CONNECTION='sphinx://host:port/index': rows from a searchd server",
    "CASSANDRA": "thrift_host=, keyspace=, column_family= (removed in MariaDB 10.6)",
}

_SYSTEM: Final = "('information_schema', 'performance_schema', 'mysql', 'sys')"


def linked_filter() -> str:
    """The WHERE condition on information_schema.TABLES for the tables of `LINKED_ENGINES`.

    >>> linked_filter()[:40]
    "UPPER(engine) IN ('MRG_MYISAM', 'FEDERAT"
    """
    names = ", ".join(f"'{e}'" for e in LINKED_ENGINES)
    return f"UPPER(engine) IN ({names}) AND table_schema NOT IN {_SYSTEM}"


def engine_is_linked(engine: object) -> bool:
    """Whether an information_schema.TABLES.ENGINE value is one of `LINKED_ENGINES`.

    >>> [engine_is_linked(e) for e in ("MRG_MyISAM", "FEDERATED", "Spider", "InnoDB", None)]
    [True, True, True, False, False]
    """
    return str(engine).upper() in LINKED_ENGINES


# The tables of those engines the account sees: schema, name, engine.
LINKED_TABLES: Final = (
    "SELECT table_schema, table_name, engine FROM information_schema.TABLES"
    f" WHERE {linked_filter()} ORDER BY table_schema, table_name"
)
