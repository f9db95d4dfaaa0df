"""The public surface is exactly `__all__`, and every name in it exists."""

from __future__ import annotations

import importlib

import pytest

import mcpkit


def test_all_is_sorted_and_resolves() -> None:
    assert list(mcpkit.__all__) == sorted(mcpkit.__all__)
    for name in mcpkit.__all__:
        assert getattr(mcpkit, name) is not None


def test_no_accidental_public_names() -> None:
    for name in mcpkit.__all__:
        getattr(mcpkit, name)
    public = {n for n in vars(mcpkit) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(mcpkit, n)).__name__ == "module"}
    assert public - modules - {"annotations", "importlib", "TYPE_CHECKING", "Any"} == set(mcpkit.__all__)


def test_the_linter_imports_nothing_of_the_core() -> None:
    import subprocess
    import sys

    code = "import sys, mcpkit.lint; print(sorted(m for m in sys.modules if m in ('mcpkit.server', 'mcp')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("package", ["mcpkit.lint", "mcpkit.sql", "mcpkit.egress"])
def test_subpackages_declare_their_surface(package: str) -> None:
    module = importlib.import_module(package)
    exported = getattr(module, "__all__", None)
    if exported is None:
        pytest.skip(f"{package} has no public surface yet")
    for name in exported:
        assert hasattr(module, name), f"{package}.__all__ names missing {name}"
