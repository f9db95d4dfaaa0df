"""Tool arguments fuzzed against each tool's own schema: every answer is a result, never INTERNAL."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpkit import Server
from mcpkit.testing import connect
from tests.fuzz.schema_values import from_schema

SKIP = {
    "test_sampling",
    "test_elicitation",
    "test_elicitation_sep1034_defaults",
    "test_elicitation_sep1330_enums",
    "test_tool_with_logging",
    "test_tool_with_progress",
}  # need a client that answers back


def servers() -> list[Server]:
    from examples.conformance import server as conformance
    from examples.weather import server as weather

    return [weather, conformance]


@pytest.mark.slow
@pytest.mark.parametrize("server", servers(), ids=lambda s: s.name)
def test_no_argument_makes_a_tool_fail_internally(server: Server) -> None:
    tools = {t["name"]: t for t in server.list_tools() if t["name"] not in SKIP}
    pairs = st.sampled_from(sorted(tools)).flatmap(
        lambda name: st.tuples(st.just(name), from_schema(tools[name]["inputSchema"]))
    )

    async def run_all(samples: list[tuple[str, object]]) -> list[tuple[str, object, str]]:
        failures = []
        async with connect(server) as client:
            for name, arguments in samples:
                args = arguments if isinstance(arguments, dict) else {"value": arguments}
                result = await client.call_tool(name, args)
                code = (result.meta or {}).get("mcpkit/error", {}).get("code")
                if code == "INTERNAL":
                    failures.append((name, arguments, code))
        return failures

    samples: list[tuple[str, object]] = []

    @settings(
        max_examples=600,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(pair=pairs)
    def collect(pair: tuple[str, object]) -> None:
        samples.append(pair)

    collect()
    assert anyio.run(run_all, samples) == []
