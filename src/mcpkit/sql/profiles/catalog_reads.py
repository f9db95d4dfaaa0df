"""Functions the reader can execute whose body reads the database's catalog (red team rt33b F3).

The catalog tells row counts per partition, sizes and bounds of tables the reader holds any column
of: over a table partitioned by a masked column that is the column's histogram. The reader's own
queries cannot name it (admission); each profile with stored functions lists those that do
(`catalog_routines` on the profile class: `profiles.mysql.catalog_reads`,
`profiles.postgres.catalog_reads`), and each counts as a start-up finding with the opt-in
`function-order:S.N`, as a function whose order `masking.view_order` refuses. A profile may also
list the views (and policies) whose query reads the catalog (`catalog_stored`: kind, schema, name ->
why; invoker views over pg_class, rt35a F6, or information_schema, rt35b F2), each with `KIND-order:S.N`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcpkit.sql.profiles.findings import Finding

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from mcpkit.sql.profiles.base import Profile

__all__ = ["catalog_findings"]


def catalog_findings(profile: Profile, conn: Connection) -> list[Finding]:
    """One finding per function of `profile.catalog_routines` and per view or policy of
    `profile.catalog_stored` (none for a profile without them)."""
    read = getattr(profile, "catalog_routines", None)
    found: dict[tuple[str, str], str] = read(conn) if read is not None else {}
    stored = getattr(profile, "catalog_stored", None)
    views: dict[tuple[str, str, str], str] = stored(conn) if stored is not None else {}
    fix = {"policy": "drop the policy, or read no catalog in it"}
    return [
        Finding(
            "masked-catalog-view",
            why,
            fix.get(kind, "revoke SELECT on it from the reader, or read no catalog in its query"),
            f"{kind}-order:{schema}.{name}",
        )
        for (kind, schema, name), why in sorted(views.items())
    ] + [
        Finding(
            "masked-catalog-function",
            f"function {schema}.{name} {why}",
            "revoke EXECUTE on it from the reader, or read no catalog in its body",
            f"function-order:{schema}.{name}",
        )
        for (schema, name), why in sorted(found.items())
    ]
