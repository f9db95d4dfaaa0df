"""Functions the reader can execute whose body reads the database's catalog (red team rt33b F3).

The catalog tells row counts per partition, sizes and bounds of tables the reader holds any column
of: over a table partitioned by a masked column that is the column's histogram. The reader's own
queries cannot name it (admission); each profile with stored functions lists those that do
(`catalog_routines` on the profile class: `profiles.mysql.catalog_reads`,
`profiles.postgres.catalog_reads`), and each counts as a start-up finding with the opt-in
`function-order:S.N`, as a function whose order `masking.view_order` refuses. Views likewise
(`catalog_views` on the profile class, INVOKER ones too: red team rt35b F2), opt-in `view-order:S.N`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcpkit.sql.profiles.findings import Finding

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from mcpkit.sql.profiles.base import Profile

__all__ = ["catalog_findings"]


def catalog_findings(profile: Profile, conn: Connection) -> list[Finding]:
    """One finding per function of `profile.catalog_routines` and per view of `catalog_views` (none
    for a profile without them)."""
    read = getattr(profile, "catalog_routines", None)
    found: dict[tuple[str, str], str] = read(conn) if read is not None else {}
    return [
        Finding(
            "masked-catalog-function",
            f"function {schema}.{name} {why}",
            "revoke EXECUTE on it from the reader, or read no catalog in its body",
            f"function-order:{schema}.{name}",
        )
        for (schema, name), why in sorted(found.items())
    ] + _view_findings(profile, conn)


def _view_findings(profile: Profile, conn: Connection) -> list[Finding]:
    """One finding per view of `profile.catalog_views` (none for a profile without it)."""
    read = getattr(profile, "catalog_views", None)
    found: dict[tuple[str, str], str] = read(conn) if read is not None else {}
    return [
        Finding(
            "masked-catalog-view",
            f"view {schema}.{name} {why}",
            "revoke SELECT on it from the reader, or read no system schema in it",
            f"view-order:{schema}.{name}",
        )
        for (schema, name), why in sorted(found.items())
    ]
