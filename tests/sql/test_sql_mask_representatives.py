"""The representative of equal values does not follow the scan (red teams rt35a F4, F5; rt35b F5).

Where the database keeps one of values that compare equal but print differently (min/max,
percentile_disc, mode, DISTINCT, GROUP BY, UNION), it kept the first or last one scanned; the
agent makes such values from any row (`round(1::numeric, id)`: the scale is the id; MariaDB's
`CASE id WHEN 2 THEN 'a' ELSE 'A' END` under its case-insensitive collation), so with the table laid
out by the masked e-mail every answer named rows by their e-mail rank. Each probe here is asked
under two scan orders (PostgreSQL: CLUSTER on the e-mail index, then on the primary key; MariaDB:
with the covering e-mail index, then without) and must answer alike both times, or be refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.sql.errors import ToolError
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import masks_file, mysql_customers, mysql_scratch, pg_customers, pg_scratch
from tests.sql_governance.support import serve_masked

ANSWERED, REFUSED = "answered", "refused"
_ROUND = "round(1::numeric, id)"
_DAYS = "CASE WHEN id = 3 THEN interval '1 day' ELSE interval '24 hours' END"
_D14 = "CASE WHEN id = 4 THEN interval '1 day' ELSE interval '24 hours' END"
_ZERO = "CASE WHEN id = 3 THEN '-0'::float8 ELSE 0::float8 END"
_BLANKS = "CAST('a' || repeat(' ', id) AS bpchar)"
_SWAPPED = (
    "SELECT id AS a, id AS b FROM customers WHERE false"
    " UNION ALL SELECT round(1::numeric, id) AS b, id AS a FROM customers"
)
PG_PROBES = {
    # rt35a F4: numeric_larger keeps the last of ties
    "max": (f"SELECT CAST(max({_ROUND}) AS text) AS m FROM customers", ANSWERED),
    "min": (f"SELECT CAST(min({_ROUND}) AS text) AS m FROM customers WHERE id <> 3", ANSWERED),
    "max_interval": (f"SELECT CAST(max({_DAYS}) AS text) AS m FROM customers", ANSWERED),
    "max_zero": (f"SELECT CAST(max({_ZERO}) AS text) AS m FROM customers", ANSWERED),
    "max_distinct": (f"SELECT CAST(max(DISTINCT {_ROUND}) AS text) AS m FROM customers", ANSWERED),
    "window_max": (f"SELECT id, CAST(max({_ROUND}) OVER () AS text) AS m FROM customers", REFUSED),
    # F4 addendum: DISTINCT, GROUP BY and UNION keep the first scanned
    "distinct": (
        f"SELECT CAST(m AS text) AS t FROM (SELECT DISTINCT {_ROUND} AS m FROM customers) s",
        ANSWERED,
    ),
    "group_by": (f"SELECT scale({_ROUND}) AS s, count(*) AS n FROM customers GROUP BY {_ROUND}", ANSWERED),
    "group_alias": (
        f"SELECT CAST(m AS text) AS t FROM (SELECT {_ROUND} AS m FROM customers GROUP BY m) s",
        ANSWERED,
    ),
    "group_position": (
        f"SELECT CAST(m AS text) AS t FROM (SELECT {_ROUND} AS m FROM customers GROUP BY 1) s",
        ANSWERED,
    ),
    "union": (
        f"SELECT CAST(m AS text) AS t FROM (SELECT {_ROUND} AS m FROM customers UNION SELECT 2) s",
        REFUSED,
    ),
    "distinct_on": (
        f"SELECT CAST(m AS text) AS t FROM (SELECT DISTINCT ON ({_ROUND}) {_ROUND} AS m FROM customers) s",
        ANSWERED,
    ),
    "intersect_all": (
        f"SELECT CAST(m AS text) AS t FROM (SELECT {_ROUND} AS m FROM customers INTERSECT ALL SELECT 1) s",
        REFUSED,
    ),
    # rt35a F5: ordered-set aggregates, DISTINCT aggregates
    "percentile": (
        "SELECT CAST(percentile_disc(ARRAY[0.0, 0.25, 0.5, 0.75, 1.0]) WITHIN GROUP"
        f" (ORDER BY {_ROUND}) AS text) AS r FROM customers",
        REFUSED,
    ),
    "mode": (f"SELECT CAST(mode() WITHIN GROUP (ORDER BY {_ROUND}) AS text) AS m FROM customers", REFUSED),
    # red team v1 L2: percentile_cont interpolates in float8, where equal integers and numerics are
    # one value (before: refused, the expression's type unknown); a float key may be -0 or 0
    "percentile_cont_numeric": (
        "SELECT percentile_cont(ARRAY[0.0, 0.3, 0.5, 1.0]) WITHIN GROUP (ORDER BY id / 3.0 + (id % 2) * 0.50)"
        " AS p, percentile_cont(0.5) WITHIN GROUP (ORDER BY CASE WHEN id > 2 THEN id / 7.0 ELSE 1 END) AS q"
        " FROM customers",
        ANSWERED,
    ),
    "percentile_cont_zero": (
        f"SELECT CAST(percentile_cont(ARRAY[0.0, 0.5, 1.0]) WITHIN GROUP (ORDER BY {_ZERO}) AS text) AS p"
        " FROM customers",
        REFUSED,
    ),
    "percentile_cont_float": (
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY id * 0.5::float8) AS p FROM customers",
        REFUSED,
    ),
    "array_agg_distinct": (f"SELECT CAST(array_agg(DISTINCT {_ROUND}) AS text) AS a FROM customers", REFUSED),
    "sum_distinct": (f"SELECT CAST(sum(DISTINCT {_ROUND}) AS text) AS a FROM customers", REFUSED),
    # rt36 F9: a derived table's constants are no integers; F11/F4: a star beside DISTINCT outputs
    "derived_constants": (
        "SELECT CAST(v AS text) AS t FROM (SELECT DISTINCT CASE c.id WHEN 4 THEN s.a ELSE s.b END AS v"
        " FROM customers c, (SELECT 1.0 AS a, 1.00 AS b) s WHERE c.id IN (1, 4)) q",
        ANSWERED,
    ),
    "distinct_star_beside": (
        "SELECT CAST(v AS text) AS t FROM (SELECT DISTINCT s.*, CASE c.id WHEN 4 THEN 1.0 ELSE 1.00 END AS v"
        " FROM customers c, (SELECT 1 AS x) s WHERE c.id IN (1, 4)) q",
        REFUSED,
    ),
    "distinct_star_derived": (
        "SELECT CAST(v AS text) AS t FROM (SELECT DISTINCT * FROM"
        " (SELECT CASE id WHEN 4 THEN 1.0 ELSE 1.00 END AS v FROM customers WHERE id IN (1, 4)) s) q",
        REFUSED,
    ),
    # rt36 F1, F2, F10: judged by the result's type
    "date_trunc_interval": (
        f"SELECT CAST(v AS text) AS t FROM (SELECT DISTINCT date_trunc('hour', {_D14}) AS v FROM customers"
        " WHERE id IN (1, 4)) q",
        ANSWERED,
    ),
    "max_extract": (
        "SELECT CAST(min(CASE id WHEN 4 THEN extract(epoch from date '2020-01-01')"
        " ELSE extract(epoch from timestamp '2020-01-01') END) AS text) AS m FROM customers"
        " WHERE id IN (1, 4)",
        ANSWERED,
    ),
    "max_timestamp_difference": (
        "SELECT CAST(max(CASE id WHEN 4 THEN timestamp '2020-01-02' - timestamp '2020-01-01'"
        " ELSE timestamp '2020-01-01 12:00' - timestamp '2020-01-01'"
        " + (timestamp '2020-01-01 12:00' - timestamp '2020-01-01') END) AS text) AS m FROM customers"
        " WHERE id IN (1, 4)",
        ANSWERED,
    ),
    # rt36 F3: the innermost CTE of a name defines it
    "cte_shadowed": (
        "SELECT CAST(v AS text) AS t FROM (WITH t AS (SELECT 1 AS v) SELECT * FROM (WITH t AS"
        " (SELECT CASE id WHEN 4 THEN 1.0 ELSE 1.00 END AS v FROM customers WHERE id IN (1, 4))"
        " SELECT DISTINCT t.v FROM t) s) q",
        ANSWERED,
    ),
    # rt36 F5: a cast to text keeps an explicit collation
    "collated_cast": (
        "SELECT DISTINCT CAST(CASE id WHEN 4 THEN 'a' ELSE 'A' END COLLATE \"reps_ci\" AS text) AS v"
        " FROM customers WHERE id IN (1, 4)",
        ANSWERED,
    ),
    "collated_column_cast": (
        "SELECT DISTINCT CAST(CASE id WHEN 4 THEN lower(nick) ELSE upper(nick) END AS text) AS v"
        " FROM customers WHERE id IN (1, 4)",
        ANSWERED,
    ),
    "plain_cast_text": ("SELECT DISTINCT CAST(lower(name) AS text) AS v FROM customers", ANSWERED),
    # rt36 F7: range_agg keeps one of equal bounds
    "range_agg": (
        "SELECT CAST(range_agg(numrange(CASE id WHEN 4 THEN 1.0 ELSE 1.00 END, 5)) AS text) AS r"
        " FROM customers WHERE id IN (1, 4)",
        REFUSED,
    ),
    # review: a UNION of three branches was traced by its last branch only
    "union_three_branches": (
        "SELECT CAST(max(x) AS text) AS m FROM (SELECT round(1::numeric, id) AS x FROM customers"
        " WHERE id IN (1, 4) UNION ALL SELECT 0 AS x UNION ALL SELECT 0 AS x) d",
        ANSWERED,
    ),
    # review: ROLLUP / CUBE / GROUPING SETS sit among the keys; refused, not sent malformed
    "rollup": (
        "SELECT round(1::numeric, id) AS r, count(*) AS n FROM customers GROUP BY ROLLUP (r)",
        REFUSED,
    ),
    "grouping_sets": (
        "SELECT round(1::numeric, id) AS r, count(*) AS n FROM customers GROUP BY GROUPING SETS ((r), ())",
        REFUSED,
    ),
    # an EXISTS computing per row that selects a star over the masked table: expanded, then ordered
    "exists_star": (
        "SELECT EXISTS (SELECT * FROM customers WHERE CASE WHEN id = 1 THEN true"
        " WHEN id = 4 THEN 1 / (id - 4) = 1 ELSE false END) AS e",
        REFUSED,
    ),
    # red team v1 F1: bpchar equality ignores trailing blanks, its cast to text strips them
    "bpchar_max": (f"SELECT octet_length(max({_BLANKS})) AS m FROM customers WHERE id <> 3", ANSWERED),
    "bpchar_min": (f"SELECT octet_length(min({_BLANKS})) AS m FROM customers WHERE id <> 3", ANSWERED),
    "bpchar_distinct": (
        f"SELECT octet_length(x) AS n FROM (SELECT DISTINCT {_BLANKS} AS x FROM customers) s",
        ANSWERED,
    ),
    "bpchar_group": (f"SELECT octet_length({_BLANKS}) AS n FROM customers GROUP BY {_BLANKS}", ANSWERED),
    "bpchar_array_agg": (f"SELECT array_to_string(array_agg({_BLANKS}), '|') AS a FROM customers", ANSWERED),
    "bpchar_domain_max": (
        "SELECT octet_length(max(CAST('a' || repeat(' ', id) AS reps_blank))) AS m FROM customers",
        ANSWERED,
    ),
    "bpchar_cte_distinct": (
        f"WITH t AS (SELECT {_BLANKS} AS x FROM customers) SELECT octet_length(x) AS n"
        " FROM (SELECT DISTINCT x FROM t) d",
        ANSWERED,
    ),
    # red team v1 F3: a set operation's later branches are read by position, not by name
    "union_names_distinct": (
        f"SELECT scale(a) AS s FROM (SELECT DISTINCT a FROM ({_SWAPPED}) t) d",
        ANSWERED,
    ),
    "union_names_max": (f"SELECT scale(max(a)) AS s FROM ({_SWAPPED}) t", ANSWERED),
    "union_names_group": (f"SELECT scale(a) AS s, count(*) AS n FROM ({_SWAPPED}) t GROUP BY a", ANSWERED),
    "union_names_cte": (
        f"WITH t AS ({_SWAPPED} UNION ALL SELECT id AS a, id AS b FROM customers WHERE false)"
        " SELECT scale(max(a)) AS s FROM t",
        ANSWERED,
    ),
    "alias_list_max": (
        "SELECT scale(max(a)) AS s FROM (SELECT id AS a, round(1::numeric, id) AS b FROM customers) t(b, a)",
        ANSWERED,
    ),
    # ordinary analyst queries keep working
    "plain": ("SELECT max(name) AS m, min(id) AS i, count(DISTINCT name) AS n FROM customers", ANSWERED),
    "plain_group": ("SELECT lower(name) AS l, count(*) AS n FROM customers GROUP BY lower(name)", ANSWERED),
    "plain_distinct": ("SELECT DISTINCT name FROM customers", ANSWERED),
    "plain_star_cte": (
        "WITH c AS (SELECT id, name, date_trunc('day', now()) AS d FROM customers) SELECT DISTINCT * FROM c",
        ANSWERED,
    ),
    "plain_durations": (
        "SELECT max(date_trunc('month', now())) AS m, count(DISTINCT extract(year from now())) AS y"
        " FROM customers",
        ANSWERED,
    ),
    # red team v1 L1: ROLLUP over stored keys was sent ordered by `CAST(ROLLUP (name) AS TEXT)`
    "plain_rollup": ("SELECT name, count(*) AS n FROM customers GROUP BY ROLLUP (name)", ANSWERED),
    "plain_cube_limit": ("SELECT name, count(*) AS n FROM customers GROUP BY CUBE (name) LIMIT 3", ANSWERED),
    "plain_union": ("SELECT name FROM customers UNION SELECT 'Zed'", ANSWERED),
    "plain_percentile": (
        "SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY id) AS p FROM customers",
        ANSWERED,
    ),
    "plain_distinct_expr": (
        "SELECT DISTINCT lower(name) AS l FROM customers ORDER BY l DESC LIMIT 3",
        ANSWERED,
    ),
    "plain_distinct_unnest": ("SELECT DISTINCT unnest(ARRAY[name, 'x']) AS n FROM customers", ANSWERED),
    "plain_bucket": (
        "SELECT CASE WHEN id > 2 THEN 'hi' ELSE 'lo' END AS b, left(name, 1) AS i, count(*) AS n"
        " FROM customers GROUP BY 1, i HAVING count(*) > 0 ORDER BY count(*) DESC LIMIT 5",
        ANSWERED,
    ),
    "plain_cte": (
        "WITH c AS (SELECT name, id * 1.5 AS x FROM customers) SELECT max(name) AS m, max(x) OVER () AS w"
        " FROM c GROUP BY x",
        ANSWERED,
    ),
}
_CASE = "CASE id WHEN 2 THEN 'a' ELSE 'A' END"
MY_PROBES = {
    # rt35b F5: the first scanned of collation-equal values
    "distinct": (f"SELECT DISTINCT {_CASE} AS g FROM customers WHERE id + 0 IN (2, 5)", ANSWERED),
    "min": (f"SELECT MIN({_CASE}) AS m FROM customers WHERE id + 0 IN (2, 5)", REFUSED),
    "group_by": (
        f"SELECT {_CASE} AS g, COUNT(*) AS n FROM customers WHERE id + 0 IN (2, 5) GROUP BY g",
        ANSWERED,
    ),
    "group_concat_distinct": (
        f"SELECT GROUP_CONCAT(DISTINCT {_CASE}) AS g FROM customers WHERE id + 0 IN (2, 5)",
        REFUSED,
    ),
    "json_arrayagg_distinct": (
        f"SELECT JSON_ARRAYAGG(DISTINCT {_CASE}) AS g FROM customers WHERE id + 0 IN (2, 5)",
        REFUSED,
    ),
    "union": (f"SELECT {_CASE} AS g FROM customers WHERE id + 0 IN (2, 5) UNION SELECT 'b'", REFUSED),
    "window_max": (f"SELECT id, MAX({_CASE}) OVER () AS m FROM customers", REFUSED),
    "binary_min": (
        f"SELECT MIN(CAST({_CASE} AS BINARY)) AS m FROM customers WHERE id + 0 IN (2, 5)",
        ANSWERED,
    ),
    # rt36 F9, F11, F6, F3 (MariaDB's default collation ignores case)
    "derived_constants": (
        "SELECT DISTINCT CASE c.id WHEN 2 THEN s.a ELSE s.b END AS v FROM customers c,"
        " (SELECT 'a' AS a, 'A' AS b) s WHERE c.id + 0 IN (2, 5)",
        ANSWERED,
    ),
    "derived_constants_max": (
        "SELECT MAX(CASE c.id WHEN 2 THEN s.a ELSE s.b END) AS v FROM customers c,"
        " (SELECT 'a' AS a, 'A' AS b) s WHERE c.id + 0 IN (2, 5)",
        REFUSED,
    ),
    "distinct_star_beside": (
        f"SELECT DISTINCT s.*, {_CASE.replace('id', 'c.id')} AS v FROM customers c, (SELECT 1 AS x) s"
        " WHERE c.id + 0 IN (2, 5)",
        REFUSED,
    ),
    "from_unixtime_format": (
        f"SELECT DISTINCT FROM_UNIXTIME(0, {_CASE}) AS v FROM customers WHERE id + 0 IN (2, 5)",
        ANSWERED,
    ),
    "from_unixtime_max": (
        f"SELECT MAX(FROM_UNIXTIME(0, {_CASE})) AS v FROM customers WHERE id + 0 IN (2, 5)",
        REFUSED,
    ),
    "cte_shadowed": (
        "WITH t AS (SELECT 1 AS v) SELECT * FROM (WITH t AS (SELECT"
        f" {_CASE} AS v FROM customers WHERE id + 0 IN (2, 5)) SELECT DISTINCT t.v FROM t) s",
        ANSWERED,
    ),
    # red team v1 F3 on MariaDB: later branches are read by position (pinned, then refused as
    # `UNION ALL` of the CASE itself is: no visible key tells the derived rows apart)
    "union_names_distinct": (
        "SELECT DISTINCT a FROM (SELECT id AS a, id AS b FROM customers WHERE false UNION ALL"
        f" SELECT {_CASE} AS b, id AS a FROM customers WHERE id + 0 IN (2, 5)) t",
        REFUSED,
    ),
    "plain_star_cte": ("WITH c AS (SELECT id, name FROM customers) SELECT DISTINCT * FROM c", ANSWERED),
    "plain": ("SELECT MAX(name) AS m, MIN(id + 1) AS i, COUNT(DISTINCT name) AS n FROM customers", ANSWERED),
    "plain_group": ("SELECT LOWER(name) AS l, COUNT(*) AS n FROM customers GROUP BY LOWER(name)", ANSWERED),
    "plain_distinct": ("SELECT DISTINCT name FROM customers ORDER BY LENGTH(name)", ANSWERED),
    "plain_distinct_expr": (
        "SELECT DISTINCT LOWER(name) AS l FROM customers ORDER BY l DESC LIMIT 3",
        ANSWERED,
    ),
    "plain_bucket": (
        "SELECT CASE WHEN id > 2 THEN 'hi' ELSE 'lo' END AS b, LEFT(name, 1) AS i, COUNT(*) AS n"
        " FROM customers GROUP BY 1, i HAVING COUNT(*) > 0 ORDER BY COUNT(*) DESC LIMIT 5",
        ANSWERED,
    ),
    "plain_numbers": (
        "SELECT MAX(id / 3) AS a, MIN(ROUND(id * 1.5, 1)) AS b, MAX(id) OVER () AS c"
        " FROM customers GROUP BY id",
        ANSWERED,
    ),
}


def _answer(service: SqlService, sql: str) -> tuple[str, str]:
    try:
        result, _ = service.query(sql, call_id="t")
        return ANSWERED, str(result.rows)
    except ToolError as exc:
        return REFUSED, exc.code


def _ask(service: SqlService, probes: dict[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
    return {name: _answer(service, sql) for name, (sql, _) in probes.items()}


@pytest.fixture(scope="module")
def pg_answers(
    pg_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[dict[str, tuple[str, str]]]]:
    with pg_scratch(pg_url, "reps") as db:
        pg_customers(db)
        # an operator's case-insensitive collation (rt36 F5); no grant is needed to use one
        db.admin.execute(
            "CREATE COLLATION reps_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);"
            # a fast default: the rows stay where CLUSTER put them
            " ALTER TABLE customers ADD COLUMN nick text COLLATE reps_ci NOT NULL DEFAULT 'a';"
            f" GRANT SELECT (nick) ON customers TO {db.reader};"
            " CREATE DOMAIN reps_blank AS bpchar;"
            # a user's format(text, numeric) matches `format('%L', x)` better than the built-in
            " CREATE FUNCTION public.format(text, numeric) RETURNS text LANGUAGE sql IMMUTABLE"
            " AS $$ SELECT 'same' $$"
        )
        served = serve_masked(
            db.reader_url, Path(masks_file(tmp_path_factory.mktemp("reps"), "customers.email"))
        )
        try:
            by_email = _ask(served, PG_PROBES)
            db.admin.execute("CLUSTER customers USING customers_pkey")
            yield [by_email, _ask(served, PG_PROBES)]
        finally:
            served.engine.close()


@pytest.fixture(scope="module")
def my_answers(
    mysql_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[dict[str, tuple[str, str]]]]:
    with mysql_scratch(mysql_url, "reps") as db:
        mysql_customers(db)
        served = serve_masked(
            db.reader_url, Path(masks_file(tmp_path_factory.mktemp("reps"), "customers.email"))
        )
        try:
            by_email = _ask(served, MY_PROBES)
            with db.admin.cursor() as c:
                c.execute(f"ALTER TABLE {db.db}.customers DROP INDEX email_idx")
            yield [by_email, _ask(served, MY_PROBES)]
        finally:
            served.engine.close()


@pytest.mark.postgres
@pytest.mark.parametrize("probe", sorted(PG_PROBES))
def test_postgres_a_representative_answers_alike_whatever_the_scan_order(
    pg_answers: list[dict[str, tuple[str, str]]], probe: str
) -> None:
    by_email, by_id = (a[probe] for a in pg_answers)
    assert by_email == by_id, (probe, by_email, by_id)
    assert by_email[0] == PG_PROBES[probe][1], (probe, by_email)
    if probe in ("rollup", "grouping_sets"):  # masking's refusal, not the engine's syntax error
        assert by_email[1] == "REFUSED", by_email
    assert "@" not in by_email[1]


@pytest.mark.mysql
@pytest.mark.parametrize("probe", sorted(MY_PROBES))
def test_mariadb_a_representative_answers_alike_whatever_the_scan_order(
    my_answers: list[dict[str, tuple[str, str]]], probe: str
) -> None:
    by_email, by_id = (a[probe] for a in my_answers)
    assert by_email == by_id, (probe, by_email, by_id)
    assert by_email[0] == MY_PROBES[probe][1], (probe, by_email)
    assert "@" not in by_email[1]


@pytest.mark.postgres
def test_postgres_values_that_print_differently_are_different_groups(
    pg_answers: list[dict[str, tuple[str, str]]],
) -> None:
    # 1.0, 1.00, ... are one value to numeric's equality, five groups under masks (docs/masking.md)
    assert pg_answers[0]["distinct"][1].count("'1.") == 5, pg_answers[0]["distinct"]
    assert pg_answers[0]["max"][1] == "[['1.00000']]", pg_answers[0]["max"]
