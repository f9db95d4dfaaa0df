"""fetch_json: statuses to errors, malformed JSON and schema mismatches as clear messages."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from mcpkit.egress import (
    BadUpstreamResponse,
    GuardedClient,
    StaticResolver,
    UpstreamError,
    UpstreamStatusError,
)
from tests.egress.egress_support import Reply, TestServer, client_for, loopback_policy, ok

pytestmark = pytest.mark.anyio

RESOLVER = StaticResolver({"api.test": ["127.0.0.1"]})


class Repo(BaseModel):
    name: str
    stars: int


def status(code: int, body: bytes = b'{"message": "upstream says no"}', *headers: tuple[str, str]) -> Reply:
    return Reply(code, [("Content-Type", "application/json"), *headers], body)


@pytest.mark.parametrize(
    ("code", "retryable"),
    [
        (400, False),
        (401, False),
        (403, False),
        (404, False),
        (409, False),
        (422, False),
        (429, True),
        (500, True),
        (502, True),
        (503, True),
        (504, True),
    ],
)
async def test_status_mapping(code: int, retryable: bool) -> None:
    async with TestServer(lambda s: status(code)) as api, client_for(api) as client:
        with pytest.raises(UpstreamStatusError) as caught:
            await client.fetch_json(f"http://api.test:{api.port}/")
    error = caught.value
    assert error.status == code
    assert error.retryable is retryable
    assert error.data["status"] == code
    assert str(code) in error.message
    assert "upstream says no" not in error.message  # bodies are not copied without error_map


async def test_retry_after_is_passed_on() -> None:
    async with TestServer(lambda s: status(429, b"", ("Retry-After", "7"))) as api, client_for(api) as client:
        with pytest.raises(UpstreamStatusError) as caught:
            await client.fetch_json(f"http://api.test:{api.port}/")
    assert caught.value.data["retry_after_s"] == 7


async def test_error_map_surfaces_the_upstream_message() -> None:
    def error_map(response: object) -> str | None:
        return str(json.loads(response.content)["message"])  # type: ignore[attr-defined]

    def broken_map(response: object) -> str | None:
        raise KeyError("boom")

    async with TestServer(lambda s: status(404)) as api, client_for(api) as client:
        with pytest.raises(UpstreamStatusError) as caught:
            await client.fetch_json(f"http://api.test:{api.port}/", error_map=error_map)
        assert "upstream says no" in caught.value.message
        assert not caught.value.retryable
        with pytest.raises(UpstreamStatusError) as caught:
            await client.fetch_json(f"http://api.test:{api.port}/", error_map=broken_map)
        assert "HTTP 404" in caught.value.message


async def test_network_error_is_retryable() -> None:
    async with TestServer(ok()) as api:
        port = api.port
    async with GuardedClient(loopback_policy(f"api.test:{port}"), resolver=RESOLVER) as client:
        with pytest.raises(UpstreamError) as caught:
            await client.fetch_json(f"http://api.test:{port}/")
    assert caught.value.retryable


@pytest.mark.parametrize("body", [b"{not json", b"<html>oops</html>", b'{"a": 1', b"\xff\xfe"])
async def test_malformed_json_is_a_clear_error(body: bytes) -> None:
    async with TestServer(ok(body)) as api, client_for(api) as client:
        with pytest.raises(BadUpstreamResponse) as caught:
            await client.fetch_json(f"http://api.test:{api.port}/")
    assert "not valid JSON" in caught.value.message
    assert not caught.value.retryable


async def test_schema_validates_and_mismatch_names_fields_not_values() -> None:
    replies = iter([b'{"name": "mcpkit", "stars": 5}', b'{"name": "x", "stars": "TOPSECRETVALUE"}'])
    async with TestServer(lambda s: Reply(200, [], next(replies))) as api, client_for(api) as client:
        repo = await client.fetch_json(f"http://api.test:{api.port}/", schema=Repo)
        assert repo == Repo(name="mcpkit", stars=5)
        with pytest.raises(BadUpstreamResponse) as caught:
            await client.fetch_json(f"http://api.test:{api.port}/", schema=Repo)
    assert "stars" in caught.value.message
    assert "TOPSECRETVALUE" not in caught.value.message


async def test_schema_can_be_any_type_and_accept_defaults_to_json() -> None:
    async with TestServer(ok(b"[1, 2, 3]")) as api, client_for(api) as client:
        assert await client.fetch_json(f"http://api.test:{api.port}/", schema=list[int]) == [1, 2, 3]
    assert api.headers["accept"] == "application/json"


async def test_empty_body_is_none() -> None:
    async with TestServer(lambda s: Reply(204)) as api, client_for(api) as client:
        assert await client.fetch_json(f"http://api.test:{api.port}/", method="DELETE") is None
