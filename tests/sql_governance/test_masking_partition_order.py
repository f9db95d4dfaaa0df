"""Red team mask17 F3: a table partitioned by a masked column is scanned in partition (bound)
order, so EXISTS with a row-dependent error tells which row's masked value falls in an earlier
partition; start-up and `doctor --mask` gave no `scan order` warning for it. The partition key over
a masked column (a plain column or an expression, at any level) is named now, as indexes are."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.maskcheck import prepare_masks, scan_order_hints
from tests.helpers import run_mcpkit
from tests.sql.sql_support import mysql_scratch, pg_scratch


def _hints(url: str, masks: Path) -> list[str]:
    engine = SqlEngine(url)
    try:
        _, _, masked = prepare_masks(engine, str(masks))
        return scan_order_hints(engine, masked)
    finally:
        engine.close()


@pytest.mark.postgres
def test_postgres_a_partition_key_over_a_masked_column_is_warned_about(pg_url: str, tmp_path: Path) -> None:
    with pg_scratch(pg_url, "maskfix_part") as pg:
        a = pg.admin
        a.execute("CREATE TABLE contacts (id int, name text, email text) PARTITION BY RANGE (email)")
        a.execute("CREATE TABLE contacts_a PARTITION OF contacts FOR VALUES FROM ('a') TO ('m')")
        a.execute("CREATE TABLE contacts_m PARTITION OF contacts FOR VALUES FROM ('m') TO ('zzzz')")
        a.execute("CREATE TABLE leads (id int, name text, email text) PARTITION BY HASH (lower(email))")
        for i in range(2):
            a.execute(f"CREATE TABLE leads_{i} PARTITION OF leads FOR VALUES WITH (MODULUS 2, REMAINDER {i})")
        # second level: by id, then each partition by the e-mail
        a.execute("CREATE TABLE events (id int, email text) PARTITION BY RANGE (id)")
        a.execute(
            "CREATE TABLE events_1 PARTITION OF events FOR VALUES FROM (0) TO (100) PARTITION BY LIST (email)"
        )
        a.execute("CREATE TABLE events_1x PARTITION OF events_1 DEFAULT")
        a.execute("CREATE TABLE plain (id int, email text) PARTITION BY RANGE (id)")  # not by the e-mail
        a.execute(f"GRANT SELECT (id, name) ON contacts, leads TO {pg.reader}")
        a.execute(f"GRANT SELECT (id) ON events, plain TO {pg.reader}")
        masks = tmp_path / "masks.yaml"
        masks.write_text("masks:\n  - '*.email'\n")
        hints = [h for h in _hints(pg.reader_url, masks) if "partitioned by" in h]
        assert any(
            h.startswith("scan order may follow masked column contacts.email (partitioned by RANGE (email)")
            for h in hints
        ), hints
        assert any("leads.email (partitioned by HASH (lower(email))" in h for h in hints), hints
        assert any("events_1.email (partitioned by LIST (email)" in h for h in hints), hints
        assert not any("plain" in h or "events.email" in h for h in hints), hints
        done = run_mcpkit("sql", "doctor", "--dsn", pg.reader_url, "--mask", str(masks))
        assert (
            "warn scan order: scan order may follow masked column contacts.email (partitioned by"
            in done.stdout
        )


@pytest.mark.mysql
def test_mariadb_a_partition_key_over_a_masked_column_is_warned_about(mysql_url: str, tmp_path: Path) -> None:
    with mysql_scratch(mysql_url, "maskfix_part") as my:
        with my.admin.cursor() as c:
            c.execute(
                f"CREATE TABLE {my.db}.contacts (id INT, name VARCHAR(20), email VARCHAR(60))"
                " PARTITION BY RANGE COLUMNS(email) (PARTITION p0 VALUES LESS THAN ('m'),"
                " PARTITION p1 VALUES LESS THAN (MAXVALUE))"
            )
            c.execute(
                f"CREATE TABLE {my.db}.plain (id INT, email VARCHAR(60)) PARTITION BY HASH (id) PARTITIONS 2"
            )
        masks = tmp_path / "masks.yaml"
        masks.write_text("masks:\n  - contacts.email\n  - plain.email\n")
        hints = [h for h in _hints(my.admin_url, masks) if "partitioned by" in h]
        assert len(hints) == 1 and "contacts.email (partitioned by RANGE COLUMNS" in hints[0], hints
