"""Capture real servers' `tools/list` into `tests/lint/real/<slug>.json` (a maintainer's tool, not a test).

Each server is installed from its registry beforehand (npm into `NPM_ROOT/<pkg with / and @ as _>`,
PyPI into a venv at `PY_ROOT/<package>`), then started over stdio and listed with the official MCP
SDK client (`mcpkit.lint._remote.fetch_stdio`). Credentials are dummies: a server that needs a real
account or the network to list its tools fails here and is left out. Judgements already recorded in a
file are kept; provenance, tools and instructions are replaced.

    .venv/bin/python tests/lint/real/capture.py [--npm-root /tmp/lc/npm] [--py-root /tmp/lc/py] [SLUG ...]
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent.parent / "src"))

from mcpkit.lint._remote import ServerError, fetch_stdio  # noqa: E402

PG = "postgresql://postgres@127.0.0.1:5432/test"
DUMMY = "dummy-credential-for-listing"


@dataclass
class Spec:
    """How to start one server."""

    slug: str
    registry: str  # "npm" or "pypi"
    package: str
    command: list[str]  # argv[0] is a bin name of the package
    env: dict[str, str] = field(default_factory=dict)


SERVERS = [
    Spec("server-everything", "npm", "@modelcontextprotocol/server-everything", ["mcp-server-everything"]),
    Spec(
        "server-filesystem",
        "npm",
        "@modelcontextprotocol/server-filesystem",
        ["mcp-server-filesystem", "/tmp/lc/files"],
    ),
    Spec("server-memory", "npm", "@modelcontextprotocol/server-memory", ["mcp-server-memory"]),
    Spec(
        "server-sequential-thinking",
        "npm",
        "@modelcontextprotocol/server-sequential-thinking",
        ["mcp-server-sequential-thinking"],
    ),
    Spec(
        "server-github",
        "npm",
        "@modelcontextprotocol/server-github",
        ["mcp-server-github"],
        {"GITHUB_PERSONAL_ACCESS_TOKEN": DUMMY},
    ),
    Spec("server-puppeteer", "npm", "@modelcontextprotocol/server-puppeteer", ["mcp-server-puppeteer"]),
    Spec(
        "server-brave-search",
        "npm",
        "@modelcontextprotocol/server-brave-search",
        ["mcp-server-brave-search"],
        {"BRAVE_API_KEY": DUMMY},
    ),
    Spec(
        "server-slack",
        "npm",
        "@modelcontextprotocol/server-slack",
        ["mcp-server-slack"],
        {"SLACK_BOT_TOKEN": DUMMY, "SLACK_TEAM_ID": "T0"},
    ),
    Spec(
        "server-gitlab",
        "npm",
        "@modelcontextprotocol/server-gitlab",
        ["mcp-server-gitlab"],
        {"GITLAB_PERSONAL_ACCESS_TOKEN": DUMMY},
    ),
    Spec(
        "server-google-maps",
        "npm",
        "@modelcontextprotocol/server-google-maps",
        ["mcp-server-google-maps"],
        {"GOOGLE_MAPS_API_KEY": DUMMY},
    ),
    Spec("server-postgres", "npm", "@modelcontextprotocol/server-postgres", ["mcp-server-postgres", PG]),
    Spec(
        "server-redis",
        "npm",
        "@modelcontextprotocol/server-redis",
        ["mcp-server-redis", "redis://127.0.0.1:6379"],
    ),
    Spec(
        "server-everart",
        "npm",
        "@modelcontextprotocol/server-everart",
        ["mcp-server-everart"],
        {"EVERART_API_KEY": DUMMY},
    ),
    Spec(
        "server-aws-kb-retrieval",
        "npm",
        "@modelcontextprotocol/server-aws-kb-retrieval",
        ["mcp-server-aws-kb-retrieval"],
        {"AWS_ACCESS_KEY_ID": DUMMY, "AWS_SECRET_ACCESS_KEY": DUMMY, "AWS_REGION": "us-east-1"},
    ),
    Spec("playwright-mcp", "npm", "@playwright/mcp", ["mcp-server-playwright"]),
    Spec(
        "notion-mcp-server",
        "npm",
        "@notionhq/notion-mcp-server",
        ["notion-mcp-server"],
        {"NOTION_TOKEN": DUMMY},
    ),
    Spec(
        "sentry-mcp-server",
        "npm",
        "@sentry/mcp-server",
        ["sentry-mcp", "--access-token", DUMMY],
    ),
    Spec(
        "mongodb-mcp-server",
        "npm",
        "mongodb-mcp-server",
        ["mongodb-mcp-server"],
        {"MDB_MCP_TELEMETRY": "disabled", "DO_NOT_TRACK": "1"},
    ),
    Spec("context7-mcp", "npm", "@upstash/context7-mcp", ["context7-mcp"]),
    Spec("firecrawl-mcp", "npm", "firecrawl-mcp", ["firecrawl-mcp"], {"FIRECRAWL_API_KEY": "fc-" + DUMMY}),
    Spec(
        "chrome-devtools-mcp", "npm", "chrome-devtools-mcp", ["chrome-devtools-mcp", "--no-usage-statistics"]
    ),
    Spec("tavily-mcp", "npm", "tavily-mcp", ["tavily-mcp"], {"TAVILY_API_KEY": "tvly-" + DUMMY}),
    Spec("exa-mcp-server", "npm", "exa-mcp-server", ["exa-mcp-server"], {"EXA_API_KEY": DUMMY}),
    Spec("stripe-mcp", "npm", "@stripe/mcp", ["mcp", "--tools=all", "--api-key=sk_test_" + DUMMY]),
    Spec(
        "hubspot-mcp-server",
        "npm",
        "@hubspot/mcp-server",
        ["mcp-server"],
        {"PRIVATE_APP_ACCESS_TOKEN": DUMMY},
    ),
    Spec(
        "figma-developer-mcp",
        "npm",
        "figma-developer-mcp",
        ["figma-developer-mcp", "--stdio", "--figma-api-key=" + DUMMY],
    ),
    Spec(
        "executeautomation-playwright",
        "npm",
        "@executeautomation/playwright-mcp-server",
        ["playwright-mcp-server"],
    ),
    Spec("desktop-commander", "npm", "@wonderwhy-er/desktop-commander", ["desktop-commander"]),
    Spec("mcp-server-kubernetes", "npm", "mcp-server-kubernetes", ["mcp-server-kubernetes"]),
    Spec(
        "mcp-server-mysql",
        "npm",
        "@benborla29/mcp-server-mysql",
        ["mcp-server-mysql"],
        {"MYSQL_HOST": "127.0.0.1", "MYSQL_PORT": "3306", "MYSQL_USER": "root", "MYSQL_DB": "test"},
    ),
    Spec(
        "elasticsearch-mcp",
        "npm",
        "@elastic/mcp-server-elasticsearch",
        ["mcp-server-elasticsearch"],
        {"ES_URL": "http://127.0.0.1:9200", "ES_API_KEY": DUMMY},
    ),
    Spec(
        "apify-actors-mcp", "npm", "@apify/actors-mcp-server", ["actors-mcp-server"], {"APIFY_TOKEN": DUMMY}
    ),
    Spec(
        "airtable-mcp-server",
        "npm",
        "airtable-mcp-server",
        ["airtable-mcp-server"],
        {"AIRTABLE_API_KEY": DUMMY},
    ),
    Spec("heroku-mcp-server", "npm", "@heroku/mcp-server", ["heroku-mcp-server"], {"HEROKU_API_KEY": DUMMY}),
    Spec(
        "supabase-mcp",
        "npm",
        "@supabase/mcp-server-supabase",
        ["mcp-server-supabase", "--access-token=" + DUMMY],
    ),
    Spec("azure-devops-mcp", "npm", "@azure-devops/mcp", ["mcp-server-azuredevops", "contoso"]),
    Spec("antv-chart", "npm", "@antv/mcp-server-chart", ["mcp-server-chart"]),
    Spec(
        "circleci-mcp",
        "npm",
        "@circleci/mcp-server-circleci",
        ["mcp-server-circleci"],
        {"CIRCLECI_TOKEN": DUMMY},
    ),
    Spec(
        "zereight-gitlab",
        "npm",
        "@zereight/mcp-gitlab",
        ["mcp-gitlab"],
        {"GITLAB_PERSONAL_ACCESS_TOKEN": DUMMY, "GITLAB_API_URL": "http://127.0.0.1:9/api/v4"},
    ),
    Spec("cyanheads-git", "npm", "@cyanheads/git-mcp-server", ["git-mcp-server"]),
    Spec(
        "perplexity-mcp",
        "npm",
        "@perplexity-ai/mcp-server",
        ["perplexity-mcp"],
        {"PERPLEXITY_API_KEY": DUMMY},
    ),
    Spec("eslint-mcp", "npm", "@eslint/mcp", ["mcp"]),
    Spec("airbnb-mcp", "npm", "@openbnb/mcp-server-airbnb", ["mcp-server-airbnb"]),
    Spec("mapbox-mcp", "npm", "@mapbox/mcp-server", ["mcp-server"], {"MAPBOX_ACCESS_TOKEN": "pk." + DUMMY}),
    Spec(
        "launchdarkly-mcp",
        "npm",
        "@launchdarkly/mcp-server",
        ["mcp", "start", "--api-key", DUMMY],
    ),
    Spec("task-master-ai", "npm", "task-master-ai", ["task-master-ai"]),
    Spec(
        "browserbase-mcp",
        "npm",
        "@browserbasehq/mcp-server-browserbase",
        ["mcp-server-browserbase"],
        {"BROWSERBASE_API_KEY": DUMMY, "BROWSERBASE_PROJECT_ID": DUMMY},
    ),
    Spec("kubernetes-mcp-server", "npm", "kubernetes-mcp-server", ["kubernetes-mcp-server"]),
    Spec("currents-mcp", "npm", "@currents/mcp", ["mcp"], {"CURRENTS_API_KEY": DUMMY}),
    Spec(
        "atlassian-jira-aashari",
        "npm",
        "@aashari/mcp-server-atlassian-jira",
        ["mcp-atlassian-jira"],
        {
            "ATLASSIAN_SITE_NAME": "example",
            "ATLASSIAN_USER_EMAIL": "a@example.com",
            "ATLASSIAN_API_TOKEN": DUMMY,
        },
    ),
    Spec("mcp-server-fetch", "pypi", "mcp-server-fetch", ["mcp-server-fetch"]),
    Spec("mcp-server-git", "pypi", "mcp-server-git", ["mcp-server-git", "--repository", "/tmp/lc/gitrepo"]),
    Spec("mcp-server-time", "pypi", "mcp-server-time", ["mcp-server-time", "--local-timezone", "UTC"]),
    Spec(
        "mcp-server-sqlite", "pypi", "mcp-server-sqlite", ["mcp-server-sqlite", "--db-path", "/tmp/lc/x.db"]
    ),
    Spec(
        "mcp-server-qdrant",
        "pypi",
        "mcp-server-qdrant",
        ["mcp-server-qdrant"],
        {"QDRANT_LOCAL_PATH": "/tmp/lc/qdrant", "COLLECTION_NAME": "c"},
    ),
    Spec("duckduckgo-mcp-server", "pypi", "duckduckgo-mcp-server", ["duckduckgo-mcp-server"]),
    Spec(
        "arxiv-mcp-server",
        "pypi",
        "arxiv-mcp-server",
        ["arxiv-mcp-server", "--storage-path", "/tmp/lc/arxiv"],
    ),
    Spec(
        "mcp-atlassian",
        "pypi",
        "mcp-atlassian",
        ["mcp-atlassian"],
        {
            "JIRA_URL": "http://127.0.0.1:9",
            "JIRA_USERNAME": "a@example.com",
            "JIRA_API_TOKEN": DUMMY,
            "CONFLUENCE_URL": "http://127.0.0.1:9/wiki",
            "CONFLUENCE_USERNAME": "a@example.com",
            "CONFLUENCE_API_TOKEN": DUMMY,
        },
    ),
    Spec("chroma-mcp", "pypi", "chroma-mcp", ["chroma-mcp", "--client-type", "ephemeral"]),
    Spec(
        "mcp-server-motherduck",
        "pypi",
        "mcp-server-motherduck",
        ["mcp-server-motherduck", "--db-path", ":memory:"],
    ),
    Spec(
        "aws-documentation",
        "pypi",
        "awslabs-aws-documentation-mcp-server",
        ["awslabs.aws-documentation-mcp-server"],
        {"FASTMCP_LOG_LEVEL": "ERROR"},
    ),
    Spec("mcp-clickhouse", "pypi", "mcp-clickhouse", ["mcp-clickhouse"], {"CLICKHOUSE_HOST": "127.0.0.1"}),
    Spec(
        "postgres-mcp",
        "pypi",
        "postgres-mcp",
        ["postgres-mcp", "--access-mode=restricted"],
        {"DATABASE_URI": PG},
    ),
    Spec("excel-mcp-server", "pypi", "excel-mcp-server", ["excel-mcp-server", "stdio"]),
    Spec(
        "dbt-mcp",
        "pypi",
        "dbt-mcp",
        ["dbt-mcp"],
        {"DISABLE_SEMANTIC_LAYER": "true", "DISABLE_DISCOVERY": "true"},
    ),
    Spec("markitdown-mcp", "pypi", "markitdown-mcp", ["markitdown-mcp"]),
    Spec(
        "mcp-neo4j-cypher",
        "pypi",
        "mcp-neo4j-cypher",
        ["mcp-neo4j-cypher"],
        {"NEO4J_URI": "bolt://127.0.0.1:9", "NEO4J_PASSWORD": DUMMY},
    ),
    Spec(
        "basic-memory", "pypi", "basic-memory", ["basic-memory", "mcp"], {"BASIC_MEMORY_HOME": "/tmp/lc/bm"}
    ),
    Spec("mcp-server-calculator", "pypi", "mcp-server-calculator", ["mcp-server-calculator"]),
    Spec("mcp-grafana", "pypi", "mcp-grafana", ["mcp-grafana"], {"GRAFANA_URL": "http://127.0.0.1:9"}),
]


def _npm_dir(root: Path, package: str) -> Path:
    return root / package.replace("/", "_").replace("@", "_")


def _version(spec: Spec, npm_root: Path, py_root: Path) -> tuple[str, Path]:
    if spec.registry == "npm":
        base = _npm_dir(npm_root, spec.package) / "node_modules"
        meta = json.loads((base / spec.package / "package.json").read_text())
        return meta["version"], base / ".bin"
    venv = py_root / spec.package
    out = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            f"import importlib.metadata as m; print(m.version({spec.package!r}))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip(), venv / "bin"


def capture(spec: Spec, npm_root: Path, py_root: Path, timeout: float) -> dict[str, Any]:
    """List one server's tools and return the corpus record (without judgements)."""
    version, bin_dir = _version(spec, npm_root, py_root)
    exe = bin_dir / spec.command[0]
    if not exe.exists() and spec.registry == "npm":  # the package names its bin differently
        meta = json.loads((bin_dir.parent / spec.package / "package.json").read_text())
        declared = meta.get("bin")
        name = next(iter(declared)) if isinstance(declared, dict) else spec.package.split("/")[-1]
        exe = bin_dir / name
    argv = [str(exe), *spec.command[1:]]
    listing = fetch_stdio(argv, env=spec.env, cwd="/tmp/lc", timeout=timeout)
    return {
        "server": spec.slug,
        "provenance": {
            "source": spec.registry,
            "package": spec.package,
            "version": version,
            "command": [exe.name, *(a.replace(DUMMY, "<dummy>") for a in spec.command[1:])],
            "env": sorted(spec.env),
            "taken": datetime.date.today().isoformat(),
            "how": "started over stdio, listed with the official MCP Python SDK client (mcpkit.lint._remote)",
        },
        "serverInfo": listing.server_info,
        "instructions": listing.instructions,
        "tools": listing.tools,
    }


def write(record: dict[str, Any]) -> Path:
    """Write a record, keeping the judgements and known problems an earlier file recorded."""
    path = HERE / f"{record['server']}.json"
    if path.exists():
        old = json.loads(path.read_text(encoding="utf-8"))
        for key in ("judgements", "known"):
            if key in old:
                record[key] = old[key]
    record.setdefault("judgements", [])
    record.setdefault("known", [])
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    """Capture the named servers (all by default); print one line per server."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--npm-root", type=Path, default=Path("/tmp/lc/npm"))
    parser.add_argument("--py-root", type=Path, default=Path("/tmp/lc/py"))
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("slugs", nargs="*")
    args = parser.parse_args(argv)
    for spec in SERVERS:
        if args.slugs and spec.slug not in args.slugs:
            continue
        try:
            record = capture(spec, args.npm_root, args.py_root, args.timeout)
        except (ServerError, OSError, subprocess.CalledProcessError, KeyError, ValueError) as exc:
            print(f"FAIL {spec.slug}: {str(exc)[:300]!r}", flush=True)
            continue
        path = write(record)
        print(f"ok   {spec.slug}: {len(record['tools'])} tools -> {path.name}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
