"""Each admission pass against its fixture file `tests/sql/fixtures/<pass>.sql`, plus `admit` itself."""

from __future__ import annotations

import importlib
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

from mcpkit.errors import Refused
from mcpkit.sql.admission import PASSES, FunctionPolicy, admit, check_lexical, parse_statement, run_passes
from mcpkit.sql.admission.reject_volatile_functions import FunctionRef
from mcpkit.sql.errors import SqlConfigError

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@dataclass
class Fixture:
    title: str
    dialect: str
    expect: str
    sql: str


def _load(name: str) -> list[Fixture]:
    out: list[Fixture] = []
    for block in (FIXTURES / f"{name}.sql").read_text(encoding="utf-8").split("\n\n"):
        meta = {}
        body = []
        for line in block.strip().splitlines():
            if line.startswith("# ") and ":" in line and not body:
                key, value = line[2:].split(":", 1)
                meta[key.strip()] = value.strip()
            else:
                body.append(line)
        out.append(Fixture(meta["title"], meta["dialect"], meta["expect"], "\n".join(body)))
    return out


class FakeCatalog:
    """`bump()` anywhere on the search path and `app.touch()` are volatile."""

    def __init__(self) -> None:
        self.asked: list[FunctionRef] = []

    def volatile(self, refs: Collection[FunctionRef]) -> set[FunctionRef]:
        self.asked.extend(refs)
        return {r for r in refs if r in {(None, "bump"), ("app", "touch")}}


def _run(step_name: str, fixture: Fixture) -> str:
    named = {
        "dialect": fixture.dialect,
        "functions": FunctionPolicy.for_dialect(fixture.dialect),
        "catalog": FakeCatalog(),
        "limit": 26,
    }
    if step_name == "lexical":
        check_lexical(fixture.sql, fixture.dialect)
        return "unchanged"
    tree = parse_statement(fixture.sql, fixture.dialect)
    if step_name == "parse_statement":
        return tree.sql(dialect=fixture.dialect)
    step = next(p for p in PASSES if p.__name__ == step_name)
    original = tree.sql(dialect=fixture.dialect)
    out = run_passes(tree, [step], **named).sql(dialect=fixture.dialect, normalize_functions=False)
    return "unchanged" if out == original and fixture.expect == "unchanged" else out


NAMES = [p.__name__ for p in PASSES] + ["lexical", "parse_statement"]
CASES = [(name, f) for name in NAMES for f in _load(name)]


def test_every_pass_has_a_fixture() -> None:
    assert {p.name.removesuffix(".sql") for p in FIXTURES.glob("*.sql")} == set(NAMES)


@pytest.mark.parametrize(("step", "fixture"), CASES, ids=[f"{n}:{f.title}" for n, f in CASES])
def test_pass_fixture(step: str, fixture: Fixture) -> None:
    if fixture.expect.startswith("refused"):
        reason = fixture.expect.split()[1]
        with pytest.raises(Refused) as info:
            _run(step, fixture)
        assert info.value.data == {"reason": reason}
        assert info.value.code == "REFUSED"
        assert info.value.message.endswith(".")
    else:
        assert _run(step, fixture) == fixture.expect


def test_passes_are_small_functions_taking_a_tree() -> None:
    for step in PASSES:
        assert step.__doc__ and ">>>" in step.__doc__, step.__name__
        assert step.__code__.co_varnames[0] == "tree"


def test_admit_sends_regenerated_sql_not_the_raw_text() -> None:
    admitted = admit("select  region ,count(*) from sales -- why\n group by region", "postgres", limit=26)
    assert admitted.sql == "SELECT region, COUNT(*) FROM sales GROUP BY region LIMIT 26"
    assert isinstance(admitted.tree, exp.Select)


@pytest.mark.parametrize(
    ("sql", "dialect", "named"),
    [
        # sqlglot wrote CAST(d AS CHAR): MariaDB answered 2020-05-06 for its own TO_CHAR's 2020
        ("SELECT TO_CHAR(DATE '2020-05-06', 'YYYY') AS y", "mysql", "TO_CHAR"),
        # sent as CAST(d AS CHAR) with no warning: 2020-05-06 for MariaDB's 2020-05-06 00:00:00
        ("SELECT TO_CHAR(DATE '2020-05-06') AS y", "mysql", "TO_CHAR"),
        ("SELECT INTERVAL(5, 1, 10) AS i", "mysql", "INTERVAL(N, N1, ...)"),  # read as an interval
    ],
)
def test_admit_refuses_what_regeneration_would_change(sql: str, dialect: str, named: str) -> None:
    # Red team my11 F4: the text sent is sqlglot's; where it would drop an argument the call is refused.
    with pytest.raises(Refused) as info:
        admit(sql, dialect, limit=26)
    assert info.value.data == {"reason": "function"} and named in info.value.message


def test_admit_keeps_what_regeneration_can_say() -> None:
    assert "TO_CHAR(CURRENT_TIMESTAMP, 'YYYY')" in admit("SELECT to_char(now(), 'YYYY')", "postgres").sql
    assert "DATE_FORMAT(NOW(), '%Y')" in admit("SELECT DATE_FORMAT(NOW(), '%Y')", "mysql").sql
    assert "INTERVAL '1' DAY" in admit("SELECT NOW() - INTERVAL 1 DAY", "mysql").sql


def test_admit_keeps_quoted_function_names_as_written() -> None:
    # Upper-casing a quoted name would call a different function.
    policy = FunctionPolicy.for_dialect("postgres", extra=["my_func"])
    assert '"my_Func"(1)' in admit('SELECT "my_Func"(1)', "postgres", functions=policy).sql


def test_admit_checks_the_generated_text_too(monkeypatch: pytest.MonkeyPatch) -> None:
    # If a rewrite ever produced something a check refuses, the second look catches it.
    admit_module = importlib.import_module("mcpkit.sql.admission.admit")

    def evil_rewrite(tree: exp.Expr) -> exp.Expr:
        return exp.select("*").from_("t").lock()

    monkeypatch.setattr(admit_module, "PASSES", (*admit_module.CHECKS, evil_rewrite))
    with pytest.raises(Refused) as info:
        admit_module.admit("SELECT 1", "postgres")
    assert info.value.data == {"reason": "lock"}


def test_allowlist_mode() -> None:
    policy = FunctionPolicy.for_dialect("postgres", allow=["lower", "count"])
    assert admit("SELECT lower(a), count(*), CAST(b AS INT), x->>'k' FROM t", "postgres", functions=policy)
    with pytest.raises(Refused) as info:
        admit("SELECT upper(a) FROM t", "postgres", functions=policy)
    assert info.value.data == {"reason": "function"}
    assert "upper" in info.value.message
    with pytest.raises(SqlConfigError, match="pg_sleep: never allowed"):  # the never list still wins
        FunctionPolicy.for_dialect("postgres", allow=["pg_sleep"])


def test_load_allowlist(tmp_path: Path) -> None:
    from mcpkit.sql.admission import load_allowlist

    path = tmp_path / "allow.txt"
    path.write_text("# reviewed\nLower\ncount  # aggregates\n\n")
    assert load_allowlist(path) == frozenset({"lower", "count"})


def test_catalog_is_asked_with_database_names() -> None:
    catalog = FakeCatalog()
    policy = FunctionPolicy.for_dialect("postgres", extra=["mixedcase", "app.f"])
    admit('SELECT lower(a), "MixedCase"(1), app.f(2) FROM t', "postgres", catalog=catalog, functions=policy)
    assert {(None, "MixedCase"), ("app", "f"), (None, "lower")} <= set(catalog.asked)


def test_refusal_never_echoes_schema() -> None:
    with pytest.raises(Refused) as info:
        admit("DELETE FROM secret_payroll_table WHERE salary > 0", "postgres")
    assert "secret_payroll" not in info.value.message and "salary" not in info.value.message


def test_deep_nesting_is_refused_not_a_crash() -> None:
    with pytest.raises(Refused) as info:
        admit("SELECT " + "(" * 400 + "1" + ")" * 400, "postgres")
    assert info.value.data == {"reason": "too_long"}


SQLISH = st.text(
    alphabet=st.sampled_from(list("SELCTFROMWHEINAUD ();,'\"`$#/*-\\@:?%.0123456789abxy\n")), max_size=80
)


@settings(max_examples=300, deadline=None)
@given(text=SQLISH, dialect=st.sampled_from(["postgres", "mysql", "sqlite"]))
def test_admission_only_admits_or_refuses(text: str, dialect: str) -> None:
    """Whatever the text, admission answers with SQL or a Refused, never another exception."""
    try:
        admitted = admit(text, dialect, limit=26)
    except Refused:
        return
    again = admit(admitted.sql, dialect, limit=26)  # what is sent is itself admissible
    assert isinstance(again.tree, exp.Expr)


@settings(max_examples=200, deadline=None)
@given(
    prefix=st.sampled_from(["SELECT 1", "SELECT a FROM t", "WITH x AS (SELECT 1) SELECT * FROM x"]),
    tail=st.sampled_from(
        [
            "; DELETE FROM t",
            "; DROP TABLE t",
            " /*!50000 ; DELETE FROM t */",
            " # x\n; DELETE FROM t",
            " FOR UPDATE",
            " INTO OUTFILE '/tmp/x'",
            "; COMMIT",
            "; SET x = 1",
        ]
    ),
    dialect=st.sampled_from(["postgres", "mysql", "sqlite"]),
)
def test_stacked_and_hidden_statements_never_pass(prefix: str, tail: str, dialect: str) -> None:
    with pytest.raises(Refused):
        admit(prefix + tail, dialect)
