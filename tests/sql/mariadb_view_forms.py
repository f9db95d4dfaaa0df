"""Views in every form a relation takes in MariaDB's stored view text, with the text 10.11 stores.

`{d}` is the test's database (customers(id, email, name), one(id), vt(id, email) WITH SYSTEM
VERSIONING, `we``ird`(id, `select`), sequence seq), `{o}` a second database. The stored texts are
what `information_schema.VIEWS.view_definition` answered (test_sql_mask_view_joins checks they
still are): the unit cases of `view_text` read them without a server. A CTE name is stored raw
(`with a`b as (`, `with select as (`): a view whose CTE name needs quoting cannot be read at all
(ER_PARSE_ERROR on every use), so it is no route to a column.
"""

from __future__ import annotations

from typing import NamedTuple


class Form(NamedTuple):
    name: str
    body: str
    stored: str
    reads: tuple[str, ...]
    """Masked relations of `{d}` the view reads (the masks are customers.email, vt.email)."""


SCHEMA = (
    "CREATE TABLE {d}.customers (id int PRIMARY KEY, email varchar(100), name varchar(50))",
    "INSERT INTO {d}.customers VALUES (1, 'ann@secret.example', 'Ann'), (2, 'bob@secret.example', 'Bob')",
    "CREATE TABLE {d}.one (id int)",
    "INSERT INTO {d}.one VALUES (1)",
    "CREATE TABLE {d}.vt (id int, email varchar(100)) WITH SYSTEM VERSIONING",
    "INSERT INTO {d}.vt VALUES (1, 'vt@secret.example')",
    "CREATE TABLE {d}.`we``ird` (id int, `select` int)",
    "INSERT INTO {d}.`we``ird` VALUES (1, 1)",
    "CREATE SEQUENCE {d}.seq",
    # a view the reader holds no privilege on at all: information_schema does not list it
    "CREATE VIEW {o}.hidden_w AS SELECT id, email FROM {d}.customers",
)

_C = ("customers",)
LEAKS = (
    Form(
        "v_straight",
        "SELECT c.id, c.email FROM one o STRAIGHT_JOIN customers c",
        "select `c`.`id` AS `id`,`c`.`email` AS `email` from (`{d}`.`one` `o` straight_join"
        " `{d}`.`customers` `c`)",
        _C,
    ),
    Form(
        "v_straight_on",
        "SELECT c.email FROM one o STRAIGHT_JOIN customers c ON o.id = c.id",
        "select `c`.`email` AS `email` from (`{d}`.`one` `o` straight_join `{d}`.`customers` `c`"
        " on(`o`.`id` = `c`.`id`))",
        _C,
    ),
    Form(
        "v_natural",
        "SELECT email FROM one NATURAL JOIN customers",
        "select `{d}`.`customers`.`email` AS `email` from (`{d}`.`one` join `{d}`.`customers`"
        " on(`{d}`.`one`.`id` = `{d}`.`customers`.`id`))",
        _C,
    ),
    Form(
        "v_left",
        "SELECT c.email FROM one o LEFT JOIN customers c ON o.id = c.id",
        "select `c`.`email` AS `email` from (`{d}`.`one` `o` left join `{d}`.`customers` `c`"
        " on(`o`.`id` = `c`.`id`))",
        _C,
    ),
    Form(
        "v_right",
        "SELECT c.email FROM one o RIGHT JOIN customers c ON o.id = c.id",
        "select `c`.`email` AS `email` from (`{d}`.`customers` `c` left join `{d}`.`one` `o`"
        " on(`o`.`id` = `c`.`id`))",
        _C,
    ),
    Form(
        "v_cross",
        "SELECT c.email FROM one o CROSS JOIN customers c",
        "select `c`.`email` AS `email` from (`{d}`.`one` `o` join `{d}`.`customers` `c`)",
        _C,
    ),
    Form(
        "v_comma",
        "SELECT c.email FROM one o, customers c",
        "select `c`.`email` AS `email` from `{d}`.`one` `o` join `{d}`.`customers` `c`",
        _C,
    ),
    Form(
        "v_paren",
        "SELECT c.email FROM one o JOIN (one p STRAIGHT_JOIN customers c) ON o.id = c.id",
        "select `c`.`email` AS `email` from (`{d}`.`one` `o` join (`{d}`.`one` `p` straight_join"
        " `{d}`.`customers` `c`) on(`o`.`id` = `c`.`id`))",
        _C,
    ),
    Form(
        "v_select_sub",
        "SELECT (SELECT max(email) FROM customers) AS e FROM one",
        "select (select max(`{d}`.`customers`.`email`) from `{d}`.`customers`) AS `e` from `{d}`.`one`",
        _C,
    ),
    Form(
        "v_where_sub",
        "SELECT id FROM one WHERE id IN (SELECT id FROM customers WHERE email LIKE 'a%')",
        "select `{d}`.`one`.`id` AS `id` from `{d}`.`one` where `{d}`.`one`.`id` in"
        " (select `{d}`.`customers`.`id` from `{d}`.`customers` where `{d}`.`customers`.`email` like 'a%')",
        _C,
    ),
    Form(
        "v_having_sub",
        "SELECT id FROM one GROUP BY id HAVING max(id) > (SELECT count(email) FROM customers)",
        "select `{d}`.`one`.`id` AS `id` from `{d}`.`one` group by `{d}`.`one`.`id`"
        " having max(`{d}`.`one`.`id`) > (select count(`{d}`.`customers`.`email`) from `{d}`.`customers`)",
        _C,
    ),
    Form(
        "v_derived",
        "SELECT q.e FROM one o STRAIGHT_JOIN (SELECT email AS e FROM customers) q",
        "select `q`.`e` AS `e` from (`{d}`.`one` `o` straight_join (select `{d}`.`customers`.`email` AS `e`"
        " from `{d}`.`customers`) `q`)",
        _C,
    ),
    Form(
        "v_json_table",
        "SELECT jt.x FROM customers c, JSON_TABLE(concat('[\"', c.email, '\"]'), '$[*]'"
        " COLUMNS (x varchar(100) PATH '$')) jt",
        "select `jt`.`x` AS `x` from `{d}`.`customers` `c` join JSON_TABLE(concat('[\"',`c`.`email`,'\"]'),"
        " '$[*]' COLUMNS (`x` varchar(100) PATH '$')) `jt`",
        _C,
    ),
    Form(
        "v_cte",
        "WITH e AS (SELECT email FROM customers) SELECT e.email FROM one STRAIGHT_JOIN e",
        "with e as (select `{d}`.`customers`.`email` AS `email` from `{d}`.`customers`)select `e`.`email`"
        " AS `email` from (`{d}`.`one` straight_join `e`)",
        _C,
    ),
    Form(
        "v_cte_recursive",
        "WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 2)"
        " SELECT r.n, c.email FROM r STRAIGHT_JOIN customers c",
        "with recursive r as (select 1 AS `n` union all select `r`.`n` + 1 AS `n + 1` from `r`"
        " where `r`.`n` < 2)select `r`.`n` AS `n`,`c`.`email` AS `email`"
        " from (`r` straight_join `{d}`.`customers` `c`)",
        _C,
    ),
    Form(
        "v_union",
        "SELECT id FROM one UNION SELECT email FROM customers",
        "select `{d}`.`one`.`id` AS `id` from `{d}`.`one` union select `{d}`.`customers`.`email` AS `email`"
        " from `{d}`.`customers`",
        _C,
    ),
    Form(
        "v_system_time",
        "SELECT o.id, v.email FROM one o STRAIGHT_JOIN vt FOR SYSTEM_TIME ALL v",
        "select `o`.`id` AS `id`,`v`.`email` AS `email` from (`{d}`.`one` `o` straight_join `{d}`.`vt`"
        " FOR SYSTEM_TIME ALL `v`)",
        ("vt",),
    ),
    Form(
        "v_keyword",
        "SELECT w.`select`, c.email FROM `we``ird` w STRAIGHT_JOIN customers c",
        "select `w`.`select` AS `select`,`c`.`email` AS `email` from (`{d}`.`we``ird` `w` straight_join"
        " `{d}`.`customers` `c`)",
        _C,
    ),
    Form(  # a string may hold a backquote: it shifts a left-to-right backquote scan
        "v_stray_quote",
        "SELECT 'x`' AS s, c.email FROM one o STRAIGHT_JOIN customers c",
        "select 'x`' AS `s`,`c`.`email` AS `email` from (`{d}`.`one` `o` straight_join"
        " `{d}`.`customers` `c`)",
        _C,
    ),
    Form(
        "v_over_view",
        "SELECT s.email FROM one o STRAIGHT_JOIN v_straight s",
        "select `s`.`email` AS `email` from (`{d}`.`one` `o` straight_join `{d}`.`v_straight` `s`)",
        (),
    ),
    Form(
        "v_unseen",
        "SELECT x.email FROM one o STRAIGHT_JOIN {o}.hidden_w x",
        "select `x`.`email` AS `email` from (`{d}`.`one` `o` straight_join `{o}`.`hidden_w` `x`)",
        (),
    ),
)

SAFE = (
    Form(
        "c_straight",
        "SELECT c.id, c.name FROM one o STRAIGHT_JOIN customers c",
        "select `c`.`id` AS `id`,`c`.`name` AS `name` from (`{d}`.`one` `o` straight_join"
        " `{d}`.`customers` `c`)",
        (),
    ),
    Form(
        "c_cte",
        "WITH e AS (SELECT id FROM customers) SELECT e.id FROM e STRAIGHT_JOIN one",
        "with e as (select `{d}`.`customers`.`id` AS `id` from `{d}`.`customers`)select `e`.`id` AS `id`"
        " from (`e` straight_join `{d}`.`one`)",
        (),
    ),
    Form(
        "c_json_table",
        "SELECT jt.x FROM one, JSON_TABLE('[1]', '$[*]' COLUMNS (x int PATH '$')) jt",
        "select `jt`.`x` AS `x` from `{d}`.`one` join JSON_TABLE('[1]', '$[*]' COLUMNS (`x`"
        " int(11) PATH '$')) `jt`",
        (),
    ),
    Form(
        "c_system_time",
        "SELECT id FROM vt FOR SYSTEM_TIME ALL",
        "select `{d}`.`vt`.`id` AS `id` from `{d}`.`vt` FOR SYSTEM_TIME ALL",
        (),
    ),
    Form(
        "c_keyword",
        "SELECT w.`select` FROM `we``ird` w STRAIGHT_JOIN one o",
        "select `w`.`select` AS `select` from (`{d}`.`we``ird` `w` straight_join `{d}`.`one` `o`)",
        (),
    ),
    Form(
        "c_sequence",
        "SELECT next_not_cached_value AS n FROM seq",
        "select `{d}`.`seq`.`next_not_cached_value` AS `n` from `{d}`.`seq`",
        (),
    ),
)


def fill(template: str, d: str, o: str) -> str:
    """`template` with the two databases' names."""
    return template.replace("{d}", d).replace("{o}", o)
