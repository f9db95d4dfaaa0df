"""PostgreSQL 15: every `pg_catalog` relation reviewed for text an operator wrote or values from rows.

PostgreSQL lets any role read most catalogs, for every object in the database: also objects in
schemas the role has no USAGE on. A catalog that holds free text (comments, labels, options) or
an expression (view, rule, policy, default, CHECK, index, partition key, trigger arguments) answers
whatever an operator wrote there, secrets included; one holding statistics answers values from
rows past masks and row-level security. Those are never readable. What is left names objects and
their structure; `tests/sql/test_sql_catalog_review.py` requires every catalog relation of the
live server to be in exactly one of the two lists, so a new catalog fails the test until reviewed.
"""

from __future__ import annotations

from typing import Final

from mcpkit.sql.admission.function_tables import RelationRule, ValueRule, relation_rule

__all__ = ["CATALOG_NEVER", "CATALOG_READABLE", "CATALOG_VALUES"]

CATALOG_NEVER: Final[tuple[RelationRule, ...]] = (
    relation_rule(
        None,
        "shows comments and security labels of every object, also ones the role cannot use (an operator "
        "may write a secret there)",
        "pg_description pg_seclabel pg_shseclabel pg_seclabels",
    ),
    relation_rule(
        None,
        "shows the SQL of views, rules, policies, defaults, CHECK constraints, indexes, partition keys, "
        "statistics objects, publication filters or trigger arguments of every table, also ones the role "
        "cannot use (an operator may write a secret there)",
        "pg_views pg_matviews pg_rules pg_rewrite pg_policy pg_policies pg_attrdef pg_constraint pg_index "
        "pg_indexes pg_partitioned_table pg_statistic_ext pg_trigger pg_publication_rel "
        "pg_publication_tables pg_aggregate",
    ),
    relation_rule(
        None,
        "shows connection and file options of foreign servers, foreign tables, wrappers, user mappings "
        "and subscriptions (hosts, commands and passwords are written there)",
        "pg_foreign_data_wrapper pg_foreign_server pg_foreign_table pg_user_mapping pg_user_mappings "
        "pg_subscription pg_extension "
        # information_schema's views of the same options (red team rtJ F3: user_mapping_options
        # answered a user mapping's password), and the helper views under them
        "user_mapping_options foreign_server_options foreign_table_options foreign_data_wrapper_options "
        "_pg_foreign_data_wrappers _pg_foreign_servers _pg_foreign_tables _pg_foreign_table_columns "
        "_pg_user_mappings",
    ),
    relation_rule(
        None,
        "shows values from table rows (most common values, histograms, large objects) past column "
        "privileges and row-level security, or the SQL of statistics objects",
        "pg_statistic pg_statistic_ext_data pg_stats_ext pg_stats_ext_exprs pg_largeobject",
    ),
    relation_rule(
        None,
        "shows statements prepared or cursors opened on a pooled session, or server internals",
        "pg_prepared_statements pg_cursors pg_shmem_allocations pg_replication_origin "
        "pg_replication_origin_status",
    ),
)

# Names, types, ownership, privileges and structure: what list_tables/describe_table also show.
# Reviewed columns that are not names: pg_class.reltuples/relpages (estimates: see docs/security.md,
# row-level security), left readable; pg_type.typdefault/typdefaultbin (a domain's default),
# pg_attribute.attmissingval (the value every row older than an ADD COLUMN ... DEFAULT holds) and
# pg_class.relpartbound (partition bounds: row values) are `CATALOG_VALUES` (red team rtJ F4: read
# for tables and domains in schemas the role could not use).
# pg_stats shows only columns the role may select of tables where row-level security is not active
# for it (the view's own condition), so its values are the role's to read; masked columns are
# withheld by the grants start-up requires.
CATALOG_READABLE: Final[frozenset[str]] = frozenset(
    [
        "pg_am",
        "pg_amop",
        "pg_amproc",
        "pg_attribute",
        "pg_auth_members",
        "pg_cast",
        "pg_class",
        "pg_collation",
        "pg_conversion",
        "pg_database",
        "pg_default_acl",
        "pg_depend",
        "pg_enum",
        "pg_event_trigger",
        "pg_inherits",
        "pg_init_privs",
        "pg_language",
        "pg_largeobject_metadata",
        "pg_namespace",
        "pg_opclass",
        "pg_operator",
        "pg_opfamily",
        "pg_parameter_acl",
        "pg_publication",
        "pg_publication_namespace",
        "pg_range",
        "pg_sequence",
        "pg_shdepend",
        "pg_subscription_rel",
        "pg_tablespace",
        "pg_transform",
        "pg_ts_config",
        "pg_ts_config_map",
        "pg_ts_dict",
        "pg_ts_parser",
        "pg_ts_template",
        "pg_type",
        "pg_available_extension_versions",
        "pg_available_extensions",
        "pg_group",
        "pg_sequences",
        "pg_stats",
        "pg_tables",
        "pg_timezone_abbrevs",
        "pg_timezone_names",
    ]
)

_CATALOG: Final[frozenset[str | None]] = frozenset({None, "pg_catalog"})
CATALOG_VALUES: Final[tuple[ValueRule, ...]] = (
    ValueRule(
        _CATALOG,
        frozenset({"pg_attribute"}),
        frozenset({"attmissingval"}),
        "holds, for every table (also ones the role cannot use), the value of a column added with a default"
        " that each older row has",
    ),
    ValueRule(
        _CATALOG,
        frozenset({"pg_attribute"}),
        frozenset({"attfdwoptions"}),
        "holds the options of every foreign table's columns, as pg_foreign_table holds the table's",
    ),
    ValueRule(
        _CATALOG,
        frozenset({"pg_type"}),
        frozenset({"typdefault", "typdefaultbin"}),
        "holds the default of every domain, also ones in schemas the role cannot use",
    ),
    ValueRule(
        _CATALOG,
        frozenset({"pg_class"}),
        frozenset({"relpartbound"}),
        "holds the partition bounds (row values) of every table, also ones the role cannot use",
    ),
    ValueRule(
        frozenset({"information_schema"}),
        frozenset({"domains"}),
        frozenset({"domain_default"}),
        "holds the default of every domain, also ones in schemas the role cannot use",
    ),
)
"""Readable catalogs' value columns no query may read (`reject_relations`)."""
