"""The linter against the real world: public servers' `tools/list` under tests/lint/real/.

Every finding at warning or above must be judged in its server's file, and no judged-false
finding may come back; every known problem recorded there must still be found. Judgements cite
evidence ids from `real/EVIDENCE.json`, each dated. `real/capture.py` re-captures the servers.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from mcpkit.lint import DEFAULT_PROFILES, Finding, lint_tools

REAL = Path(__file__).resolve().parent / "real"
FILES = sorted(p for p in REAL.glob("*.json") if p.name != "EVIDENCE.json")
#: The general clients, the spec and the Claude API: the targets the issue's complaints were about.
PROFILES = [*DEFAULT_PROFILES, "claude-api"]


@cache
def _evidence() -> dict[str, dict[str, str]]:
    data: dict[str, dict[str, str]] = json.loads((REAL / "EVIDENCE.json").read_text(encoding="utf-8"))
    return data


@cache
def _record(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((REAL / name).read_text(encoding="utf-8"))
    return data


@cache
def _findings(name: str) -> tuple[Finding, ...]:
    r = _record(name)
    return tuple(lint_tools(r["tools"], profiles=PROFILES, instructions=r.get("instructions"), groups="all"))


def _matches(j: dict[str, Any], f: Finding) -> bool:
    return (
        j["rule"] == f.rule
        and j.get("severity", f.severity) == f.severity
        and j.get("tool", "*") in ("*", f.tool)
        and f.path.startswith(j.get("path", ""))
        and (j.get("client") is None or j["client"] in f.clients)
    )


def test_the_corpus_has_at_least_40_servers_with_provenance() -> None:
    assert len(FILES) >= 40
    for path in FILES:
        r = _record(path.name)
        prov = r["provenance"]
        assert prov["taken"], path.name
        if prov["source"] == "github":
            assert prov["repository"] and len(prov["commit"]) == 40 and prov["path"], path.name
        else:
            assert prov["source"] in ("npm", "pypi") and prov["package"] and prov["version"], path.name
        assert isinstance(r["tools"], list) and r["tools"], path.name


def test_every_judgement_cites_dated_evidence() -> None:
    evidence = _evidence()
    assert all(e.get("date") and e.get("url") and e.get("says") for e in evidence.values())
    for path in FILES:
        for j in _record(path.name)["judgements"]:
            assert j["verdict"] in ("true", "false") and j["judged"], (path.name, j)
            assert j["evidence"] and all(e in evidence for e in j["evidence"]), (path.name, j)


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_findings_at_warning_or_above_are_judged_true(path: Path) -> None:
    judgements = _record(path.name)["judgements"]
    problems = []
    for f in _findings(path.name):
        if f.severity == "info":
            continue
        verdict = next((j for j in judgements if _matches(j, f)), None)
        if verdict is None:
            problems.append(f"unjudged: {f.rule} [{f.severity}] {f.tool}{f.path}: {f.message}")
        elif verdict["verdict"] == "false":
            problems.append(f"judged false: {f.rule} [{f.severity}] {f.tool}{f.path} ({verdict['note']})")
    assert not problems, "\n".join(problems[:20])


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_known_problems_are_found(path: Path) -> None:
    found = _findings(path.name)
    for known in _record(path.name)["known"]:
        assert any(
            f.rule == known["rule"] and f.tool == known["tool"] and f.path.startswith(known["path"])
            for f in found
        ), f"{path.stem}: {known['rule']} missed at {known['tool']}{known['path']} ({known['why']})"


def test_the_security_group_is_silent_on_the_real_servers() -> None:
    # The false-positive figure of the opt-in security group (SL101-SL103) on public servers.
    flagged = {p.stem: [f for f in _findings(p.name) if f.rule.startswith("SL1")] for p in FILES}
    assert {name: fs for name, fs in flagged.items() if fs} == {}
