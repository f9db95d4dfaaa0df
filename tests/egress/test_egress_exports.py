"""The public surface of `mcpkit.egress` is exactly `__all__`, and every name is documented."""

from __future__ import annotations

import inspect

import mcpkit.egress as egress
from mcpkit.errors import Refused, ToolError


def test_all_is_the_public_surface() -> None:
    public = {name for name in vars(egress) if not name.startswith("_")}
    modules = {name for name, value in vars(egress).items() if inspect.ismodule(value)}
    assert set(egress.__all__) == public - modules
    assert sorted(egress.__all__) == egress.__all__


def test_public_names_have_docstrings() -> None:
    for name in egress.__all__:
        obj = getattr(egress, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), name


def test_error_hierarchy() -> None:
    assert issubclass(egress.EgressDenied, Refused)
    for cls in (
        egress.UpstreamError,
        egress.UpstreamStatusError,
        egress.BadUpstreamResponse,
        egress.ResponseTooLarge,
    ):
        assert issubclass(cls, ToolError)
    assert egress.EgressDenied("x", "m").code == "REFUSED"
