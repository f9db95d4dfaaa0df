"""The databases a SQL server is given: `--dsn [NAME=]URL` (repeatable), `--sources sources.yaml`,
and which per-database file (`--mask`, `--role-map`, `--reports` as `NAME=FILE`) belongs to which."""

from __future__ import annotations

import argparse
import hashlib
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import yaml
from sqlalchemy.engine import URL, make_url

from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.routing import DEFAULT_SOURCE
from mcpkit.sql.routing import SOURCE_NAME as _SOURCE_NAME

__all__ = [
    "Login",
    "SourceFile",
    "configuration",
    "load_sources",
    "login_of",
    "logins_shared",
    "parse_dsns",
    "per_source",
]

_NAMED: Final = re.compile(r"([A-Za-z][A-Za-z0-9_]{0,31})=(.+)", re.DOTALL)


@dataclass(frozen=True)
class SourceFile:
    """One database of a sources file: its URL and its files (absolute or relative to the cwd)."""

    name: str
    url: str
    mask: str | None = None
    role_map: str | None = None
    reports: str | None = None


def parse_dsns(values: Sequence[str]) -> list[tuple[str, str]]:
    """`--dsn` values as `(source name, URL)`: one plain URL is the source `default`.

    >>> parse_dsns(["postgresql://u@h/db"])
    [('default', 'postgresql://u@h/db')]
    >>> parse_dsns(["sales=postgresql://u@h/db", "events=sqlite:///e.db"])
    [('sales', 'postgresql://u@h/db'), ('events', 'sqlite:///e.db')]

    Raises:
        SqlConfigError: several URLs without names, a bad or repeated name.
    """
    out: list[tuple[str, str]] = []
    for value in values:
        named = _NAMED.fullmatch(value)
        if named is None and len(values) > 1:
            raise SqlConfigError(
                "with several databases, name each one: --dsn NAME=URL (NAME: a letter, then "
                "letters, digits or _)"
            )
        name, url = (named.group(1), named.group(2)) if named else (DEFAULT_SOURCE, value)
        if any(name == n for n, _ in out):
            raise SqlConfigError(f"--dsn: the source name {name!r} is given twice")
        out.append((name, url))
    return out


_SOURCE_KEYS: Final = {"dsn", "dsn_env", "mask", "role_map", "reports"}


def load_sources(path: str | Path, environ: Mapping[str, str] | None = None) -> list[SourceFile]:
    """Read a sources file (`--sources sources.yaml`): one entry per database.

        sources:
          sales:
            dsn_env: SALES_DSN          # the URL from the environment (or dsn: URL)
            mask: sales-masks.yaml      # paths are relative to this file
            role_map: sales-roles.yaml
            reports: sales-reports.yaml
          events:
            dsn: sqlite:///events.db

    Raises:
        SqlConfigError: unreadable, an unknown key, a bad name, no URL (`file:line: ...`).
    """
    env = os.environ if environ is None else environ
    where = Path(path)
    try:
        root = yaml.compose(where.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    except (OSError, yaml.YAMLError) as exc:
        raise SqlConfigError(f"{path}: cannot read the sources file: {exc}") from None
    top = {k.value: v for k, v in root.value} if isinstance(root, yaml.MappingNode) else {}
    listing = top.get("sources")
    if set(top) != {"sources"} or not isinstance(listing, yaml.MappingNode) or not listing.value:
        raise SqlConfigError(f"{path}:1: a sources file is `sources:` with one entry per database")
    out: list[SourceFile] = []
    for key, node in listing.value:
        line = f"{path}:{key.start_mark.line + 1}"
        name = str(key.value)
        if not _SOURCE_NAME.fullmatch(name):
            raise SqlConfigError(f"{line}: source name {name!r}: a letter, then letters, digits or _")
        if any(name == f.name for f in out):
            raise SqlConfigError(f"{line}: source {name} is listed twice")
        if not isinstance(node, yaml.MappingNode):
            raise SqlConfigError(f"{line}: source {name}: give dsn: or dsn_env:, and optional files")
        fields = {str(k.value): v for k, v in node.value}
        unknown = sorted(set(fields) - _SOURCE_KEYS)
        if unknown or any(not isinstance(v, yaml.ScalarNode) for v in fields.values()):
            raise SqlConfigError(
                f"{line}: source {name}: keys are {', '.join(sorted(_SOURCE_KEYS))}, each one value"
                + (f" (not {unknown[0]!r})" if unknown else "")
            )
        values = {k: str(v.value) for k, v in fields.items()}
        if ("dsn" in values) == ("dsn_env" in values):
            raise SqlConfigError(f"{line}: source {name}: give exactly one of dsn: and dsn_env:")
        url = values.get("dsn") or env.get(values["dsn_env"], "")
        if not url:
            raise SqlConfigError(f"{line}: source {name}: the variable {values['dsn_env']} is not set")

        def beside(value: str | None) -> str | None:
            return None if value is None else str(where.parent / value)

        out.append(
            SourceFile(
                name,
                url,
                beside(values.get("mask")),
                beside(values.get("role_map")),
                beside(values.get("reports")),
            )
        )
    return out


def per_source(values: Sequence[str] | None, names: Sequence[str], option: str) -> dict[str, str]:
    """`--mask`/`--role-map`/`--reports` values as source name -> file.

    With one database a plain FILE is its file; with several each value is NAME=FILE.

    Raises:
        SqlConfigError: an unknown source, a file given twice for one, or no name with several.
    """
    out: dict[str, str] = {}
    for value in values or ():
        named = _NAMED.fullmatch(value)
        if named is not None and named.group(1) in names:
            name, path = named.group(1), named.group(2)
        elif len(names) == 1:
            name, path = names[0], value
        else:
            known = ", ".join(names)
            raise SqlConfigError(f"{option} {value}: name the database it is for: SOURCE=FILE ({known})")
        if name in out:
            raise SqlConfigError(f"{option}: source {name} has two files")
        out[name] = path
    return out


Login = tuple[str, str | None, int | None, str | None]


def login_of(url: str | URL) -> Login:
    """(backend, host, port, user): the login a URL connects as, whichever database it names."""
    u = make_url(url)
    return (u.get_backend_name(), u.host, u.port, u.username)


def logins_shared(urls: Sequence[str]) -> Counter[Login]:
    """How many of the URLs log in as each login.

    >>> logins_shared(["mysql://u@h/a", "mysql://u@h/b", "mysql://v@h/a"])[login_of("mysql://u@h/c")]
    2
    """
    return Counter(login_of(url) for url in urls)


def configuration(args: argparse.Namespace) -> list[str]:
    """What, beyond the loaded sources, makes this server's answers differ from another's: the
    masks, role-map and reports files' contents and the row maximum (never a password)."""
    parts = [f"max_rows:{args.max_rows}", f"reports_only:{args.reports_only}"]
    for option in ("mask", "role_map", "reports"):
        for given in getattr(args, option, None) or ():
            source, path = given.split("=", 1) if "=" in given and not Path(given).exists() else ("", given)
            try:
                content = Path(path).read_bytes()
            except OSError:
                content = b""
            # the content, not the path: replicas may keep their files in different places
            parts.append(f"{option}:{source}:{hashlib.sha256(content).hexdigest()}")
    return parts
