"""Helpers for the issue-6 tests: the CRM tables next to the demo data, corpus loading, the masked path."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.maskcheck import enforce_masks, prepare_masks
from mcpkit.sql.masking import (
    KnownSchema,
    MaskPolicy,
    apply_mask,
    plan_masking,
    reflect_schema,
    reflect_views,
)
from mcpkit.sql.masking.schema import SchemaMapping
from mcpkit.sql.models import QueryResult
from mcpkit.sql.service import Masking, SqlService
from mcpkit.sql.shaping import shape_rows

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "masking_corpus.yaml"
DIALECTS = ("sqlite", "postgres", "mysql")

_FIRST = ("ada", "grace", "alan", "edsger", "barbara", "donald", "margaret", "ken", "frances", "john")
_LAST = ("lovelace", "hopper", "turing", "dijkstra", "liskov", "knuth", "hamilton", "thompson", "allen")
_REGIONS = ("Europe", "North America", "Asia Pacific", "Latin America")

CRM_DDL = (
    "CREATE TABLE {s}customers (id INTEGER PRIMARY KEY, name VARCHAR(80) NOT NULL,"
    " email VARCHAR(120) NOT NULL, ssn VARCHAR(11) NOT NULL, region VARCHAR(40) NOT NULL,"
    " tier INTEGER NOT NULL)",
    "CREATE TABLE {s}orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL,"
    " amount NUMERIC(12, 2) NOT NULL, email VARCHAR(120) NOT NULL, ssn VARCHAR(11))",
)


def crm_rows() -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """40 customers with unique emails and SSNs (the masked values), and their orders."""
    rng = random.Random(6)  # deterministic test data
    customers = []
    seen: set[str] = set()
    for i in range(1, 41):
        while True:
            first, last = rng.choice(_FIRST), rng.choice(_LAST)
            email = f"{first}.{last}{rng.randint(10, 99)}@example.org"
            if email not in seen:
                seen.add(email)
                break
        ssn = f"{rng.randint(100, 899)}-{rng.randint(10, 99)}-{rng.randint(1000, 9999)}"
        customers.append((i, f"{first.title()} {last.title()}", email, ssn, rng.choice(_REGIONS), i % 3 + 1))
    orders = [
        (j, rng.randint(1, 40), round(rng.uniform(5, 500), 2), f"billing+{j}@corp.example", None)
        for j in range(1, 121)
    ]
    return customers, orders


def secrets() -> list[str]:
    """Every masked value: emails and SSNs, plus the distinctive parts of each."""
    customers, _ = crm_rows()
    out = []
    for _, _, email, ssn, _, _ in customers:
        out += [email, email.split("@")[0], ssn, ssn.replace("-", "")]
    return out


@dataclass
class Case:
    """One corpus entry."""

    name: str
    sql: str
    expect: str
    masked: list[int] = field(default_factory=list)
    dialects: tuple[str, ...] = DIALECTS

    def text(self, schema: str) -> str:
        return self.sql.replace("{schema}", schema)


def load_corpus() -> tuple[MaskPolicy, list[Case], list[Case]]:
    """The policy, the attacks and the legitimate queries of `masking_corpus.yaml`."""
    raw = yaml.safe_load(CORPUS.read_text(encoding="utf-8"))
    policy = MaskPolicy.of(raw["masks"])

    def cases(items: list[dict[str, Any]], default: str) -> list[Case]:
        return [
            Case(
                name=i["name"],
                sql=i["sql"],
                expect=i.get("expect", default),
                masked=list(i.get("masked", [])),
                dialects=tuple(i.get("dialects", DIALECTS)),
            )
            for i in items
        ]

    return policy, cases(raw["attacks"], "refused"), cases(raw["legit"], "answered")


def run_masked(
    service: SqlService, sql: str, schema: SchemaMapping, policy: MaskPolicy, *, max_rows: int = 200
) -> QueryResult:
    """`execute_query` with masking, composed the way the server will: admit, plan, run, mask, shape."""
    admitted = service.admit(sql, max_rows)
    plan = plan_masking(admitted.tree, service.engine.dialect, schema, policy)
    rows = service.engine.execute(plan.sql or admitted.sql, None, max_rows, service.timeout_s, "mask-test")
    return shape_rows(apply_mask(rows, plan))


def serve_masked(url: str, masks: Path, **kw: Any) -> SqlService:
    """What `serve --mask FILE` does at start-up: the service (10 rows, 10 s), or SqlConfigError."""
    engine = SqlEngine(url)
    try:
        policy, reflection, masked = prepare_masks(engine, str(masks))
        enforce_masks(engine, masked)
    except BaseException:
        engine.close()
        raise
    masking = Masking(policy, reflection.known(engine), masked)
    return SqlService(engine, max_rows=10, timeout_s=10.0, masking=masking, **kw)


def served_with_views(url: str, policy: MaskPolicy, max_rows: int) -> SqlService:
    """A service under `policy` whose analysis knows the views (20 s), the engine's check enforced."""
    engine = SqlEngine(url)
    mapping = reflect_schema(engine.sa_engine, policy=policy)
    enforce_masks(engine, policy.masked_tables(mapping))
    known = KnownSchema(mapping, engine.dialect, views=reflect_views(engine.sa_engine))
    return SqlService(engine, max_rows=max_rows, timeout_s=20.0, masking=Masking(policy, known))


def leaked(result: QueryResult, values: list[str]) -> list[str]:
    """Masked values (or their parts) that appear in any cell or column name."""
    texts = [str(c) for row in result.rows for c in row] + list(result.columns)
    return sorted({v for v in values for t in texts if v in t})


# Generated queries for the non-interference tests (SQLite twins and the PostgreSQL/MariaDB twins).
MASKED_COLS = ("c.email", "c.ssn")
CLEAN_COLS = ("c.id", "c.name", "c.region", "c.tier")
_ANY_COL = st.sampled_from(MASKED_COLS + CLEAN_COLS)


def _value(col: str, dialect: str) -> st.SearchStrategy[str]:
    concat = f"concat({col}, '!')" if dialect == "mysql" else f"{col} || '!'"
    return st.sampled_from(
        [
            col,
            f"upper({col})",
            f"length({col})",
            f"substr({col}, 1, 2)",
            concat,
            f"CASE WHEN {col} LIKE 'a%' THEN 1 ELSE 0 END",
            f"coalesce({col}, 'none')",
        ]
    )


_PREDICATES = st.one_of(
    _ANY_COL.map(lambda c: f"{c} LIKE 'a%'"),
    _ANY_COL.map(lambda c: f"length({c}) > 12"),
    _ANY_COL.map(lambda c: f"{c} > 'm'"),
    st.just("c.tier = 2"),
    st.just("c.id < 25"),
)


@st.composite
def masked_queries(draw: st.DrawFn, dialect: str = "sqlite") -> str:
    """Generated SELECTs over the CRM fixture: masked and clean columns in every clause."""
    if draw(st.booleans()):
        key = draw(st.sampled_from(CLEAN_COLS + MASKED_COLS))
        agg = draw(st.sampled_from(["count(DISTINCT {})", "max({})", "min(length({}))", "count({})"]))
        select = [key, agg.format(draw(_ANY_COL)), "count(*)"]
        tail = f" GROUP BY {key}" + draw(
            st.sampled_from(["", " HAVING count(*) > 1", f" HAVING max({draw(_ANY_COL)}) > 'b'"])
        )
        order = f" ORDER BY {key}"
    else:
        select = [
            *draw(st.lists(_ANY_COL.flatmap(lambda c: _value(c, dialect)), min_size=1, max_size=4)),
            "c.id",
        ]
        tail = ""
        order = (
            " ORDER BY " + draw(st.sampled_from([*CLEAN_COLS, *MASKED_COLS, "length(c.email)"])) + ", c.id"
        )
    where = f" WHERE {draw(_PREDICATES)}" if draw(st.booleans()) else ""
    source = draw(
        st.sampled_from(
            [
                "customers c",
                "(SELECT * FROM customers) c",
                "customers c JOIN orders o ON o.customer_id = c.id",
                "(SELECT id, name, region, tier, upper(email) AS email, ssn FROM customers) c",
            ]
        )
    )
    distinct = "DISTINCT " if draw(st.integers(0, 9)) == 0 else ""
    return f"SELECT {distinct}{', '.join(select)} FROM {source}{where}{tail}{order} LIMIT 30"
