"""Every rule: its id, its documentation, its fixture pair and the snapshot of what it finds."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import mcpkit.lint.rules
from mcpkit.lint import PROFILES, REGISTRY, Rule, lint_tools
from mcpkit.lint.docs import doc_problems, rule_doc
from tests.lint.lint_support import ALL_PROFILES, FIXTURES, check_snapshot, lint_fixture

CODES = sorted(REGISTRY)
#: Rules that only `mcpkit lint --config` can fire (they compare servers): tested in test_lint_live.py.
CONFIG_ONLY = {"SL027"}
FIXTURE_CODES = [c for c in CODES if c not in CONFIG_ONLY]
RULES_DIR = Path(mcpkit.lint.rules.__file__).parent


def test_registry_holds_exactly_the_issue_ids() -> None:
    assert [f"SL{n:03d}" for n in (*range(1, 28), 101, 102, 103)] == CODES


@pytest.mark.parametrize("code", CODES)
def test_rule_lives_in_its_own_module(code: str) -> None:
    cls = REGISTRY[code]
    module = cls.__module__.rsplit(".", 1)[-1]
    assert module.startswith(code.lower() + "_"), module
    assert (RULES_DIR / f"{module}.py").exists()
    files = [p for p in RULES_DIR.glob("sl*.py") if p.name.startswith(code.lower())]
    assert len(files) == 1


@pytest.mark.parametrize("code", CODES)
def test_rule_attributes(code: str) -> None:
    cls = REGISTRY[code]
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", cls.name), cls.name
    assert cls.summary and not cls.summary.endswith(".")
    assert cls.severity and set(cls.severity) <= set(PROFILES)
    assert set(cls.severity.values()) <= {"error", "warning", "info"}
    assert cls.status in ("stable", "preview")


@pytest.mark.parametrize("code", CODES)
def test_rule_docstring_has_ruff_sections(code: str) -> None:
    assert doc_problems(REGISTRY[code]) == []


def test_doc_check_catches_a_missing_section() -> None:
    class NoReferences(Rule):
        """## What it does
        Flags nothing.

        ## Why is this bad?
        It is not.

        ## Example
        ```json
        {}
        ```
        """

    class Empty(Rule):
        pass

    assert doc_problems(NoReferences) == ["missing section: References"]
    assert len(doc_problems(Empty)) == 4


def test_doc_check_catches_sections_out_of_order() -> None:
    class Shuffled(Rule):
        """## Why is this bad?
        x
        ## What it does
        y
        ## Example
        ```json
        {}
        ```
        ## References
        - z
        """

    assert doc_problems(Shuffled) == [
        "sections out of order: Why is this bad?, What it does, Example, References"
    ]


@pytest.mark.parametrize("code", FIXTURE_CODES)
def test_fixture_pair_exists(code: str) -> None:
    assert (FIXTURES / code / "bad.json").is_file(), f"{code} needs fixtures/{code}/bad.json"
    assert (FIXTURES / code / "good.json").is_file(), f"{code} needs fixtures/{code}/good.json"


@pytest.mark.parametrize("code", FIXTURE_CODES)
def test_bad_fixture_fires_and_matches_snapshot(code: str) -> None:
    found = lint_fixture(code, "bad")
    assert found, f"{code} finds nothing in its bad fixture"
    check_snapshot(FIXTURES / code / "bad.snap", [f.to_dict() for f in found])


@pytest.mark.parametrize("code", FIXTURE_CODES)
def test_good_fixture_is_clean(code: str) -> None:
    assert lint_fixture(code, "good") == []


def test_every_fixture_directory_belongs_to_a_rule() -> None:
    assert sorted(p.name for p in FIXTURES.iterdir() if p.is_dir()) == FIXTURE_CODES


def _examples(code: str) -> tuple[object, object] | None:
    doc = rule_doc(REGISTRY[code])
    example = doc.split("## Example", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```json\n(.*?)```", example, re.S)
    if len(blocks) != 2:
        return None
    return json.loads(blocks[0]), json.loads(blocks[1])


def _as_tools(value: object) -> list[dict[str, object]]:
    if isinstance(value, list):
        return value
    assert isinstance(value, dict)
    if "inputSchema" in value or "name" in value:
        return [{"description": "An example.", **value}]
    return [{"name": "example", "description": "An example.", "inputSchema": value}]


@pytest.mark.parametrize("code", [c for c in CODES if _examples(c) is not None])
def test_docstring_example_fires_and_use_instead_does_not(code: str) -> None:
    pair = _examples(code)
    assert pair is not None
    bad, good = pair
    assert any(f.rule == code for f in lint_tools(_as_tools(bad), profiles=ALL_PROFILES, groups="all"))
    assert not any(f.rule == code for f in lint_tools(_as_tools(good), profiles=ALL_PROFILES, groups="all"))


def test_most_rules_have_checkable_examples() -> None:
    assert len([c for c in CODES if _examples(c) is not None]) >= 15
