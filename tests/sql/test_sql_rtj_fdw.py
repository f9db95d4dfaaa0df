"""Red team rtJ, F3: `information_schema.user_mapping_options` served a user mapping's remote
password to a reader holding USAGE on the foreign server (no foreign table needed), while
`pg_user_mappings` was refused. Start-up now refuses USAGE on a foreign server (`foreign-server`,
its REVOKE), and admission refuses information_schema's option views as it does their catalogs."""

from __future__ import annotations

import secrets

import pytest

from mcpkit.errors import Refused
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import pg_need_extensions, pg_scratch, run_cli

pytestmark = pytest.mark.postgres

_OPTIONS = [
    "SELECT option_value FROM information_schema.user_mapping_options",
    "SELECT option_value FROM information_schema.foreign_server_options",
    "SELECT * FROM information_schema.foreign_table_options",
    "SELECT * FROM information_schema.foreign_data_wrapper_options",
    "SELECT * FROM information_schema._pg_user_mappings",
]


@pytest.mark.parametrize("to", ["reader", "PUBLIC"])
def test_usage_on_a_foreign_server_is_refused_until_revoked(
    pg_url: str, capsys: pytest.CaptureFixture[str], to: str
) -> None:
    token = f"MKSECRET{secrets.token_hex(6)}"
    with pg_scratch(pg_url, "rtjfdw") as s:
        pg_need_extensions(s.admin, "postgres_fdw")
        s.admin.execute("CREATE EXTENSION postgres_fdw")
        s.admin.execute(
            "CREATE SERVER mk_srv FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host 'db.internal.example')"
        )
        s.admin.execute(
            f"CREATE USER MAPPING FOR {s.reader} SERVER mk_srv OPTIONS (user 'ro', password '{token}')"
        )
        grantee = s.reader if to == "reader" else "PUBLIC"
        s.admin.execute(f"GRANT USAGE ON FOREIGN SERVER mk_srv TO {grantee}")
        code, out = run_cli(capsys, "sql", "doctor", "--dsn", s.reader_url)
        line = next((x for x in out.splitlines() if "foreign server mk_srv" in x), "")
        assert code == 1 and line.startswith("fail least privilege:"), out
        assert f"REVOKE USAGE ON FOREIGN SERVER mk_srv FROM {grantee}" in line, line
        engine = SqlEngine(s.reader_url)
        try:
            service = SqlService(engine)
            for sql in _OPTIONS:  # the parser's line, while the grant stands
                with pytest.raises(Refused):
                    service.query(sql, call_id="t")
            s.admin.execute(f"REVOKE USAGE ON FOREIGN SERVER mk_srv FROM {grantee}")
            code, out = run_cli(capsys, "sql", "doctor", "--dsn", s.reader_url)
            assert "foreign server" not in out, out
            with engine.sa_engine.connect() as conn:  # the engine's line: nothing to show
                rows = conn.exec_driver_sql("SELECT * FROM information_schema.user_mapping_options").all()
            assert rows == []
        finally:
            engine.close()
