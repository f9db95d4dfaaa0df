"""An mcpkit server over Streamable HTTP whose egress uses OAuth2 client credentials, answered in process.

python tests/servers/oauth_app.py PORT

The token endpoint mints `TOKEN`; the API echoes the request's headers back (as httpbin's /headers
does), so a careless tool hands its own bearer token to the client unless mcpkit scrubs it.
"""

from __future__ import annotations

import logging
import sys

import httpx2

from mcpkit import Context, Server, tool
from mcpkit.egress import OAuth2ClientCredentials
from mcpkit.testing import MockEgress

TOKEN = "oauth-access-Tok3n-0123456789abcdef"


def token_endpoint(request: httpx2.Request) -> httpx2.Response:
    return httpx2.Response(200, json={"access_token": TOKEN, "token_type": "Bearer", "expires_in": 3600})


def api(request: httpx2.Request) -> httpx2.Response:
    return httpx2.Response(200, json={"headers": dict(request.headers)})


@tool
async def echo_headers(ctx: Context) -> dict[str, object]:
    """Call the API and return what it saw."""
    seen = await ctx.fetch_json("https://api.example.com/headers")
    logging.getLogger("oauth_app").warning("the API saw %s", seen)
    return dict(seen)


def main() -> None:
    server = Server(
        "oauth",
        tools=[echo_headers],
        auth=OAuth2ClientCredentials(
            token_url="https://auth.example.com/token",
            client_id_secret="CLIENT_ID",
            client_secret_secret="CLIENT_SECRET",
            api_host="api.example.com",
        ),
        environ={"CLIENT_ID": "client-id-123456", "CLIENT_SECRET": "client-secret-abcdef123"},
    )
    egress = MockEgress({"auth.example.com": token_endpoint, "api.example.com": api})
    with egress.installed(server.egress):
        server.run_http(port=int(sys.argv[1]))


if __name__ == "__main__":
    main()
