"""Compile `reports.yaml` into tools: checked at load (admission, the database, masking, lint), all or none.

    reports.yaml --parse_reports--> specs --prepare_sql (admission)--> --plan_masking-->
                 --EXPLAIN on the database--> Tool(input model, handler) --lint_tools--> tools

A call binds the validated arguments to the report's `:name` placeholders and runs the same path
as `execute_query`: the row cap in the SQL, a read-only session, masking, shaping, markdown and
structuredContent.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from sqlalchemy import text

from mcpkit import Context, Server, Tool, ToolAnnotations, ToolResult
from mcpkit.errors import DefinitionError, Refused
from mcpkit.lint import lint_tools
from mcpkit.sql.audit import CallAudit
from mcpkit.sql.clipping import ClipPlan
from mcpkit.sql.engines.base import Column, Engine, Rows
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import MaskedReadFailed, QueryFailed
from mcpkit.sql.masking import NO_MASKING, KnownSchema, MaskPlan, MaskPolicy, apply_mask, plan_masking
from mcpkit.sql.masking.schema import SchemaMapping
from mcpkit.sql.models import QueryResult
from mcpkit.sql.profiles import Profile, profile_of
from mcpkit.sql.render import render_markdown
from mcpkit.sql.reports.bind import BindError, BoundSql, prepare_sql
from mcpkit.sql.reports.inputs import default_problem, input_model, sample_value
from mcpkit.sql.reports.like import like_value
from mcpkit.sql.reports.spec import ParamSpec, Problems, ReportsError, ReportSpec, parse_reports
from mcpkit.sql.routing import SERVICE_KEY
from mcpkit.sql.service import DEFAULT_ROWS, SqlService
from mcpkit.sql.shaping import shape_rows

__all__ = ["RESERVED_NAMES", "ReportRunner", "build_report_tools", "load_reports"]

RESERVED_NAMES: Final = (
    "list_tables",
    "describe_table",
    "execute_query",
    "create_chart",
    "profile_table",
    "sample_table",
)
_READ_ONLY: Final = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_BIND: Final = re.compile(r"(?<![:\w\\]):(\w+)(?!:)")  # the placeholders SQLAlchemy's text() binds
_Prepare = Callable[[Mapping[str, str]], tuple[BoundSql, MaskPlan]]


def _bind(params: Sequence[ParamSpec], values: dict[str, Any], profile: Profile) -> dict[str, Any]:
    """The values to bind: as the engine keeps them (dates), `like:` values with wildcards escaped."""
    out = {}
    for p in params:
        value = profile.report_value(values.get(p.name))
        out[p.name] = like_value(p.like, value) if p.like else value
    return out


@dataclass(frozen=True)
class ReportRunner:
    """The handler of one report tool.

    Args:
        spec: The report.
        bound: Its checked SQL.
        plan: Its masking plan (fixed SQL, so planned once at load).
        rows: Its row cap.
        service: Engine and timeout (as for `execute_query`); a served call runs on the service
            the routing middleware resolved (the caller's role), `service` is the fallback.
        calls: The audit, when there is one: the SQL sent and rows are noted per call.
        clip: Cells clipped inside the SQL sent, as for `execute_query` (planned once at load).
    """

    spec: ReportSpec
    bound: BoundSql
    plan: MaskPlan
    rows: int
    service: SqlService
    calls: CallAudit | None = None
    clip: ClipPlan | None = None

    @property
    def sql(self) -> str:
        """The SQL each call sends (masking, then clipping, applied)."""
        return self.clip.sql if self.clip is not None else self.plan.sql or self.bound.send

    def run(self, values: dict[str, Any], ctx: Context) -> QueryResult:
        """Bind `values` and run the report; the shaped, masked result."""
        routed = ctx.state.get(SERVICE_KEY)
        engine = routed.engine if isinstance(routed, SqlService) else self.service.engine
        params = _bind(self.spec.params, values, profile_of(engine))
        if self.calls is not None:
            self.calls.note(ctx.call_id, sql=self.sql)
        try:
            raw = engine.execute(self.sql, params, self.rows, self.service.timeout_s, ctx.call_id)
        except QueryFailed as exc:
            if self.plan.active:  # over a masked read the failure's class is one sentence (rtB F3)
                raise MaskedReadFailed.of(exc) from None
            raise
        if self.clip is not None:
            clip = self.clip
            raw = Rows(
                tuple(Column(c.name, c.type_name) for c in clip.columns),
                tuple(clip.reassemble(r) for r in raw.rows),
                raw.more,
                raw.elapsed_s,
                raw.call_id,
            )
        result = shape_rows(apply_mask(raw, self.plan))
        if self.calls is not None:
            self.calls.note(ctx.call_id, rows=result.row_count, truncated=result.truncated)
        return result

    def __call__(self, args: Any, ctx: Context) -> ToolResult:
        values = {p.name: getattr(args, p.name) for p in self.spec.params}
        if self.calls is None:
            result = self.run(values, ctx)
        else:
            with self.calls.noting(ctx):
                result = self.run(values, ctx)
        return ToolResult(text=render_markdown(result), structured=result)


def _description(spec: ReportSpec, rows: int) -> str:
    columns = "; ".join(f"{name}: {desc}" for name, desc in spec.output)
    tail = f" Returns at most {rows} rows" + (f". Columns: {columns}." if columns else ".")
    return spec.description.rstrip() + tail


def _complaint(exc: BaseException) -> str:
    first = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return first[0][:300] if first else type(exc).__name__


def _explain(engine: Engine, sql: str, params: dict[str, Any], timeout_s: float) -> str | None:
    """The database's own complaint about the SQL, or None when it plans fine."""
    if not isinstance(engine, SqlEngine):
        return None
    wrapped = engine.profile.plan_check.format(sql)
    with engine.session(timeout_s, "reports-check") as (conn, _):
        try:
            conn.execute(text(wrapped), params).close()
        except Exception as exc:  # shown to the operator at start-up, never to a model
            return _complaint(exc)
    return None


def _typed_parameters(
    service: SqlService, spec: ReportSpec, samples: dict[str, Any], prepare: _Prepare
) -> tuple[BoundSql, MaskPlan]:
    """The report prepared with each parameter the database cannot type (PostgreSQL: `:p IS NULL`)
    cast to its declared type (`Profile.parameter_casts`).

    The server is asked, not guessed at: the report runs as a call binds it (`LIMIT 0`, omitted
    optional parameters NULL), and each "could not determine data type of parameter $n" names one
    more parameter to cast (psycopg numbers them in order of first appearance). EXPLAIN does not
    catch this, so any other failure here fails the load too.
    """
    engine, kinds, casts = service.engine, {q.name: q.type for q in spec.params}, dict[str, str]()
    while True:
        bound, plan = prepare(casts)
        if not isinstance(engine, SqlEngine):
            return bound, plan
        sql = plan.sql or bound.send  # masked: what a call sends, not the columns it may not read
        order = list(dict.fromkeys(m.group(1) for m in _BIND.finditer(sql)))
        failure: Exception | None = None
        with engine.session(service.timeout_s, "reports-types") as (conn, _):
            try:
                conn.execute(text(f"SELECT * FROM ({sql}) AS mk_probe LIMIT 0"), samples).close()
            except Exception as exc:  # shown to the operator at start-up, never to a model
                failure = exc
        if failure is None:
            return bound, plan
        number = engine.profile.untyped_parameter(failure)
        if number is None or not 0 < number <= len(order) or order[number - 1] in casts:
            raise BindError(f"the database rejects it: {_complaint(failure)}")
        casts[order[number - 1]] = engine.profile.parameter_casts[kinds[order[number - 1]]]


def _clip_plan(service: SqlService, sql: str, names: Sequence[str], rows: int) -> ClipPlan | None:
    """The clipping of a report's SQL, planned once: its columns described with every parameter
    NULL (`LIMIT 0`: nothing is read), then the engine's wrap around the text with placeholders."""
    if service.cells is None or not isinstance(service.engine, SqlEngine):
        return None
    found = service.engine.profile.clipping()
    if found is None:
        return None
    probe = sql
    for name in names:
        probe = re.sub(rf"(?<![:\w]):{re.escape(name)}\b", "NULL", probe)
    with service.engine.session(service.timeout_s, "reports-clip") as (_, dbapi):
        columns = found.describe(dbapi, probe, None)
    cells = service.cells
    if len(columns) > cells.max_columns or cells.rows_fit(rows + 1, len(columns)) <= rows:
        raise DefinitionError(
            f"a report's result of {len(columns)} columns x {rows} rows is over the per-call budget "
            f"(at most {cells.max_columns} columns, {cells.call_bytes // cells.min_cell} cells); "
            "return fewer columns or rows"
        )
    return found.wrap(sql, columns, rows + 1, cells)


def _compile(
    spec: ReportSpec,
    p: Problems,
    service: SqlService,
    schema: SchemaMapping | KnownSchema | None,
    policy: MaskPolicy | None,
    reserved: Sequence[str],
) -> tuple[BoundSql, MaskPlan, int] | None:
    dialect, profile = service.engine.dialect, profile_of(service.engine)
    if spec.name in reserved:
        p.items.append(f"{p.source}:{spec.line}: report {spec.name!r}: the name is taken by a built-in tool")
    if spec.broken:
        return None
    defaults = [(q, why) for q in spec.params if (why := default_problem(q)) is not None]
    for q, why in defaults:  # the call's own validator, so no rule of the file is missed
        p.items.append(f"{p.source}:{q.line}: report {spec.name!r}: parameter {q.name!r}: default: {why}")
    if defaults:
        return None
    rows = spec.max_rows or min(DEFAULT_ROWS, service.max_rows)
    if rows > service.max_rows:
        p.items.append(
            f"{p.source}:{spec.line}: report {spec.name!r}: max_rows {rows} is above the server's "
            f"maximum of {service.max_rows}"
        )
        return None
    sql_at = f"{p.source}:{spec.sql_line}: report {spec.name!r}: sql: "
    # An omitted optional parameter is bound as NULL: the start-up checks try that case too.
    values = {q.name: None if not q.required and q.default is None else sample_value(q) for q in spec.params}
    samples = _bind(spec.params, values, profile)

    def prepare(casts: Mapping[str, str]) -> tuple[BoundSql, MaskPlan]:
        bound = prepare_sql(
            spec.sql,
            dialect,
            spec.params,
            limit=rows + 1,
            functions=service.functions,
            catalog=service.catalog,
            casts=casts,
        )
        if policy is None or policy.empty:
            return bound, NO_MASKING
        if schema is None:
            raise BindError("masking is on, so the reflected schema is needed to check reports")
        return bound, plan_masking(bound.tree, dialect, schema, policy)

    try:
        bound, plan = (
            _typed_parameters(service, spec, samples, prepare) if profile.parameter_casts else prepare({})
        )
    except (BindError, Refused) as exc:
        p.items.append(sql_at + (exc.message if isinstance(exc, Refused) else str(exc)))
        return None
    complaint = _explain(service.engine, plan.sql or bound.send, samples, service.timeout_s)
    if complaint:
        p.items.append(sql_at + f"the database rejects it: {complaint}")
        return None
    return bound, plan, rows


def build_report_tools(
    text_: str,
    service: SqlService,
    *,
    source: str = "reports.yaml",
    schema: SchemaMapping | KnownSchema | None = None,
    policy: MaskPolicy | None = None,
    calls: CallAudit | None = None,
    reserved: Sequence[str] = RESERVED_NAMES,
) -> list[Tool]:
    """Compile reports from YAML text; every report checked, all problems reported together.

    Args:
        text_: The YAML.
        service: The SQL service the reports run through (engine, limits, function policy).
        source: The file name errors show.
        schema: The reflected schema (needed with a mask policy).
        policy: The mask policy; a report that filters on a masked column fails the load.
        calls: The audit, to note the SQL sent and rows of each call.
        reserved: Tool names reports may not take.

    Returns:
        One tool per report, in file order.

    Raises:
        ReportsError: with `file:line: report 'name': what` for every problem.
    """
    specs, p = parse_reports(text_, source)
    tools: list[Tool] = []
    lines: dict[str, int] = {}
    for spec in specs:
        compiled = _compile(spec, p, service, schema, policy, reserved)
        if compiled is None:
            continue
        bound, plan, rows = compiled
        clip = _clip_plan(service, plan.sql or bound.send, bound.names, rows)
        runner = ReportRunner(spec, bound, plan, rows, service, calls, clip)
        if calls is not None:
            calls.register(
                spec.name, statement=runner.sql, secret_arguments=[q.name for q in spec.params if q.secret]
            )
        try:
            tools.append(
                Tool(
                    name=spec.name,
                    title=spec.title,
                    description=_description(spec, rows),
                    input=input_model(spec.name, spec.params),
                    output=QueryResult,
                    handler=runner,
                    annotations=_READ_ONLY,
                    category="sql-reports",
                    keywords=("report", *spec.name.replace("-", "_").split("_")),
                    cache_ttl_s=spec.cache_ttl_s,
                    timeout_s=service.timeout_s + 15.0,
                )
            )
            lines[spec.name] = spec.line
        except (DefinitionError, TypeError, ValueError) as exc:
            p.items.append(f"{p.source}:{spec.line}: report {spec.name!r}: {exc}")
    p.raise_if_any()
    _lint(tools, p, lines)
    p.raise_if_any()
    return tools


def _lint(tools: list[Tool], p: Problems, lines: dict[str, int]) -> None:
    if not tools:
        return
    try:
        listing = Server("mcpkit-reports-check", tools=tools, lint="off").list_tools()
    except DefinitionError as exc:
        p.items.append(f"{p.source}:1: {exc}")
        return
    for finding in lint_tools(listing):
        if finding.severity == "error":
            line = lines.get(finding.tool or "", 1)
            where = f"{p.source}:{line}: report {finding.tool!r}"
            p.items.append(f"{where}: lint {finding.rule} {finding.path}: {finding.message}")


def load_reports(path: str | Path, service: SqlService, **options: Any) -> list[Tool]:
    """`build_report_tools` on a file (`--reports reports.yaml`).

    Raises:
        ReportsError: the file is unreadable or any report has a problem.
    """
    try:
        content = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ReportsError([f"{path}: cannot read the reports file ({exc.strerror or exc})"]) from None
    return build_report_tools(content, service, source=str(path), **options)
