"""Response bodies that decode to nothing are capped by the bytes read, not only by the time limit."""

from __future__ import annotations

import asyncio
import time

import pytest

from mcpkit.egress import GuardedClient, ResponseTooLarge, StaticResolver
from tests.egress.egress_support import Reply, TestServer, loopback_policy

pytestmark = pytest.mark.anyio

GZIP_HEADER = bytes([0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 0xFF])
EMPTY_STORED_BLOCK = bytes([0x00, 0x00, 0x00, 0xFF, 0xFF])  # a non-final stored block of length 0
DEFLATE_HEADER = bytes([0x78, 0x9C])  # zlib wrapper


@pytest.mark.parametrize(
    ("encoding", "header"), [("gzip", GZIP_HEADER), ("deflate", DEFLATE_HEADER)], ids=["gzip", "deflate"]
)
async def test_empty_deflate_blocks_are_capped_by_raw_bytes(encoding: str, header: bytes) -> None:
    sent = 0
    hung_up = asyncio.Event()
    chunk = EMPTY_STORED_BLOCK * 13_107  # 65,535 bytes that decode to nothing

    async def empty_blocks(writer: asyncio.StreamWriter) -> None:  # 400 MB unless the client hangs up
        nonlocal sent
        writer.write(header)
        try:
            for _ in range(6_000):
                writer.write(chunk)
                sent += len(chunk)
                await writer.drain()
        except ConnectionError:
            hung_up.set()

    reply = Reply(200, [("Content-Encoding", encoding)], stream=empty_blocks)
    async with TestServer(lambda s: reply) as api:
        # A generous time limit: only the byte cap can stop this read early.
        policy = loopback_policy(f"api.test:{api.port}", max_bytes=100_000, timeout=60.0)
        started = time.monotonic()
        async with GuardedClient(policy, resolver=StaticResolver({"api.test": ["127.0.0.1"]})) as client:
            with pytest.raises(ResponseTooLarge):
                await client.fetch(f"http://api.test:{api.port}/")
        took = time.monotonic() - started
        await asyncio.wait_for(hung_up.wait(), 10)
    assert took < 20  # stopped by the cap (the time limit is 60 s)
    assert sent < 64 * 2**20  # the client hung up long before 400 MB (kernel buffers aside)
