"""A repeated statement is admitted and mask-planned once: an LRU of plans per service.

A plan is what admission and masking decided for one SQL text and row cap: the SQL to send, its
tree, and the masking plan. It is valid only for the inputs it was made under, so the cache is
emptied whenever any of them is replaced or changes: the function policy, the volatility catalog,
the masks and the reflected schema they resolve against, the analysis budget, the dialect, and the
profile's `policy_generation` (bumped when per-connection enforcement changes). Refusals are not
cached (a refused statement is analysed again). What depends on the database's state at the time
of the call is not part of a plan: the volatility of the functions called is checked again on every
hit (through the catalog's own cache with its lifetime), and the columns the cell clipping wraps
are described inside each call's session.

An `OrderedDict` under a lock is the whole LRU; `functools.lru_cache` cannot be emptied per stamp
nor shared safely between the instance's handler threads without one.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

from sqlglot import exp

from mcpkit.sql.admission import Admitted
from mcpkit.sql.masking import MaskPlan

__all__ = ["DEFAULT_PLANS", "MAX_CACHED_CHARS", "Plan", "PlanCache"]

DEFAULT_PLANS: Final = 256
"""Plans kept per service (a few KB each: the SQL text and two small trees)."""
MAX_CACHED_CHARS: Final = 4096
"""Longer statements are not kept: a tree may have up to the analysis budget's 4,000 nodes, and
256 of those would hold a lot of memory for statements that rarely repeat word for word."""


@dataclass(frozen=True)
class Plan:
    """What admission and masking decided for one statement: `admitted` is shared, never mutated."""

    admitted: Admitted
    masking: MaskPlan
    calls_functions: bool
    """Whether the tree has a function call (whose volatility each hit looks up again)."""

    @classmethod
    def of(cls, admitted: Admitted, masking: MaskPlan) -> Plan:
        """The plan of an admitted, mask-planned statement."""
        calls = next(admitted.tree.find_all(exp.Func), None) is not None
        return cls(admitted, masking, calls)


class PlanCache:
    """Plans keyed by (SQL text, row cap), valid while the `stamp` they were made under holds.

    The stamp is a tuple of the inputs' objects and counters; it is compared element by element
    by identity (`is`) for objects, so a replaced policy or schema empties the cache even when it
    compares equal, and by equality for the counters.

    >>> cache = PlanCache(2)
    >>> cache.get(("SELECT 1", 26), stamp=("p", 0)) is None
    True
    """

    def __init__(self, size: int = DEFAULT_PLANS) -> None:
        self.size = size
        self._plans: OrderedDict[tuple[str, int], Plan] = OrderedDict()
        self._stamp: tuple[object, ...] = ()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def _check(self, stamp: tuple[object, ...]) -> None:
        same = len(stamp) == len(self._stamp) and all(
            a is b or (isinstance(a, int) and a == b) for a, b in zip(stamp, self._stamp, strict=True)
        )
        if not same:
            self._plans.clear()
            self._stamp = stamp

    def get(self, key: tuple[str, int], *, stamp: tuple[object, ...]) -> Plan | None:
        """The plan made for `key` under `stamp`, or None (and the cache emptied if the stamp moved)."""
        with self._lock:
            self._check(stamp)
            plan = self._plans.get(key)
            if plan is None:
                self.misses += 1
                return None
            self._plans.move_to_end(key)
            self.hits += 1
            return plan

    def put(self, key: tuple[str, int], plan: Plan, *, stamp: tuple[object, ...]) -> None:
        """Keep `plan` for `key`, made under `stamp` (a later `get` under another stamp drops it)."""
        if self.size <= 0 or len(key[0]) > MAX_CACHED_CHARS:
            return
        with self._lock:
            self._check(stamp)
            self._plans[key] = plan
            self._plans.move_to_end(key)
            while len(self._plans) > self.size:
                self._plans.popitem(last=False)

    def clear(self) -> None:
        """Forget every plan."""
        with self._lock:
            self._plans.clear()
