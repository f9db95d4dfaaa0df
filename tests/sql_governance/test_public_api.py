"""The issue-6 packages: `__all__` lists documented public names, doctests pass, modules stay small."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

PACKAGES = ["mcpkit.sql.masking", "mcpkit.sql.audit", "mcpkit.sql.reports", "mcpkit.sql.identities"]
DOCTESTED = [
    "mcpkit.sql.masking.policy",
    "mcpkit.sql.masking.schema",
    "mcpkit.sql.masking.plan",
    "mcpkit.sql.audit.record",
    "mcpkit.sql.audit.store",
    "mcpkit.sql.audit.calls",
    "mcpkit.sql.audit_cli",
    "mcpkit.sql.reports.yaml_lines",
    "mcpkit.sql.reports.spec",
    "mcpkit.sql.reports.bind",
    "mcpkit.sql.reports.inputs",
    "mcpkit.sql.identities",
]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_complete_and_documented(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__doc__
    exported = set(module.__all__)
    assert exported <= {n for n in dir(module) if not n.startswith("_")}
    for attr in exported:
        obj = getattr(module, attr)
        if callable(obj):
            assert obj.__doc__, f"{name}.{attr} has no docstring"


@pytest.mark.parametrize("name", DOCTESTED)
def test_doctests(name: str) -> None:
    failed, attempted = doctest.testmod(importlib.import_module(name))
    assert attempted > 0 and failed == 0


def test_modules_stay_small() -> None:
    root = Path(importlib.import_module("mcpkit.sql").__file__ or "").parent
    paths = [*root.glob("masking/*.py"), *root.glob("audit/*.py"), *root.glob("reports/*.py")]
    paths += [root / "identities.py", root / "audit_cli.py"]
    for path in paths:
        lines = len(path.read_text(encoding="utf-8").splitlines())
        assert lines <= 400, f"{path.name} has {lines} lines"
