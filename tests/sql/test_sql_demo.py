"""The demo database: deterministic, realistic, the same tables on every engine."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from mcpkit.sql.demo import demo_rows, write_demo_sqlite


def test_rows_are_deterministic() -> None:
    assert demo_rows(sales=50, vectors=3) == demo_rows(sales=50, vectors=3)


def test_shape_of_the_data() -> None:
    sales, vectors = demo_rows()
    assert len(sales) >= 2000 and len(vectors) >= 100
    assert {r["year"] for r in sales} == {2021, 2022, 2023, 2024}
    assert {r["quarter"] for r in sales} == {1, 2, 3, 4}
    assert max(len(r["notes"]) for r in sales) > 500  # some notes are clipped when shown
    assert all(isinstance(r["receipt"], bytes) and 0 < len(r["receipt"]) <= 256 for r in sales)
    assert {len(v["embedding"]) for v in vectors} == {384}


def test_write_sqlite(tmp_path: Path) -> None:
    path = write_demo_sqlite(tmp_path / "d.db")
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM sales_demo").fetchone() == (3000,)
        assert conn.execute("SELECT count(*) FROM product_vectors").fetchone() == (200,)
    with pytest.raises(FileExistsError):
        write_demo_sqlite(path)
    write_demo_sqlite(path, overwrite=True)
