"""docs/authoring.md is real code: its python blocks run in order in one namespace, asserts included."""

from __future__ import annotations

import re
import sys
import types

from tests.helpers import ROOT


def test_every_snippet_of_the_authoring_guide_runs() -> None:
    text = (ROOT / "docs" / "authoring.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 10
    module = types.ModuleType("authoring_guide")
    sys.modules[module.__name__] = module  # pydantic resolves the models' annotations through it
    try:
        for i, code in enumerate(blocks, 1):
            exec(compile(code, f"docs/authoring.md[{i}]", "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
