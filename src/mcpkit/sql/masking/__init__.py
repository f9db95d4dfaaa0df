"""Column masking: sensitive columns come back as `<masked>`, and no query may filter on them.

Per query: `plan_masking(admitted.tree, dialect, schema, policy)` refuses or returns a `MaskPlan`;
run `plan.sql or admitted.sql`, then `apply_mask(rows, plan)` before shaping.

Decisions (lineage over sqlglot's qualified scopes, bottom-up through CTEs, derived tables,
laterals, scalar subqueries and UNION ALL branches):

- Any output computed from a masked column is masked: `upper(email)`, `email AS e`, CASE,
  casts, JSON, and aggregates whose value tells something about it (`count(DISTINCT email)`,
  `min`/`max`, `length`, `string_agg`): masked, not refused. The database computes them on a
  typed NULL instead of the value (the rewrite in `MaskPlan.sql`), so no error or timing tells
  anything either; only `*` passes a raw value through, masked on the way out.
- A masked column anywhere that decides which rows come back or their order is refused: WHERE,
  HAVING, JOIN ON/USING/NATURAL, GROUP BY, ORDER BY, DISTINCT (ON), window PARTITION/ORDER,
  LIMIT, table functions in FROM, IN/ANY subqueries, UNION/INTERSECT/EXCEPT (they compare rows).
- Names resolve as the engine does: an ORDER BY name inside an expression may be the input column
  an output alias shadows (refused when masked); on MySQL/MariaDB column names and aliases
  match in any case (folded before resolving), table names do not.
- Fail closed: with masks configured, a table not in the reflected schema (pg_stats, sqlite_stat4,
  information_schema hold values), a column or whole-row reference sqlglot cannot resolve, or a
  result whose columns differ from the plan is refused.
- Nothing follows the scan order (an index on a masked column orders it): over a masked table
  or any view, every ORDER BY is completed with the outputs, windows and concatenating
  aggregates with visible tie-breakers, and what cannot be ordered is refused (`order.py`);
  the one kept of equal values that print differently (min/max, DISTINCT, GROUP BY) is chosen
  by their exact forms, or refused (`representatives.py`, `alike.py`).
- Joins on columns the analysis may not see (NATURAL JOIN, USING beside a table function) and
  functions whose value follows the evaluation order (seeded RAND, time-based UUIDs, per-row
  clocks, sequences) are refused over a masked read or a view (`shapes.py`).
- Views and user-defined functions are opaque: mask their columns too (`*.email` helps), or use
  identities and grants; SECURITY DEFINER functions are refused in identity mode. SQLite views
  over masked columns are analysed at start-up (`profiles.sqlite_views`); PostgreSQL and MariaDB
  views and SQL functions whose stored query follows a masked scan order refuse start-up
  (`view_order.py`).
"""

__all__ = [
    "MASKED",
    "NO_MASKING",
    "KnownSchema",
    "MaskPlan",
    "MaskPolicy",
    "MaskRefused",
    "MaskRule",
    "Reflection",
    "apply_mask",
    "plan_masking",
    "reflect",
    "reflect_schema",
    "reflect_views",
]

from mcpkit.sql.masking.plan import MASKED, NO_MASKING, MaskPlan, apply_mask, plan_masking
from mcpkit.sql.masking.policy import MaskPolicy, MaskRule
from mcpkit.sql.masking.schema import KnownSchema, Reflection, reflect, reflect_schema, reflect_views
from mcpkit.sql.masking.taint import MaskRefused
