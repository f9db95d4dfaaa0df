"""Identities: each authenticated principal queries as its own database role, so the database decides.

`--role-map roles.yaml` maps principals (and groups) to roles:

    principals:
      alice@example.com: analyst_emea
    groups:
      amer-team: analyst_amer
    logins:                     # one login per role, user and password from the secrets store
      analyst_emea: {user: EMEA_USER, password: EMEA_PASSWORD}
      analyst_amer: {user: AMER_USER, password: AMER_PASSWORD}

Each role has its own login (`mysql:` is the older name of `logins:`): start-up verifies that no
login is a member of another mapped role (so neither `SET ROLE` nor `set_config('role', ...)`
reaches another principal's rows) and runs the least-privilege and mask checks as every login;
each role's calls run the same checks again while serving (`serving`, `mcpkit.sql.rolecheck`).
With `--allow shared-login` (PostgreSQL) one service account runs `SET LOCAL ROLE "<role>"` per
call instead, and only the function audit and admission stand between SQL and another role (see
docs/security.md). A principal with no role is refused, and so are functions that would run as
someone else (SECURITY DEFINER, or a SET role clause).

`IdentityRouter` answers "which service does this caller get"; the SQL server asks it from its
routing middleware (`mcpkit.sql.routing.SourceRouter.resolve`, on the public pipeline), never from a
tool handler.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import yaml
from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.errors import Refused
from mcpkit.sql.admission import FunctionCatalog
from mcpkit.sql.definers import DefinerCatalog
from mcpkit.sql.engines.described import Remembered
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.profiles import profile_for_dialect
from mcpkit.sql.profiles.base import ROLE_NAME, quote_role
from mcpkit.sql.reverify import all_of
from mcpkit.sql.rolecheck import login_isolation, login_verify, shared_verify, verify_roles
from mcpkit.sql.service import SqlService

if TYPE_CHECKING:
    from mcpkit.context import Context
    from mcpkit.sql.reverify import Verify

__all__ = [
    "DefinerCatalog",
    "IdentityRouter",
    "MysqlLogin",
    "RoleEngine",
    "RoleMap",
    "quote_role",
    "session_setup",
    "verify_roles",
]

log = logging.getLogger("mcpkit.sql")

_UNMAPPED: Final = "This server has no database role for your identity; ask its operator to map one."


def session_setup(dialect: str, role: str) -> str | None:
    """The statement each call's session runs first for `role` (None: the login carries the role).

    >>> session_setup("postgres", "analyst_emea")
    'SET LOCAL ROLE "analyst_emea"'
    """
    return profile_for_dialect(dialect).role_setup(role)


@dataclass(frozen=True)
class MysqlLogin:
    """The names of the secrets holding one role's login: its user and password."""

    user: str
    password: str


@dataclass(frozen=True)
class RoleMap:
    """Principal or group -> database role, from `roles.yaml`.

    >>> m = RoleMap(principals={"alice": "emea"}, groups={"amer-team": "amer"})
    >>> m.role_for("alice"), m.role_for("bob", groups=["amer-team"])
    ('emea', 'amer')
    """

    principals: Mapping[str, str] = field(default_factory=dict)
    groups: Mapping[str, str] = field(default_factory=dict)
    logins: Mapping[str, MysqlLogin] = field(default_factory=dict)

    @property
    def roles(self) -> frozenset[str]:
        """Every role the map can hand out."""
        return frozenset(self.principals.values()) | frozenset(self.groups.values())

    def role_for(self, principal: str | None, groups: Sequence[str] = ()) -> str:
        """The role of a caller: its own mapping first, else exactly one role among its groups.

        Raises:
            Refused: no mapping, or groups that map to different roles (ambiguous: refused).
        """
        if principal is not None and principal in self.principals:
            return self.principals[principal]
        found = {self.groups[g] for g in groups if g in self.groups}
        if len(found) != 1:
            raise Refused(_UNMAPPED, data={"reason": "no_role"}, expose_data=True)
        return found.pop()

    @classmethod
    def from_yaml(cls, path: str | Path) -> RoleMap:
        """Load `roles.yaml`.

        Raises:
            SqlConfigError: unreadable, unknown keys, or a role that is not a plain name (with line).
        """
        try:
            root = yaml.compose(Path(path).read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
        except (OSError, yaml.YAMLError) as exc:
            raise SqlConfigError(f"{path}: cannot read the role map: {exc}") from None
        return cls.parse(root, str(path))

    @classmethod
    def parse(cls, root: Any, source: str = "roles.yaml") -> RoleMap:
        """Build from a composed YAML node (keeps lines for errors)."""
        sections: dict[str, dict[str, Any]] = {"principals": {}, "groups": {}, "logins": {}}
        if root is not None and not isinstance(root, yaml.MappingNode):
            raise SqlConfigError(f"{source}:1: the role map is a mapping with principals: and groups:")
        for key, value in root.value if root is not None else ():
            where = f"{source}:{key.start_mark.line + 1}"
            section = "logins" if key.value == "mysql" else str(key.value)
            if section not in sections or not isinstance(value, yaml.MappingNode):
                raise SqlConfigError(f"{where}: expected principals:, groups: or logins: mappings")
            for k, v in value.value:
                line = f"{source}:{k.start_mark.line + 1}"
                if section == "logins":
                    login = {a.value: b.value for a, b in getattr(v, "value", [])}
                    if set(login) != {"user", "password"}:
                        raise SqlConfigError(f"{line}: give the user and password secret names of {k.value}")
                    sections["logins"][k.value] = MysqlLogin(login["user"], login["password"])
                    continue
                if not isinstance(v, yaml.ScalarNode) or not ROLE_NAME.fullmatch(str(v.value)):
                    raise SqlConfigError(f"{line}: the role of {k.value!r} must be a plain role name")
                sections[section][str(k.value)] = str(v.value)
        return cls(sections["principals"], sections["groups"], sections["logins"])


class RoleEngine(SqlEngine):
    """`SqlEngine` whose every session first runs the role's setup (`SET LOCAL ROLE`), inside the
    call's transaction, on a pool of its own (one role's principals cannot take another's
    connections); the pool's reset (`DISCARD ALL`'s commands) runs before any reuse."""

    def __init__(self, base: SqlEngine, role: str) -> None:
        self.__dict__.update(base.__dict__)
        self._sa = self._new_pool()
        self._described = Remembered()  # what the role's queries return is the role's own
        self.role = role
        self._setup = base.profile.role_setup(role)

    @contextmanager
    def session(
        self, timeout_s: float, call_id: str, *, deferred: bool = False
    ) -> Iterator[tuple[Connection, Any]]:
        """The base session, then the role set inside its read-only transaction (deferred: by the
        caller, which sends `_prelude`, the begin and then the role, ahead of its first statement)."""
        with super().session(timeout_s, call_id, deferred=deferred) as (conn, dbapi):
            if self._setup and not deferred:
                with dbapi.cursor() as cur:
                    cur.execute(self._setup)
            yield conn, dbapi
            undo = getattr(self.profile, "role_undo", None)
            if self._setup and undo and self.guard is not None and self.guard.masks:
                with dbapi.cursor() as cur:  # the fingerprint after the call is read as the one before
                    cur.execute(undo)

    def _prelude(self, conn: Connection, dbapi: Any, timeout_s: float, call_id: str) -> list[str]:
        """The base's begin, then the role's setup."""
        return super()._prelude(conn, dbapi, timeout_s, call_id) + ([self._setup] if self._setup else [])

    def close(self) -> None:
        """Close this role's pooled connections (the base engine keeps its own)."""
        self._sa.dispose()


_WHO: Final = "SELECT current_user"  # MariaDB: user@host of the account the server matched


def _same_identity(role: str, current: str, account: str, seen: Mapping[str, str]) -> str:
    """`current`, the identity `role`'s login authenticated as, unless it is the server's own
    account or another role's (copy-pasted credentials: its principals would read what those may).

    Raises:
        SqlConfigError: the role's login is the server's account or another role's.
    """
    if current == account:
        raise SqlConfigError(
            f"role map: role {role} logs in as the server's own account {current}, so its principals "
            "read what the server's account may: give the role a login of its own"
        )
    for other, identity in seen.items():
        if identity == current:
            raise _one_login(other, role, current)
    return current


def _one_login(first: str, second: str, user: str) -> SqlConfigError:
    return SqlConfigError(
        f"role map: roles {first} and {second} log in as the same user {user}, so each "
        "role's principals read what the other's may: give each role a login of its own"
    )


class IdentityRouter:
    """Per-call services: the caller's role, the template service's limits and policies.

    Args:
        template: The service as configured (its engine logs in as the server's account).
        roles: The role map.
        secret: Looks up a secret by name (the logins); default the environment.
        anonymous: A call without a principal (stdio): "account" runs it as the server's account,
            "refuse" refuses it (HTTP with identities).
        groups_of: The caller's groups; default `ctx.groups` (a JWT's groups claim).
        shared_login: PostgreSQL only: roles without a login are taken on with SET ROLE by the
            server's account (`--allow shared-login`; isolation then rests on the function audit).
    """

    def __init__(
        self,
        template: SqlService,
        roles: RoleMap,
        *,
        secret: Callable[[str], str | None] = os.environ.get,
        anonymous: Literal["account", "refuse"] = "refuse",
        groups_of: Callable[[Context], Sequence[str]] | None = None,
        shared_login: bool = False,
    ) -> None:
        if not isinstance(template.engine, SqlEngine):
            raise SqlConfigError("identities need a database engine")
        self.base: SqlEngine = template.engine
        profile = self.base.profile
        for role in roles.roles:
            profile.role_setup(role)  # validates every role for this database
        missing = sorted(roles.roles - set(roles.logins))
        if missing and not (shared_login and profile.switches_roles):
            raise SqlConfigError(
                f"role map: no login for role {missing[0]!r}: give each role its own login under "
                "logins: (a shared account that switches roles can be made to switch to another's)"
            )
        self.template, self.roles, self.secret = template, roles, secret
        self.anonymous, self.groups_of = anonymous, groups_of
        self.catalog: FunctionCatalog | None = profile.identity_catalog(self.base, template.catalog)
        self._services: dict[str, SqlService] = {}
        self._lock = threading.Lock()
        self._account = ""  # the server's account where roles switch, read by `verify`
        # role -> what its calls verify again while serving (`rolecheck.guard_roles`); None: the base's
        self.serving: Callable[[str], Verify] | None = None

    def _engine(self, role: str) -> SqlEngine:
        engine = self._unguarded(role)
        if self.serving is not None and self.base.guard is not None:
            # each role's calls read their own fingerprint and re-run what start-up verified for it
            engine.guard = self.base.guard.fresh(f"role {role}", self.serving(role))
        return engine

    def _unguarded(self, role: str) -> SqlEngine:
        if role not in self.roles.logins:
            return RoleEngine(self.base, role)  # --allow shared-login (PostgreSQL)
        login = self.roles.logins[role]
        user, password = self.secret(login.user), self.secret(login.password)
        if not user:
            raise SqlConfigError(f"the secret {login.user} (the user of role {role}) is not set")
        return self.base.for_login(user, password or None)  # its own pool, same size

    def isolation(self, role: str) -> Verify | None:
        """What keeps `role`'s calls from another principal's rows, as a while-serving check
        (`mcpkit.sql.rolecheck`; None: nothing to check on this database)."""
        if not self.base.profile.switches_roles:
            return None  # a login per role that cannot switch: no role reaches another's login
        user, others = self._others(role)
        reach = login_verify(role, user, others, self._account or str(self.base.url.username))
        if role in self.roles.logins:
            return reach
        # a shared login: the account's checks, then its SET LOCAL ROLE, then the role's reach
        return all_of(shared_verify(self.roles.roles, self.base.profile.role_setup(role)), reach)

    def _others(self, role: str) -> tuple[str, set[str]]:
        """The user `role`'s calls run as (its login, or the role), and the other principals' ones."""
        users = {r: self._login_user(r) for r in self.roles.roles}
        return users[role], {u for r, u in users.items() if r != role and u != users[role]}

    def role_of(self, principal: str | None, groups: Sequence[str] = ()) -> str | None:
        """The role a caller's calls run as (None: the server's own account, stdio only).

        Raises:
            Refused: the caller has no role.
        """
        if principal is None and not groups and self.anonymous == "account":
            return None
        return self.roles.role_for(principal, groups)

    def groups_for(self, ctx: Context) -> Sequence[str]:
        """The groups that pick a caller's role (`groups_of`, default the token's groups claim)."""
        return self.groups_of(ctx) if self.groups_of is not None else ctx.groups

    def service_for(self, principal: str | None, groups: Sequence[str] = ()) -> SqlService:
        """The service of a caller (refused when it has no role)."""
        role = self.role_of(principal, groups)
        if role is None:
            return self.template
        with self._lock:
            if role not in self._services:
                t = self.template
                self._services[role] = SqlService(
                    self._engine(role),
                    max_rows=t.max_rows,
                    timeout_s=t.timeout_s,
                    functions=t.functions,
                    catalog=self.catalog,
                    max_cost=t.max_cost,
                    masking=t.masking,
                )
            return self._services[role]

    def verify(self, allow: Collection[str] = ()) -> None:
        """Run the start-up least-privilege check as every mapped role (after its SET ROLE, or
        logged in as it), as the server's own account is checked.

        Raises:
            SqlConfigError: a role holds what a reader must not (one line per finding).
        """
        from mcpkit.sql.checks import ensure_safe_account, inspect_account
        from mcpkit.sql.profiles.base import ConnectionBudget

        profile = self.base.profile
        shared: dict[str, str] = {}
        for role in sorted(self.roles.logins):  # one login per principal's role, not one for two
            user = self._login_user(role)
            if user in shared:
                raise _one_login(shared[user], role, user)
            shared[user] = role
        with self.base.session(10.0, "verify-role") as (conn, _):
            account = str(conn.execute(text(_WHO)).scalar())
        who: dict[str, str] = {}
        for role, engine in self.identities():
            if role in self.roles.logins:  # as the server authenticated it, not as the secret spells it
                with engine.session(10.0, "verify-role") as (conn, _):
                    who[role] = _same_identity(role, str(conn.execute(text(_WHO)).scalar()), account, who)
            # a login per principal has a pool of its own (`_engine`): its limit must cover it
            budget = ConnectionBudget(engine.pool_size) if role in self.roles.logins else None
            report = inspect_account(engine, "verify-role", allow, connections=budget)
            ensure_safe_account(report, allow=allow)
            if profile.switches_roles:  # as its login, or as the role after SET ROLE
                user, others = self._others(role)
                with engine.session(10.0, "verify-role") as (conn, _):
                    login_isolation(profile, conn, role, user, others, account, warn=True)
        self._account = account if profile.switches_roles else ""

    def identities(self) -> Iterator[tuple[str, SqlEngine]]:
        """Every mapped role with a fresh engine that runs as it (its login, or the server's account
        after `SET ROLE`), closed when the iteration moves on: for checks at start-up and again
        while serving."""
        for role in sorted(self.roles.roles):
            engine = self._unguarded(role)
            engine.guard = None  # these are the checks: their failures are their own, not refusals
            try:
                yield role, engine
            finally:
                engine.close()

    def _login_user(self, role: str) -> str:
        login = self.roles.logins.get(role)
        return (self.secret(login.user) or role) if login is not None else role

    def for_context(self, ctx: Context) -> SqlService:
        """The service of the caller of a tool call."""
        return self.service_for(ctx.principal, self.groups_for(ctx))

    def close(self) -> None:
        """Close the per-role logins (MySQL); the base engine stays with its owner."""
        with self._lock:
            for service in self._services.values():
                service.engine.close()
            self._services.clear()
