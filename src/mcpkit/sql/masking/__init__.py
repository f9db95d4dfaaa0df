"""Column masking: sensitive columns come back as `<masked>`, and no query may filter on them.

Per query: `plan_masking(admitted.tree, dialect, schema, policy)` refuses or returns a `MaskPlan`;
run `plan.sql or admitted.sql`, then `apply_mask(rows, plan)` before shaping.
"""

__all__ = [
    "MASKED",
    "NO_MASKING",
    "KnownSchema",
    "MaskPlan",
    "MaskPolicy",
    "MaskRefused",
    "MaskRule",
    "apply_mask",
    "plan_masking",
    "reflect_schema",
]

from mcpkit.sql.masking.plan import MASKED, NO_MASKING, MaskPlan, apply_mask, plan_masking
from mcpkit.sql.masking.policy import MaskPolicy, MaskRule
from mcpkit.sql.masking.schema import KnownSchema, reflect_schema
from mcpkit.sql.masking.taint import MaskRefused
