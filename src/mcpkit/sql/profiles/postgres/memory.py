"""PostgreSQL backend memory: bounded by the postmaster's data limit, proven by one allocation.

PostgreSQL has no per-session memory setting. The bound is the operating system's: a postmaster
started under RLIMIT_DATA (systemd `LimitDATA=`, `ulimit -d`, `prlimit --data`) passes it to every
backend it forks, and since Linux 4.7 the limit counts private writable mappings but not the
shared memory (`shared_buffers`, MAP_SHARED). A backend past it fails the allocation cleanly
(`ERROR: out of memory`, SQLSTATE 53200): the transaction aborts, the backend and the cluster live.

The proof is one allocation of the budget in the backend that runs the calls: a value built at run
time (a column of a fenced subquery, so the planner cannot fold it and copy it), refused at once
under the limit, held (and written) without one.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["MAX_PROBE_BYTES", "MEMORY_FIX", "MEMORY_SETUP", "memory_bounded", "probe_sql"]

_UNIT: Final = 1024
_HEADER: Final = 4  # a text value's length word (VARHDRSZ)
MAX_PROBE_BYTES: Final = 1024**3
"""PostgreSQL's largest single allocation is 1 GiB - 1 (MaxAllocSize): one value proves no more."""
_OUT_OF_MEMORY: Final = "53200"
MEMORY_FIX: Final = (
    "start PostgreSQL with a per-process data limit at or below it: a systemd drop-in (systemctl "
    "edit postgresql@<version>-main: [Service] LimitDATA={systemd}), or `ulimit -d {kib}` (or "
    "`prlimit --data={bytes}`) before pg_ctl; or accept an unbounded backend with --allow "
    "unbounded-memory"
)
"""The fix, formatted with the budget as systemd, `ulimit -d` (KiB) and `prlimit` (bytes) write it."""


MEMORY_SETUP: Final = (
    "not SQL: PostgreSQL bounds no backend's memory itself. `serve` verifies at start-up that a backend",
    "cannot allocate --backend-memory (default 1 GiB) and refuses to start otherwise: start the server",
    "with a per-process data limit (shared memory, shared_buffers, is not counted), then restart it:",
    "  systemctl edit postgresql@<version>-main  ->  [Service]  LimitDATA=1G",
    "  or: ulimit -d 1048576 (or prlimit --data=1073741824) before pg_ctl",
    "every backend has it: keep work_mem, maintenance_work_mem and autovacuum_work_mem well below it",
    "(a managed database, RDS or Cloud SQL, cannot set it: serve --allow unbounded-memory)",
)
"""What `mcpkit sql grant` prints, as comments, about the limit (`mcpkit sql doctor` checks it)."""


def probe_sql(budget: int) -> str:
    """The probe: one text value of about `budget` bytes (1 KiB units, at most 1 GiB - 1 KiB).

    >>> probe_sql(64 * 1024**2)
    "SELECT octet_length(repeat(repeat('x', 1024), n)) FROM (SELECT 65536 AS n OFFSET 0) AS s"
    >>> probe_sql(1024**3).endswith("(SELECT 1048575 AS n OFFSET 0) AS s")
    True
    """
    units = min(-(-budget // _UNIT), (MAX_PROBE_BYTES - 1 - _HEADER) // _UNIT)
    return (
        f"SELECT octet_length(repeat(repeat('x', {_UNIT}), n)) FROM (SELECT {int(units)} AS n OFFSET 0) AS s"
    )


def memory_bounded(dbapi: Any, budget: int) -> bool:
    """Whether this backend fails to allocate `budget` bytes (True) or holds them (False).

    Runs inside a call's read-only transaction, which the out-of-memory error aborts (the caller
    rolls it back). Any other error propagates.
    """
    try:
        dbapi.execute(probe_sql(budget), prepare=False)
    except Exception as exc:
        if getattr(exc, "sqlstate", None) == _OUT_OF_MEMORY:
            return True
        raise
    return False
