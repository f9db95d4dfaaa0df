"""URL templates whose path parameters cannot leave their segment, their path prefix or their origin.

`/`, `..`, `?`, `#`, `%2e%2e%2f` and whole URLs in a parameter are percent-encoded whole with
`quote(value, safe="")`; the values `.`, `..` and the empty string are refused outright (they
are dot segments or collapse one). After building, the canonical URL must keep the template's
origin and the path prefix before the first parameter. With a `base_url`, templates must be
relative paths: they are appended under the base path, never resolved against it, so `/admin`
or `//evil.example` cannot override the base.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote

from mcpkit.egress.errors import EgressDenied
from mcpkit.egress.urls import Target, canonicalise
from mcpkit.errors import InvalidParams

__all__ = ["TemplateGuard", "expand_template"]

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_ABSOLUTE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:|^[/\\]{2}")
_DOT_SEGMENTS = frozenset({".", "..", "%2e", "%2e%2e", ".%2e", "%2e."})


@dataclass(frozen=True)
class TemplateGuard:
    """What a URL built from a template must keep: the template's origin and static path prefix."""

    origin: tuple[str, str, int]
    path_prefix: str

    def verify(self, target: Target) -> None:
        """Raise `EgressDenied("template")` when `target` left the origin or the path prefix."""
        path = target.url.raw_path.decode("ascii").split("?", 1)[0]
        if target.origin != self.origin or not path.startswith(self.path_prefix) or _has_dot_segment(path):
            raise EgressDenied("template", "The URL built from the template leaves its base path.")


def _encode(name: str, value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InvalidParams(f"Path parameter {name!r} must be a string or an integer.")
    text = str(value)
    if text in ("", ".", ".."):
        raise InvalidParams(f"Path parameter {name!r} must not be empty, '.' or '..'.")
    return quote(text, safe="")


def _join_base(base_url: str, template: str) -> str:
    if _ABSOLUTE.match(template) or "\\" in template.split("?", 1)[0]:
        raise EgressDenied("template", "With a base URL, the request path must be relative.")
    base = base_url.split("#", 1)[0].split("?", 1)[0]
    return base.rstrip("/") + "/" + template.lstrip("/")


def _has_dot_segment(path: str) -> bool:
    return any(s.lower() in _DOT_SEGMENTS for s in path.split("/"))


def expand_template(
    template: str, path_params: Mapping[str, object] | None, base_url: str | None = None
) -> tuple[str, TemplateGuard | None]:
    """Fill `{name}` placeholders with encoded values and say what the result must keep.

    >>> expand_template("https://api.example/u/{id}", {"id": "../admin"})[0]
    'https://api.example/u/..%2Fadmin'

    Args:
        template: An absolute URL, or a relative path when `base_url` is given; placeholders
            may appear only in the path.
        path_params: Values for every placeholder, and nothing else.
        base_url: Optional base the relative template is appended to.

    Returns:
        (url, guard): `guard` is None when there is nothing to keep (no placeholders, no base).

    Raises:
        InvalidParams: missing, extra or unusable parameter values.
        EgressDenied: `template` when the template itself is unusable.
    """
    if path_params is None and base_url is None:
        return template, None  # a plain URL: braces in it are just characters httpx will encode
    text = template if base_url is None else _join_base(base_url, template)
    cut = min((i for i in (text.find("?"), text.find("#")) if i >= 0), default=len(text))
    path_part, tail = text[:cut], text[cut:]
    names = _PLACEHOLDER.findall(path_part)
    params = dict(path_params or {})
    if _PLACEHOLDER.search(tail):
        raise EgressDenied("template", "URL template placeholders may appear only in the path.")
    if set(names) != set(params):
        missing, extra = sorted(set(names) - set(params)), sorted(set(params) - set(names))
        raise InvalidParams(
            f"Path parameters do not match the URL template (missing {missing}, unexpected {extra})."
        )
    if not names and base_url is None:
        return text, None
    if re.search(r"[{}]", _PLACEHOLDER.sub("", path_part)) or _has_dot_segment(path_part):
        raise EgressDenied("template", "The URL template has stray braces or dot segments.")
    first = _PLACEHOLDER.search(path_part)
    head = path_part if first is None else path_part[: first.start()]
    # `text` starts with the base and has no dot segments, so this prefix includes the base path
    probe = canonicalise(head + "x")
    probe_path = probe.url.raw_path.decode("ascii").split("?", 1)[0]
    if not probe_path.endswith("x"):
        raise EgressDenied("template", "URL template placeholders must be in the path.")
    guard = TemplateGuard(origin=probe.origin, path_prefix=probe_path[:-1])
    filled = _PLACEHOLDER.sub(lambda m: _encode(m.group(1), params[m.group(1)]), path_part)
    return filled + tail, guard
