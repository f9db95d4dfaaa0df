"""Read a response body under a byte cap, decoding gzip/deflate with bounded output.

The cap applies to the decoded bytes, and no single step produces more than the cap allows, so
a decompression bomb costs at most `max_bytes` of memory: zlib's `max_length` bounds each
call's output. The bytes read off the wire are capped too (at `max_bytes` plus deflate's
worst-case framing): a stream of empty deflate blocks decodes to nothing and would otherwise be
read until the time limit. Reading stops (and the connection is closed) as soon as a cap is passed.
"""

from __future__ import annotations

import zlib

import httpx2

from mcpkit.egress.errors import BadUpstreamResponse, ResponseTooLarge

__all__ = ["read_capped"]

# Compressed data is never much longer than what it decodes to: stored blocks add 5 bytes per
# 64 KiB, gzip 18 bytes of header and trailer. More raw bytes than this over the cap is padding.
_FRAMING_SLACK = 65_536


class _Inflater:
    """Incremental gzip or deflate (zlib-wrapped or raw) decoder with bounded output."""

    def __init__(self, encoding: str) -> None:
        self._gzip = encoding in ("gzip", "x-gzip")
        self._obj = zlib.decompressobj(zlib.MAX_WBITS | 16 if self._gzip else zlib.MAX_WBITS)
        self._first = True

    def feed(self, data: bytes, budget: int) -> bytes:
        """Decode `data` into at most `budget` bytes; the caller treats `budget` bytes as over the cap."""
        try:
            out = self._obj.decompress(data, budget)
        except zlib.error:
            if self._gzip or not self._first:
                raise
            self._obj = zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate, as some servers send
            out = self._obj.decompress(data, budget)
        self._first = False
        return out

    def finish(self, budget: int) -> bytes:
        """Whatever output zlib still holds, at most `budget` bytes."""
        return self._obj.flush(budget)


def _too_large(host: str, max_bytes: int) -> ResponseTooLarge:
    return ResponseTooLarge(f"The response from {host} is larger than the {max_bytes}-byte limit.")


async def read_capped(response: httpx2.Response, max_bytes: int, host: str) -> bytes:
    """Read and decode `response`'s body, refusing past `max_bytes`; always closes the response.

    Args:
        response: A streaming response from the transport.
        max_bytes: The cap on the decoded body.
        host: For messages.

    Returns:
        The decoded body.

    Raises:
        ResponseTooLarge: the body (declared or actual, decoded) is over the cap.
        BadUpstreamResponse: an unsupported or corrupt content encoding.
    """
    try:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            raise _too_large(host, max_bytes)
        encoding = response.headers.get("content-encoding", "identity").strip().lower() or "identity"
        if encoding not in ("identity", "gzip", "x-gzip", "deflate"):
            raise BadUpstreamResponse(f"The response from {host} uses an unsupported content encoding.")
        inflater = None if encoding == "identity" else _Inflater(encoding)
        body = bytearray()
        raw_read, raw_cap = 0, max_bytes + _FRAMING_SLACK
        async for chunk in response.aiter_raw():
            raw_read += len(chunk)
            if raw_read > raw_cap:
                raise _too_large(host, max_bytes)
            budget = max_bytes - len(body) + 1
            try:
                body += chunk if inflater is None else inflater.feed(chunk, budget)
            except zlib.error:
                raise BadUpstreamResponse(
                    f"The response from {host} has a corrupt compressed body."
                ) from None
            if len(body) > max_bytes:
                raise _too_large(host, max_bytes)
        if inflater is not None:
            body += inflater.finish(max_bytes - len(body) + 1)
            if len(body) > max_bytes:
                raise _too_large(host, max_bytes)
        return bytes(body)
    finally:
        await response.aclose()
