"""A configurable mcpkit server over Streamable HTTP, run as a real subprocess by the serving tests.

python tests/servers/http_app.py PORT [--tokens FILE] [--jwks FILE --issuer ISS --resource URL]
    [--scopes a,b] [--stateless] [--json] [--redis URL] [--name NAME] [--max-body N] [--max-concurrent N]
    [--max-arriving N] [--max-sessions N] [--sessions-per-client N] [--session-idle S]
    [--head-timeout S] [--body-timeout S] [--metrics] [--metrics-port PORT]
    [--forwarded-allow-ips IPS]
"""

from __future__ import annotations

import argparse
import secrets
import time

import anyio
from pydantic import BaseModel, ConfigDict, Field

from mcpkit import Context, Server, Tool
from mcpkit.telemetry import Telemetry
from mcpkit.transport.auth import HttpAuth, JWTVerifier, StaticTokens


class Text(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field("", description="Any text")


class Sleep(BaseModel):
    seconds: float = Field(description="How long to sleep", ge=0, le=30)


class Ratio(BaseModel):
    model_config = ConfigDict(extra="forbid")
    x: float = Field(description="Any number")


async def ratio(args: Ratio, ctx: Context) -> str:
    return f"x={args.x!r}"


async def draft(args: Text, ctx: Context) -> str:
    return f"draft {secrets.token_hex(8)}"  # a fresh value per computation: a cache hit shows


async def echo(args: Text, ctx: Context) -> str:
    return args.text


async def whoami(args: Text, ctx: Context) -> str:
    return ctx.principal or "anonymous"


async def sleep(args: Sleep, ctx: Context) -> str:
    await anyio.sleep(args.seconds)
    return f"slept {args.seconds}"


def block(args: Sleep, ctx: Context) -> str:
    """A sync handler: its thread cannot be stopped once started."""
    time.sleep(args.seconds)
    return f"blocked {args.seconds}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--tokens")
    parser.add_argument("--jwks")
    parser.add_argument("--issuer", default="https://idp.example.com")
    parser.add_argument("--resource")
    parser.add_argument("--scopes", default="")
    parser.add_argument("--stateless", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--redis")
    parser.add_argument("--name", default="http-test")
    parser.add_argument("--limit", type=int)
    parser.add_argument("--max-body", type=int, default=1_048_576)
    parser.add_argument("--max-arriving", type=int, default=64 * 1_048_576)
    parser.add_argument("--max-concurrent", type=int, default=16)
    parser.add_argument("--max-sessions", type=int, default=1000)
    parser.add_argument("--sessions-per-client", type=int, default=16)
    parser.add_argument("--session-idle", type=float, default=1800.0)
    parser.add_argument("--head-timeout", type=float, default=10.0)
    parser.add_argument("--body-timeout", type=float, default=30.0)
    parser.add_argument("--metrics", action="store_true")
    parser.add_argument("--metrics-port", type=int)
    parser.add_argument("--forwarded-allow-ips")
    opts = parser.parse_args()
    resource = opts.resource or f"http://127.0.0.1:{opts.port}/mcp"
    auth = None
    if opts.tokens:
        auth = HttpAuth(
            StaticTokens.from_file(opts.tokens, resource),
            resource,
            required_scopes=[s for s in opts.scopes.split(",") if s],
        )
    elif opts.jwks:
        verifier = JWTVerifier(issuer=opts.issuer, audience=resource, jwks=opts.jwks)
        auth = HttpAuth(
            verifier,
            resource,
            authorization_servers=[opts.issuer],
            required_scopes=[s for s in opts.scopes.split(",") if s],
        )
    server = Server(
        opts.name,
        tools=[
            Tool(
                name="echo",
                description="Echo the text.",
                input=Text,
                handler=echo,
                rate_limit_per_min=opts.limit,
            ),
            Tool(name="whoami", description="The caller's principal.", input=Text, handler=whoami),
            Tool(name="sleep", description="Sleep a while.", input=Sleep, handler=sleep),
            Tool(name="ratio", description="Echo a number.", input=Ratio, handler=ratio),
            Tool(
                name="draft",
                description="This caller's scratch value (cached per caller).",
                input=Text,
                handler=draft,
                cache_ttl_s=300,
            ),
            Tool(name="block", description="Block a thread a while.", input=Sleep, handler=block),
            Tool(
                name="block_deadline",
                description="Block a thread past a 1 s deadline.",
                input=Sleep,
                handler=block,
                timeout_s=1.0,
            ),
        ],
        redis_url=opts.redis,
        middleware=[Telemetry()] if opts.metrics or opts.metrics_port else (),
    )
    server.run_http(
        port=opts.port,
        auth=auth,
        stateless=opts.stateless,
        json_response=opts.json,
        max_body_bytes=opts.max_body,
        max_arriving_body_bytes=opts.max_arriving,
        max_concurrent_per_client=opts.max_concurrent,
        max_sessions=opts.max_sessions,
        max_sessions_per_client=opts.sessions_per_client,
        session_idle_timeout_s=opts.session_idle,
        head_timeout_s=opts.head_timeout,
        body_timeout_s=opts.body_timeout,
        graceful_s=10,
        metrics=opts.metrics,
        metrics_port=opts.metrics_port,
        **({"forwarded_allow_ips": opts.forwarded_allow_ips.split(",")} if opts.forwarded_allow_ips else {}),
    )


if __name__ == "__main__":
    main()
