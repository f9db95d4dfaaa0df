"""The analysis budget: a query too large or too complex to analyse quickly is refused before analysis.

Parsing, admission, masking analysis and regeneration run in Python. Some of sqlglot's steps are
quadratic in the number of UNION branches or scopes (qualifying an 1,800-branch UNION ALL took 8 s),
and a pass cannot be interrupted part-way, so the budget has two parts:

- size limits checked before the expensive steps (tokens before parsing; nodes, SELECTs and set
  operation branches after; nodes again once the guards are written in, since the second look,
  masking analysis and regeneration run over the guarded tree: 60 guarded casts over 2,600 nodes
  made 15,000, 4-8 s of analysis, red team rt19pg F12), set so that anything under them is
  analysed in about a second on a small VM, two for a tree its guards multiply (bench figures in
  docs/benchmarks.md);
- a deadline checked between steps, so a slow step is not followed by more work. It is counted in
  the analysing thread's CPU time, so a query is not refused because other calls held the GIL
  (red team rt33a F3); the call's timeout is its wall-clock ceiling (`mcpkit.sql.admission.slots`).

Analysis runs in the tool handler's worker thread, never on the event loop (see mcpkit.pipeline).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from sqlglot import exp

from mcpkit.sql.admission.slots import past_wall_ceiling, queue_if_slow
from mcpkit.sql.errors import refuse

__all__ = ["DEFAULT_BUDGET", "AnalysisBudget", "NodeAllowance"]


def _too_complex(what: str) -> None:
    refuse(
        "too_complex",
        f"The query is too large to check within this server's analysis budget ({what}); "
        "split it into smaller queries or simplify it.",
    )


@dataclass(frozen=True)
class AnalysisBudget:
    """Limits on the Python-side work of one call.

    Args:
        seconds: Deadline for parse, admission, masking analysis and regeneration together, in the
            analysing thread's CPU time.
        max_tokens: SQL tokens, checked before parsing.
        max_nodes: Syntax-tree nodes.
        max_selects: SELECT scopes (subqueries, CTEs, branches).
        max_branches: UNION/INTERSECT/EXCEPT branches.
        max_sent_nodes: Syntax-tree nodes once admission's guards are written in.
    """

    seconds: float = 5.0
    max_tokens: int = 12_000
    max_nodes: int = 4_000
    max_selects: int = 150
    max_branches: int = 100
    max_sent_nodes: int = 12_000

    def deadline(self) -> float:
        """The thread CPU time (`time.thread_time`) by which this thread's analysis must be done."""
        return time.thread_time() + self.seconds

    def check_tokens(self, count: int) -> None:
        """Refuse before parsing when the text has too many tokens."""
        if count > self.max_tokens:
            _too_complex(f"{count} tokens; at most {self.max_tokens}")

    def check_tree(self, tree: exp.Expr) -> None:
        """Refuse a parsed statement with too many nodes, SELECTs or set-operation branches.

        >>> import sqlglot
        >>> AnalysisBudget(max_branches=2).check_tree(sqlglot.parse_one("SELECT 1 UNION SELECT 2"))
        """
        nodes = selects = branches = 0
        for node in tree.walk():
            nodes += 1
            if isinstance(node, exp.Select):
                selects += 1
            elif isinstance(node, exp.SetOperation):
                branches += 1
        if branches:
            branches += 1  # n operators join n + 1 branches
        if branches > self.max_branches:
            _too_complex(f"{branches} UNION/INTERSECT/EXCEPT branches; at most {self.max_branches}")
        if selects > self.max_selects:
            _too_complex(f"{selects} SELECTs; at most {self.max_selects}")
        if nodes > self.max_nodes:
            _too_complex(f"{nodes} syntax nodes; at most {self.max_nodes}")

    def check_sent(self, tree: exp.Expr) -> None:
        """Refuse a statement whose guards (`bound_searches`) made it too large to analyse again.

        >>> import sqlglot
        >>> AnalysisBudget(max_sent_nodes=4).check_sent(sqlglot.parse_one("SELECT 1"))
        """
        nodes = sum(1 for _ in tree.walk())
        if nodes > self.max_sent_nodes:
            _too_complex(
                f"{nodes} syntax nodes once its searches, casts and builders are bounded; "
                f"at most {self.max_sent_nodes}"
            )

    @staticmethod
    def check_deadline(deadline: float | None) -> None:
        """Refuse once this thread's CPU time passes `deadline`, or its call's wall-clock ceiling (a
        slow short text takes its analysis slot here first, `slots.queue_if_slow`)."""
        queue_if_slow()
        if deadline is not None and (time.thread_time() > deadline or past_wall_ceiling()):
            _too_complex("it took too long to analyse")


DEFAULT_BUDGET: Final = AnalysisBudget()


class NodeAllowance:
    """The sent-tree bound (`max_sent_nodes`) held while a rewrite adds to a tree: every addition is
    counted as it is built and the statement refused as soon as the total passes `limit`.

    Masking's tie-breakers added every visible column, in its exact forms, to every window's ORDER
    BY after `check_sent`: 99 windows over a 97-column table made 110,000 nodes, 10-13 s and +260 MB
    per call (red team rt26 F3).

    >>> import sqlglot
    >>> room = NodeAllowance(sqlglot.parse_one("SELECT 1"), 4)
    >>> room.add([exp.column("a")], "x")
    >>> room.nodes
    4
    """

    def __init__(self, tree: exp.Expr, limit: int | None) -> None:
        self.limit = limit
        self.nodes = 0 if limit is None else sum(1 for _ in tree.walk())

    def add(self, added: Sequence[exp.Expr], what: str) -> None:
        """Count `added` (nodes about to join the tree); refuse once the tree would pass the limit."""
        if self.limit is None or not added:
            return
        self.nodes += sum(1 for node in added for _ in node.walk())
        if self.nodes > self.limit:
            _too_complex(f"{self.nodes}+ syntax nodes once {what} are written in; at most {self.limit}")
