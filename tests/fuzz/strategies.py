"""Hypothesis strategies for malformed and hostile JSON-RPC messages."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

METHODS = [
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "notifications/initialized",
    "resources/list",
    "prompts/get",
    "logging/setLevel",
    "server/discover",
    "completion/complete",
    "notifications/cancelled",
]

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=5,
)
ids = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63),
    st.text(max_size=20),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=1),
)
methods = st.one_of(st.sampled_from(METHODS), st.text(max_size=30), json_values)


@st.composite
def tool_calls(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(
        st.one_of(st.sampled_from(["forecast", "to_fahrenheit", "nope", "", "x" * 300]), st.text(max_size=20))
    )
    arguments = draw(
        st.one_of(
            json_values,
            st.dictionaries(
                st.sampled_from(["city", "days", "celsius", "extra", "__proto__", "constructor"]),
                json_values,
                max_size=4,
            ),
        )
    )
    return {
        "jsonrpc": "2.0",
        "id": draw(st.integers(0, 2**31)),
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


@st.composite
def shaped(draw: st.DrawFn) -> dict[str, Any]:
    msg: dict[str, Any] = {}
    if draw(st.booleans()):
        msg["jsonrpc"] = draw(st.one_of(st.just("2.0"), json_values))
    if draw(st.booleans()):
        msg["id"] = draw(ids)
    if draw(st.integers(0, 9)):
        msg["method"] = draw(methods)
    if draw(st.booleans()):
        msg["params"] = draw(json_values)
    if draw(st.integers(0, 5)) == 0:
        msg[draw(st.sampled_from(["result", "error", "extra"]))] = draw(json_values)
    return msg


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


huge_string = st.integers(10_000, 400_000).map(
    lambda n: json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "forecast", "arguments": {"city": "A" * n}},
        }
    )
)
deep = st.integers(100, 20_000).map(
    lambda d: '{"jsonrpc":"2.0","id":1,"method":"ping","params":' + nested(d) + "}"
)
broken = st.one_of(
    st.text(max_size=200).filter(lambda t: "\n" not in t and "\r" not in t),
    st.binary(max_size=200)
    .map(lambda b: b.decode("latin-1"))
    .filter(lambda t: "\n" not in t and "\r" not in t),
    st.sampled_from(
        [
            '{"jsonrpc": "2.0", "id": 1, "method": "ping"',
            "{",
            "[",
            '"',
            "nul",
            "[1,]",
            "{}{}",
            '{"jsonrpc":"2.0","id":1,"method":"ping"}garbage',
            "\ufeff{}",
            "[]",
        ]
    ),
)


def as_line(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


messages = st.one_of(
    shaped().map(as_line),
    tool_calls().map(as_line),
    st.lists(shaped(), min_size=0, max_size=4).map(as_line),  # batches (removed from the spec in 2025-06-18)
    broken,
    huge_string,
    deep,
)
