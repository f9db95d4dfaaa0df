"""The README's example server is real code: it runs and behaves as the README says."""

from __future__ import annotations

import re
import types

import pytest

from mcpkit.testing import connect
from tests.helpers import ROOT, text_of


def readme_server() -> object:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    code = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    assert len([line for line in code.splitlines() if line.strip()]) <= 22
    module = types.ModuleType("readme_example")
    exec(compile(code, "README.md", "exec"), module.__dict__)
    return module.server


@pytest.mark.anyio
async def test_readme_example_validates_strictly_and_answers() -> None:
    async with connect(readme_server()) as client:  # type: ignore[arg-type]
        ok = await client.call_tool("forecast", {"city": "Paris", "days": 2})
        wrong_type = await client.call_tool("forecast", {"city": "Paris", "days": "2"})
        unknown_city = await client.call_tool("forecast", {"city": "Atlantis"})
    assert text_of(ok) == "Paris: mild for 2 day(s)"
    assert text_of(wrong_type).startswith("INVALID_PARAMS:") and "days" in text_of(wrong_type)
    assert text_of(unknown_city) == "TOOL_ERROR: No forecast for that city; try Paris or Oslo."
