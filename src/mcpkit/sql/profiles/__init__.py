"""Database profiles: one per backend, chosen from one table by the URL's SQLAlchemy backend.

Adding an engine is writing one `Profile` subclass and its tests, and naming it in `PROFILES`.
Every answer has a generic default (`base.Profile`, `capabilities.Capabilities`); the profile
overrides what its database does differently:

- what it is: `name` (`engine_name`), `read_only_enforced`, `has_accounts`, `forever_sql` (doctor);
- session: `engine_options`, `begin`/`begin_statements`, `run`, `type_names`, `interrupt`, `end`,
  `reset` (and `poolable`), `classify`, `use_function_policy` (and `policy_generation`); `undone`
  for checks run inside a call's session; `clipping` (the `mcpkit.sql.clipping` hooks it uses);
- verification: `inspect`, `catalog_fingerprint`, `connection_findings`/`connection_warnings`,
  `use_masks`, `derived_masks`, `withheld_relations`, `scan_order_hints`;
- catalog and cost: `readable`, `function_catalog`, `table_stats`, `sample_clause`, `costed`,
  `explain`, `cost`; `grant` for `mcpkit sql grant`;
- identities: `role_setup`, `switches_roles` with `identity_catalog`, `shared_login_problems`,
  `login_problems`;
- tools: `vector_kind` and `use_vectors` (similar_rows), `plan_check`, `report_value`,
  `parameter_casts` and `untyped_parameter` (reports);
- masking, stated on the class (`profile_class`: the passes know only the dialect):
  `exact_ties`, `orderless`, `ordered_aggregates`, `ordered_object_aggregates`, `ordered_sums`,
  `float_sums`, `float_round`, `sum_overflows`, `bare_columns`, `rollup_in_key_order`, `caseless_columns`,
  `builtin_schema`, `time_based_uuid`.

What stays keyed by the sqlglot dialect is grammar: the admission passes (MySQL's executable
comments, PostgreSQL's attribute calls, `FROM DUAL`, SQLite's parameter sigils) and the function
and relation tables of `admission.function_tables`, one module per engine.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Final

from sqlalchemy.engine import URL

from mcpkit.sql.dialects import sqlglot_dialect
from mcpkit.sql.profiles.base import AccountReport, Finding, Profile, safe_call_id
from mcpkit.sql.profiles.generic import GenericProfile
from mcpkit.sql.profiles.mysql import MysqlProfile
from mcpkit.sql.profiles.postgres import PostgresCatalog, PostgresProfile
from mcpkit.sql.profiles.sqlite import SqliteProfile

if TYPE_CHECKING:
    from mcpkit.sql.engines.base import Engine

__all__ = [
    "PROFILES",
    "AccountReport",
    "Finding",
    "GenericProfile",
    "MysqlProfile",
    "PostgresCatalog",
    "PostgresProfile",
    "Profile",
    "SqliteProfile",
    "engine_name",
    "profile_class",
    "profile_for",
    "profile_for_dialect",
    "profile_of",
    "safe_call_id",
]

PROFILES: Final[dict[str, Callable[[], Profile]]] = {
    "postgresql": PostgresProfile,
    "mysql": MysqlProfile,
    "mariadb": MysqlProfile,
    "sqlite": SqliteProfile,
}
"""SQLAlchemy backend name -> the profile of that database."""


def profile_for(url: URL) -> Profile:
    """A fresh profile for a URL's backend (the generic profile for untested backends).

    >>> from mcpkit.sql.dialects import normalize_url
    >>> profile_for(normalize_url("postgresql://u@h/db")).name
    'PostgreSQL'
    >>> profile_for(normalize_url("oracle://u@h/db")).dialect
    'oracle'
    """
    make = PROFILES.get(url.get_backend_name())
    return make() if make is not None else GenericProfile(sqlglot_dialect(url))


def profile_of(engine: Engine) -> Profile:
    """The profile an engine runs with; for engines without one (test fakes), its dialect's.

    >>> from mcpkit.sql.engines.fake import FakeEngine
    >>> profile_of(FakeEngine(lambda sql: ([], []), dialect="mysql")).name
    'MySQL/MariaDB'
    """
    profile = getattr(engine, "profile", None)
    return profile if isinstance(profile, Profile) else profile_for_dialect(engine.dialect)


def profile_for_dialect(dialect: str) -> Profile:
    """A fresh profile of the database a sqlglot dialect names (generic when none is known)."""
    for make in PROFILES.values():
        candidate = make()
        if candidate.dialect == dialect:
            return candidate
    return GenericProfile(dialect)


@cache
def engine_name(dialect: str) -> str:
    """The name of the database a sqlglot dialect is read for, as a model is shown it.

    >>> engine_name("mysql"), engine_name("duckdb")
    ('MySQL/MariaDB', 'duckdb')
    """
    return profile_for_dialect(dialect).name


@cache
def profile_class(dialect: str) -> type[Profile]:
    """The profile class of a sqlglot dialect, for the facts it states on the class (the masking
    passes, which know only the dialect).

    >>> profile_class("postgres").builtin_schema
    'pg_catalog'
    """
    return type(profile_for_dialect(dialect))
