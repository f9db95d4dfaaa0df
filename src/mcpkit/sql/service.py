"""The SQL service: admission, engine, shaping and rendering, shared by the tools and the CLI."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from contextlib import nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol

from opentelemetry import trace
from opentelemetry.trace import StatusCode

from mcpkit.errors import Refused, ToolError
from mcpkit.sql.admission import (
    DEFAULT_BUDGET,
    Admitted,
    AnalysisBudget,
    FunctionCatalog,
    FunctionPolicy,
    admit,
)
from mcpkit.sql.admission.reject_volatile_functions import reject_volatile_functions
from mcpkit.sql.admission.slots import analysis_slot
from mcpkit.sql.clipping import CellBudget
from mcpkit.sql.engines.base import Engine
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import MaskedReadFailed, QueryFailed, SqlConfigError, refuse
from mcpkit.sql.masking import NO_MASKING, KnownSchema, MaskPlan, MaskPolicy, apply_mask, plan_masking
from mcpkit.sql.masking.failures import row_failure
from mcpkit.sql.models import QueryResult, TableDescription, TableList
from mcpkit.sql.plans import DEFAULT_PLANS, Plan, PlanCache
from mcpkit.sql.profiles import profile_of
from mcpkit.sql.profiles.scan_order import unmasked_call
from mcpkit.sql.reflect import describe_table, list_tables
from mcpkit.sql.relcheck import Relations
from mcpkit.sql.render import render_description, render_markdown, render_table_list
from mcpkit.sql.reverify import catalog_checked
from mcpkit.sql.scanpins import index_scans_allowed, pin_state
from mcpkit.sql.shaping import shape_rows

__all__ = ["DEFAULT_ROWS", "HARD_MAX_ROWS", "Masking", "Note", "SqlService"]

log = logging.getLogger("mcpkit.sql")
# set while a call runs again after its scan pins moved (`SqlService._again`)
_REPLANNED: ContextVar[bool] = ContextVar("mcpkit_sql_replanned", default=False)
# Child spans of the call's span (see mcpkit.telemetry); no-ops until an SDK is installed. They carry
# no SQL text: literals in a query can be data the operator's trace store should not hold.
_tracer = trace.get_tracer("mcpkit.sql")

DEFAULT_ROWS: Final = 25
HARD_MAX_ROWS: Final = 5000
DEFAULT_CELLS: Final = CellBudget()


class Note(Protocol):
    """Receives audit fields (`sql`, `rows`, `truncated`) as a call learns them."""

    def __call__(self, **fields: Any) -> None: ...


@dataclass(frozen=True)
class Masking:
    """Which columns to mask, the reflected schema queries are resolved against, and table ->
    masked columns (derived masks included) that the database must withhold from each identity."""

    policy: MaskPolicy
    schema: KnownSchema
    masked: Mapping[str, frozenset[str]] = field(default_factory=dict)
    relations: Relations | None = None  # read at start-up: what the re-verification compares (`relcheck`)


class SqlService:
    """Answer one query the way the agent sees it: admitted, capped, run read-only, shaped, rendered.

    Args:
        engine: Where queries run.
        max_rows: The hard maximum of `max_rows` per call (at most 5000).
        timeout_s: Per-call deadline for the database work.
        functions: Function policy (denylist, optional allowlist); the dialect's default if None.
        catalog: Volatility lookup; "auto" asks the database's profile (`pg_proc` on PostgreSQL),
            None turns it off.
        max_cost: Refuse queries whose planner estimate is above this: PostgreSQL's and MySQL's
            cost, MariaDB's estimated rows examined (the profile's `cost`).
        masking: Sensitive columns to mask (`--mask`), with the schema they are resolved against.
        budget: Limits on the Python-side analysis of one call (size limits and a deadline).
        cells: Bytes the cells of one call may take, clipped inside the SQL sent (None: off).
        plans: Admission and masking plans kept for repeated statements (`mcpkit.sql.plans`;
            0: none).
    """

    def __init__(
        self,
        engine: Engine,
        *,
        max_rows: int = 500,
        timeout_s: float = 30.0,
        functions: FunctionPolicy | None = None,
        catalog: FunctionCatalog | Literal["auto"] | None = "auto",
        max_cost: float | None = None,
        masking: Masking | None = None,
        budget: AnalysisBudget = DEFAULT_BUDGET,
        cells: CellBudget | None = DEFAULT_CELLS,
        plans: int = DEFAULT_PLANS,
    ) -> None:
        if not 1 <= max_rows <= HARD_MAX_ROWS:
            raise ValueError(f"max_rows must be between 1 and {HARD_MAX_ROWS}")
        self.engine = engine
        self.profile = profile_of(engine)
        self.max_rows = max_rows
        self.timeout_s = timeout_s
        self.functions = functions or FunctionPolicy.for_dialect(engine.dialect)
        self.profile.use_function_policy(self.functions)
        if catalog == "auto":
            catalog = self.profile.function_catalog(engine)
        self.catalog: FunctionCatalog | None = catalog
        if max_cost is not None and (max_cost <= 0 or not self.profile.costed):
            raise SqlConfigError(
                "--max-cost needs a positive ceiling and PostgreSQL or MySQL/MariaDB "
                "(this database's planner states no estimate)"
            )
        self.max_cost = max_cost
        self.masking = masking
        self.budget = budget
        self.cells = cells
        self._admit = admit  # replaced only by the defense-in-depth tests
        self.plans = PlanCache(plans)

    def admit(self, sql: str, rows: int, deadline: float | None = None) -> Admitted:
        """Admit `sql` with the row cap `rows` built in (one more row, to see whether more exist)."""
        return self._admit(
            sql,
            self.engine.dialect,
            limit=rows + 1,
            functions=self.functions,
            catalog=self.catalog,
            budget=self.budget,
            deadline=deadline,
        )

    def query(
        self,
        sql: str,
        *,
        call_id: str,
        max_rows: int = DEFAULT_ROWS,
        note: Note | None = None,
        timeout_s: float | None = None,
    ) -> tuple[QueryResult, str]:
        """Run one query as `execute_query` does.

        Args:
            sql: The model's SQL.
            call_id: Shown to the database and in the log.
            max_rows: Rows to return (clamped to this service's maximum).
            note: Told what the audit needs: `sql=` actually sent, then `rows=` and `truncated=`.
            timeout_s: A shorter deadline for this statement (a tool that runs several shares
                one budget); never longer than the service's.

        Returns:
            The structured result and its markdown.

        Raises:
            Refused: admission or the cost ceiling said no.
            QueryFailed: the database failed the query (masked).
            QueryTimeout: the deadline passed.
        """
        rows = max(1, min(max_rows, self.max_rows))
        deadline_s = self.timeout_s if timeout_s is None else max(0.001, min(timeout_s, self.timeout_s))
        started = time.monotonic()
        pins = None if self.masking is None else pin_state(self.masking.schema)
        with _span("sql.admission") as span:
            try:
                with analysis_slot(deadline_s, len(sql)):  # long texts queue, on the call's timeout
                    admitted, plan = self._plan(sql, rows, self.budget.deadline())
            except Refused as exc:
                reason = (exc.data or {}).get("reason")
                span.set_attribute("mcpkit.sql.refused", str(reason))
                span.set_status(StatusCode.ERROR, "REFUSED")
                log.info("sql call %s refused (%s): %r", call_id, reason, sql[:2000])
                raise
        sent = plan.sql or admitted.sql
        log.info("sql call %s admitted: %s", call_id, sent[:2000])
        if note is not None:
            note(sql=sent)
        with _span("sql.database", {"db.system.name": self.engine.dialect}) as span:
            checked = catalog_checked() if self.functions.opted_in(admitted.tree) else nullcontext()
            try:
                if self.max_cost is not None:
                    self._check_cost(sent, call_id)  # MariaDB's EXPLAIN runs constant subqueries
                m = self.masking  # masked reads in reach of a masked index: `profiles.postgres.index_reach`
                free = not plan.active or (m is not None and index_scans_allowed(admitted.tree, m.schema))
                with checked, unmasked_call(free):
                    found = self.engine.execute(
                        sent, None, rows, deadline_s, call_id, clip=self.cells, tree=admitted.tree
                    )
            except QueryFailed as exc:
                if not plan.active:
                    raise
                if self.masking is not None and pin_state(self.masking.schema) != pins:  # a dropped index
                    left_s = deadline_s - (time.monotonic() - started)
                    return self._again(sql, call_id, max_rows, note, left_s)
                # which row failed first must not show in the failure's class (rtA F1, rtB F3)
                folded = row_failure(exc, self.engine, self.profile, sent, call_id, deadline_s)
                if self.profile.compile_check is None:  # no plan-only check (MariaDB): one sentence
                    folded = MaskedReadFailed.of(folded)
                raise folded from None
            result = shape_rows(apply_mask(found, plan))
            span.set_attribute("db.response.returned_rows", result.row_count)
        if self.masking is not None and plan.active and pin_state(self.masking.schema) != pins:
            log.info("sql call %s: the scan pins moved while it ran (rte F3): planned again", call_id)
            return self._again(sql, call_id, max_rows, note, deadline_s - (time.monotonic() - started))
        if note is not None:
            note(rows=result.row_count, truncated=result.truncated)
        return result, render_markdown(result)

    def _again(
        self, sql: str, call_id: str, max_rows: int, note: Note | None, left_s: float
    ) -> tuple[QueryResult, str]:
        """The call planned and run once more, in what is left of its timeout, after its scan pins
        moved; moved again, it fails closed (review R10: each re-run took a whole timeout, no end)."""
        if _REPLANNED.get():
            log.warning("sql call %s: the scan pins moved again while it ran; failed", call_id)
            raise QueryFailed("other", call_id)
        token = _REPLANNED.set(True)
        try:
            return self.query(
                sql, call_id=call_id, max_rows=max_rows, note=note, timeout_s=max(0.001, left_s)
            )
        finally:
            _REPLANNED.reset(token)

    def _stamp(self) -> tuple[object, ...]:
        """Everything a plan depends on besides its SQL and row cap (see `mcpkit.sql.plans`)."""
        m = self.masking
        return (
            self._admit,
            self.engine.dialect,
            self.functions,
            self.catalog,
            self.budget,
            m,
            None if m is None else m.policy,
            None if m is None else m.schema,
            None if m is None else m.schema.scan_pins,  # replaced when re-verified (`scanpins.pins_check`)
            self.profile.policy_generation,
        )

    def _plan(self, sql: str, rows: int, deadline: float | None) -> tuple[Admitted, MaskPlan]:
        """Admit and mask-plan `sql`, or take the plan made for the same text under the same inputs.

        A cached plan still has its functions' volatility checked against the catalog (whose
        answers expire), so a function re-created as volatile is refused as on a first call.
        """
        stamp, key = self._stamp(), (sql, rows)
        cached = self.plans.get(key, stamp=stamp)
        if cached is not None:
            if cached.calls_functions and self.catalog is not None:
                # On a copy: the check marks nodes while it runs, and other threads share the tree.
                reject_volatile_functions(cached.admitted.tree.copy(), self.engine.dialect, self.catalog)
            AnalysisBudget.check_deadline(deadline)
            return cached.admitted, cached.masking
        admitted = self.admit(sql, rows, deadline)
        masking = self.mask_plan(admitted)
        AnalysisBudget.check_deadline(deadline)
        self.plans.put(key, Plan.of(admitted, masking), stamp=stamp)
        return admitted, masking

    def mask_plan(self, admitted: Admitted) -> MaskPlan:
        """The masking plan of an admitted query (refused when it filters on a masked column)."""
        if self.masking is None:
            return NO_MASKING
        m = self.masking
        return plan_masking(
            admitted.tree, self.engine.dialect, m.schema, m.policy, max_nodes=self.budget.max_sent_nodes
        )

    def tables(self, *, call_id: str, schema: str | None = None) -> tuple[TableList, str]:
        """`list_tables`: what the account can read, with row estimates."""
        found = list_tables(self._reflecting(), call_id=call_id, timeout_s=self.timeout_s, schema=schema)
        return found, render_table_list(found)

    def describe(
        self, name: str, *, call_id: str, schema: str | None = None, timeout_s: float | None = None
    ) -> tuple[TableDescription, str]:
        """`describe_table`: columns, keys, indexes, comments of one readable table (`timeout_s`: a
        shorter deadline, for a tool that shares one budget across several steps)."""
        deadline_s = self.timeout_s if timeout_s is None else max(0.001, min(timeout_s, self.timeout_s))
        found = describe_table(self._reflecting(), name, call_id=call_id, schema=schema, timeout_s=deadline_s)
        return found, render_description(found)

    def _reflecting(self) -> SqlEngine:
        if not isinstance(self.engine, SqlEngine):
            raise ToolError("This server's engine cannot list or describe tables.")
        return self.engine

    def _check_cost(self, sql: str, call_id: str) -> None:
        cost = self._plan_cost(sql, call_id)
        if cost is not None and self.max_cost is not None and cost > self.max_cost:
            # The estimate stays in the log: PostgreSQL costs a scan from the table's current page
            # count, i.e. the size of every value in it, masked or hidden ones too (rt20mask F5).
            log.info("sql call %s over the cost ceiling: estimate %.0f", call_id, cost)
            refuse(
                "cost",
                f"The planner's estimate for this query is over this server's ceiling of "
                f"{self.max_cost:.0f}; filter, aggregate or narrow the query.",
            )

    def _plan_cost(self, sql: str, call_id: str) -> float | None:
        if not self.profile.costed:
            return None
        document = self.engine.execute(self.profile.explain(sql), None, 1, self.timeout_s, call_id)
        return self.profile.cost(document.rows[0][0])


def _span(name: str, attributes: dict[str, Any] | None = None) -> Any:
    """A child span whose failure is its error code only (no exception text, which may hold SQL)."""
    return _tracer.start_as_current_span(
        name, attributes=attributes, record_exception=False, set_status_on_exception=False
    )
