"""The SQLite worker process (`isolated`): opens the database as the parent's engine does, answers calls.

Each answer goes back as `(retire, reply)`: a worker that met the heap limit, or is resident more than
`RETIRE_BYTES` above what it held once ready, ends after answering, and the parent starts another
(red team rtI F2: glibc keeps a call's freed heap, so five idle workers held 605 MB each for the life
of the server, and the next caller's call ran beside it).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import resource
from dataclasses import dataclass
from multiprocessing.connection import Connection as Pipe
from typing import Any, Final

from mcpkit.errors import Refused
from mcpkit.sql.admission.policy import FunctionPolicy
from mcpkit.sql.errors import QueryFailed, QueryTimeout
from mcpkit.sql.profiles.sqlite_masks import Withheld

__all__ = ["HEADROOM", "MEMORY_LIMIT", "RETIRE_BYTES", "Setup", "worker_main"]

log = logging.getLogger("mcpkit.sql")

MEMORY_LIMIT: Final = 512 * 1024 * 1024
"""Each worker's data segment (`RLIMIT_DATA`) at least; by default raised to what the worker holds
once open plus its SQLite heap limit (`sqlite_heap`: the parent pool's) plus `HEADROOM`, so a call that
fits in process fits in the worker."""
HEADROOM: Final = 192 * 1024 * 1024
"""Past SQLite's heap: Python's copies of the rows (clipped to the cell budget) and their pickling."""
RETIRE_BYTES: Final = 64 * 1024 * 1024
"""A worker resident this much above what it held once ready is retired after its call (the heap a
call grew stays with the process: red team rtI F2, five idle workers kept 605 MB each)."""


@dataclass(frozen=True)
class Setup:
    """What a worker needs to open the database exactly as the parent's engine does."""

    url: str
    policy: tuple[str, frozenset[str], frozenset[str] | None] | None
    withheld: Withheld
    vectors: bool
    grace_s: float
    memory_bytes: int  # 0: no cap; negative: `MEMORY_LIMIT` raised to fit the heap (`_cap`)
    pool: int  # the parent's pool size: the worker's SQLite heap limit is the one its calls would meet


def worker_main(fd: int) -> None:  # pragma: no cover: runs in the worker process
    """The worker: open the database as the parent's profile would, then answer calls until EOF."""
    from mcpkit.sql.engines.engine import SqlEngine

    pipe = Pipe(fd)
    setup: Setup = pipe.recv()
    logging.basicConfig(level=logging.WARNING, format="mcpkit worker: %(message)s")
    if setup.memory_bytes > 0:
        resource.setrlimit(resource.RLIMIT_DATA, (setup.memory_bytes, setup.memory_bytes))
    try:
        engine = SqlEngine(setup.url, grace_s=setup.grace_s, pool_size=1, isolate=False)
        profile: Any = engine.profile
        profile.use_pool(engine, setup.pool)  # one call may use the heap the whole pool would
        if setup.memory_bytes < 0:
            cap = _cap()
            resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
        if setup.policy is not None:
            dialect, extra, only = setup.policy
            profile.use_function_policy(FunctionPolicy(dialect, extra, only))
        profile.withheld = setup.withheld
        profile.vectors = setup.vectors
    except Exception as exc:
        log.warning("the worker could not open the database: %s: %s", type(exc).__name__, exc)
        pipe.send(("failed", "connection", None))
        return
    pipe.send(("ready",))
    ready = _resident()
    while True:
        try:
            sql, params, limit, timeout_s, call_id, clip = pipe.recv()
        except (EOFError, OSError):
            return
        try:
            reply: tuple[Any, ...] = (
                "rows",
                engine.execute(sql, params, limit, timeout_s, call_id, clip=clip),
            )
        except QueryTimeout:
            reply = ("timeout",)
        except QueryFailed as exc:
            reply = ("failed", exc.kind, exc.message)
        except Refused as exc:
            reply = ("refused", exc.message, exc.data)
        except MemoryError:
            reply = ("failed", "resource", None)
        except Exception as exc:
            log.warning("sql call %s failed in the worker: %s: %s", call_id, type(exc).__name__, exc)
            reply = ("failed", "other", None)
        # Past the heap limit, or holding what a big call grew: answer, then end (the parent replaces it).
        retire = reply[:2] == ("failed", "resource") or _resident(trim=True) > ready + RETIRE_BYTES
        try:
            pipe.send((retire, reply))
        except MemoryError:
            pipe.send((True, ("failed", "resource", None)))
            retire = True
        if retire:
            return


def _resident(trim: bool = False) -> int:  # pragma: no cover: runs in the worker process
    """This process's resident memory (`/proc/self/statm`; `trim`: after glibc returned the free heap
    it keeps, where it can); 0 when unreadable."""
    if trim:
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).malloc_trim(0)
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return 0


def _cap() -> int:  # pragma: no cover: runs in the worker process
    """`MEMORY_LIMIT`, or what this worker holds now plus its SQLite heap limit and `HEADROOM`."""
    from mcpkit.sql.profiles.sqlite_heap import heap_limit

    held = 0
    with (
        contextlib.suppress(OSError, ValueError, IndexError),
        open("/proc/self/status", encoding="ascii") as f,
    ):
        held = int(f.read().split("VmData:")[1].split()[0]) * 1024
    return max(MEMORY_LIMIT, held + heap_limit() + HEADROOM)
