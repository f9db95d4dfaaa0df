"""The plan-only check of a failed masked read (`masking.failures.row_failure`, rtA F1) keeps a
failure's class only when the plan fails the same way (review R17). Before, any failure of the
check kept it: a check that timed out or found the pool busy (other calls of the agent's can hold
it) left `undefined_object` on one order of two rows and `data` on the other."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from mcpkit.errors import ToolError
from mcpkit.sql.errors import QueryFailed, QueryTimeout
from mcpkit.sql.masking.failures import row_failure


class _Check:
    """An engine whose plan-only check fails with `raised`."""

    def __init__(self, raised: ToolError) -> None:
        self.raised = raised

    def execute(self, *_: Any, **__: Any) -> None:
        raise self.raised


def _told(raised: ToolError) -> str:
    profile: Any = SimpleNamespace(compile_check="EXPLAIN (COSTS OFF) {}")
    engine: Any = _Check(raised)
    return row_failure(QueryFailed("undefined_object", "t"), engine, profile, "SELECT 1", "t", 1.0).kind


@pytest.mark.parametrize(
    "raised",
    [QueryTimeout(1.0, "t"), QueryFailed("resource", "t"), QueryFailed("connection", "t")],
    ids=["timeout", "busy", "connection"],
)
def test_a_check_that_fails_otherwise_tells_the_data_failure(raised: ToolError) -> None:
    assert _told(raised) == "data"


def test_the_plan_failing_the_same_way_keeps_the_class() -> None:
    assert _told(QueryFailed("undefined_object", "t")) == "undefined_object"
