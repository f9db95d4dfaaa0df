"""A declared secret stays out of results and the operator's log however a handler encodes it, and
a secret too short to redact stops start-up (red-team pass 2, items 3 and 13).

Before: a secret percent-encoded into a URL query or JSON-escaped with `\\/` lost only its first
nine characters to `[REDACTED]`; base64 (alone or inside a Basic header) and hex leaked whole;
a 3-character secret was never redacted at all, silently.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import urllib.parse
from collections.abc import Callable

import pytest
from pydantic import BaseModel

from mcpkit import Context, DefinitionError, Server, Tool
from mcpkit.testing import connect
from tests.helpers import dump

pytestmark = pytest.mark.anyio

SECRET = "tok-Sup3r/Secret+Value=42"

ENCODINGS: dict[str, Callable[[str], str]] = {
    "url query": lambda s: "https://api.example.com/v1?" + urllib.parse.urlencode({"key": s}),
    "url path": lambda s: "https://api.example.com/" + urllib.parse.quote(s),
    "lower-case percent": lambda s: re.sub(
        "%[0-9A-F]{2}", lambda m: m[0].lower(), urllib.parse.quote(s, safe="")
    ),
    "json with escaped slashes": lambda s: json.dumps({"k": s}).replace("/", "\\/"),
    "base64": lambda s: base64.b64encode(s.encode()).decode(),
    "url-safe base64": lambda s: base64.urlsafe_b64encode(s.encode()).decode(),
    "basic header": lambda s: "Basic " + base64.b64encode(f"user:{s}".encode()).decode(),
    "basic header, short user": lambda s: "Basic " + base64.b64encode(f"ab:{s}".encode()).decode(),
    "hex": lambda s: s.encode().hex(),
    "upper-case hex": lambda s: s.encode().hex().upper(),
}


class How(BaseModel):
    how: str


async def encode(args: How, ctx: Context) -> str:
    text = ENCODINGS[args.how](ctx.require_secret("API_TOKEN"))
    ctx.log.warning("calling %s", text)
    return text


def _leaks(wire: str, secret: str) -> list[str]:
    """Which encoding of `secret` (or a 10-character run of one) still appears in `wire`."""
    found = []
    for name, spell in ENCODINGS.items():
        spelled = spell(secret)
        core = spelled[-16:-4] if len(spelled) > 20 else spelled
        if core in wire:
            found.append(name)
    if secret in wire:
        found.append("plain")
    return found


async def test_encoded_secrets_are_scrubbed_from_results_and_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    server = Server(
        "encodings",
        tools=[Tool(name="encode", description="Encode.", input=How, handler=encode, secrets=["API_TOKEN"])],
        environ={"API_TOKEN": SECRET},
    )
    async with connect(server) as client:
        results = {how: await client.call_tool("encode", {"how": how}) for how in ENCODINGS}
    leaked = {how: _leaks(dump(result), SECRET) for how, result in results.items()}
    assert not any(leaked.values()), leaked
    assert all("[REDACTED]" in dump(result) for result in results.values())
    # The operator's log goes through the same redactor (its formatter), as a deployment's does.
    text = "\n".join(server.redactor.redact(r.getMessage()) for r in caplog.records)
    assert "calling" in text
    assert _leaks(text, SECRET) == []


async def test_unrelated_text_is_left_alone() -> None:
    """Encoded spellings shorter than 8 characters are not matched: ordinary text keeps its meaning."""
    server = Server(
        "encodings",
        tools=[Tool(name="encode", description="Encode.", input=How, handler=encode, secrets=["API_TOKEN"])],
        environ={"API_TOKEN": "abcd"},
    )
    ordinary = "abc ab-cd YWJjZA== abcd%20 order 4242"
    assert server.redactor.scrub(ordinary) == "abc ab-cd YWJjZA== [REDACTED]%20 order 4242"


@pytest.mark.parametrize("value", ["739", "q7", "9"])
def test_a_secret_too_short_to_redact_stops_start_up(value: str) -> None:
    with pytest.raises(DefinitionError, match=r"DOOR_PIN is \d characters long") as caught:
        Server(
            "door",
            tools=[
                Tool(name="encode", description="Encode.", input=How, handler=encode, secrets=["DOOR_PIN"])
            ],
            environ={"DOOR_PIN": value},
        )
    assert value not in str(caught.value).replace("DOOR_PIN", "")


def test_a_four_character_secret_is_redacted() -> None:
    server = Server(
        "door",
        tools=[Tool(name="encode", description="Encode.", input=How, handler=encode, secrets=["DOOR_PIN"])],
        environ={"DOOR_PIN": "7391"},
    )
    assert server.redactor.scrub({"pin": "7391"}) == {"pin": "[REDACTED]"}
