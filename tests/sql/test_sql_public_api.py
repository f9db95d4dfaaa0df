"""The public surface: `__all__` lists exactly the public names, each importable and documented."""

from __future__ import annotations

import importlib

import pytest

MODULES = ["mcpkit.sql", "mcpkit.sql.admission", "mcpkit.sql.engines", "mcpkit.sql.profiles"]


@pytest.mark.parametrize("name", MODULES)
def test_all_is_complete_and_documented(name: str) -> None:
    module = importlib.import_module(name)
    public = {n for n in dir(module) if not n.startswith("_")}
    exported = set(module.__all__)
    assert exported <= public
    for attr in exported:
        obj = getattr(module, attr)
        if callable(obj):
            assert obj.__doc__, f"{name}.{attr} has no docstring"


def test_modules_stay_small() -> None:
    from pathlib import Path

    root = Path(importlib.import_module("mcpkit.sql").__file__ or "").parent
    for path in root.rglob("*.py"):
        lines = len(path.read_text().splitlines())
        assert lines <= 400, f"{path.name} has {lines} lines"


DOCTESTED = [
    "mcpkit.sql.profiles",
    "mcpkit.sql.profiles.base",
    "mcpkit.sql.profiles.postgres",
    "mcpkit.sql.profiles.mysql.cost",
    "mcpkit.sql.profiles.mysql.view_text",
    "mcpkit.sql.profiles.mysql.routine_relations",
    "mcpkit.sql.profiles.mysql.routine_tokens",
    "mcpkit.sql.dialects",
    "mcpkit.sql.shaping",
    "mcpkit.sql.render",
    "mcpkit.sql.demo",
    "mcpkit.sql.engines.fake",
    "mcpkit.sql.admission.admit",
    "mcpkit.sql.admission.functions",
    "mcpkit.sql.admission.lexical",
    "mcpkit.sql.admission.parse",
    "mcpkit.sql.admission.cap_rows",
    "mcpkit.sql.admission.drop_from_dual",
    "mcpkit.sql.admission.require_query",
    "mcpkit.sql.admission.reject_writes",
    "mcpkit.sql.admission.reject_locks",
    "mcpkit.sql.admission.reject_parameters",
    "mcpkit.sql.admission.reject_functions",
    "mcpkit.sql.admission.reject_attribute_calls",
    "mcpkit.sql.admission.reject_volatile_functions",
    "mcpkit.sql.sources",
]


@pytest.mark.parametrize("name", DOCTESTED)
def test_doctests(name: str) -> None:
    import doctest

    module = importlib.import_module(name)
    failed, attempted = doctest.testmod(module)
    assert attempted > 0 and failed == 0
