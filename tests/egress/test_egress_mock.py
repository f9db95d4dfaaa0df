"""The egress test seam (`MockEgress`) with the whole policy still applied; operator-allowed private
networks; the `.suffix` allowlist form."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel, Field

from mcpkit import Context, DefinitionError, Server, Tool, ToolError
from mcpkit.egress import EgressPolicy, OAuth2ClientCredentials
from mcpkit.testing import MockEgress, connect
from tests.helpers import dump, text_of

pytestmark = pytest.mark.anyio

API = "orders.acme.internal"
CREDENTIALS = {"ORDERS_CLIENT_ID": "orders-client", "ORDERS_CLIENT_SECRET": "s3cret-client-pw"}


class LookupIn(BaseModel):
    order_id: str = Field(description="e.g. 'ORD-10423'.")
    url: str | None = None


class Order(BaseModel):
    id: str
    status: str


async def lookup_order(args: LookupIn, ctx: Context) -> Any:
    url = args.url or f"https://{API}/v1/orders/{{order_id}}"
    response = await ctx.fetch(url, path_params={"order_id": args.order_id})
    if response.status_code == 404:
        raise ToolError(f"Order {args.order_id} not found.")
    order = Order.model_validate(response.json())
    return {"id": order.id, "status": order.status}


def server(**options: Any) -> Server:
    options.setdefault("egress", [API, "auth.acme.com"])
    return Server(
        "orders",
        tools=[
            Tool(name="lookup_order", description="Look up an order.", input=LookupIn, handler=lookup_order)
        ],
        auth=OAuth2ClientCredentials(
            token_url="https://auth.acme.com/oauth/token",
            client_id_secret="ORDERS_CLIENT_ID",
            client_secret_secret="ORDERS_CLIENT_SECRET",
            api_host=API,
        ),
        environ=CREDENTIALS,
        **options,
    )


def token_endpoint(request: httpx2.Request) -> httpx2.Response:
    assert request.headers["authorization"].startswith("Basic ")
    return httpx2.Response(
        200, json={"access_token": "at-123456789", "expires_in": 3600, "token_type": "Bearer"}
    )


def orders(request: httpx2.Request) -> httpx2.Response:
    order_id = request.url.path.rsplit("/", 1)[-1]
    if order_id == "ORD-404":
        return httpx2.Response(404, json={"error": "no such order"})
    if order_id == "ORD-away":
        return httpx2.Response(302, headers={"location": "https://evil.example.net/steal"})
    if order_id == "ORD-loop":
        return httpx2.Response(302, headers={"location": "http://127.0.0.1/admin"})
    if order_id == "ORD-moved":
        return httpx2.Response(302, headers={"location": "https://cdn.acme.com/orders/ORD-moved"})
    return httpx2.Response(200, json={"id": order_id, "status": "shipped"})


def cdn(request: httpx2.Request) -> httpx2.Response:
    return httpx2.Response(200, json={"id": "ORD-moved", "status": "moved"})


def mock(**resolve: str) -> MockEgress:
    return MockEgress(
        {API: orders, "auth.acme.com": token_endpoint, "cdn.acme.com": cdn, "evil.example.net": orders},
        resolve={k.replace("_", "."): v for k, v in resolve.items()},
    )


def code(result: Any) -> str | None:
    return (result.meta or {}).get("mcpkit/error", {}).get("code")


async def test_handler_and_policy_proven_together() -> None:
    egress = mock()
    srv = server(egress=[API, "auth.acme.com", "cdn.acme.com"])
    async with connect(srv, egress=egress) as client:
        ok = await client.call_tool("lookup_order", {"order_id": "ORD-10423"})
        missing = await client.call_tool("lookup_order", {"order_id": "ORD-404"})
        moved = await client.call_tool("lookup_order", {"order_id": "ORD-moved"})
        away = await client.call_tool("lookup_order", {"order_id": "ORD-away"})
        loop = await client.call_tool("lookup_order", {"order_id": "ORD-loop"})
        off_list = await client.call_tool(
            "lookup_order", {"order_id": "x", "url": "https://evil.example.net/{order_id}"}
        )
    assert ok.structured_content == {"id": "ORD-10423", "status": "shipped"}
    assert text_of(missing) == "TOOL_ERROR: Order ORD-404 not found."
    assert moved.structured_content == {"id": "ORD-moved", "status": "moved"}
    assert code(away) == code(loop) == code(off_list) == "REFUSED"  # redirects and the allowlist still apply
    sent = {(r.url.host, r.url.path): r.headers.get("authorization", "") for r in egress.requests}
    token_calls = [r for r in egress.requests if r.url.host == "auth.acme.com"]
    assert len(token_calls) == 1 and b"grant_type=client_credentials" in token_calls[0].content
    assert sent[(API, "/v1/orders/ORD-10423")] == "Bearer at-123456789"
    assert sent[("cdn.acme.com", "/orders/ORD-moved")] == ""  # the token never follows another origin
    assert ("evil.example.net", "/steal") not in sent
    assert "s3cret-client-pw" not in json.dumps([dump(r) for r in (ok, missing, away)])


async def test_unrouted_hosts_fail_like_unreachable_ones() -> None:
    egress = MockEgress({"auth.acme.com": token_endpoint})
    async with connect(server(), egress=egress) as client:
        result = await client.call_tool("lookup_order", {"order_id": "ORD-1"})
    assert code(result) == "TOOL_ERROR" and (result.meta or {})["mcpkit/error"]["retryable"] is True
    assert egress.unrouted == [API]


async def test_an_internal_name_resolving_to_a_private_address_needs_the_operator() -> None:
    egress = mock(orders_acme_internal="10.1.2.3")
    async with connect(server(), egress=egress) as client:
        refused = await client.call_tool("lookup_order", {"order_id": "ORD-1"})
    assert code(refused) == "REFUSED" and "10.1.2.3" not in dump(refused)
    allowed = server(egress_private=["10.1.0.0/16"])
    async with connect(allowed, egress=mock(orders_acme_internal="10.1.2.3")) as client:
        assert not (await client.call_tool("lookup_order", {"order_id": "ORD-1"})).is_error
    elsewhere = mock(orders_acme_internal="10.2.0.1")
    async with connect(allowed, egress=elsewhere) as client:
        assert code(await client.call_tool("lookup_order", {"order_id": "ORD-1"})) == "REFUSED"
    for inside in ("127.0.0.1", "169.254.169.254", "::1", "192.168.1.1"):
        async with connect(allowed, egress=mock(orders_acme_internal=inside)) as client:
            assert code(await client.call_tool("lookup_order", {"order_id": "ORD-1"})) == "REFUSED", inside


def test_private_networks_are_named_narrowly() -> None:
    policy = EgressPolicy(allow=("db.internal",), private_networks=("10.1.0.0/16", "fd12:3456::/32"))
    assert [str(n) for n in policy.networks] == ["10.1.0.0/16", "fd12:3456::/32"]
    EgressPolicy(allow=("meta.internal",), private_networks=("169.254.169.254/32",))  # named alone: allowed
    for bad, why in [
        ("0.0.0.0/0", "not inside one"),
        ("8.8.8.0/24", "not inside one"),
        ("10.0.0.0/7", "not inside one"),
        ("169.254.0.0/16", "metadata"),
        ("100.100.0.0/16", "metadata"),
        ("10.1.0.1/16", "CIDR"),
        ("intranet", "CIDR"),
    ]:
        with pytest.raises(DefinitionError, match=why):
            EgressPolicy(allow=("x.internal",), private_networks=(bad,))
    with pytest.raises(DefinitionError, match="allowlist"):
        EgressPolicy(private_networks=("10.1.0.0/16",))
    with pytest.raises(DefinitionError, match="not one string"):
        Server("s", tools=server().available_tools(), egress=[API], egress_private="10.1.0.0/16")  # type: ignore[arg-type]


async def test_suffix_entries_allow_subdomains_only() -> None:
    srv = server(egress=[".acme.internal", "auth.acme.com"])  # the form the Server docstring shows
    routes = {"api.acme.internal": orders, "acme.internal": orders, "auth.acme.com": token_endpoint}
    egress = MockEgress(routes)
    async with connect(srv, egress=egress) as client:
        sub = await client.call_tool(
            "lookup_order", {"order_id": "A", "url": "https://api.acme.internal/{order_id}"}
        )
        apex = await client.call_tool(
            "lookup_order", {"order_id": "A", "url": "https://acme.internal/{order_id}"}
        )
    assert not sub.is_error and code(apex) == "REFUSED"
    for bad in (".com", ".10.0.0.1", "."):
        with pytest.raises(DefinitionError, match="allowlist entry"):
            EgressPolicy(allow=(bad,))


# --- access tokens obtained at run time are secrets too -----------------------------------------


@pytest.fixture
def operator_log() -> Iterator[io.StringIO]:
    """Everything the root logger's handlers write while the test runs (redaction goes on them)."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    root.addHandler(handler)
    old = root.level
    root.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(old)


class Mode(BaseModel):
    mode: str


async def careless(args: Mode, ctx: Context) -> Any:
    """Hands back what the API echoed: its own bearer token, in every place a result can carry it."""
    seen = (await ctx.fetch(f"https://{API}/v1/echo")).json()["authorization"]
    ctx.log.info("the API saw %s", seen)
    logging.getLogger("careless").warning("header was %r", seen)
    if args.mode == "error":
        raise ToolError(f"The API refused {seen}.", data={"sent": seen}, expose_data=True)
    if args.mode == "crash":
        raise RuntimeError(f"boom with {seen}")
    return {"sent": seen, "cut": seen[7:20]}


async def test_runtime_access_tokens_never_reach_a_result_or_the_log(operator_log: io.StringIO) -> None:
    minted = iter(["at-first-0123456789", "at-second-0123456789", "at-third-0123456789"])
    rejected: set[str] = set()

    def rotating_token_endpoint(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json={"access_token": next(minted), "expires_in": 3600})

    def echo(request: httpx2.Request) -> httpx2.Response:
        bearer = request.headers.get("authorization", "")
        if request.url.path == "/v1/reject" or bearer.removeprefix("Bearer ") in rejected:
            return httpx2.Response(401)
        return httpx2.Response(200, json={"authorization": bearer})

    srv = Server(
        "careless",
        tools=[Tool(name="careless", description="Echo what the API saw.", input=Mode, handler=careless)],
        egress=[API, "auth.acme.com"],
        auth=OAuth2ClientCredentials(
            token_url="https://auth.acme.com/oauth/token",
            client_id_secret="ORDERS_CLIENT_ID",
            client_secret_secret="ORDERS_CLIENT_SECRET",
            api_host=API,
        ),
        environ=CREDENTIALS,
    )
    notes: list[Any] = []

    async def on_log(params: Any) -> None:
        notes.append(params)

    egress = MockEgress({API: echo, "auth.acme.com": rotating_token_endpoint})
    async with connect(srv, egress=egress, logging_callback=on_log) as client:
        results = [await client.call_tool("careless", {"mode": m}) for m in ("plain", "error", "crash")]
        rejected.add("at-first-0123456789")  # the API rejects the first token: a second one is minted
        results.append(await client.call_tool("careless", {"mode": "plain"}))
    sent = [r.headers.get("authorization") for r in egress.requests if r.url.host == API]
    assert sent[0] == "Bearer at-first-0123456789" and sent[-1] == "Bearer at-second-0123456789"
    wire = json.dumps([dump(r) for r in results]) + json.dumps([str(n) for n in notes])
    log = operator_log.getvalue()
    for token in ("at-first-0123456789", "at-second-0123456789", "at-first-01", "at-second-01"):
        assert token not in wire and token not in log, token
    assert results[0].structured_content == {"sent": "Bearer [REDACTED]", "cut": "[REDACTED]"}
    assert text_of(results[1]) == "TOOL_ERROR: The API refused Bearer [REDACTED]."
    assert (results[2].meta or {})["mcpkit/error"]["code"] == "INTERNAL" and "Traceback" in log
    assert results[3].structured_content == {"sent": "Bearer [REDACTED]", "cut": "[REDACTED]"}


async def test_a_token_source_keeps_the_previous_token_registered_and_drops_older_ones() -> None:
    """A token two mints back has expired or been rejected: the redactor forgets it, so a server
    that runs for months does not grow its redaction pattern without end."""
    from mcpkit.logs import Redactor

    minted = iter(["tok-one-0123456789", "tok-two-0123456789", "tok-three-0123456789"])

    async def send(target: object, headers: httpx2.Headers, body: bytes) -> httpx2.Response:
        return httpx2.Response(200, json={"access_token": next(minted), "expires_in": 3600})

    redactor = Redactor()
    source = OAuth2ClientCredentials(
        token_url="https://auth.acme.com/oauth/token",
        client_id_secret="ID",
        client_secret_secret="SECRET",
        api_host=API,
    ).bind(lambda name: "x")
    source.register_secrets(redactor)
    for _ in range(3):
        source.invalidate(await source.token(send))  # rejected by the API: the next call mints anew
    text = "tok-one-0123456789 tok-two-0123456789 tok-three-0123456789"
    assert redactor.redact(text) == "tok-one-0123456789 [REDACTED] [REDACTED]"


async def test_runtime_access_token_is_scrubbed_over_real_http() -> None:
    """The second red team's break, through the official client over Streamable HTTP: an API that
    echoes request headers handed the tool's bearer token to the client verbatim."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from tests.helpers import free_port, python_server
    from tests.servers.oauth_app import TOKEN

    port = free_port()
    with python_server(["tests/servers/oauth_app.py", str(port)], port) as running:
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(streamable_http_client(url), mode="legacy") as client:
            result = await client.call_tool("echo_headers", {})
        log = running.log()
    assert result.structured_content is not None
    assert result.structured_content["headers"]["authorization"] == "Bearer [REDACTED]"
    assert TOKEN not in dump(result) and TOKEN[:12] not in dump(result)
    assert "the API saw" in log and TOKEN not in log and TOKEN[:12] not in log
