"""One pooled call's pipeline with the reset as its own message (as mcpkit sends it) or folded in.

psycopg alone on one autocommit connection: BEGIN READ ONLY, the settings, the describe and the
capped query in one pipeline; then the reset (ROLLBACK and DISCARD ALL's commands, setseed) either
as one simple-query message (a second round trip) or queued after a sync in the same pipeline,
where each statement travels alone (extended protocol). Wall and client CPU per call, alternated
blocks (issue 15, round three).

    .venv/bin/python bench/sql_reset_fold.py [postgresql://postgres@127.0.0.1:5432/test] [calls]
"""

import secrets
import statistics
import sys
import time
from typing import Any

import psycopg

RESET = [
    "ROLLBACK", "CLOSE ALL", "SET SESSION AUTHORIZATION DEFAULT", "RESET ALL", "DEALLOCATE ALL",
    "UNLISTEN *", "SELECT pg_advisory_unlock_all()", "DISCARD PLANS", "DISCARD TEMP", "DISCARD SEQUENCES",
]  # fmt: skip
SETTINGS = (
    "SELECT set_config('statement_timeout', '15000', true), set_config('lock_timeout', '15000', true),"
    " set_config('idle_in_transaction_session_timeout', '30000', true),"
    " set_config('application_name', 'mk', true)"
)
QUERY = "SELECT g AS id, md5(g::text) AS note, g * 7 AS units FROM generate_series(1, 1000) g"


def seed() -> str:
    return f"SELECT setseed({secrets.randbits(52) / 2**52 * 2 - 1!r})"


def call(conn: psycopg.Connection[Any], fold: bool) -> list[Any]:
    with conn.cursor() as head, conn.cursor() as probe, conn.cursor() as cur, conn.cursor() as reset:
        with conn.pipeline() as pipeline:
            head.execute("BEGIN READ ONLY", prepare=False)
            head.execute(SETTINGS, prepare=False)
            probe.execute(f"SELECT * FROM ({QUERY}) q LIMIT 0", prepare=False)
            cur.execute(f"SELECT * FROM ({QUERY}) q LIMIT 26", prepare=False)
            if fold:
                pipeline.sync()
                for statement in [*RESET, seed()]:
                    reset.execute(statement, prepare=False)
        rows = cur.fetchmany(26)
    if not fold:
        conn.execute("; ".join([*RESET, seed()]), prepare=False)  # type: ignore[arg-type]
    return rows


def main() -> None:
    dsn = sys.argv[1] if len(sys.argv) > 1 else "postgresql://postgres@127.0.0.1:5432/test"
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for _ in range(6):
            for fold in (False, True):
                for _ in range(50):
                    call(conn, fold)
                wall, cpu = time.perf_counter(), time.process_time()
                for _ in range(calls):
                    call(conn, fold)
                runs[fold].append(
                    ((time.perf_counter() - wall) / calls * 1e6, (time.process_time() - cpu) / calls * 1e6)
                )
    for fold, blocks in runs.items():
        print(
            f"{'folded' if fold else 'separate'}: wall us {[round(w) for w, _ in blocks]}"
            f" median {statistics.median(w for w, _ in blocks):.0f}; client CPU us"
            f" {[round(c) for _, c in blocks]} median {statistics.median(c for _, c in blocks):.0f}"
        )


if __name__ == "__main__":
    main()
