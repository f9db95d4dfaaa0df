"""The errors of `mcpkit.sql`.

    McpkitError (mcpkit.errors)
    ├── SqlConfigError          the DSN, account or options are unusable (CLI exit 2), never model-visible
    └── ToolError
        ├── Refused             REFUSED: admission said no (raised with `refuse`, a stable `data.reason`)
        ├── QueryFailed         TOOL_ERROR: the database failed the query; masked sentence + `data.reason`
        └── ToolTimeout
            └── QueryTimeout    TIMEOUT: the query ran past its deadline and was stopped

Every message here is one sentence a model may read: no database error text, no table names,
no stack traces. The operator log (logger `mcpkit.sql`) gets the detail with the call id.
"""

from __future__ import annotations

from typing import Final, Literal, NoReturn

from mcpkit.errors import McpkitError, Refused, ToolError, ToolTimeout

__all__ = [
    "FAILURE_MESSAGES",
    "MEMORY_EXCEEDED",
    "PATHS_TOO_LARGE",
    "SEARCH_TOO_LARGE",
    "VALUE_TOO_LARGE",
    "FailureKind",
    "MaskedReadFailed",
    "QueryFailed",
    "QueryTimeout",
    "RefusalReason",
    "SessionLost",
    "SqlConfigError",
    "refuse",
    "row_count_failure",
]

RefusalReason = Literal[
    "syntax",
    "multiple_statements",
    "not_a_query",
    "write",
    "lock",
    "parameter",
    "variable",
    "function",
    "relation",
    "volatile_function",
    "attribute_call",
    "comment",
    "string_literal",
    "unicode_identifier",
    "too_long",
    "too_complex",
    "too_wide",
    "cost",
    "not_found",
    "chart",
    "charts_missing",
]

FailureKind = Literal[
    "syntax",
    "undefined_object",
    "permission",
    "read_only",
    "data",
    "resource",
    "connection",
    "other",
]

FAILURE_MESSAGES: Final[dict[FailureKind, str]] = {
    "syntax": "The database reported a syntax error; check the query against this database's SQL dialect.",
    "undefined_object": (
        "The query names a table, column or function that does not exist or is not visible; "
        "use list_tables and describe_table."
    ),
    "permission": "The database account this server uses may not read something the query needs.",
    "read_only": "The database refused a change: this server is read-only, only queries are allowed.",
    "data": "The query failed on the data (for example a bad cast or division by zero); fix the expression.",
    "resource": "The query needed more resources than the database allows; aggregate or filter in SQL first.",
    "connection": "The database is not reachable right now; try again later.",
    "other": "The database could not run the query; the operator log has the details.",
}

SEARCH_TOO_LARGE: Final = "The query searches strings too large to search within the time limit; narrow it."
"""The `resource` sentence for a string search admission bounded (`admission.bound_searches`)."""
VALUE_TOO_LARGE: Final = (
    "The query would build a value larger than this server allows (a JSON function, repeat, pad,"
    " replace, a split, a regular expression or a long concatenation over large values); apply it to"
    " smaller values."
)
"""The `resource` sentence for a value-growing call admission bounded (`GrowthBound`)."""
MEMORY_EXCEEDED: Final = (
    "The query needed more memory than the database allows one call; aggregate, filter or build smaller"
    " values in SQL."
)
"""The `resource` sentence for a call the database's memory limit stopped (PostgreSQL's data limit)."""
PATHS_TOO_LARGE: Final = (
    "JSON_EXTRACT with several paths (or a ** or computed path) over a document this large would build"
    " a value larger than this server allows; extract one literal path per call."
)
"""The `resource` sentence for MariaDB's JSON_EXTRACT bounded by its paths (`PATHS_BOUND_MARKER`)."""


# A subquery answered more than one row where one value was wanted: PostgreSQL SQLSTATE 21000,
# MariaDB error 1242. Which row a scan meets second follows the scan order, so it reads as the
# same failure as a division by zero on another row (red team rt35a F8), not as another class.
_ROW_COUNT_STATES: Final = frozenset({"21000"})
_ROW_COUNT_ERRNOS: Final = frozenset({1242})


def row_count_failure(orig: BaseException) -> bool:
    """Whether a driver error is a scalar subquery's "more than one row" (a `data` failure)."""
    if getattr(orig, "sqlstate", None) in _ROW_COUNT_STATES:
        return True
    args: tuple[object, ...] = tuple(getattr(orig, "args", ()))
    return bool(args) and isinstance(args[0], int) and args[0] in _ROW_COUNT_ERRNOS


class SessionLost(RuntimeError):
    """A session's state could not be put back after mcpkit changed it (MariaDB: `SET ROLE` back to
    a role revoked meanwhile): its connection must be dropped, and the call fails as a connection
    failure the agent may retry on a new one."""


class SqlConfigError(McpkitError):
    """The server cannot start or the CLI cannot run: bad DSN, unsafe account, bad option file."""


class QueryFailed(ToolError):
    """The database failed the query; the message is a fixed sentence chosen by `kind`.

    Args:
        kind: The failure class, also sent as `data.reason`.
        call_id: The call id, sent so the operator can find the log line.
        message: A fixed sentence more precise than the kind's (an error mcpkit raised on purpose).
    """

    expose_data = True  # the failure class and call id: fixed values the client may act on

    def __init__(self, kind: FailureKind, call_id: str | None = None, *, message: str | None = None) -> None:
        data: dict[str, str] = {"reason": kind}
        if call_id:
            data["call_id"] = call_id
        super().__init__(message or FAILURE_MESSAGES[kind], retryable=kind == "connection", data=data)
        self.kind: FailureKind = kind


MASKED_READ_FAILED: Final = (
    "The query failed on the data (a bad value or cast, an overflow, a resource limit) or its SQL was not"
    " accepted; over a table with masked columns such failures are not told apart: check the expression."
)


class MaskedReadFailed(QueryFailed):
    """A failure of a query over a masked read, whatever its class (the connection's aside): which
    row a scan raised its error on first follows the scan order, which can follow a masked value, so
    the class itself was one bit of it (red team rtB F3: BIGINT overflow on row a, "more than one
    row" on row b, answered as two sentences, sorted the masked scores in 63 calls).

    Use `MaskedReadFailed.of(exc)`: the exception to raise instead of `exc` (itself when kept).
    """

    @classmethod
    def of(cls, exc: QueryFailed) -> QueryFailed:
        """`exc` told as a `data` failure with one sentence; a connection failure (retryable,
        raised before the statement or when the connection drops) as it is."""
        if exc.kind == "connection" or isinstance(exc, MaskedReadFailed):
            return exc
        folded = cls("data", (exc.data or {}).get("call_id"), message=MASKED_READ_FAILED)
        folded.__cause__ = None
        return folded


class QueryTimeout(ToolTimeout):
    """The query ran past its deadline and the database work was stopped."""

    expose_data = True

    def __init__(self, timeout_s: float, call_id: str | None = None) -> None:
        data: dict[str, object] = {"reason": "timeout", "timeout_s": timeout_s}
        if call_id:
            data["call_id"] = call_id
        super().__init__(
            f"The query ran past the {timeout_s:g} s limit and was stopped; aggregate, filter or narrow it.",
            data=data,
        )


def refuse(reason: RefusalReason, message: str) -> NoReturn:
    """Raise `mcpkit.errors.Refused` with a stable `data.reason`.

    Args:
        reason: Stable machine-readable refusal class.
        message: One sentence saying what is allowed; never echoes schema details.

    Raises:
        Refused: always.
    """
    raise Refused(message, data={"reason": reason}, expose_data=True)
