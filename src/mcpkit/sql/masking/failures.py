"""One failure class for every error a row raises while a masked read runs (red team rtA F1).

The failure class is told to the agent (`data.reason` and its sentence), and PostgreSQL raises
nearly every class from a row at run time: `cast(name AS regclass)` an undefined object,
`cast(name AS jsonpath)` or `to_tsquery(name)` a syntax error, a guard's cast a resource failure,
`1 / 0` a data failure. With `CASE id WHEN a THEN 1 / 0 WHEN b THEN cast(name AS regclass) END`
the class told which of rows a and b the scan met first, and a scan can follow a masked column (an
index, CLUSTER): the whole e-mail ranking in 65 calls for 20 rows. So over a masked read a failure
of another class is planned again without running (`Profile.compile_check`); when the plan passes,
a row raised it, and it reads as the data failure. A failure the planner repeats is the query's
own (a misspelt function, a type mismatch) and keeps its class. Timeouts stay what they are (the
documented residual).

The check is run for a data failure too, its outcome unused: run only for the other classes, its
round trip and planning told them apart by the time the call took (red team rtd F2: 50-100 ms, 6
of 6 comparisons of the masked e-mails right with three calls per pair).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from mcpkit.errors import ToolError
from mcpkit.sql.errors import FailureKind, QueryFailed

if TYPE_CHECKING:
    from mcpkit.sql.engines.base import Engine
    from mcpkit.sql.profiles.base import Profile

__all__ = ["row_failure"]

log = logging.getLogger("mcpkit.sql")

# A connection failure is no row's: it is retried. Data failures are the class kept.
_FOLDED: Final[frozenset[FailureKind]] = frozenset(
    {"syntax", "undefined_object", "permission", "read_only", "resource", "other"}
)


def row_failure(
    failure: QueryFailed, engine: Engine, profile: Profile, sent: str, call_id: str, timeout_s: float
) -> QueryFailed:
    """The failure to report for `failure` of the masked read `sent`: `failure` itself when the plan
    fails the same way (the query's own error), else the data failure. A check that fails otherwise
    (its timeout, a busy pool, which concurrent calls can cause) says nothing about the rows, so
    it does not keep the class (review R17)."""
    check = profile.compile_check
    if check is None or failure.kind == "connection":
        return failure
    try:
        engine.execute(check.format(sent), None, 1, timeout_s, call_id)
    except QueryFailed as again:
        if again.kind == failure.kind:
            return failure  # the planner fails too: the query's own error, the same on every row
    except ToolError:
        pass  # timed out, busy, refused: not the planner's word, so told as data (fails closed)
    if failure.kind not in _FOLDED:
        return failure  # data (checked all the same: the time a call takes shows no class)
    log.info("sql call %s: a row raised a %s failure over a masked read; told as data", call_id, failure.kind)
    return QueryFailed("data", call_id)
