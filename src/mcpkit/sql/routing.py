"""Routing: which database, and as whom, each tool call runs (middleware of the public pipeline).

    record -> your middleware -> SourceRouter.choose -> audit -> SourceRouter.resolve -> ... -> handler

`choose` names the call's source (the tool's fixed source, the `source` argument, or the only one)
in `call.state[SOURCE_KEY]`, so the audit's start entry carries it. `resolve` runs inside the audit,
so what it refuses is recorded: it turns who the caller provably is (`call.principal`, `call.groups`)
into the service of that source's database role (`--role-map`), puts it in `call.state[SERVICE_KEY]`,
and gives a failure to reach that database a sentence naming it. Handlers only read the result:

    def my_tool(args: MyInput, ctx: Context) -> ToolResult:
        service = service_of(ctx)          # the source's database, as the caller's role

A new tool gets source routing by calling `service_of(ctx)`; nothing else. `build_server` gives
every tool it serves (but reports, which belong to one database) a required `source` argument when
the server has several databases (`routed_tool`, `with_source`), and leaves it unchanged with one.

A source that did not answer at start-up (several databases only) is served as unavailable: its
calls fail with a sentence naming it, and the start-up checks are tried again (at most every few
seconds) until they pass; a source whose checks then find something unsafe stays refused.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

import anyio.to_thread
from pydantic import BaseModel, Field, create_model

from mcpkit.definition import Tool
from mcpkit.errors import Refused, ToolError
from mcpkit.sql.errors import QueryFailed, QueryTimeout, SqlConfigError
from mcpkit.sql.profiles import engine_name

if TYPE_CHECKING:
    from mcpkit.context import Context
    from mcpkit.pipeline import Call, CallNext
    from mcpkit.result import Outcome
    from mcpkit.sql.identities import IdentityRouter
    from mcpkit.sql.service import SqlService

__all__ = [
    "ALL_SOURCES",
    "SERVICES_KEY",
    "SERVICE_KEY",
    "SOURCE_KEY",
    "SOURCE_NAME",
    "Source",
    "SourceRouter",
    "SourceUnavailable",
    "routed_tool",
    "service_of",
    "source_of",
    "with_source",
]

log = logging.getLogger("mcpkit.sql")

SOURCE_KEY: Final = "mcpkit.sql.source"
"""`call.state` / `ctx.state` key: the name of the call's source."""
SERVICE_KEY: Final = "mcpkit.sql.service"
"""`call.state` / `ctx.state` key: the `SqlService` the call runs on (its source, the caller's role)."""
SERVICES_KEY: Final = "mcpkit.sql.services"
"""`call.state` key of a call over every source (`list_tables` without `source`): name -> the
caller's `SqlService`, or None where the source is unreachable (sources that refuse the caller
are left out)."""
ALL_SOURCES: Final = "*"
SOURCE_NAME: Final = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}")
"""A source name: a letter, then letters, digits or `_` (at most 32): safe to show to a model."""
DEFAULT_SOURCE: Final = "default"
_RETRY_S: Final = 5.0


class SourceUnavailable(QueryFailed):
    """One source cannot serve right now (unreachable, or refused by its start-up checks)."""

    def __init__(self, source: str, *, checks_failed: bool = False, call_id: str | None = None) -> None:
        data: dict[str, str] = {"reason": "source_refused" if checks_failed else "connection"}
        data["source"] = source
        if call_id:
            data["call_id"] = call_id
        if checks_failed:
            message = (
                f"The database {source!r} is not served: it failed this server's safety checks; "
                "the operator log says why. Other sources still answer."
            )
        else:
            message = (
                f"The database {source!r} is not reachable right now; try again later. "
                "Other sources still answer."
            )
        ToolError.__init__(self, message, retryable=not checks_failed, data=data)
        self.kind = "connection"


Prepare = Callable[[], "tuple[SqlService, IdentityRouter | None]"]


class Source:
    """One database of the server: its name, service (account, masks, limits) and role map.

    Args:
        name: The name tools take as `source` (`--dsn name=URL`).
        dialect: The sqlglot dialect (known from the URL, before any connection).
        service: The service as configured; None while the source has not passed its start-up
            checks (it was unreachable): `prepare` is then tried on a call, at most every 5 s.
        router: Identities (`--role-map`), if any.
        prepare: Runs the start-up checks and builds `(service, router)`; raises `SqlConfigError`
            when the checks refuse, `QueryFailed`/`QueryTimeout` when the database is unreachable.
    """

    def __init__(
        self,
        name: str,
        dialect: str,
        service: SqlService | None = None,
        router: IdentityRouter | None = None,
        *,
        prepare: Prepare | None = None,
    ) -> None:
        if not SOURCE_NAME.fullmatch(name):
            raise SqlConfigError(
                f"source name {name!r}: use a letter, then letters, digits or _ (at most 32)"
            )
        if service is None and prepare is None:
            raise SqlConfigError(f"source {name}: give a service or a way to prepare one")
        self.name, self.dialect = name, dialect
        self.service, self.router = service, router
        self._prepare = prepare
        self._refused = False
        self._next_try = 0.0
        self._lock = threading.Lock()

    @property
    def label(self) -> str:
        """`name (PostgreSQL)`."""
        return f"{self.name} ({engine_name(self.dialect)})"

    @property
    def ready(self) -> bool:
        """Its start-up checks have passed."""
        return self.service is not None

    def ensure_ready(self, call_id: str | None = None) -> SqlService:
        """The configured service, running the deferred start-up checks first when needed.

        Raises:
            SourceUnavailable: still unreachable, or its checks refused it.
        """
        if self.service is not None:
            return self.service
        with self._lock:
            if self.service is not None:
                return self.service
            if self._refused:
                raise SourceUnavailable(self.name, checks_failed=True, call_id=call_id)
            if time.monotonic() < self._next_try or self._prepare is None:
                raise SourceUnavailable(self.name, call_id=call_id)
            try:
                service, router = self._prepare()
            except (QueryFailed, QueryTimeout):
                self._next_try = time.monotonic() + _RETRY_S
                log.warning("source %s is still unreachable; its calls fail until it answers", self.name)
                raise SourceUnavailable(self.name, call_id=call_id) from None
            except SqlConfigError as exc:
                self._refused = True
                log.error("source %s: refused by its start-up checks: %s", self.name, exc)
                raise SourceUnavailable(self.name, checks_failed=True, call_id=call_id) from None
            log.warning("source %s answered and passed its start-up checks; serving it", self.name)
            self.service, self.router = service, router
            return service

    def service_for(self, principal: str | None, groups: Sequence[str] = ()) -> SqlService:
        """The service of one caller: the source's database as the caller's role."""
        service = self.ensure_ready()
        return self.router.service_for(principal, groups) if self.router is not None else service

    def close(self) -> None:
        """Close the role logins and the engine."""
        if self.router is not None:
            self.router.close()
        if self.service is not None:
            self.service.engine.close()


class SourceRouter:
    """The routing middleware of a SQL server: `Server(middleware=[router.choose, ..., router.resolve])`.

    Args:
        sources: The databases, in the order they are listed.
        fixed: Tool name -> source name, for tools bound to one database (reports).
        spanning: Tools that, given no `source`, run over every source (`list_tables`).
    """

    def __init__(
        self,
        sources: Sequence[Source],
        fixed: Mapping[str, str] | None = None,
        spanning: Sequence[str] = ("list_tables",),
    ) -> None:
        if not sources:
            raise SqlConfigError("give at least one database")
        self.sources: dict[str, Source] = {}
        for s in sources:
            if s.name in self.sources:
                raise SqlConfigError(f"source {s.name!r} is named twice")
            self.sources[s.name] = s
        self.fixed: dict[str, str] = dict(fixed or {})
        self.spanning = frozenset(spanning)

    @property
    def names(self) -> tuple[str, ...]:
        """The source names, in order."""
        return tuple(self.sources)

    @property
    def several(self) -> bool:
        """More than one database: tools take `source`."""
        return len(self.sources) > 1

    def pick(self, call: Call) -> str | None:
        """The call's source name (`ALL_SOURCES` for a spanning tool given none), or None (the
        chain's validation then refuses a bad `source`)."""
        if call.tool is None:
            return None
        name = self.fixed.get(call.name)
        if name is None:
            if not self.several:
                return next(iter(self.sources))
            name = call.arguments.get("source")
            if name in (None, "") and call.name in self.spanning:
                return ALL_SOURCES
        return name if isinstance(name, str) and name in self.sources else None

    async def choose(self, call: Call, call_next: CallNext) -> Outcome:
        """Name the call's source in `call.state` and the operator record (before the audit)."""
        name = self.pick(call)
        if name is not None:
            call.state[SOURCE_KEY] = name
            call.record["source"] = name
        return await call_next(call)

    async def resolve(self, call: Call, call_next: CallNext) -> Outcome:
        """The caller's service on the chosen source in `call.state` (inside the audit)."""
        name = call.state.get(SOURCE_KEY, "")
        if name == ALL_SOURCES:
            call.state[SERVICES_KEY] = await self._every_service(call)
            return await call_next(call)
        source = self.sources.get(name)
        if source is None:
            return await call_next(call)
        call.state[SERVICE_KEY] = await self._service(source, call)
        try:
            return await call_next(call)
        except QueryFailed as exc:
            if self.several and exc.kind == "connection" and not isinstance(exc, SourceUnavailable):
                raise SourceUnavailable(source.name, call_id=call.call_id) from None
            raise

    async def _service(self, source: Source, call: Call) -> SqlService:
        if not source.ready:  # the deferred start-up checks talk to the database
            await anyio.to_thread.run_sync(source.ensure_ready, call.call_id)
        router = source.router
        service = source.ensure_ready(call.call_id)
        if router is not None:
            groups = router.groups_for(call.make_context(call)) if router.groups_of else call.groups
            role = router.role_of(call.principal, groups)
            service = router.service_for(call.principal, groups)
            # what the caller may see: cached answers are keyed on it (the result cache)
            call.vary[f"role:{source.name}"] = role if role is not None else "-"
            call.record.setdefault("roles", {})[source.name] = role
        return service

    async def _every_service(self, call: Call) -> dict[str, SqlService | None]:
        found: dict[str, SqlService | None] = {}
        refused: Refused | None = None
        for name, source in self.sources.items():
            try:
                found[name] = await self._service(source, call)
            except SourceUnavailable:
                found[name] = None
            except Refused as exc:  # no role on this source: it is not the caller's to list
                refused = exc
        if not found and refused is not None:
            raise refused
        return found

    def stages(self, audit: Any = None) -> list[Any]:
        """`[choose, audit, resolve]`: the middleware to give `Server`, around the audit's stage."""
        return [self.choose, *([audit] if audit is not None else []), self.resolve]

    def close(self) -> None:
        """Close every source."""
        for source in self.sources.values():
            source.close()


def service_of(ctx: Context) -> SqlService:
    """The service a routed call runs on (the middleware put it on the call).

    Raises:
        ToolError: the call was not routed (a tool that takes no `source` on a server with
            several databases): a server definition error, logged for the operator.
    """
    service = ctx.state.get(SERVICE_KEY)
    if service is None:
        log.error("[%s] tool %r has no database: it is not routed (no source)", ctx.call_id, ctx.tool)
        raise ToolError("This tool is not connected to a database; the operator log says why.")
    return service  # type: ignore[no-any-return]


def source_of(ctx: Context) -> str | None:
    """The name of a routed call's source."""
    name = ctx.state.get(SOURCE_KEY)
    return name if isinstance(name, str) else None


def with_source(
    model: type[BaseModel],
    sources: Sequence[Source] | SourceRouter,
    *,
    required: bool = True,
    engines: bool = True,
) -> type[BaseModel]:
    """`model` with a `source` argument (an enum of the names) when there are several databases.

    With one database the model is returned unchanged, so its schema stays as small as before.

    Args:
        model: A tool's input model.
        sources: The server's sources (or its router).
        required: Whether `source` must be given (False: it defaults to "", meaning all).
        engines: Name each database's engine in the description (where the dialect matters).
    """
    listed = list(sources.sources.values()) if isinstance(sources, SourceRouter) else list(sources)
    if len(listed) < 2:
        return model
    names = tuple(s.name for s in listed)
    kinds = ": " + ", ".join(s.label for s in listed) if engines else ""
    choice: Any = Literal[names]
    if required:
        field = (choice, Field(description=f"Which database{kinds}."))
    else:
        field = (
            Literal[(*names, "")],
            Field(default="", description=f"Which database{kinds}; empty: all."),
        )
    return create_model(
        model.__name__,
        __base__=model,
        __doc__=model.__doc__,
        source=field,
    )


def routed_tool(tool: Tool[Any, Any], routing: SourceRouter) -> Tool[Any, Any]:
    """`tool` taking a required `source` when `routing` has several databases (unless it is bound to
    one, or already takes `source`); the same tool otherwise."""
    if not routing.several or tool.name in routing.fixed or "source" in tool.input.model_fields:
        return tool
    return dataclasses.replace(tool, input=with_source(tool.input, routing))
