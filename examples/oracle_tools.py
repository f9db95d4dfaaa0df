"""Seed 000 ("Oracle MCP Tool Standards"), ported to mcpkit.

The seed registers typed tool definitions collected per category module, each with a described
input schema, an output schema, a per-minute rate limit, optional memoisation with a TTL, and an
error envelope `{code, message, detail, context}`; a `ToolCache` offers `getOrCompute(key, fn, ttl)`
and `invalidatePattern(...)`. In mcpkit each of those is a field or a call:

    seed                                   mcpkit
    category, keywords                     Tool(category=..., keywords=...), toolsets
    inputSchema / outputSchema (Zod)       pydantic input / output models (strict, described)
    rateLimitPerMin                        rate_limit_per_min (per caller; a cache hit spends none)
    cacheable + TTL                        cache_ttl_s (per caller and arguments); mutating=True clears
                                           the category ("update clears")
    OracleError(code, message, detail,     a ToolError subclass with its own code; `data` goes to the
      context)                             operator log unless exposed
    ToolCache.getOrCompute / invalidate    ctx.cache.get_or_compute / ctx.cache.invalidate
    { success, data, error, metadata }     structuredContent + text; errors: isError + mcpkit/error

    python examples/oracle_tools.py       # serves over stdio
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from mcpkit import Context, Server, Tool, ToolAnnotations, ToolError

SKILLS = {"security": "Review code for vulnerabilities.", "coding": "Write and refactor code."}
MEMORY: dict[str, str] = {"deploy": "Deploys go through the staging cluster first."}
READ_ONLY = ToolAnnotations(readOnlyHint=True, openWorldHint=False)


class InvalidSkill(ToolError):
    """The seed's `OracleError("INVALID_SKILL", ...)`: its own code, a hint the model may read."""

    code = "INVALID_SKILL"
    expose_data = True


# --- consult -----------------------------------------------------------------------------------


class AskIn(BaseModel):
    question: Annotated[str, Field(min_length=1, max_length=50_000)] = Field(
        description="The question or what you're stuck on"
    )
    oracle: str | None = Field(None, description="Oracle profile name (e.g. 'coding')")
    files: list[str] = Field(default=[], max_length=50, description="File globs to include")


class Answer(BaseModel):
    output: str = Field(description="The answer")
    files_included: int = Field(description="How many files were read")


def oracle_ask(args: AskIn, ctx: Context) -> Answer:
    return Answer(output=f"[{args.oracle or 'default'}] {args.question[:60]}", files_included=len(args.files))


# --- session: skills, cached through ctx.cache -------------------------------------------------


class NoArgs(BaseModel):
    pass


class SkillList(BaseModel):
    skills: list[str] = Field(description="Skill names, for oracle_skill_get")


LOADS = {"skills": 0}


async def oracle_skills(args: NoArgs, ctx: Context) -> SkillList:
    def load() -> list[str]:
        LOADS["skills"] += 1
        return sorted(SKILLS)

    return SkillList(skills=await ctx.cache.get_or_compute("skills-list", 300, load))


class SkillIn(BaseModel):
    skill: str = Field(description="A skill name from oracle_skills", max_length=64)


def oracle_skill_get(args: SkillIn, ctx: Context) -> str:
    if args.skill not in SKILLS:
        raise InvalidSkill(
            f"Unknown skill: {args.skill}. Run oracle_skills to see available options.",
            data={"available": sorted(SKILLS)},
        )
    return SKILLS[args.skill]


# --- memory: cached results, cleared by an update in the same category -------------------------


class MemoryKey(BaseModel):
    key: str = Field(description="Memory key", max_length=128)


class MemoryUpdate(MemoryKey):
    text: str = Field(description="New text", max_length=10_000)


def oracle_memory_get(args: MemoryKey, ctx: Context) -> str:
    return MEMORY.get(args.key, "(nothing remembered)")


async def oracle_memory_update(args: MemoryUpdate, ctx: Context) -> str:
    MEMORY[args.key] = args.text
    dropped = await ctx.cache.invalidate("skill*")  # the seed's cache.invalidatePattern
    return f"Updated {args.key} ({dropped.count} cached skill lists dropped)."


def tools() -> list[Tool]:
    """The seed's createToolDefinitions(), all categories."""
    return [
        Tool(
            name="oracle_ask",
            title="Ask the oracle",
            description="Ask a question; the answer may read files matching the given globs.",
            input=AskIn,
            output=Answer,
            handler=oracle_ask,
            category="consult",
            keywords=("question", "help", "stuck"),
            rate_limit_per_min=10,
        ),
        Tool(
            name="oracle_skills",
            description="List the skills oracle_skill_get can return.",
            input=NoArgs,
            output=SkillList,
            handler=oracle_skills,
            annotations=READ_ONLY,
            category="session",
            cache_ttl_s=300,
        ),
        Tool(
            name="oracle_skill_get",
            description="Get one skill's instructions.",
            input=SkillIn,
            handler=oracle_skill_get,
            annotations=READ_ONLY,
            category="session",
        ),
        Tool(
            name="oracle_memory_get",
            description="Read one remembered note.",
            input=MemoryKey,
            handler=oracle_memory_get,
            annotations=READ_ONLY,
            category="memory",
            cache_ttl_s=300,
        ),
        Tool(
            name="oracle_memory_update",
            description="Replace one remembered note; cached reads of memory are dropped.",
            input=MemoryUpdate,
            handler=oracle_memory_update,
            category="memory",
            mutating=True,
            annotations=ToolAnnotations(destructiveHint=False, idempotentHint=True),
        ),
    ]


server = Server(
    "oracle",
    tools=tools(),
    toolsets={"consult": ["consult"], "knowledge": ["session", "memory"]},
    find_tools=True,
)

if __name__ == "__main__":
    server.run_stdio()
