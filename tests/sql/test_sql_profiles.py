"""Issue 10 (architecture): each engine's knowledge is in its profile; the callers ask the profile.

Before, reverify, clipping, identities, similar_rows, reports and masking each branched on the
dialect name (29 branches in 15 modules); an engine added only as a profile got PostgreSQL's,
MySQL's or nobody's behaviour depending on the module.
"""

from __future__ import annotations

import datetime as dt
import re

import sqlglot
from sqlglot import exp

from mcpkit.sql.dialects import normalize_url
from mcpkit.sql.profiles import PROFILES, GenericProfile, Profile, profile_class, profile_for
from tests.helpers import ROOT

# Where a dialect name may still be tested outside the profiles: grammar, in the admission passes.
_GRAMMAR: dict[str, str] = {
    "admission/lexical.py": "MySQL's executable comments and `--x` comments are tokenizer rules",
    "admission/drop_from_dual.py": "MySQL's FROM DUAL is syntax sqlglot keeps as a table",
    "admission/reject_attribute_calls.py": "PostgreSQL's attribute-call syntax f(x).y / x.f",
    "admission/reject_parameters.py": "SQLite reads $a, :a, @a as parameters",
    "admission/reject_relations.py": "the fallback of the per-engine relation tables",
    "admission/policy.py": "SQLite's table-valued calls in FROM (the per-engine function tables)",
}
_BRANCH = re.compile(r"dialect (==|!=|in \()")


def test_no_module_outside_the_profiles_branches_on_the_engine_but_admissions_grammar() -> None:
    root = ROOT / "src" / "mcpkit" / "sql"
    found = {
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if "profiles" not in path.relative_to(root).parts and _BRANCH.search(path.read_text(encoding="utf-8"))
    }
    assert found <= set(_GRAMMAR), sorted(found - set(_GRAMMAR))


def test_an_engine_known_only_by_its_url_gets_the_generic_answers() -> None:
    profile = profile_for(normalize_url("oracle://u@h/db"))
    assert isinstance(profile, GenericProfile)
    assert profile.clipping() is None and profile.vector_kind is None and profile.use_vectors() is None
    assert not profile.switches_roles and not profile.parameter_casts
    assert profile.untyped_parameter(ValueError("parameter $1")) is None
    assert profile.report_value(dt.date(2026, 1, 2)) == dt.date(2026, 1, 2)
    assert profile.plan_check.format("SELECT 1") == "SELECT * FROM (SELECT 1) AS q WHERE 1 = 0"
    assert GenericProfile.exact_ties(exp.column("a")) == []
    assert (GenericProfile.ordered_aggregates, GenericProfile.bare_columns) == (True, False)


def test_every_profile_states_clipping_and_vectors_and_its_class_is_found_by_dialect() -> None:
    for make in PROFILES.values():
        profile = make()
        assert profile_class(profile.dialect) is type(profile)
        assert profile.clipping() is not None, profile.name
        assert profile.vector_kind is not None, profile.name
        ties = type(profile).exact_ties(exp.column("a"))
        assert ties, profile.name  # every known engine has values that compare equal, print apart
        for tie in ties:  # and each tie-breaker is SQL its dialect reads back
            sqlglot.parse_one(tie.sql(dialect=profile.dialect), read=profile.dialect)
    assert profile_class("oracle") is GenericProfile
    assert issubclass(profile_class("postgres"), Profile)
