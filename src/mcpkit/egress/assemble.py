"""The egress client a `Server` builds from its options (`egress=`, `egress_private=`, `auth=`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from mcpkit.egress.client import GuardedClient
from mcpkit.egress.oauth2 import OAuth2ClientCredentials
from mcpkit.egress.policy import EgressPolicy
from mcpkit.errors import DefinitionError

__all__ = ["client_for"]


def client_for(
    egress: Sequence[str] | EgressPolicy | GuardedClient | None,
    private: Sequence[str],
    auth: OAuth2ClientCredentials | None,
    secret: Callable[[str], str | None],
) -> GuardedClient:
    """The server's `GuardedClient`: the one given, or one built from the hosts or policy given."""
    if isinstance(egress, GuardedClient):
        if auth is not None or private:
            raise DefinitionError(
                "pass auth= and private networks to your GuardedClient's policy, not to the Server, "
                "when you bring one"
            )
        return egress
    if isinstance(egress, str):
        raise DefinitionError("egress is a list of hosts, not one string")
    if isinstance(private, str):
        raise DefinitionError("egress_private is a list of networks (['10.1.0.0/16']), not one string")
    if isinstance(egress, EgressPolicy):
        policy = replace(egress, private_networks=(*egress.private_networks, *private)) if private else egress
    else:
        policy = EgressPolicy(
            allow=None if egress is None else tuple(egress), private_networks=tuple(private)
        )
    return GuardedClient(policy, auth=auth, secret=secret if auth is not None else None)
