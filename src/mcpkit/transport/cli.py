"""Command-line serving options every mcpkit server command shares (`--transport`, auth, Redis, limits)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from mcpkit.errors import DefinitionError
from mcpkit.secrets import SECRETS_DIR_ENV
from mcpkit.transport.auth import HttpAuth, JWTVerifier, StaticTokens, load_tokens

if TYPE_CHECKING:
    from mcpkit.server import Server

__all__ = ["add_serving_arguments", "auth_from_args", "serve"]


def add_serving_arguments(parser: argparse.ArgumentParser) -> None:
    """Add `--transport --host --port --stateless --json-response --tokens --jwt-* --max-sessions`, ..."""
    group = parser.add_argument_group("serving")
    group.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    group.add_argument("--host", default="127.0.0.1", help="address to bind (HTTP; default 127.0.0.1)")
    group.add_argument("--port", type=int, default=8000)
    group.add_argument(
        "--stateless", action="store_true", help="no sessions: any replica answers any request"
    )
    group.add_argument("--json-response", action="store_true", help="JSON instead of SSE responses")
    group.add_argument(
        "--allowed-host",
        action="append",
        default=None,
        dest="allowed_hosts",
        help="a Host header value to accept (repeatable; needed when binding 0.0.0.0)",
    )
    group.add_argument("--resource-url", help="this server's public URL (the token audience)")
    group.add_argument("--tokens", help="'principal token [scopes]' lines: a file, or secret:NAME")
    group.add_argument("--jwt-issuer", help="accept JWTs from this issuer")
    group.add_argument("--jwks", help="the issuer's JWKS: a file or an https URL")
    group.add_argument(
        "--jwt-groups-claim", default="groups", metavar="CLAIM", help="the JWT claim listing groups"
    )
    group.add_argument("--required-scope", action="append", default=[], dest="required_scopes")
    group.add_argument(
        "--max-sessions",
        type=int,
        default=1000,
        metavar="N",
        help="open MCP sessions for the whole server (stateful HTTP; default 1000)",
    )
    group.add_argument(
        "--max-sessions-per-client",
        type=int,
        default=16,
        metavar="N",
        help="open MCP sessions per caller: its token's principal, else its connection (default 16)",
    )
    group.add_argument(
        "--metrics",
        action="store_true",
        help="serve Prometheus metrics at GET /metrics on the MCP port, behind the same auth "
        "(HTTP; needs the telemetry extra)",
    )
    group.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        metavar="PORT",
        help="serve GET /metrics without auth on a listener of its own at PORT (for a scraper "
        "without a token), bound to --metrics-host",
    )
    group.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="ADDR",
        help="the address of the --metrics-port listener (default 127.0.0.1)",
    )
    group.add_argument(
        "--forwarded-allow-ips",
        default=None,
        metavar="IPS",
        help="comma-separated proxy addresses or networks whose X-Forwarded-For is believed "
        "(default: none; limits never key on it)",
    )
    group.add_argument(
        "--redis",
        default=os.environ.get("MCPKIT_REDIS_URL"),
        help="share rate limits and cache with other replicas (default $MCPKIT_REDIS_URL)",
    )


def auth_from_args(args: argparse.Namespace, server: Server) -> HttpAuth | None:
    """The HTTP auth the options ask for, or None."""
    if not args.tokens and not args.jwt_issuer:
        return None
    resource = args.resource_url or f"http://{args.host}:{args.port}/mcp"
    if args.tokens and args.jwt_issuer:
        raise DefinitionError("choose --tokens or --jwt-issuer, not both")
    if args.tokens:
        if args.tokens.startswith("secret:"):
            name = args.tokens.removeprefix("secret:")
            text = os.environ.get(name)
            directory = os.environ.get(SECRETS_DIR_ENV)
            if text is None and directory and (Path(directory) / name).is_file():
                text = (Path(directory) / name).read_text(encoding="utf-8")
            if text is None:
                raise DefinitionError(
                    f"--tokens {args.tokens}: no environment variable or secret file {name}"
                )
            verifier = StaticTokens(load_tokens(text, source=args.tokens), resource)
        else:
            verifier = StaticTokens.from_file(args.tokens, resource)
        return HttpAuth(verifier, resource, required_scopes=args.required_scopes)
    if not args.jwks:
        raise DefinitionError("--jwt-issuer needs --jwks")
    jwt_verifier = JWTVerifier(
        issuer=args.jwt_issuer,
        audience=resource,
        jwks=args.jwks,
        egress=server.egress,
        groups_claim=args.jwt_groups_claim,
    )
    return HttpAuth(
        jwt_verifier, resource, authorization_servers=[args.jwt_issuer], required_scopes=args.required_scopes
    )


def serve(server: Server, args: argparse.Namespace) -> int:
    """Serve `server` as the options say; returns the exit code."""
    for option in ("max_sessions", "max_sessions_per_client"):
        if getattr(args, option) < 1:
            raise DefinitionError(f"--{option.replace('_', '-')} must be at least 1")
    if args.metrics_port is not None and not 0 < args.metrics_port < 65536:
        raise DefinitionError("--metrics-port must be a TCP port (1-65535)")
    if (args.metrics or args.metrics_port is not None) and args.transport != "http":
        raise DefinitionError("--metrics and --metrics-port need --transport http")
    if telemetry_wanted(args):
        from mcpkit.telemetry import configure

        configure(server.name, prometheus=args.metrics or args.metrics_port is not None)
    if args.transport == "stdio":
        server.run_stdio()
        return 0
    server.run_http(
        host=args.host,
        port=args.port,
        stateless=args.stateless,
        json_response=args.json_response,
        allowed_hosts=args.allowed_hosts,
        auth=auth_from_args(args, server),
        max_sessions=args.max_sessions,
        max_sessions_per_client=args.max_sessions_per_client,
        metrics=args.metrics,
        metrics_port=args.metrics_port,
        metrics_host=args.metrics_host,
        forwarded_allow_ips=[ip.strip() for ip in (args.forwarded_allow_ips or "").split(",") if ip.strip()]
        or None,
    )
    return 0


def telemetry_wanted(args: argparse.Namespace) -> bool:
    """`--metrics`, `--metrics-port`, or an OTLP endpoint in the standard `OTEL_EXPORTER_OTLP_*ENDPOINT`
    variables."""
    otlp = any(
        os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}ENDPOINT") for signal in ("", "TRACES_", "METRICS_")
    )
    prometheus = bool(getattr(args, "metrics", False)) or getattr(args, "metrics_port", None) is not None
    return prometheus or otlp
