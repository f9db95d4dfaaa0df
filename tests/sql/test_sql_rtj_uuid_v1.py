"""Red team rtJ, F5: uuid-ossp's `uuid_generate_v1()` counted as a harmless VOLATILE function, so a view
calling it passed start-up and served the host's MAC address (its node field), which admission
refuses by name and MariaDB's `UUID()` is left out for (my13 F7). It is a hazard now; `v1mc` (a
random multicast node) and `v4` stay harmless."""

from __future__ import annotations

import pytest

from tests.sql.sql_support import pg_need_extensions, pg_scratch, run_cli

pytestmark = pytest.mark.postgres


def test_a_view_serving_uuid_generate_v1_is_refused(pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pg_scratch(pg_url, "rtjuuid") as s:
        pg_need_extensions(s.admin, "uuid-ossp")
        s.admin.execute('CREATE SCHEMA ext; CREATE EXTENSION "uuid-ossp" SCHEMA ext')
        s.admin.execute("CREATE TABLE public.accounts (id int)")
        for version in ("v1", "v1mc", "v4"):
            s.admin.execute(
                f"CREATE VIEW public.ids_{version} WITH (security_invoker) AS"
                f" SELECT id, ext.uuid_generate_{version}() AS u FROM public.accounts"
            )
        s.admin.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {s.reader}")
        code, out = run_cli(capsys, "sql", "doctor", "--dsn", s.reader_url)
        failing = [x for x in out.splitlines() if x.startswith("fail least privilege:")]
        assert code == 1 and any("ids_v1 runs ext.uuid_generate_v1," in x for x in failing), out
        assert not any("uuid_generate_v1mc" in x or "uuid_generate_v4" in x for x in failing), out
