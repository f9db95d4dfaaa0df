"""Red team rt19mask F4/F5 (MariaDB): a column the login holds no privilege on (what `grant --mask`
prints) is missing from the catalog, and MariaDB checks no privilege on the columns `USING` and
`NATURAL JOIN` join on. The analysis put hidden columns back only for literal rules, so a glob rule
(`cards.p?n`) or a derived mask (a foreign-key copy) left the column unknown and
`cards JOIN (SELECT '482913' AS pin ...) g USING (pin)` answered every PIN in clear. Now over a
table with hidden columns a NATURAL JOIN, and a USING name that is not one of its readable
columns, are refused whatever the masks say; USING on a readable column and ON joins still answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.sql.sql_support import mcpkit_in_process, mysql_scratch

PINS = ("482913", "007311")
EMAIL = "bob@hidden.example"
GUESSES = f"(SELECT '{PINS[0]}' AS pin UNION ALL SELECT '{PINS[1]}' UNION ALL SELECT '000000')"


def _mcpkit(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, *argv: str
) -> tuple[int, str]:
    """`mcpkit ARGV` in this process (6 fresh interpreters took 30 s alone): the exit code, then
    everything it printed and logged."""
    code, out, err = mcpkit_in_process(capsys, caplog, *argv)
    return code, out + err


def _query(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, url: str, masks: Path, sql: str
) -> tuple[int, str]:
    return _mcpkit(capsys, caplog, "sql", "query", "--dsn", url, "--mask", str(masks), "--timeout", "20", sql)


@pytest.mark.mysql
def test_mariadb_using_or_natural_over_a_hidden_column_is_refused(
    mysql_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with mysql_scratch(mysql_url, "maskleft_hj") as my:
        reader = f"'{my.reader}'@'%'"
        with my.admin.cursor() as c:
            c.execute(f"CREATE TABLE {my.db}.cards (id INT PRIMARY KEY, name VARCHAR(20), pin VARCHAR(6))")
            c.execute(f"INSERT INTO {my.db}.cards VALUES (1, 'ann', '{PINS[0]}'), (2, 'bob', '{PINS[1]}')")
            c.execute(
                f"CREATE TABLE {my.db}.members (id INT PRIMARY KEY, name VARCHAR(20), email VARCHAR(100),"
                " UNIQUE KEY (email))"
            )
            c.execute(
                f"CREATE TABLE {my.db}.orders (id INT PRIMARY KEY, member_id INT, member_email VARCHAR(100),"
                f" FOREIGN KEY (member_email) REFERENCES {my.db}.members (email))"
            )
            c.execute(f"INSERT INTO {my.db}.members VALUES (2, 'bob', '{EMAIL}')")
            c.execute(f"INSERT INTO {my.db}.orders VALUES (11, 2, '{EMAIL}')")
            # What `grant --mask` prints: the masked columns and the copy withheld.
            c.execute(f"GRANT SELECT (id, name) ON {my.db}.cards TO {reader}")
            c.execute(f"GRANT SELECT (id, name) ON {my.db}.members TO {reader}")
            c.execute(f"GRANT SELECT (id, member_id) ON {my.db}.orders TO {reader}")
        masks = tmp_path / "masks.yaml"
        masks.write_text("masks:\n  - cards.p?n\n  - members.email\n")
        attacks = [
            f"SELECT c.id, g.pin FROM cards c JOIN {GUESSES} g USING (pin)",  # F4: a glob rule
            f"SELECT c.id, g.pin FROM cards c NATURAL JOIN {GUESSES} g",
            f"SELECT o.id, g.member_email FROM orders o JOIN (SELECT '{EMAIL}' AS member_email) g"
            " USING (member_email)",  # F5: the foreign-key copy
        ]
        for sql in attacks:
            code, out = _query(capsys, caplog, my.reader_url, masks, sql)
            assert code != 0 and not {*PINS, EMAIL} & set(out.split()), out
            assert PINS[0] not in out and PINS[1] not in out and EMAIL not in out, out
            assert "hidden columns" in out or "readable columns" in out, out
        # doctor no longer counts only what it sees: the glob rule's table is named.
        _, doctor = _mcpkit(capsys, caplog, "sql", "doctor", "--dsn", my.reader_url, "--mask", str(masks))
        unseen = [line for line in doctor.splitlines() if "cannot see some columns of" in line]
        assert len(unseen) == 1 and f"{my.db}.cards".casefold() in unseen[0], doctor
        assert unseen[0].startswith("warn") and "orders" not in unseen[0], unseen  # literal rules only
        # Readable columns still join, by USING and by ON.
        code, out = _query(
            capsys,
            caplog,
            my.reader_url,
            masks,
            "SELECT c.id, g.n FROM cards c JOIN (SELECT 1 AS id, 5 AS n) g USING (id)",
        )
        assert code == 0 and "5" in out, out
        code, out = _query(
            capsys,
            caplog,
            my.reader_url,
            masks,
            "SELECT o.id, m.name FROM orders o JOIN members m ON m.id = o.member_id",
        )
        assert code == 0 and "bob" in out, out


@pytest.mark.parametrize(
    ("sql", "refused"),
    [
        ("SELECT c.id FROM (cards c JOIN (SELECT 1 AS pin) g USING (pin))", True),  # parenthesised
        ("SELECT c.id FROM t JOIN (cards c JOIN (SELECT 1 AS pin) g USING (pin)) ON 1 = 1", True),
        ("WITH x AS (SELECT c.id FROM cards c JOIN (SELECT 1 AS pin) g USING (pin)) SELECT * FROM x", True),
        ("SELECT * FROM DB.CARDS c JOIN (SELECT 1 AS pin) g USING (PIN)", True),
        ("SELECT * FROM t NATURAL JOIN cards", True),
        ("SELECT c.id FROM cards c JOIN (SELECT 1 AS id) g USING (id)", False),  # a readable column
        ("SELECT * FROM t JOIN (SELECT 1 AS pin) g USING (pin)", False),  # t hides nothing
    ],
)
def test_every_join_shape_over_a_table_with_hidden_columns(sql: str, refused: bool) -> None:
    import sqlglot

    from mcpkit.sql.masking import MaskRefused
    from mcpkit.sql.masking.hidden import refuse_hidden_joins
    from mcpkit.sql.masking.schema import KnownSchema

    mapping = {"db": {"cards": {"id": "INT", "name": "TEXT"}, "t": {"id": "INT", "pin": "TEXT"}}}
    known = KnownSchema(mapping, "mysql", path=("db",), partial=frozenset({"db.cards"}))
    tree = sqlglot.parse_one(sql, read="mysql")
    if refused:
        with pytest.raises(MaskRefused):
            refuse_hidden_joins(tree, known)
    else:
        refuse_hidden_joins(tree, known)
