"""Benchmark `mcpkit lint` on a generated 10,000-tool list (tens of MB).

Run: `.venv/bin/python bench/lint.py [--tools 10000] [--seed 7] [--profiles all|default]`

Prints the payload size, the time to lint (and, separately, to parse the JSON), findings, and peak
memory (tracemalloc during the lint and the process's max RSS). Tools are varied like real servers:
distinct names and descriptions, 8-24 parameters, enums, nested objects, arrays, Optional fields as
`anyOf`-with-null, some `$defs`/`$ref`, and a sprinkling of broken ones so rules have work to do.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from mcpkit.lint import PROFILES, lint_tools  # noqa: E402
from mcpkit.lint._metaschema import cache_size  # noqa: E402

WORDS = (
    "account order invoice customer ticket issue branch commit file folder user team project query "
    "report metric alert incident deploy build release record event window region zone label status"
).split()


def _param(rng: random.Random, i: int, j: int) -> dict[str, Any]:
    kind = rng.random()
    text = f"The {rng.choice(WORDS)} {rng.choice(WORDS)} for tool {i}, parameter {j}. " * rng.randint(1, 4)
    if kind < 0.35:
        return {"type": "string", "description": text, "maxLength": rng.choice([64, 256, 1024])}
    if kind < 0.5:
        return {"type": "integer", "description": text, "minimum": 0, "maximum": rng.randint(10, 10_000)}
    if kind < 0.6:
        return {"type": "string", "description": text, "enum": rng.sample(WORDS, rng.randint(2, 8))}
    if kind < 0.7:
        return {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "description": text}
    if kind < 0.8:
        return {"type": "array", "items": {"type": "string", "format": "date-time"}, "description": text}
    if kind < 0.9:
        return {
            "type": "object",
            "description": text,
            "properties": {
                w: {"type": rng.choice(["string", "number", "boolean"]), "description": f"{w} of {j}"}
                for w in rng.sample(WORDS, 3)
            },
            "required": [],
        }
    return {"type": "boolean", "description": text, "default": False}


def make_tool(rng: random.Random, i: int) -> dict[str, Any]:
    """One realistic tool; about 1 in 50 carries a defect."""
    props = {f"{rng.choice(WORDS)}_{j}": _param(rng, i, j) for j in range(rng.randint(8, 24))}
    schema: dict[str, Any] = {"type": "object", "properties": props, "required": list(props)[:2]}
    if i % 7 == 0:
        schema["$defs"] = {"Window": {"type": "object", "properties": {"start": {"type": "string"}}}}
        schema["properties"]["window"] = {"$ref": "#/$defs/Window"}
    if i % 50 == 1:
        schema["properties"]["bad"] = {"type": "array"}
    if i % 50 == 2:
        schema["properties"]["bad"] = {"type": "strnig", "pattern": "[a-"}
    tool: dict[str, Any] = {
        "name": f"{rng.choice(WORDS)}_{rng.choice(WORDS)}_{i}",
        "description": " ".join(rng.choices(WORDS, k=rng.randint(20, 120))),
        "inputSchema": schema,
    }
    if i % 3 == 0:
        tool["outputSchema"] = {"type": "object", "properties": {"result": {"type": "string"}}}
    return tool


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--profiles", choices=("default", "all"), default="all")
    args = parser.parse_args(argv)

    rng = random.Random(args.seed)
    text = json.dumps({"tools": [make_tool(rng, i) for i in range(args.tools)]})
    started = time.perf_counter()
    tools = json.loads(text)["tools"]
    parsed = time.perf_counter() - started
    profiles = list(PROFILES) if args.profiles == "all" else None

    tracemalloc.start()
    started = time.perf_counter()
    findings = lint_tools(tools, profiles=profiles)
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    started = time.perf_counter()
    lint_tools(tools, profiles=profiles)
    warm = time.perf_counter() - started

    by_rule = Counter(f.rule for f in findings)
    print(f"tools: {args.tools:,}  payload: {len(text) / 1e6:.1f} MB  profiles: {args.profiles}")
    print(f"parse: {parsed:.2f} s")
    print(f"lint (cold): {elapsed:.2f} s   lint (warm cache): {warm:.2f} s")
    print(
        f"peak traced memory during lint: {peak / 1e6:.0f} MB   max RSS: "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3:.0f} MB"
    )
    print(f"distinct metaschema skeletons validated: {cache_size():,}")
    print(f"findings: {len(findings):,}  " + "  ".join(f"{k}={v}" for k, v in sorted(by_rule.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
