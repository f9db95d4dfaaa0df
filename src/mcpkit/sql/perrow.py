"""The user's functions that count as per-row ones over masked reads, at start-up and while serving.

Every user function counts (`Profile.row_order_routines`, red team rt29 F2) but those whose order
`--allow function-order:` accepts (`profiles.stored.order_accepted`: by name, or on PostgreSQL by
signature per overload, rt35a L1). An opt-in accepts what start-up saw: where the profile keeps a
digest of each function, view and policy an `--allow *-order:` opt-in accepts (`accepted_bodies`),
one replaced while serving fails the re-verification (rt35a F7), as a function that became a per-row
one since start-up does.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Collection
from typing import TYPE_CHECKING, Final

from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.masking import KnownSchema
from mcpkit.sql.profiles.stored import order_accepted

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from mcpkit.sql.engines.engine import SqlEngine

__all__ = ["accepted_bodies", "per_row_routines", "per_row_since", "row_order_routines"]

log = logging.getLogger("mcpkit.sql")
# What the opt-ins accepted at start-up, per analysed schema (its functions, views and policies).
_STARTUP: Final[weakref.WeakKeyDictionary[KnownSchema, dict[str, str]]] = weakref.WeakKeyDictionary()


def row_order_routines(
    engine: SqlEngine, conn: Connection, allow: Collection[str]
) -> dict[tuple[str, str], str]:
    """`Profile.row_order_routines` but those whose `--allow function-order:` accepts their order."""
    found = engine.profile.row_order_routines(conn)
    accepted = order_accepted(engine.profile, conn, allow)
    return {key: why for key, why in found.items() if key not in accepted}


def accepted_bodies(engine: SqlEngine, conn: Connection, allow: Collection[str]) -> dict[str, str]:
    """What each function, view and policy an `--allow *-order:` opt-in accepts is now (what it is
    -> digest; empty for a profile that keeps none)."""
    read = getattr(engine.profile, "accepted_bodies", None)
    return dict(read(conn, allow)) if read is not None else {}


def _callable(engine: SqlEngine, schema: str, name: str) -> bool:
    """Whether the function policy lets a call name function `schema.name`."""
    policy = engine.profile.function_policy
    return policy is not None and policy.reaches(name, schema)  # a package's functions too (rt34 F2)


def per_row_routines(
    engine: SqlEngine, allow: Collection[str] = (), known: KnownSchema | None = None
) -> frozenset[str]:
    """The user's functions whose value may change from row to row whatever they are declared (but
    those `allow` accepts), each the function policy lets calls use told to the operator with why:
    a call of one over a masked read is refused (`KnownSchema.per_row`). With `known`, what the
    opt-ins accept is kept with it for `per_row_since`, and the aggregates (`KnownSchema.aggregates`)."""
    with engine.session(30.0, "startup-masks") as (conn, _):
        found = row_order_routines(engine, conn, allow)
        keys = engine.profile.routine_keys(conn, {name for _, name in found})  # rt34 F6: `tíck` is `tick`
        if known is not None:
            _STARTUP[known] = accepted_bodies(engine, conn, allow)
            known.aggregates = engine.profile.user_aggregates(conn)  # red team v1 L3
    for (schema, name), why in sorted(found.items()):
        if _callable(engine, schema, name):
            log.warning(
                "masks: function %s.%s counts as a per-row function over masked reads: %s", schema, name, why
            )
    return keys


def per_row_since(engine: SqlEngine, conn: Connection, known: KnownSchema, allow: Collection[str]) -> None:
    """Refuse the call when a function calls may use became a per-row one since start-up, or one an
    opt-in accepted has another body (`CREATE OR REPLACE`); a view calling one is `enforce_order`'s."""
    found = row_order_routines(engine, conn, allow)
    new = sorted(
        f"{s}.{n}" for s, n in found if n.casefold() not in known.per_row and _callable(engine, s, n)
    )
    if new:
        raise SqlConfigError(
            f"--mask: function {', '.join(new)} may now change from row to row; restart the server"
        )
    seen = _STARTUP.get(known) or {}
    now = accepted_bodies(engine, conn, allow) if seen else {}
    changed = sorted(what for what, digest in seen.items() if now.get(what, digest) != digest)
    if changed:
        raise SqlConfigError(
            f"--mask: {', '.join(changed)}, accepted by its --allow opt-in, was replaced since start-up;"
            " review it and restart the server"
        )
