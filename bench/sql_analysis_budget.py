"""What the Python-side analysis of one call costs on the worst shapes under the size limits.

    python bench/sql_analysis_budget.py [--repeat 3]
    PYTHONPATH=/tmp/old/src python bench/sql_analysis_budget.py   # another checkout's src

Admission (PostgreSQL) then the masking analysis of each admitted query, with a mask on one column,
as `SqlService` runs them (the deadline left out); no database is needed. Prints the CPU time of
the calling thread (the median of `--repeat`; a shared host's wall clock varies more), the syntax
nodes as written and as sent, and the answer: admitted, or the refusal's reason and what it said.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent / "src"))  # PYTHONPATH comes first

from mcpkit.errors import Refused
from mcpkit.sql.admission import AnalysisBudget, admit, parse_statement
from mcpkit.sql.masking import MaskPolicy, plan_masking

SCHEMA = {"t": {"id": "INT", "a": "TEXT", "b": "TEXT", "n": "TEXT"}}
POLICY = MaskPolicy.of(["t.b"])
UNTIMED = AnalysisBudget(seconds=600)  # the size limits decide, not a shared host's wall clock
OP = "coalesce(upper(a), lower(n), a, n, b, 'x') || coalesce(upper(n), lower(a), 'y')"
CASES = {
    "plain: 90-branch UNION, 3,959 nodes": " UNION ALL ".join(
        f"SELECT id, a, b, n, id + 1, a || n, upper(a), lower(n), coalesce(a, n) FROM t"
        f" WHERE id = {i} AND a = n"
        for i in range(90)
    ),
    "140 scalar subqueries": "SELECT "
    + ", ".join(f"(SELECT a::int FROM t x{i} WHERE x{i}.id = {i})" for i in range(140))
    + ", b FROM t",
    "30 branches, one guarded search each": " UNION ALL ".join(
        f"SELECT strpos({OP}, n), id, b FROM t WHERE id = {i}" for i in range(30)
    ),
    "60 guarded searches over wide operands": "SELECT "
    + ", ".join(f"strpos({OP} || '{i}', n)" for i in range(60))
    + ", b FROM t",
    "60 branches, one guarded search each": " UNION ALL ".join(
        f"SELECT strpos({OP}, n), id, a, b, n, id + 1, id + 2, a || n FROM t WHERE id = {i}"
        for i in range(60)
    ),
    "60 branches, one guarded cast each": " UNION ALL ".join(
        f"SELECT ({OP})::int, id, a, b, n FROM t WHERE id = {i}" for i in range(60)
    ),
}


def _nodes(tree: object) -> int:
    return sum(1 for _ in tree.walk())  # type: ignore[attr-defined]


def _once(sql: str) -> tuple[float, str, int]:
    started = time.thread_time()
    sent = 0
    try:
        admitted = admit(sql, "postgres", limit=501, budget=UNTIMED)
        sent = _nodes(admitted.tree)
        plan_masking(admitted.tree, "postgres", SCHEMA, POLICY)
        answer = "admitted"
    except Refused as exc:
        answer = f"{(exc.data or {}).get('reason')}: {exc.message.split('(')[1].split(')')[0]}"
    return (time.thread_time() - started) * 1000, answer, sent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print("| query | nodes written | nodes sent | CPU ms | answer |")
    print("| --- | ---: | ---: | ---: | --- |")
    for name, sql in CASES.items():
        runs = [_once(sql) for _ in range(args.repeat)]
        ms = statistics.median(r[0] for r in runs)
        _, answer, sent = runs[0]
        written = _nodes(parse_statement(sql, "postgres"))
        print(f"| {name} | {written:,} | {sent:,} | {ms:,.0f} | {answer} |")


if __name__ == "__main__":
    main()
