"""Output models of the SQL tools (their JSON Schemas are the tools' declared output schemas)."""

from __future__ import annotations

from typing import Annotated, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, JsonValue, WithJsonSchema

__all__ = [
    "ColumnEntry",
    "ForeignKeyEntry",
    "IndexEntry",
    "QueryResult",
    "Row",
    "SourceTables",
    "SourcesTableList",
    "TableDescription",
    "TableEntry",
    "TableList",
]

Row: TypeAlias = Annotated[list[JsonValue], WithJsonSchema({"type": "array"})]
"""One shaped row. Its cells are any JSON (validated as `JsonValue`), so the declared schema says
only "an array": a `$ref` to an empty `JsonValue` schema per cell made the official client's
output-schema check of a 25-row answer cost about 2 ms, and it says no more."""
Rows: TypeAlias = Annotated[list[Row], WithJsonSchema({"type": "array"})]
"""The shaped rows, validated here as lists of `JsonValue` lists. Declared as "an array" (that each
row is one is in its description): `items` made the official client's check descend into every
row, 0.32 ms against 0.05 ms for a 25-row answer (jsonschema's `iter_errors`, as the client runs it)."""
Names: TypeAlias = Annotated[list[str], WithJsonSchema({"type": "array"})]
"""Column names, validated here as strings. Declared as "an array" (of names, says the description):
`items` made the client's check descend into every name. With `Notice`, the client's whole check of
a 25-row, 6-column answer: 55 to 24 µs (`iter_errors`, as above)."""
Notice: TypeAlias = Annotated[str | None, WithJsonSchema({"type": ["string", "null"]})]
"""Text or null, declared as one type list rather than pydantic's `anyOf` (8 µs less per check)."""


class QueryResult(BaseModel):
    """Rows of an answered query, shaped cell by cell."""

    model_config = ConfigDict(extra="forbid")

    columns: Names = Field(description="Column names (strings), in order.")
    rows: Rows = Field(description="Shaped rows: one list per row, one cell per column.")
    row_count: int = Field(description="Rows sent (at most max_rows).")
    truncated: bool = Field(description="True when more rows exist than were sent.")
    elapsed_ms: float = Field(description="Time the database took, in milliseconds.")
    notice: Notice = Field(
        default=None,
        description="Why fewer rows than max_rows were sent (the answer's size); how many cells were cut.",
    )


class TableEntry(BaseModel):
    """One table or view the account can read."""

    model_config = ConfigDict(extra="forbid")

    table_schema: str | None = Field(description="Schema (PostgreSQL schema, MySQL database, SQLite main).")
    name: str
    kind: str = Field(description="table or view")
    row_estimate: int | None = Field(
        default=None, description="The database's own estimate, when it has one."
    )
    row_estimate_note: str | None = Field(
        default=None, description="Why no estimate is shown (e.g. row-level security hides rows)."
    )


class TableList(BaseModel):
    """Tables and views the account can read."""

    model_config = ConfigDict(extra="forbid")

    tables: list[TableEntry]
    truncated: bool = Field(default=False, description="True when the list was cut.")


class SourceTables(BaseModel):
    """The tables of one database of a server that serves several."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(description="The name tools take as source.")
    dialect: str = Field(description="PostgreSQL, MySQL/MariaDB or SQLite.")
    available: bool = Field(description="False when the database could not be listed right now.")
    tables: list[TableEntry]
    truncated: bool = Field(default=False, description="True when the list was cut.")


class SourcesTableList(BaseModel):
    """Tables and views the account can read, per database."""

    model_config = ConfigDict(extra="forbid")

    sources: list[SourceTables]


class ColumnEntry(BaseModel):
    """One column of a table."""

    model_config = ConfigDict(extra="forbid")

    name: str
    type: str
    nullable: bool
    default: str | None = None
    primary_key: bool = False
    comment: str | None = None


class ForeignKeyEntry(BaseModel):
    """A foreign key: these columns reference a table's columns."""

    model_config = ConfigDict(extra="forbid")

    columns: list[str]
    references_schema: str | None = None
    references_table: str
    references_columns: list[str]


class IndexEntry(BaseModel):
    """An index."""

    model_config = ConfigDict(extra="forbid")

    name: str | None
    columns: list[str | None]
    unique: bool


class TableDescription(BaseModel):
    """Columns, keys, indexes and comment of one table or view."""

    model_config = ConfigDict(extra="forbid")

    table_schema: str | None
    name: str
    kind: str
    comment: str | None = None
    row_estimate: int | None = None
    row_estimate_note: str | None = Field(
        default=None, description="Why no estimate is shown (e.g. row-level security hides rows)."
    )
    columns: list[ColumnEntry]
    primary_key: list[str] = Field(default_factory=list)
    foreign_keys: list[ForeignKeyEntry] = Field(default_factory=list)
    indexes: list[IndexEntry] = Field(default_factory=list)
