"""Test-only pieces for the egress tests: loopback HTTP(S) servers, a test CA, the testing judge."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ssl
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from ipaddress import IPv4Address, ip_address
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from mcpkit.egress import Denial, EgressPolicy, GuardedClient, StaticResolver, judge_address
from mcpkit.egress.addresses import IPAddress

TEST_LOOPBACK = IPv4Address("127.0.0.1")


def judge_admitting_test_loopback(ip: IPAddress) -> Denial | None:
    """THE TESTING HOOK: the production judge, except that 127.0.0.1 (our own servers) is admitted.

    127.0.0.2 and every other loopback, private or special address stay refused, so tests can
    run a "forbidden" server on 127.0.0.2 and prove nothing ever reaches it.
    """
    if ip == TEST_LOOPBACK:
        return None
    return judge_address(ip)


def loopback_policy(*allow: str, **kwargs: Any) -> EgressPolicy:
    """A policy for loopback tests: the given allowlist and the testing judge."""
    return EgressPolicy(allow=allow or None, address_judge=judge_admitting_test_loopback, **kwargs)


def client_for(server: TestServer, host: str = "api.test", **policy_kwargs: Any) -> GuardedClient:
    """A client allowed to reach `server` as `host` (resolved to 127.0.0.1) and nothing else."""
    policy = loopback_policy(f"{host}:{server.port}", **policy_kwargs)
    return GuardedClient(policy, resolver=StaticResolver({host: ["127.0.0.1"]}))


@dataclass
class Seen:
    """One request a test server received."""

    method: str
    target: str
    headers: dict[str, str]
    body: bytes
    local: tuple[str, int]
    sni: str | None


@dataclass
class Reply:
    """What a test server answers; `stream` writes the body itself (no Content-Length)."""

    status: int = 200
    headers: Sequence[tuple[str, str]] = ()
    body: bytes = b""
    stream: Callable[[asyncio.StreamWriter], Awaitable[None]] | None = None


Handler = Callable[[Seen], Reply | Awaitable[Reply]]


@dataclass
class TestServer:
    """A tiny HTTP/1.1 server on loopback: one request per connection, every request recorded."""

    handler: Handler
    host: str = "127.0.0.1"
    ssl_context: ssl.SSLContext | None = None
    seen: list[Seen] = field(default_factory=list)
    connections: int = 0
    port: int = 0
    _server: asyncio.Server | None = None
    _sni: dict[int, str | None] = field(default_factory=dict)

    __test__ = False

    async def __aenter__(self) -> TestServer:
        if self.ssl_context is not None:
            self.ssl_context.sni_callback = self._on_sni
        self._server = await asyncio.start_server(self._serve, self.host, self.port, ssl=self.ssl_context)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    def _on_sni(self, ssl_object: ssl.SSLObject, name: str | None, ctx: ssl.SSLContext) -> None:
        self._sni[id(ssl_object)] = name

    @property
    def headers(self) -> dict[str, str]:
        """Headers of the last request."""
        return self.seen[-1].headers

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers: dict[str, str] = {}
            for line in lines[1:]:
                if line:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            ssl_object = writer.get_extra_info("ssl_object")
            sni = self._sni.get(id(ssl_object)) if ssl_object is not None else None
            local = writer.get_extra_info("sockname")[:2]
            seen = Seen(method, target, headers, body, local, sni)
            self.seen.append(seen)
            reply = self.handler(seen)
            if not isinstance(reply, Reply):
                reply = await reply
            status_line = f"HTTP/1.1 {reply.status} {_PHRASES.get(reply.status, 'Status')}\r\n"
            out = [status_line, "Connection: close\r\n"]
            out += [f"{k}: {v}\r\n" for k, v in reply.headers]
            if reply.stream is None:
                out.append(f"Content-Length: {len(reply.body)}\r\n")
            writer.write(("".join(out) + "\r\n").encode("latin-1"))
            if reply.stream is None:
                writer.write(reply.body)
            else:
                await reply.stream(writer)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, ssl.SSLError):
                await writer.wait_closed()


_PHRASES = {
    200: "OK",
    204: "No Content",
    301: "Moved Permanently",
    302: "Found",
    303: "See Other",
    307: "Temporary Redirect",
    308: "Permanent Redirect",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


def ok(body: bytes = b"ok", *headers: tuple[str, str]) -> Handler:
    """A handler answering 200 with `body`."""
    return lambda seen: Reply(200, headers, body)


@dataclass
class TestCA:
    """A throwaway CA and a server certificate for some names, for TLS tests on loopback."""

    names: Sequence[str]
    directory: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="mcpkit-ca-")))

    __test__ = False

    def __post_init__(self) -> None:
        now = datetime.datetime.now(datetime.UTC)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mcpkit test CA")])
        ca_cert = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        key = ec.generate_private_key(ec.SECP256R1())
        sans: list[x509.GeneralName] = []
        for name in self.names:
            try:
                sans.append(x509.IPAddress(ip_address(name)))
            except ValueError:
                sans.append(x509.DNSName(name))
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, self.names[0])]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
            )
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        pem = serialization.Encoding.PEM
        (self.directory / "ca.pem").write_bytes(ca_cert.public_bytes(pem))
        (self.directory / "cert.pem").write_bytes(cert.public_bytes(pem))
        (self.directory / "key.pem").write_bytes(
            key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        )

    def server_context(self) -> ssl.SSLContext:
        """A fresh server-side context presenting the certificate."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.directory / "cert.pem", self.directory / "key.pem")
        return ctx

    def client_context(self) -> ssl.SSLContext:
        """A verifying client context that trusts only this CA."""
        return ssl.create_default_context(cafile=str(self.directory / "ca.pem"))
