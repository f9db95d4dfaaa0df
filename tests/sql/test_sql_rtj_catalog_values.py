"""Red team rtJ, F4: readable catalogs answered values of objects in a schema the reader cannot use:
`pg_attribute.attmissingval` (the value every row older than an `ADD COLUMN ... DEFAULT` holds),
`pg_type.typdefault`/`typdefaultbin` and `information_schema.domains.domain_default` (a domain's
default), `pg_class.relpartbound` (partition bounds, row values). Admission refuses those columns,
`*` and whole rows of those catalogs; their names stay readable."""

from __future__ import annotations

import secrets

import pytest

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import pg_scratch, rows_or_message

pytestmark = pytest.mark.postgres

_READS = [
    "SELECT attname, attmissingval::text FROM pg_attribute WHERE atthasmissing",
    "SELECT typname, typdefault FROM pg_type WHERE typdefault IS NOT NULL",
    "SELECT typname, typdefaultbin::text FROM pg_type WHERE typdefaultbin IS NOT NULL",
    "SELECT domain_name, domain_default FROM information_schema.domains",
    "SELECT relname, relpartbound::text FROM pg_class WHERE relispartition",
    "SELECT a::text FROM pg_attribute a WHERE atthasmissing",
    "SELECT t.*::text FROM pg_type t WHERE typdefault IS NOT NULL",
]


def test_catalog_values_of_hidden_objects_are_refused(pg_url: str) -> None:
    token = f"mksecret{secrets.token_hex(6)}"
    with pg_scratch(pg_url, "rtjcv") as s:
        s.admin.execute("CREATE SCHEMA hid")  # no USAGE for the reader
        s.admin.execute(f"CREATE DOMAIN hid.token AS text DEFAULT '{token}d'")
        s.admin.execute("CREATE TABLE hid.t (a int)")
        s.admin.execute("INSERT INTO hid.t VALUES (1)")
        s.admin.execute(f"ALTER TABLE hid.t ADD COLUMN k text DEFAULT '{token}m'")
        s.admin.execute("CREATE TABLE hid.pay (tenant text) PARTITION BY LIST (tenant)")
        s.admin.execute(f"CREATE TABLE hid.pay_a PARTITION OF hid.pay FOR VALUES IN ('{token}p')")
        engine = SqlEngine(s.reader_url)
        try:
            with engine.sa_engine.connect() as conn:  # what the login itself reads: the values are there
                seen = " ".join(str(conn.exec_driver_sql(sql).all()) for sql in _READS)
            assert f"{token}d" in seen and f"{token}m" in seen and "PARTITIONBOUNDSPEC" in seen, seen
            service = SqlService(engine)
            for sql in _READS:
                answer = str(rows_or_message(service, sql))
                assert token not in answer and "never readable" in answer, (sql, answer)
            names = rows_or_message(service, "SELECT attname FROM pg_attribute WHERE atthasmissing")
            assert names == [["k"]]
        finally:
            engine.close()
