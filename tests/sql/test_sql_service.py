"""The service with a fake engine: caps, refusals and messages, without a database."""

from __future__ import annotations

import pytest

from mcpkit.errors import Refused
from mcpkit.sql.engines.fake import FakeEngine
from mcpkit.sql.service import SqlService


def _rows(sql: str) -> tuple[list[str], list[tuple[object, ...]]]:
    return ["n"], [(i,) for i in range(1000)]


def test_cap_is_in_the_sql_and_in_the_fetch() -> None:
    fake = FakeEngine(_rows, dialect="postgres")
    service = SqlService(fake, max_rows=100, catalog=None)
    result, text = service.query("SELECT n FROM t", call_id="c1", max_rows=10)
    assert fake.calls == ["SELECT n FROM t LIMIT 11"]
    assert result.row_count == 10 and result.truncated
    assert "more rows exist" in text.splitlines()[0]


def test_max_rows_is_clamped_to_the_hard_maximum() -> None:
    fake = FakeEngine(_rows, dialect="sqlite")
    service = SqlService(fake, max_rows=50, catalog=None)
    result, _ = service.query("SELECT n FROM t", call_id="c1", max_rows=10_000)
    assert result.row_count == 50 and fake.calls == ["SELECT n FROM t LIMIT 51"]


def test_hard_maximum_is_bounded() -> None:
    with pytest.raises(ValueError, match="5000"):
        SqlService(FakeEngine(_rows), max_rows=5001)


def test_refused_query_never_reaches_the_engine() -> None:
    fake = FakeEngine(_rows, dialect="mysql")
    with pytest.raises(Refused) as info:
        SqlService(fake, catalog=None).query("DELETE FROM t", call_id="c1")
    assert fake.calls == []
    assert info.value.code == "REFUSED"
    assert info.value.message.count(".") >= 1 and "\n" not in info.value.message


def test_no_more_rows() -> None:
    fake = FakeEngine(lambda sql: (["a", "b"], [(1, "x")]), dialect="sqlite")
    result, text = SqlService(fake, catalog=None).query("SELECT a, b FROM t", call_id="c")
    assert not result.truncated
    assert text.splitlines()[0].startswith("1 row sent; no more rows;")


_SPANS = """
import json
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from mcpkit.errors import Refused
from mcpkit.sql.engines.fake import FakeEngine
from mcpkit.sql.service import SqlService

spans = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(spans))
trace.set_tracer_provider(provider)
service = SqlService(FakeEngine(lambda sql: (["n"], [(1,), (2,)])), catalog=None)
with trace.get_tracer("test").start_as_current_span("tools/call execute_query"):
    service.query("SELECT n FROM t", call_id="c1")
    try:
        service.query("DELETE FROM t", call_id="c2")
    except Refused:
        pass
finished = spans.get_finished_spans()
out = [[s.name, s.parent.span_id if s.parent else None, dict(s.attributes)] for s in finished]
print(json.dumps(out))
"""


def test_admission_and_database_are_child_spans_of_the_call() -> None:
    import json
    import subprocess
    import sys

    from tests.helpers import ROOT

    # A process of its own: the global tracer provider can be set once per process.
    done = subprocess.run(
        [sys.executable, "-c", _SPANS], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    spans = json.loads(done.stdout.strip().splitlines()[-1])
    names = [name for name, _, _ in spans]
    assert names == ["sql.admission", "sql.database", "sql.admission", "tools/call execute_query"]
    call_id = next(parent for name, parent, _ in spans if name == "tools/call execute_query")
    assert call_id is None
    parents = {parent for name, parent, _ in spans if name.startswith("sql.")}
    assert len(parents) == 1 and None not in parents  # all under the call's span
    assert spans[1][2]["db.response.returned_rows"] == 2
    assert "mcpkit.sql.refused" in spans[2][2]
    assert all("SELECT" not in json.dumps(attributes) for _, _, attributes in spans)  # no SQL text
