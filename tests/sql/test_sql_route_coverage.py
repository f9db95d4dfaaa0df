"""Every catalog column that names a function PostgreSQL may run is either walked by the route audit
or reviewed here, with the reason (red teams found support functions, estimators, commutators and
type I/O one at a time: this lists them all from the server, so a new one fails here first)."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text

from mcpkit.sql.profiles.postgres.edges import EDGES

# Columns of type regproc, and oid columns that hold a function.
_FUNCTION_COLUMNS = """
SELECT c.relname || '.' || a.attname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
WHERE c.relnamespace = 'pg_catalog'::regnamespace AND c.relkind = 'r' AND NOT a.attisdropped
  AND (a.atttypid = 'regproc'::regtype OR (a.atttypid = 'oid'::regtype AND a.attname IN
       ('castfunc', 'evtfoid', 'fdwhandler', 'fdwvalidator', 'laninline', 'lanplcallfoid',
        'lanvalidator', 'tgfoid')))
ORDER BY 1
"""

# Every column holding a stored expression (node tree): what it names runs when PostgreSQL evaluates it.
_TREE_COLUMNS = """
SELECT c.relname || '.' || a.attname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
WHERE c.relnamespace = 'pg_catalog'::regnamespace AND c.relkind = 'r' AND NOT a.attisdropped
  AND a.atttypid = 'pg_node_tree'::regtype
ORDER BY 1
"""

REVIEWED_TREES = {
    "pg_attrdef.adbin": "a column default runs on INSERT/UPDATE/COPY only (read-only session)",
    "pg_class.relpartbound": "partition bounds are constants, evaluated when the partition is attached",
    "pg_policy.polwithcheck": "WITH CHECK applies to written rows only (read-only session)",
    "pg_publication_rel.prqual": "a publication's row filter runs in logical decoding, not for a query",
    "pg_rewrite.ev_qual": "only INSERT/UPDATE/DELETE rules have a condition (not a view's ON SELECT)",
    "pg_trigger.tgqual": "a trigger's WHEN fires on writes only (read-only session)",
    "pg_type.typdefaultbin": "a domain's default applies to INSERT/UPDATE of a column of that domain only",
}

REVIEWED = {
    "pg_am.amhandler": "C only (takes internal); its index and table methods' support functions are walked",
    "pg_conversion.conproc": "C only (takes internal); runs for convert(), whose built-ins are judged",
    "pg_transform.trffromsql": "C only (takes internal); the functions declared TRANSFORM FOR are walked",
    "pg_transform.trftosql": "C only (takes internal); the functions declared TRANSFORM FOR are walked",
    "pg_ts_parser.prsstart": "C only (takes internal); text-search parsers",
    "pg_ts_parser.prstoken": "C only (takes internal); text-search parsers",
    "pg_ts_parser.prsend": "C only (takes internal); text-search parsers",
    "pg_ts_parser.prsheadline": "C only (takes internal); text-search parsers",
    "pg_ts_parser.prslextype": "C only (takes internal); text-search parsers",
    "pg_ts_template.tmplinit": "C only (takes internal); text-search dictionary templates",
    "pg_ts_template.tmpllexize": "C only (takes internal); text-search dictionary templates",
    "pg_event_trigger.evtfoid": "fires on DDL, which no call can run (read-only transaction, admission)",
    "pg_trigger.tgfoid": "fires on writes, which no call can run (read-only transaction)",
    "pg_foreign_data_wrapper.fdwhandler": "a readable foreign table is itself a start-up finding",
    "pg_foreign_data_wrapper.fdwvalidator": "runs on CREATE/ALTER of foreign objects (DDL) only",
    "pg_language.lanplcallfoid": "C only; every function in the language is judged itself",
    "pg_language.laninline": "runs for DO blocks, which admission and the read-only session refuse",
    "pg_language.lanvalidator": "runs on CREATE FUNCTION (DDL) only",
}


def _columns(pg_url: str, query: str) -> list[str]:
    engine = create_engine(pg_url)
    try:
        with engine.connect() as conn:
            return [str(r[0]) for r in conn.execute(text(query))]
    finally:
        engine.dispose()


def _walked(columns: list[str], reviewed: dict[str, str]) -> set[str]:
    """The columns the audit's edges read; every other one must be reviewed, and only those."""
    walked = {c for c in columns if c.split(".")[1] in EDGES}
    assert sorted(set(columns) - walked - set(reviewed)) == [], "walk these, or review them here"
    assert sorted(walked & set(reviewed)) == [], "walked now: drop them from the reviewed ones"
    assert sorted(set(reviewed) - set(columns)) == [], "gone from the catalog"
    return walked


@pytest.mark.postgres
def test_every_function_column_of_the_catalog_is_walked_or_reviewed(pg_url: str) -> None:
    columns = _columns(pg_url, _FUNCTION_COLUMNS)
    assert len(columns) >= 40, columns  # the query itself found them
    _walked(columns, REVIEWED)


@pytest.mark.postgres
def test_every_expression_column_of_the_catalog_is_walked_or_reviewed(pg_url: str) -> None:
    """Red team pg11, F4: index expressions and predicates, table CHECKs, statistics expressions and
    partition keys were run by the planner as the reader and walked by nothing."""
    columns = _columns(pg_url, _TREE_COLUMNS)
    assert len(columns) >= 15, columns  # the query itself found them
    walked = _walked(columns, REVIEWED_TREES)
    assert {"pg_index.indexprs", "pg_index.indpred", "pg_statistic_ext.stxexprs"} <= walked
