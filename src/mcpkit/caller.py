"""Who is calling: what the SDK's request context says of the caller, for the call pipeline.

The principal and groups come only from verified credentials (the HTTP auth layer); the identity
that limits and caches count is the principal, else the connection, never a name the client chose.
The principal is kept whole (a Kubernetes service account's subject runs past 128 characters, and
two of them may share their first 128): a key is never cut, only what is shown.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any
from weakref import WeakKeyDictionary

from mcp.server.context import ServerRequestContext

from mcpkit.context import ClientInfo
from mcpkit.transport.gate import CALLER_STATE_KEY

__all__ = ["authenticated_caller", "client_info", "identity_of", "unauthenticated_identity"]

_SHOWN = 128


def identity_of(principal: str) -> str:
    """The key of a principal: itself up to 128 characters, else its start and its full SHA-256
    (longer than 128, so it never equals a short principal's key).

    >>> identity_of("alice")
    'alice'
    >>> a, b = identity_of("x" * 200 + "a"), identity_of("x" * 200 + "b")
    >>> a != b and len(a) > 128
    True
    """
    if len(principal) <= _SHOWN:
        return principal
    return f"{principal[:64]}...sha256:{hashlib.sha256(principal.encode()).hexdigest()}"


def client_info(ctx: ServerRequestContext[Any]) -> ClientInfo | None:
    """The client's name and version from `initialize` (cut to a sane length), when it gave them."""
    params = ctx.session.client_params
    if params is None:
        return None
    info = params.client_info
    return ClientInfo(name=info.name[:128], version=(info.version or "")[:64])


def unauthenticated_identity(ctx: ServerRequestContext[Any]) -> str:
    """Whom limits and caches count without a principal: never a name the client chose.

    Over HTTP the gate's caller key (the connection); otherwise (stdio, in-memory) the SDK's
    per-client connection, since one such connection is one client.
    """
    scope = getattr(ctx.request, "scope", None)
    state = scope.get("state") if isinstance(scope, dict) else None
    key = state.get(CALLER_STATE_KEY) if isinstance(state, dict) else None
    if isinstance(key, str):
        return key
    # `ctx.session` is a per-request proxy; the SDK exposes its connection only as `_connection`.
    connection = getattr(ctx.session, "_connection", ctx.session)
    try:
        return _CONNECTION_KEYS.setdefault(connection, "session:" + os.urandom(8).hex())
    except TypeError:  # not weakly referenceable: the object's id, stable while it lives
        return f"session:{id(connection):x}"


_CONNECTION_KEYS: WeakKeyDictionary[Any, str] = WeakKeyDictionary()


def authenticated_caller(ctx: ServerRequestContext[Any]) -> tuple[str | None, tuple[str, ...]]:
    """The authenticated caller of an HTTP request (set by the auth middleware) and its groups."""
    scope = getattr(ctx.request, "scope", None)
    user = scope.get("user") if isinstance(scope, dict) else None
    if user is None or not getattr(user, "is_authenticated", False):
        return None, ()
    name = getattr(user, "display_name", None) or getattr(user, "username", None)
    claims = getattr(getattr(user, "access_token", None), "claims", None) or {}
    groups = claims.get("groups", ())
    named = tuple(g for g in groups if isinstance(g, str)) if isinstance(groups, list | tuple) else ()
    return (str(name) if name else None), named
