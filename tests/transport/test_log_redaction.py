"""A static token reaches no log line, however the line quotes or cuts the text around it.

The red team of issue 12 found two ways past the redactor, which matched whole tokens only: the SQL
server logs a refused query with `%r` (a token with a backslash then reads `tok\\\\en`) and keeps the
first 2000 characters of a query (a token straddling character 2000 appears cut). And uvicorn's own
handlers, created after redaction was installed, wrote to stderr unredacted.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import uvicorn

from mcpkit import Server, Tool
from mcpkit.logs import REDACTED, Redactor
from tests.servers.http_app import Text, echo

TOKENS = [
    "carol-tok\\en-0123456789ab",
    "dave-tok'en-0123456789abc",
    'erin-"tok"-0123456789',
    "plain-0123456789abcdef",
]


@pytest.mark.parametrize("token", TOKENS)
def test_a_secret_is_redacted_quoted_escaped_or_cut(token: str) -> None:
    redactor = Redactor()
    redactor.add(token)
    lines = {
        "verbatim": f"query: SELECT '{token}'",
        "repr": "query: " + repr(f"SELECT '{token}' AS \"x\""),
        "json": json.dumps({"query": f"SELECT '{token}'"}),
        "cut": f"query: SELECT '{token}"[: len("query: SELECT '") + 10],
        "cut repr": ("query: " + repr(f"x {token}"))[: len("query: 'x ") + 12],
    }
    for kind, line in lines.items():
        redacted = redactor.redact(line)
        assert REDACTED in redacted, (kind, line)
        for length in range(8, len(token) + 1):  # no 8 characters of the token survive
            assert token[:length] not in redacted, (kind, redacted)
            assert repr(token)[1 : length + 1] not in redacted, (kind, redacted)


def test_a_short_prefix_or_unrelated_text_is_left_alone() -> None:
    redactor = Redactor()
    redactor.add("plain-0123456789abcdef")
    assert redactor.redact("plain-0 and plain text") == "plain-0 and plain text"  # 7: too short to tell


def test_uvicorns_own_log_handlers_redact(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """run_http serves with uvicorn's log config; what uvicorn logs (an ASGI traceback) is redacted too."""
    token = TOKENS[3]
    server = Server(
        "redact-uvicorn", tools=[Tool(name="echo", description="Echo.", input=Text, handler=echo)]
    )
    server.redactor.add(token)

    def serve(self: uvicorn.Server, *args: Any) -> None:  # what uvicorn would log while serving
        logging.getLogger("uvicorn.error").error("Exception in ASGI application: header %s", token)

    monkeypatch.setattr(uvicorn.Server, "run", serve)
    server.run_http(port=1)
    err = capfd.readouterr().err
    assert "Exception in ASGI application" in err
    assert token not in err
    assert REDACTED in err
