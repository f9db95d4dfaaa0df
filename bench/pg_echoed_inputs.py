"""The allowlisted PostgreSQL functions whose error quotes an argument whole, measured (rt33a F1).

    python bench/pg_echoed_inputs.py [--dsn postgresql://postgres@127.0.0.1:5432/test]

Runs `tests/sql/pg_echo_probe.probe` over every overload of every name on the PostgreSQL allowlist
(`function_tables.postgres.POSTGRES`) and prints the body of
`src/mcpkit/sql/admission/function_tables/postgres_echoed.py`'s `ECHOED` (about 5 s). Run it on a
database with the contrib extensions the allowlist names installed to probe theirs too.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcpkit.sql.admission.function_tables.postgres import POSTGRES, SIZE_BOUNDS
from tests.sql.pg_echo_probe import overloads, probe


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    with psycopg.connect(args.dsn) as conn:
        names = POSTGRES.allowed - SIZE_BOUNDS.function_casts  # those are bounded as casts
        echoed = probe(conn, overloads(conn, names))
    print("ECHOED: Final[dict[str, tuple[int, ...]]] = {")
    for name, by_count in echoed.items():
        positions = sorted({p for ps in by_count.values() for p in ps})
        print(f'    "{name}": {tuple(positions)},')
    print("}")


if __name__ == "__main__":
    main()
