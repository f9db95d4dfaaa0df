"""`mcpkit sql grant`: the SQL an administrator runs to create a reader `serve` accepts at start-up."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.profiles.base import ConnectionBudget

if TYPE_CHECKING:
    from mcpkit.sql.masking import MaskPolicy

__all__ = ["grant"]


def _masked_grants(
    engine: SqlEngine, script: list[str], mask_file: str
) -> tuple[list[str], list[str], list[str]]:
    """The grants with SELECT on the unmasked columns only, what to run before them
    (`Profile.mask_preparation`), and why views were left out (`_ordered_views`)."""
    from sqlalchemy import inspect

    from mcpkit.sql.masking import MaskPolicy
    from mcpkit.sql.masking.copies import derived_and_copied, referenced_hints
    from mcpkit.sql.masking.grants import column_grants, granted_tables, without_tables
    from mcpkit.sql.masking.literals import require_matched

    insp = inspect(engine.sa_engine)
    quote = engine.sa_engine.dialect.identifier_preparer.quote_identifier
    policy = MaskPolicy.from_yaml(mask_file)
    # A rule that names no column would have grant print SQL for a reader `serve` then refuses.
    for line in require_matched(engine, policy):
        print(f"mcpkit sql: warning: {line}", file=sys.stderr)

    def columns_of(schema: str | None, table: str) -> list[str]:
        return [str(c["name"]) for c in insp.get_columns(table, schema)]

    granted = granted_tables(script)
    # The other tables of the granted ones' schemas count too: a column masked in a partition or
    # inheritance child is masked in its parents, which read the child's rows.
    family = [
        (s, t) for s in {s for s, _ in granted} for t in insp.get_table_names(s) if (s, t) not in granted
    ]
    masked, named = {}, {}  # keys for the profile (quoted), and for copied_masks (plain)
    default = insp.default_schema_name
    for schema, table in granted + family:
        columns = policy.masked_columns(schema, table, columns_of(schema, table))
        if columns:
            masked[f"{quote(schema)}.{quote(table)}" if schema else table] = columns
            named[f"{schema}.{table}" if schema and schema != default else table] = columns
    preparation: list[str] = []
    withheld: list[tuple[str | None, str]] = []  # tables the reader must not read by name at all
    left_out: list[str] = []
    if masked:  # generated columns computed from masked ones, and parents, are not granted either
        schemas = [s for s, _ in granted if s]
        with engine.sa_engine.connect() as conn:
            derived = derived_and_copied(engine.profile.derived_masks, conn, masked, named, schemas)
            for d in derived:
                masked[d.key] = masked.get(d.key, frozenset()) | d.columns
            preparation = engine.profile.mask_preparation(conn, masked)
            withheld = engine.profile.mask_withheld(conn, masked)
            for schema, name, why in engine.profile.mask_left_out(conn, masked):
                if (schema, name) in granted:
                    withheld.append((schema, name))
                    left_out.append(f"left out: view {schema}.{name} {why}")
            for line in referenced_hints(conn, named, schemas):
                print(f"-- warning: {line}", file=sys.stderr)
        policy = policy.with_columns((d.schema, d.table, d.columns) for d in derived)
        for kind, schema, name, why in _ordered_views(engine, policy, masked, set(granted)):
            withheld.append((schema, name))
            left_out.append(
                f"left out: {kind} {schema}.{name} may answer in the scan order of a masked table: {why}"
            )
    grants = without_tables(column_grants(script, policy, columns_of, quote), withheld)
    return preparation, grants, left_out


def _ordered_views(
    engine: SqlEngine,
    policy: MaskPolicy,
    masked: dict[str, frozenset[str]],
    granted: set[tuple[str | None, str]],
) -> list[tuple[str, str, str, str]]:
    """(kind, schema, name, why) of the granted views whose stored query follows a masked scan order
    (`masking.view_order`, red team rt19mask F8), and of the granted tables under a policy whose
    expression does (red team rt27 F7, "table S.T" with the policy's name): the reader gets no grant
    on them."""
    from mcpkit.sql.masking import reflect
    from mcpkit.sql.masking.view_order import order_reasons, primary_keys
    from mcpkit.sql.profiles.stored import stored_queries

    known = reflect(engine, policy).known(engine)
    with engine.sa_engine.connect() as conn:
        stored = stored_queries(engine.profile, conn, masked)  # all: a view over one counts too
        keys = primary_keys(conn, getattr(engine.profile, "primary_key", None))
        reasons = order_reasons(stored, engine.dialect, known, policy, keys)
    out = [("view", q.schema, q.name, why) for q, why in reasons if q.kind == "view"]
    out += [
        ("table", q.schema, q.table, f"policy {q.name.removeprefix(q.table + '.')}: {why}")
        for q, why in reasons
        if q.kind == "policy" and q.table is not None
    ]
    return [item for item in out if (item[1], item[2]) in granted]


def grant(args: argparse.Namespace) -> int:
    """`mcpkit sql grant`: print the SQL that creates a least-privilege reader (with `--mask`,
    SELECT on the unmasked columns only)."""
    import secrets

    password = os.environ.get(args.password_env, "") if args.password_env else secrets.token_urlsafe(18)
    if not password:
        raise SqlConfigError(f"the variable {args.password_env} is empty")
    engine = SqlEngine(args.dsn)
    tables = [t.strip() for t in args.tables.split(",") if t.strip()]
    try:
        with engine.sa_engine.connect() as conn:
            script = engine.profile.grant(conn, args.role, tables, password, ConnectionBudget(args.pool_size))
        preparation: list[str] = []
        left_out: list[str] = []
        if getattr(args, "mask", None):
            preparation, script, left_out = _masked_grants(engine, script, args.mask)
    finally:
        engine.close()
    print(f"-- a read-only role for mcpkit sql serve ({engine.profile.name}); run as an administrator")
    if preparation:
        print("-- first: masked values the database keeps outside the columns, readable by every login")
        print("\n".join(f"{statement};" for statement in preparation))
    for line in left_out:
        print(f"-- {line}; no grant on it")
    print("\n".join(s if s.startswith("--") else f"{s};" for s in script))
    if engine.profile.memory_setup:
        print("\n".join(f"-- {line}" for line in engine.profile.memory_setup))
    return 0
