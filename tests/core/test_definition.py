"""Everything wrong with a definition is an error when it is defined, never at call time."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, RootModel

from mcpkit import DefinitionError, Server, Tool, ToolAnnotations, tool


class In(BaseModel):
    x: int = 0


def handler(args: In, ctx: object) -> str:
    return "ok"


def make(name: str = "t", **kw: object) -> Tool:
    options: dict[str, object] = {"description": "A tool.", "input": In, "handler": handler, **kw}
    return Tool(name=name, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["", "has space", "x" * 129, "naïve", "semi;colon", "slash/x"])
def test_badly_formed_names(name: str) -> None:
    with pytest.raises(DefinitionError, match="tool name"):
        make(name)


@pytest.mark.parametrize("name", ["a", "get_user", "db.query", "x-y", "X" * 128])
def test_spec_names_are_accepted(name: str) -> None:
    assert make(name).name == name


def test_duplicates_and_case_only_differences() -> None:
    with pytest.raises(DefinitionError, match="twice"):
        Server("s", tools=[make("a"), make("a")])
    with pytest.raises(DefinitionError, match="differing only in case"):
        Server("s", tools=[make("Get"), make("get")])


def test_description_limit_counts_utf16_code_units() -> None:
    make(description="😀" * 1024)  # 2048 code units: at the limit
    with pytest.raises(DefinitionError, match="2050 UTF-16"):
        make(description="😀" * 1025)
    with pytest.raises(DefinitionError, match="description is required"):
        make(description="  ")


def test_input_and_output_must_compile_to_object_roots() -> None:
    class Listing(RootModel[list[int]]):
        pass

    with pytest.raises(DefinitionError, match="output"):
        Server("s", tools=[make(output=Listing)])
    with pytest.raises(DefinitionError, match="input"):
        Server("s", tools=[make(input=Listing)])
    with pytest.raises(DefinitionError, match="pydantic model"):
        Server("s", tools=[make(input=dict)])
    with pytest.raises(DefinitionError, match="input_schema"):
        Server("s", tools=[make(input_schema={"type": "array"})])


def test_policy_numbers_must_be_positive() -> None:
    for field in ("rate_limit_per_min", "cache_ttl_s", "timeout_s"):
        with pytest.raises(DefinitionError, match=field):
            make(**{field: 0})


def test_annotations_defaults_and_author_wins() -> None:
    read = make().listed_annotations()
    assert read.read_only_hint is True and read.destructive_hint is None and read.open_world_hint is True
    writes = make(mutating=True).listed_annotations()
    assert (
        writes.read_only_hint is False and writes.destructive_hint is True and writes.idempotent_hint is False
    )
    explicit = make(
        mutating=True,
        annotations=ToolAnnotations(destructive_hint=False, open_world_hint=False, idempotent_hint=True),
    ).listed_annotations()
    assert (explicit.destructive_hint, explicit.open_world_hint, explicit.idempotent_hint) == (
        False,
        False,
        True,
    )
    author_says_not_read_only = make(annotations=ToolAnnotations(read_only_hint=False)).listed_annotations()
    assert author_says_not_read_only.read_only_hint is False
    with pytest.raises(DefinitionError, match="readOnlyHint"):
        make(mutating=True, annotations=ToolAnnotations(read_only_hint=True))


def test_allowlist_names_must_exist_and_env_only_narrows() -> None:
    tools = [make("a"), make("b"), make("c")]
    with pytest.raises(DefinitionError, match="zz"):
        Server("s", tools=tools, allowed_tools=["a", "zz"])
    server = Server("s", tools=tools, allowed_tools=["a", "b"], environ={"MCPKIT_ALLOWED_TOOLS": "b, c"})
    with pytest.raises(DefinitionError, match="MCPKIT_ALLOWED_TOOLS"):
        Server("s", tools=tools, environ={"MCPKIT_ALLOWED_TOOLS": "a,typo"})
    assert [t["name"] for t in server.list_tools()] == ["b"]


def test_category_denylist_and_toolsets() -> None:
    tools = [make("read", category="db"), make("send", category="mail"), make("misc")]
    denied = Server("s", tools=tools, environ={"MCPKIT_DENIED_CATEGORIES": "mail"})
    assert [t["name"] for t in denied.list_tools()] == ["read", "misc"]
    sets = {"database": ["db"], "email": ["mail"]}
    only_db = Server("s", tools=tools, toolsets=sets, environ={"MCPKIT_TOOLSETS": "database"})
    assert [t["name"] for t in only_db.list_tools()] == ["read"]
    with pytest.raises(DefinitionError, match="unknown toolsets"):
        Server("s", tools=tools, toolsets=sets, enabled_toolsets=["nope"])


def test_decorator_builds_the_same_object() -> None:
    @tool(category="math", rate_limit_per_min=10)
    def add(a: int, b: int = 2) -> int:
        """Add two integers."""
        return a + b

    assert isinstance(add, Tool)
    assert add.category == "math" and add.rate_limit_per_min == 10
    assert add.description == "Add two integers."
    with pytest.raises(DefinitionError, match="type annotation"):

        @tool()
        def untyped(a):  # type: ignore[no-untyped-def]
            """No types."""
            return a
