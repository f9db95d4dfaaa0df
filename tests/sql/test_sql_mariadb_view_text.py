"""Reading MariaDB's stored view text to fail closed (red team rt25 F0), without a server.

The texts are the ones MariaDB 10.11 stores (`mariadb_view_forms`, checked against the server by
test_sql_mask_view_joins): every relation a view reads must come out, in whatever form it stands,
and a relation the catalog does not hold must come out as unseen wherever it stands.
"""

from __future__ import annotations

import pytest

from mcpkit.sql.profiles.mysql.mask_routes import _tainted_views
from mcpkit.sql.profiles.mysql.view_text import read_relations, routine_calls, unseen_relations
from tests.sql.mariadb_view_forms import LEAKS, SAFE, Form, fill

D, OTHER = "shop", "other"
CATALOG = {
    *((D, t) for t in ("customers", "one", "vt", "we`ird", "seq")),
    *((D, f.name) for f in (*LEAKS, *SAFE)),
}
HIDDEN = {(D, "customers"): {"email"}, (D, "vt"): {"email"}}


def _same(name: str) -> str:
    return name


@pytest.mark.parametrize("form", LEAKS, ids=lambda f: f.name)
def test_every_masked_relation_of_a_stored_text_is_read(form: Form) -> None:
    read = read_relations(fill(form.stored, D, OTHER), D)
    for table in form.reads:
        assert (D, table) in read, (form.name, read)


@pytest.mark.parametrize("form", [*LEAKS, *SAFE], ids=lambda f: f.name)
def test_a_stored_text_over_the_catalog_has_nothing_unseen(form: Form) -> None:
    unseen = unseen_relations(fill(form.stored, D, OTHER), D, CATALOG, _same)
    assert unseen == ([(OTHER, "hidden_w")] if form.name == "v_unseen" else []), form.name


def test_each_form_that_reads_a_masked_column_is_tainted_and_no_other() -> None:
    views = [(D, f.name, "DEFINER", fill(f.stored, D, OTHER)) for f in (*LEAKS, *SAFE)]
    tainted = _tainted_views(views, (CATALOG, _same), HIDDEN, D, {})
    assert set(tainted) == {(D, f.name) for f in LEAKS}, tainted
    assert tainted[(D, "v_straight")] == "it reads a masked column with its definer's rights"
    assert tainted[(D, "v_over_view")] == "it reads view v_straight, which reads a masked column"
    assert tainted[(D, "v_unseen")] == "it reads other.hidden_w, which this check cannot see into"


@pytest.mark.parametrize(
    ("stored", "unseen"),
    [
        # an alias named like the database of the relation it stands for: FROM places it
        ("select `h`.`email` AS `email` from (`shop`.`one` straight_join `h`.`w` `h`)", [("h", "w")]),
        # no keyword before it: its qualifier is declared nowhere else in the text
        ("select `x`.`id` AS `id`,nextval(`h`.`s`) AS `n` from `shop`.`one` `x`", [("h", "s")]),
        ("select `h`.`w`.`email` AS `email` from `shop`.`one`", [("h", "w")]),
        # a string holding a backquote shifts a left-to-right scan; every backquote starts a chain
        ("select 'a`' AS `s`,`x`.`e` AS `e` from (`shop`.`one` `o` straight_join `h`.`w` `x`)", [("h", "w")]),
        # a CTE is named alone; a name alone that no CTE declares is the view's database's
        ("with e as (select 1 AS `k`)select `e`.`k` AS `k` from (`e` straight_join `f`)", [("shop", "f")]),
        # lower_case_table_names=0: `One` is not the visible `one`
        ("select `shop`.`One`.`id` AS `id` from `shop`.`One`", [("shop", "One")]),
    ],
)
def test_a_relation_the_catalog_lacks_is_unseen_wherever_it_stands(
    stored: str, unseen: list[tuple[str, str]]
) -> None:
    assert unseen_relations(stored, D, CATALOG, _same) == unseen


def test_names_compare_as_the_server_compares_them() -> None:
    stored = "select `shop`.`One`.`id` AS `id` from `SHOP`.`One`"
    assert unseen_relations(stored, D, CATALOG, str.lower) == []  # lower_case_table_names 1 or 2
    assert unseen_relations(stored, D, CATALOG, _same) == [("SHOP", "One"), ("shop", "One")]


def test_a_relation_read_under_any_name_of_a_chain_counts() -> None:
    # over-approximation is the safe direction: an alias or column named like a table counts too
    stored = "select `customers`.`id` AS `id` from `shop`.`one` `customers`"
    assert (D, "customers") in read_relations(stored, D) and (D, "one") in read_relations(stored, D)
    assert routine_calls("select 'x`' AS `a`,`shop`.`f`(1) AS `b`", D) == [(D, "f")]
