"""The committed rule docs are exactly what the registry generates."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mcpkit.lint import REGISTRY
from mcpkit.lint.docs import generated_files, render_index
from tests.lint.lint_support import ROOT

DOCS = ROOT / "docs"
FILES = generated_files()


@pytest.mark.parametrize("rel", sorted(FILES))
def test_committed_doc_matches_the_registry(rel: str) -> None:
    path = DOCS / rel
    assert path.exists(), f"docs/{rel} missing: run python -m mcpkit.lint.docs --write docs"
    assert path.read_text(encoding="utf-8") == FILES[rel], (
        f"docs/{rel} is stale: run python -m mcpkit.lint.docs --write docs"
    )


def test_no_orphan_rule_pages() -> None:
    pages = sorted(p.name for p in (DOCS / "rules").glob("SL*.md"))
    assert pages == [f"{code}.md" for code in sorted(REGISTRY)]


def test_index_lists_every_rule_with_its_profiles() -> None:
    index = render_index()
    for code, cls in REGISTRY.items():
        row = next(line for line in index.splitlines() if line.startswith(f"| [{code}]"))
        assert cls.summary in row
        assert row.count("error") + row.count("warning") + row.count("info") >= len(cls.severity)


def test_module_prints_the_index() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mcpkit.lint.docs"], capture_output=True, text=True, check=True, timeout=120
    )
    assert proc.stdout == render_index()
