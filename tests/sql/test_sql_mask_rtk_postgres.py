"""Red team rtK F3 on PostgreSQL: a table LIST-partitioned by a masked column was served with a
warning that said order-dependent answers "can reveal the ranking of its values". The partitions are
scanned in bound order, so the time a per-row failure took placed each id in its partition: the
bound its value falls in (LIST: the value). The warning said that; it is a start-up finding now
(`--allow partition-order:T`, partref; `tests/sql_governance/test_masking_partition_order.py`), whose
line says it (rt19mask still withholds the partitions themselves; docs/masking.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.maskcheck import prepare_masks
from mcpkit.sql.scanpins import partition_findings
from tests.sql.sql_support import masks_file, pg_scratch

pytestmark = pytest.mark.postgres


def test_f3_a_masked_list_partition_key_is_refused_as_the_value(pg_url: str, tmp_path: Path) -> None:
    with pg_scratch(pg_url, "fixn_k3") as pg:
        pg.admin.execute(
            "CREATE TABLE patients (id int, name text, diagnosis text) PARTITION BY LIST (diagnosis)"
        )
        pg.admin.execute("CREATE TABLE patients_hiv PARTITION OF patients FOR VALUES IN ('hiv')")
        pg.admin.execute("CREATE TABLE patients_other PARTITION OF patients DEFAULT")
        engine = SqlEngine(pg.admin_url)
        try:
            _, _, masked = prepare_masks(engine, masks_file(tmp_path, "patients.diagnosis"))
            found = [f.line() for f in partition_findings(engine, masked)]
        finally:
            engine.close()
    assert len(found) == 1 and "public.patients is partitioned by LIST (diagnosis)" in found[0], found
    assert "which partition each row is in" in found[0] and "LIST: the value itself" in found[0], found
    assert found[0].endswith("(or --allow partition-order:public.patients)"), found
