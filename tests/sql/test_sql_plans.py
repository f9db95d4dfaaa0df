"""A repeated statement reuses its admission and masking plan, never across a change of the inputs
the plan was made under (mask policy, reflected schema, function policy, the profile's enforcement
generation), and a function's volatility is looked up again on every call (`mcpkit.sql.plans`)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from mcpkit.errors import Refused
from mcpkit.sql.admission import FunctionPolicy
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.masking import KnownSchema, MaskPolicy, reflect_schema
from mcpkit.sql.plans import MAX_CACHED_CHARS
from mcpkit.sql.profiles.postgres.catalog import PostgresCatalog
from mcpkit.sql.service import Masking, SqlService
from tests.sql.sql_support import DbEnv, pg_admin

NOTES = "SELECT id, notes FROM sales_demo WHERE id = 1"


@pytest.fixture
def service(sqlite_env: DbEnv) -> Iterator[SqlService]:
    engine = SqlEngine(sqlite_env.ro_url)
    yield SqlService(engine, max_rows=100, timeout_s=5.0)
    engine.close()


def _masking(service: SqlService, columns: list[str]) -> Masking:
    assert isinstance(service.engine, SqlEngine)
    return Masking(MaskPolicy.of(columns), KnownSchema(reflect_schema(service.engine.sa_engine), "sqlite"))


def _call(service: SqlService, sql: str) -> list[tuple[object, ...]]:
    result, _ = service.query(sql, call_id=secrets.token_hex(16))
    return [tuple(r) for r in result.rows]


def test_a_repeated_statement_is_planned_once(service: SqlService) -> None:
    first = _call(service, NOTES)
    assert (service.plans.misses, service.plans.hits) == (1, 0)
    assert _call(service, NOTES) == first
    assert (service.plans.misses, service.plans.hits) == (1, 1)
    _call(service, NOTES + " ")  # another text is another plan
    assert service.plans.misses == 2


def test_a_long_statement_is_not_kept(service: SqlService) -> None:
    long = NOTES + " AND notes <> '" + "x" * MAX_CACHED_CHARS + "'"
    _call(service, long)
    _call(service, long)
    assert (service.plans.misses, service.plans.hits) == (2, 0)


def test_a_cached_plan_is_not_reused_after_the_masks_change(service: SqlService) -> None:
    plain = _call(service, NOTES)
    assert plain[0][1] not in (None, "<masked>")
    _call(service, NOTES)  # cached now
    service.masking = _masking(service, ["sales_demo.notes"])
    masked = _call(service, NOTES)
    assert masked[0][1] == "<masked>", "a plan made without masks served a masked column"
    assert service.plans.hits == 1 and service.plans.misses == 2
    # A new policy masking another column, equal schema: planned again, notes unmasked.
    assert service.masking is not None
    service.masking = Masking(MaskPolicy.of(["sales_demo.region"]), service.masking.schema)
    assert _call(service, NOTES) == plain
    # The same policy over a re-reflected schema (the schema knowledge changed): planned again.
    service.masking = _masking(service, ["sales_demo.notes"])
    _call(service, NOTES)
    misses = service.plans.misses
    service.masking = Masking(service.masking.policy, _masking(service, []).schema)
    assert _call(service, NOTES)[0][1] == "<masked>"
    assert service.plans.misses == misses + 1


def test_a_cached_plan_is_not_reused_after_the_function_policy_changes(service: SqlService) -> None:
    sql = "SELECT upper(region) FROM sales_demo WHERE id = 1"
    _call(service, sql)
    _call(service, sql)
    service.functions = FunctionPolicy.for_dialect("sqlite", allow=["lower"])
    with pytest.raises(Refused) as refused:
        _call(service, sql)
    assert (refused.value.data or {}).get("reason") == "function"


def test_a_cached_plan_is_not_reused_after_the_profile_generation_moves(service: SqlService) -> None:
    _call(service, NOTES)
    _call(service, NOTES)
    assert service.plans.hits == 1
    service.profile.policy_generation += 1  # what use_masks / use_function_policy do
    _call(service, NOTES)
    assert service.plans.hits == 1 and service.plans.misses == 2


def test_volatility_is_looked_up_again_on_a_cached_plan(pg_env: DbEnv) -> None:
    """A function re-created as VOLATILE after its query was planned is refused on the next call."""
    name = f"mk_plan_{secrets.token_hex(4)}"
    qualified = f"{pg_env.schema}.{name}"
    with pg_admin(pg_env.admin_url) as admin:
        admin.execute(
            f"CREATE FUNCTION {qualified}(int) RETURNS int LANGUAGE sql IMMUTABLE AS $$ SELECT $1 $$"
        )
        admin.execute(f"GRANT EXECUTE ON FUNCTION {qualified}(int) TO {pg_env.ro_user}")
    engine = SqlEngine(pg_env.ro_url, pool_size=1)
    try:
        service = SqlService(
            engine,
            timeout_s=5.0,
            functions=FunctionPolicy.for_dialect("postgres", extra=[name]),
            catalog=PostgresCatalog(engine, ttl_s=0.0),
        )
        sql = f"SELECT {name}(id) FROM sales_demo WHERE id = 1"
        assert _call(service, sql) == [(1,)]
        assert _call(service, sql) == [(1,)]
        assert service.plans.hits == 1
        with pg_admin(pg_env.admin_url) as admin:
            admin.execute(
                f"CREATE OR REPLACE FUNCTION {qualified}(int) RETURNS int LANGUAGE sql VOLATILE"
                " AS $$ SELECT $1 $$"
            )
        with pytest.raises(Refused) as refused:
            _call(service, sql)
        assert (refused.value.data or {}).get("reason") == "volatile_function"
        assert service.plans.hits == 2  # refused from the cached plan, by the catalog
    finally:
        engine.close()
        with pg_admin(pg_env.admin_url) as admin:
            admin.execute(f"DROP FUNCTION IF EXISTS {qualified}(int)")
