"""Red team mask17 F2: a trigger that copies a masked value (a BEFORE `SET NEW.copy = NEW.email`, an
AFTER audit trigger inserting the row into another table) got a start-up warning only on PostgreSQL
and only for BEFORE triggers. Every row trigger on a table with masked columns is named now, on all
three engines (start-up log and `doctor --mask`'s `warn triggers:` line), with the tables it writes;
masking what it names keeps the copies from coming back in clear."""

from __future__ import annotations

import secrets
import sqlite3
from pathlib import Path

import pytest

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.maskcheck import prepare_masks
from mcpkit.sql.masking import MASKED
from tests.sql.sql_support import mcpkit_here, mysql_scratch, pg_scratch

SECRET = "ann.secret@corp-x.example"


def _masks(tmp_path: Path, *rules: str) -> str:
    path = tmp_path / f"masks_{secrets.token_hex(3)}.yaml"
    path.write_text("masks:\n" + "".join(f"  - {r}\n" for r in rules))
    return str(path)


def _hints(url: str, masks: str) -> list[str]:
    from mcpkit.sql.maskcheck import trigger_hints  # new with mask17 F2

    engine = SqlEngine(url)
    try:
        _, _, masked = prepare_masks(engine, masks)
        return trigger_hints(engine, masked)
    finally:
        engine.close()


def test_sqlite_after_triggers_are_named_by_doctor_and_masking_what_they_write_holds(tmp_path: Path) -> None:
    path = tmp_path / "maskfix_trig.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE members (id INTEGER PRIMARY KEY, name TEXT, email TEXT, email_copy TEXT)")
        db.execute("CREATE TABLE members_audit (id INTEGER, row_data TEXT)")
        db.execute(
            "CREATE TRIGGER members_copy AFTER INSERT ON members BEGIN"
            " UPDATE members SET email_copy = NEW.email WHERE id = NEW.id; END"
        )
        db.execute(
            "CREATE TRIGGER members_audit_t AFTER INSERT ON members BEGIN"
            " INSERT INTO members_audit VALUES (NEW.id, NEW.name || ' ' || NEW.email); END"
        )
        db.execute(f"INSERT INTO members (id, name, email) VALUES (1, 'Ann', '{SECRET}')")
    db.close()
    dsn = f"sqlite:///{path}"
    done = mcpkit_here("sql", "doctor", "--dsn", dsn, "--mask", _masks(tmp_path, "members.email"))
    lines = [line for line in done.stdout.splitlines() if "triggers" in line]
    assert any("AFTER row trigger members_copy (it writes members)" in line for line in lines), done.stdout
    assert any("AFTER row trigger members_audit_t (it writes members_audit)" in line for line in lines)
    assert all(line.lstrip().startswith("warn") for line in lines), lines
    # The operator masks what the warnings name: the copies never come back in clear.
    masks = _masks(tmp_path, "members.email", "members.email_copy", "members_audit.row_data")
    for sql in ("SELECT * FROM members", "SELECT * FROM members_audit"):
        ran = mcpkit_here("sql", "query", "--dsn", dsn, "--mask", masks, sql)
        assert SECRET not in ran.stdout + ran.stderr and MASKED in ran.stdout, ran.stdout + ran.stderr


@pytest.mark.postgres
def test_postgres_after_audit_triggers_are_named(pg_url: str, tmp_path: Path) -> None:
    with pg_scratch(pg_url, "maskfix_trig") as pg:
        a = pg.admin
        a.execute("CREATE TABLE members (id int PRIMARY KEY, name text, email text)")
        a.execute("CREATE TABLE members_audit (op text, row_data jsonb)")
        a.execute(
            "CREATE FUNCTION audit_fn() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " INSERT INTO members_audit VALUES (TG_OP, to_jsonb(NEW)); RETURN NEW; END $$"
        )
        a.execute(
            "CREATE TRIGGER members_audit_t AFTER INSERT OR UPDATE ON members"
            " FOR EACH ROW EXECUTE FUNCTION audit_fn()"
        )
        a.execute(f"INSERT INTO members VALUES (1, 'Ann', '{SECRET}')")
        a.execute(f"GRANT SELECT (id, name) ON members TO {pg.reader}")
        hints = _hints(pg.reader_url, _masks(tmp_path, "members.email"))
        assert len(hints) == 1, hints
        assert "AFTER row trigger members_audit_t (it writes members_audit)" in hints[0], hints


@pytest.mark.mysql
def test_mariadb_before_and_after_triggers_are_named(mysql_url: str, tmp_path: Path) -> None:
    with mysql_scratch(mysql_url, "maskfix_trig") as my:
        with my.admin.cursor() as c:
            c.execute(
                f"CREATE TABLE {my.db}.members (id INT PRIMARY KEY, name VARCHAR(20), email VARCHAR(60),"
                " email_copy VARCHAR(60))"
            )
            c.execute(f"CREATE TABLE {my.db}.members_audit (id INT, row_data VARCHAR(200))")
            c.execute(
                f"CREATE TRIGGER {my.db}.members_bi BEFORE INSERT ON {my.db}.members FOR EACH ROW"
                " SET NEW.email_copy = NEW.email"
            )
            c.execute(
                f"CREATE TRIGGER {my.db}.members_ai AFTER INSERT ON {my.db}.members FOR EACH ROW"
                f" INSERT INTO {my.db}.members_audit VALUES (NEW.id, NEW.email)"
            )
            c.execute(f"INSERT INTO {my.db}.members (id, name, email) VALUES (1, 'Ann', '{SECRET}')")
        # The triggers are listed to an account with the TRIGGER privilege: doctor with the admin DSN.
        hints = _hints(my.admin_url, _masks(tmp_path, "members.email"))
        assert any("BEFORE row trigger members_bi (it writes members)" in h for h in hints), hints
        assert any(f"AFTER row trigger members_ai (it writes {my.db}.members_audit)" in h for h in hints), (
            hints
        )


@pytest.mark.mysql
def test_mariadb_a_reader_is_told_it_cannot_see_the_triggers(mysql_url: str, tmp_path: Path) -> None:
    # information_schema.TRIGGERS lists nothing to an account without the TRIGGER privilege (no
    # error): the reader's start-up and doctor said nothing about an audit trigger copying e-mails.
    with mysql_scratch(mysql_url, "maskleft_trig") as my:
        with my.admin.cursor() as c:
            c.execute(f"CREATE TABLE {my.db}.members (id INT PRIMARY KEY, email VARCHAR(60))")
            c.execute(f"CREATE TABLE {my.db}.members_audit (id INT, email VARCHAR(60))")
            c.execute(
                f"CREATE TRIGGER {my.db}.members_ai AFTER INSERT ON {my.db}.members FOR EACH ROW"
                f" INSERT INTO {my.db}.members_audit VALUES (NEW.id, NEW.email)"
            )
            c.execute(f"GRANT SELECT (id) ON {my.db}.members TO '{my.reader}'@'%'")
        masks = _masks(tmp_path, "members.email")
        hints = _hints(my.reader_url, masks)
        told = [h for h in hints if "cannot see the triggers of masked table(s) members" in h]
        assert len(hints) == 1 and told, hints
        assert f"SHOW TRIGGERS FROM `{my.db}` WHERE `Table` = 'members'" in told[0]
        done = mcpkit_here("sql", "doctor", "--dsn", my.reader_url, "--mask", masks)
        warned = [line for line in done.stdout.splitlines() if line.startswith("warn") and "triggers" in line]
        assert any("cannot see the triggers" in line for line in warned), done.stdout
        # The administrator sees the trigger itself, and is not told it cannot.
        hints = _hints(my.admin_url, masks)
        assert len(hints) == 1 and "AFTER row trigger members_ai" in hints[0], hints
        with my.admin.cursor() as c:  # TRIGGER on the table: the reader sees it too
            c.execute(f"GRANT TRIGGER ON {my.db}.members TO '{my.reader}'@'%'")
        hints = _hints(my.reader_url, masks)
        assert len(hints) == 1 and "AFTER row trigger members_ai" in hints[0], hints
