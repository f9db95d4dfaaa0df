"""PostgreSQL backend memory: bounded by the postmaster's data limit, proven by one allocation.

PostgreSQL has no per-session memory setting. The bound is the operating system's: a postmaster
started under RLIMIT_DATA (systemd `LimitDATA=`, `ulimit -d`, `prlimit --data`) passes it to every
backend it forks, and since Linux 4.7 the limit counts private writable mappings but not the
shared memory (`shared_buffers`, MAP_SHARED). A backend past it fails the allocation cleanly
(`ERROR: out of memory`, SQLSTATE 53200): the transaction aborts, the backend and the cluster live.

The proof is one allocation of the budget in the backend that runs the calls: a value built at run
time (from a column of a fenced subquery, so the planner cannot fold it and copy it), refused at once
under the limit, held without one. Where the database encoding has multibyte characters (UTF8: 4
bytes at most) `lpad` allocates 4 bytes per character it is asked for but writes the one-byte fill
only, so an unlimited server is refused after touching a quarter of the budget (1 GiB: 256 MB, 8.8 s
under load here) instead of all of it (`repeat`: 1,039 MB, 2.1 s), which a small host may not have
spare; single-byte encodings take `repeat`.

The proof covers the server it reached only. A URL naming several hosts (`host=a&host=b`, `host=a,b`,
a failover list, `load_balance_hosts=random`) lets each new connection reach another, unproven one
(red team rt21 F4: the probe landed on the limited server, then 4 of 6 calls ran on an unlimited
one), so it is refused unless `--allow unbounded-memory` (`url_hosts`, `checks.backend_memory`).
Probing each new pooled connection instead (about 4 ms when limited) would leave the hosts it never
reached unproven until a call lands there, and a call under `--pool-size 0` opens one per call.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["MAX_PROBE_BYTES", "MEMORY_FIX", "MEMORY_SETUP", "memory_bounded", "probe_sql", "url_hosts"]

_UNIT: Final = 1024
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
    """The probe: one text value allocated at about `budget` bytes (at most 1 GiB - 1 KiB).

    >>> print(probe_sql(64 * 1024**2))
    SELECT CASE WHEN m > 1 THEN octet_length(lpad('', (n / m)::int, 'x'))
     ELSE octet_length(repeat(repeat('x', 1024), (n / 1024)::int)) END
     FROM (SELECT 67108864::bigint AS n,
     pg_encoding_max_length(pg_char_to_encoding(getdatabaseencoding())) AS m OFFSET 0) AS s
    """
    size = min(-(-budget // _UNIT) * _UNIT, MAX_PROBE_BYTES - _UNIT)
    return (
        "SELECT CASE WHEN m > 1 THEN octet_length(lpad('', (n / m)::int, 'x'))\n"
        f" ELSE octet_length(repeat(repeat('x', {_UNIT}), (n / {_UNIT})::int)) END\n"
        f" FROM (SELECT {int(size)}::bigint AS n,\n"
        " pg_encoding_max_length(pg_char_to_encoding(getdatabaseencoding())) AS m OFFSET 0) AS s"
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


def url_hosts(
    host: str | None, query: Mapping[str, Any], env: Mapping[str, str] = os.environ
) -> tuple[str, ...]:
    """Every host libpq may connect to for this URL (its host, `host=` and `hostaddr=` entries,
    comma lists split, each with its entry of a `port=` list; PGHOST/PGHOSTADDR when it names none).

    >>> url_hosts(None, {"host": ("a:5499", "b:5432"), "load_balance_hosts": "random"})
    ('a:5499', 'b:5432')
    >>> url_hosts(None, {"host": "a,a", "port": "5499,5432"}, env={})
    ('a:5499', 'a:5432')
    >>> url_hosts("db", {}, env={})
    ('db',)
    """
    written: list[str] = [host] if host else []
    for key in ("host", "hostaddr"):
        value = query.get(key, ())
        written += [value] if isinstance(value, str) else list(value)
    if not written:
        written = [env[k] for k in ("PGHOST", "PGHOSTADDR") if env.get(k)]
    hosts = [h.strip() for entry in written for h in entry.split(",") if h.strip()]
    ports = [p.strip() for p in str(query.get("port") or env.get("PGPORT") or "").split(",")]
    if len(ports) == len(hosts) > 1:
        hosts = [f"{h}:{p}" if p else h for h, p in zip(hosts, ports, strict=True)]
    return tuple(dict.fromkeys(hosts))
