"""MySQL and MariaDB: every grant the login holds, judged against an allowlist.

What a reader needs passes: USAGE, SELECT and SHOW VIEW on its databases, tables and columns, and
EXECUTE (the DEFINER routine checks in `account` judge what it reaches). Data writes that the
call's READ ONLY transaction refuses (INSERT, UPDATE, DELETE, DELETE HISTORY; a sequence's
NEXTVAL/SETVAL needs INSERT and is refused too, error 1792) are told as writable. Everything else
is refused: DDL, routines, views, events, triggers, temporary tables (MySQL 8 lets a read-only
transaction write them), LOCK TABLES, GRANT OPTION, every administrative, replication and monitor
privilege, anything on the `mysql` or `performance_schema` schemas or on every database at once
(`*.*` includes them), and a privilege name this list does not know (fail closed).

The grants are read from `SHOW GRANTS` as the session is and under each role granted to the login
(`roles.under_each_role`): they hold column grants and grants to PUBLIC, which
`information_schema.*_PRIVILEGES` leave out.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Final

from mcpkit.sql.profiles.base import Finding

__all__ = ["Grant", "judge_grants", "parse_grants"]

_READ: Final = frozenset({"USAGE", "SELECT", "SHOW VIEW", "EXECUTE"})
_DATA_WRITE: Final = frozenset({"INSERT", "UPDATE", "DELETE", "DELETE HISTORY"})
_SYSTEM: Final = ("`mysql`.", "`performance_schema`.")
_WHY: Final[dict[str, str]] = {
    "CREATE": "creates databases and tables",
    "ALTER": "changes tables",
    "DROP": "drops tables and databases",
    "INDEX": "creates and drops indexes",
    "REFERENCES": "declares foreign keys on the tables",
    "CREATE VIEW": "creates views",
    "CREATE ROUTINE": "creates functions and procedures",
    "ALTER ROUTINE": "changes and drops functions and procedures",
    "EVENT": "schedules events",
    "TRIGGER": "creates triggers",
    "CREATE TEMPORARY TABLES": "creates temporary tables (MySQL 8 lets a read-only transaction write them)",
    "LOCK TABLES": "locks tables against other sessions",
    "ALL PRIVILEGES": "holds every privilege on it",
    "PROXY": "acts as another account",
    "ADMIN OPTION": "grants the role to other accounts",
}
_LINE: Final = re.compile(
    r"GRANT (.+?) ON ((?:FUNCTION |PROCEDURE |PACKAGE BODY |PACKAGE )?)"
    r"(\*\.\*|`(?:[^`]|``)+`\.(?:\*|`(?:[^`]|``)+`)) TO (PUBLIC|`(?:[^`]|``)+`(?:@`(?:[^`]|``)*`)?)(.*)$"
)
_PROXY: Final = re.compile(r"GRANT PROXY ON (\S+) TO (\S+)")
# Which granted role a session enables at login: no privilege of its own (the role's lines are read).
_DEFAULT_ROLE: Final = re.compile(
    r"SET DEFAULT ROLE (?:`(?:[^`]|``)+`|NONE) FOR `(?:[^`]|``)+`(?:@`(?:[^`]|``)*`)?$"
)
_ROLES: Final = re.compile(
    r"GRANT ((?:`(?:[^`]|``)+`(?:, )?)+) TO (PUBLIC|`(?:[^`]|``)+`(?:@`(?:[^`]|``)*`)?)( WITH ADMIN OPTION)?$"
)


@dataclass(frozen=True)
class Grant:
    """One privilege from one `SHOW GRANTS` line: `columns` is ` (`a`, `b`)` for a column grant."""

    privilege: str
    columns: str
    kind: str
    on: str
    grantee: str
    grant_option: bool = False

    def revoke(self) -> str:
        """The statement that takes it away."""
        if self.privilege == "ADMIN OPTION":
            return f"REVOKE ADMIN OPTION FOR {self.on} FROM {self.grantee}"
        return f"REVOKE {self.privilege}{self.columns} ON {self.kind}{self.on} FROM {self.grantee}"

    def via(self) -> str:
        """` through role r` / ` through PUBLIC` when the login does not hold it itself."""
        if self.grantee == "PUBLIC":
            return " through PUBLIC"
        return "" if "@" in self.grantee else f" through role {self.grantee}"


def _split(privileges: str) -> list[tuple[str, str]]:
    """`SELECT (`a`, `b`), INSERT` -> privilege names and their column lists.

    >>> _split("SELECT (`a`, `b,c`), DELETE HISTORY")
    [('SELECT', ' (`a`, `b,c`)'), ('DELETE HISTORY', '')]
    """
    out, depth, quoted, start = [], 0, False, 0
    for i, ch in enumerate(privileges + ","):
        if ch == "`":
            quoted = not quoted  # a doubled backquote toggles twice
        elif not quoted and ch in "()":
            depth += 1 if ch == "(" else -1
        elif not quoted and depth == 0 and ch == ",":
            name, _, columns = privileges[start:i].strip().partition("(")
            out.append((name.strip().upper(), f" ({columns}" if columns else ""))
            start = i + 1
    return out


def parse_grants(lines: Sequence[str]) -> tuple[list[Grant], list[str]]:
    """Every privilege the `SHOW GRANTS` lines hold, and the lines that could not be read (each one
    refused: fail closed). Role grants are skipped (their roles' lines are read under them), but
    for their ADMIN OPTION.

    >>> parse_grants(["GRANT SELECT (`a`), UPDATE ON `d`.`t` TO PUBLIC WITH GRANT OPTION"])[0][1]
    Grant(privilege='UPDATE', columns='', kind='', on='`d`.`t`', grantee='PUBLIC', grant_option=True)
    >>> parse_grants(["SET DEFAULT ROLE `r` FOR `u`@`%`"])
    ([], [])
    """
    grants: list[Grant] = []
    unread = []
    for line in dict.fromkeys(lines):  # each role repeats the login's and PUBLIC's lines
        m = _LINE.match(line)
        if m is not None:
            option = "WITH GRANT OPTION" in m[5]
            for name, columns in _split(m[1]):
                grants.append(Grant(name, columns, m[2], m[3], m[4], option))
        elif (p := _PROXY.match(line)) is not None:
            grants.append(Grant("PROXY", "", "", p[1], p[2], "WITH GRANT OPTION" in line))
        elif _DEFAULT_ROLE.match(line):
            continue
        elif (r := _ROLES.match(line)) is not None:
            if r[3]:  # the role is granted WITH ADMIN OPTION: the login may grant it on
                grants += [
                    Grant("ADMIN OPTION", "", "", role, r[2]) for role in re.findall(r"`(?:[^`]|``)+`", r[1])
                ]
        else:
            unread.append(line)
    return grants, unread


def judge_grants(
    lines: Sequence[str], current: str, skip: Collection[str], opt_in: str | None
) -> tuple[list[Finding], list[str]]:
    """Refusals for what a reader must not hold, and the data writes to tell (with their REVOKE).

    Args:
        lines: `SHOW GRANTS` of the session and under each granted role.
        current: CURRENT_USER(), for the messages.
        skip: Global privileges `account` already judges (FILE, SUPER, ...), with their opt-ins.
        opt_in: The opt-in that accepts these findings (`superuser` when the login is one), or None.
    """
    grants, unread = parse_grants(lines)
    found = [
        Finding(
            "mysql:grant",
            f"{current} holds a grant mcpkit cannot read, so it is refused",
            f"revoke what this line grants: {line.split(' IDENTIFIED ')[0]}",
            opt_in,
        )
        for line in unread
    ]
    writable: list[str] = []
    options = dict.fromkeys((g.kind, g.on, g.grantee) for g in grants if g.grant_option)
    for kind, on, grantee in options:
        via = Grant("", "", kind, on, grantee).via()
        found.append(
            Finding(
                "mysql:grant-option",
                f"{current} holds GRANT OPTION on {kind}{on}{via} (it passes its privileges on to others)",
                f"REVOKE GRANT OPTION ON {kind}{on} FROM {grantee}",
                opt_in,
            )
        )
    for g in grants:
        if g.on == "*.*" and g.privilege in skip:
            continue
        system = g.on == "*.*" or g.on.startswith(_SYSTEM)
        if g.privilege == "USAGE" or (g.privilege in _READ and not system):
            continue
        if g.privilege == "EXECUTE" and g.on == "*.*":
            continue  # every routine: the DEFINER routine checks judge what it reaches
        if g.privilege in _DATA_WRITE and not system:
            writable.append(f"{g.privilege}{g.columns} ON {g.kind}{g.on}{g.via()} ({g.revoke()})")
            continue
        if g.on == "*.*":
            why = "reaches every database, the mysql and performance_schema schemas included"
        elif system:
            why = "reaches a system schema: accounts, server state, other sessions' SQL"
        else:
            why = _WHY.get(g.privilege, "is administrative or unknown to mcpkit; a reader does not need it")
        found.append(
            Finding(
                "mysql:privilege",
                f"{current} holds {g.privilege}{g.columns} on {g.kind}{g.on}{g.via()} (it {why})",
                g.revoke(),
                opt_in,
            )
        )
    return found, list(dict.fromkeys(writable))
