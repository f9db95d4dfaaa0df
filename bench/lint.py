"""Benchmark `mcpkit lint` on a generated 10,000-tool list (tens of MB).

Run: `.venv/bin/python bench/lint.py [--tools 10000] [--seed 7] [--profiles default|all] [--jobs 0]`

Prints the payload size, the time to lint (wall and CPU; parsing the JSON is timed apart), the
findings, and peak memory (the max RSS of this process and of its workers, and the Python heap peak
of a separate single-process run under tracemalloc, which slows it down). Tools are varied like real
servers: distinct names and descriptions, 6-16 parameters, enums, nested objects, arrays, Optional
fields as `anyOf`-with-null, some `$defs`/`$ref`, and a sprinkling of broken ones for rules to find.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from mcpkit.lint import PROFILES, lint_report
from mcpkit.lint._metaschema import cache_size

WORDS = [
    "account",
    "order",
    "invoice",
    "customer",
    "ticket",
    "issue",
    "branch",
    "commit",
    "file",
    "folder",
    "user",
    "team",
    "project",
    "query",
    "report",
    "metric",
    "alert",
    "incident",
    "deploy",
    "build",
    "release",
    "record",
    "event",
    "window",
    "region",
    "zone",
    "label",
    "status",
]


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
    props = {f"{rng.choice(WORDS)}_{j}": _param(rng, i, j) for j in range(rng.randint(6, 16))}
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


def _rss_mb(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    """Generate, lint, report."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--profiles", choices=("default", "all"), default="default")
    parser.add_argument("--jobs", type=int, default=0, help="worker processes (0: one per CPU, 1: none)")
    parser.add_argument("--no-tracemalloc", action="store_true", help="skip the slow heap-peak run")
    args = parser.parse_args(argv)

    rng = random.Random(args.seed)
    text = json.dumps({"tools": [make_tool(rng, i) for i in range(args.tools)]})
    started = time.perf_counter()
    tools = json.loads(text)["tools"]
    parsed = time.perf_counter() - started
    profiles = list(PROFILES) if args.profiles == "all" else None
    rss_before = _rss_mb(resource.RUSAGE_SELF)

    runs = []
    for _ in range(3):
        wall, cpu = time.perf_counter(), time.process_time()
        report = lint_report(tools, profiles=profiles, jobs=args.jobs)
        runs.append((time.perf_counter() - wall, time.process_time() - cpu))
    findings = report.findings

    print(
        f"tools: {args.tools:,}  payload: {report.payload_bytes / 1e6:.1f} MB  profiles: {args.profiles}  "
        f"jobs: {args.jobs or 'auto'}  cpus: {os.cpu_count()}"
    )
    print(f"parse JSON: {parsed:.2f} s")
    print(
        "lint wall: " + ", ".join(f"{w:.2f}" for w, _ in runs) + f" s (best {min(w for w, _ in runs):.2f} s; "
        "the first run fills the metaschema cache)"
    )
    print("lint CPU of this process: " + ", ".join(f"{c:.2f}" for _, c in runs) + " s")
    print(
        f"max RSS: {_rss_mb(resource.RUSAGE_SELF):.0f} MB (of which {rss_before:.0f} MB before linting: "
        f"the list and its JSON text); workers: {_rss_mb(resource.RUSAGE_CHILDREN):.0f} MB"
    )
    if not args.no_tracemalloc:
        tracemalloc.start()
        lint_report(tools, profiles=profiles, jobs=1)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"Python heap peak while linting (single process, tracemalloc): {peak / 1e6:.0f} MB")
    print(f"distinct metaschema skeletons validated: {cache_size():,}")
    by_rule = Counter(f.rule for f in findings)
    print(f"findings: {len(findings):,}  " + "  ".join(f"{k}={v}" for k, v in sorted(by_rule.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
