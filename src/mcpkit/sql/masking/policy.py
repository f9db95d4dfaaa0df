"""The mask policy: which columns are sensitive, as `table.column` globs from `masks.yaml`.

    masks:
      - customers.email        # one column of one table
      - "*.ssn"                # that column in every table
      - hr.employees.salary    # schema.table.column
      - "payroll.*"            # every column of a table

Globs use `fnmatch` syntax (`*`, `?`, `[...]`) and match case-insensitively, so a rule also
covers the same name quoted in another case: masking errs on the side of hiding.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from glob import escape
from pathlib import Path
from typing import Any

import yaml

from mcpkit.sql.errors import SqlConfigError

__all__ = ["MaskPolicy", "MaskRule"]


@dataclass(frozen=True)
class MaskRule:
    """One rule: globs on schema (optional), table and column, kept lower-cased."""

    table: str
    column: str
    schema: str | None = None
    source: str = ""
    where: str = field(default="", repr=False, compare=False)  # `file:line: ` of a masks file's rule

    @property
    def literal(self) -> bool:
        """No glob in any part: the rule names one column (of one table, in any or one schema).

        >>> MaskRule.parse("people.ssn").literal, MaskRule.parse("*.ssn").literal
        (True, False)
        """
        return not any(set("*?[") & set(p) for p in (self.schema or "", self.table, self.column))

    @classmethod
    def parse(cls, text: str, where: str = "") -> MaskRule:
        """Read `table.column` or `schema.table.column`.

        >>> MaskRule.parse("*.SSN")
        MaskRule(table='*', column='ssn', schema=None, source='*.SSN')

        Raises:
            SqlConfigError: not two or three non-empty dot-separated parts.
        """
        parts = [p.strip() for p in text.split(".")] if isinstance(text, str) else []
        if len(parts) not in (2, 3) or not all(parts):
            raise SqlConfigError(
                f"{where}mask {text!r}: write table.column or schema.table.column (globs allowed)"
            )
        folded = [p.casefold() for p in parts]
        if len(folded) == 3:
            return cls(table=folded[1], column=folded[2], schema=folded[0], source=text, where=where)
        return cls(table=folded[0], column=folded[1], source=text, where=where)

    def matches(self, schema: str | None, table: str, column: str) -> bool:
        """Whether this rule covers the column; an unknown schema matches any schema glob."""
        if self.schema is not None and schema is not None and not fnmatchcase(schema.casefold(), self.schema):
            return False
        return fnmatchcase(table.casefold(), self.table) and fnmatchcase(column.casefold(), self.column)

    def covers_table(self, schema: str | None, table: str) -> bool:
        """Whether some column of this table may be covered."""
        if self.schema is not None and schema is not None and not fnmatchcase(schema.casefold(), self.schema):
            return False
        return fnmatchcase(table.casefold(), self.table)


@dataclass(frozen=True)
class MaskPolicy:
    """The sensitive columns of one server.

    >>> policy = MaskPolicy.of(["customers.email", "*.ssn"])
    >>> policy.masks(None, "Customers", "EMAIL"), policy.masks("hr", "staff", "ssn")
    (True, True)
    >>> policy.masks(None, "customers", "name")
    False
    """

    rules: tuple[MaskRule, ...] = ()
    readers: frozenset[tuple[str | None, str]] = frozenset()
    """`(schema, table)`, case-folded, of tables with no masked column that read a masked table's
    rows (PostgreSQL inheritance parents): a query over one answers in that table's scan order, so
    it counts as a masked read (`reads_masked`)."""

    @classmethod
    def of(cls, entries: Iterable[str]) -> MaskPolicy:
        """A policy from rule strings."""
        return cls(tuple(MaskRule.parse(e) for e in entries))

    @classmethod
    def from_yaml(cls, path: str | Path) -> MaskPolicy:
        """Load `masks.yaml`: a `masks:` list of rules (or a bare list).

        Raises:
            SqlConfigError: the file is unreadable or a rule is malformed (with file and line).
        """
        name = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
            root = yaml.compose(text, Loader=yaml.SafeLoader)
        except (OSError, yaml.YAMLError) as exc:
            raise SqlConfigError(f"{name}: cannot read the mask file: {exc}") from None
        items = _entries(root, name)
        rules = []
        for node in items:
            where = f"{name}:{node.start_mark.line + 1}: "
            if not isinstance(node, yaml.ScalarNode):
                raise SqlConfigError(f"{where}each mask is a string such as customers.email")
            rules.append(MaskRule.parse(str(node.value), where))
        return cls(tuple(rules))

    def with_columns(self, entries: Iterable[tuple[str | None, str, Iterable[str]]]) -> MaskPolicy:
        """This policy, plus exact rules for `(schema, table, columns)` (derived masks).

        >>> MaskPolicy.of(["t.email"]).with_columns([(None, "t_eu", ["email"])]).masks(None, "T_EU", "email")
        True
        """
        added = tuple(
            MaskRule(
                table=escape(table.casefold()),
                column=escape(column.casefold()),
                schema=escape(schema.casefold()) if schema else None,
                source=f"{table}.{column} (derived)",
            )
            for schema, table, columns in entries
            for column in sorted(columns)
        )
        return MaskPolicy(self.rules + added, self.readers)

    def with_readers(self, entries: Iterable[tuple[str | None, str]]) -> MaskPolicy:
        """This policy, plus `(schema, table)` tables that read a masked table's rows (`readers`).

        >>> MaskPolicy.of(["c.email"]).with_readers([("crm", "People")]).reads_masked(None, "people")
        True
        """
        added = frozenset((s.casefold() if s else None, t.casefold()) for s, t in entries)
        return MaskPolicy(self.rules, self.readers | added)

    def reads_masked(self, schema: str | None, table: str) -> bool:
        """Whether `table` reads a masked table's rows (`readers`); an unknown schema matches any."""
        folded = table.casefold()
        return any(
            t == folded and (s is None or schema is None or s == schema.casefold()) for s, t in self.readers
        )

    @property
    def empty(self) -> bool:
        """No rule: nothing is masked and queries need no analysis."""
        return not self.rules

    def masks(self, schema: str | None, table: str, column: str) -> bool:
        """Whether the column is sensitive."""
        return any(r.matches(schema, table, column) for r in self.rules)

    def masked_columns(self, schema: str | None, table: str, columns: Iterable[str]) -> frozenset[str]:
        """The sensitive ones among a table's columns."""
        return frozenset(c for c in columns if self.masks(schema, table, c))

    def masked_tables(
        self, tables: Mapping[str, Iterable[str]], schema: str | None = None
    ) -> dict[str, frozenset[str]]:
        """Table -> its sensitive columns, for the tables of one schema that have any.

        >>> MaskPolicy.of(["*.ssn"]).masked_tables({"staff": ["id", "SSN"], "sales": ["id"]})
        {'staff': frozenset({'SSN'})}
        """
        found = {t: self.masked_columns(schema, t, cols) for t, cols in tables.items()}
        return {t: cols for t, cols in found.items() if cols}


def _entries(root: Any, name: str) -> list[Any]:
    if root is None:
        return []
    if isinstance(root, yaml.MappingNode):
        for key, value in root.value:
            if key.value == "masks":
                root = value
                break
            raise SqlConfigError(f"{name}:{key.start_mark.line + 1}: unknown key {key.value!r}; use masks:")
        else:
            return []
    if isinstance(root, yaml.ScalarNode) and root.value in ("", "null", "~"):
        return []
    if not isinstance(root, yaml.SequenceNode):
        raise SqlConfigError(f"{name}:{root.start_mark.line + 1}: masks is a list of table.column rules")
    return list(root.value)
