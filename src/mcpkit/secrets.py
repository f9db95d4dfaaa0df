"""Secrets: read from the environment or a secrets directory, only when declared; known to the redactor."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from mcpkit.errors import DefinitionError, McpkitError, ToolError
from mcpkit.logs import MIN_SECRET_CHARS, Redactor

__all__ = ["SecretNotDeclared", "SecretStore"]

SECRETS_DIR_ENV = "MCPKIT_SECRETS_DIR"


class SecretNotDeclared(McpkitError):
    """A handler asked for a secret neither its tool nor its server declared (an author bug)."""


class SecretStore:
    """The declared secrets of one server, loaded once at start-up.

    A value comes from the environment variable of the same name, else from the file of that name
    in the secrets directory (`secrets_dir`, or `$MCPKIT_SECRETS_DIR`), with one trailing newline
    removed. Every loaded value is registered with the redactor, so it cannot reach a log line or
    the client (nor can its percent, JSON, hex or base64 encodings); a value shorter than
    `MIN_SECRET_CHARS` (4) stops start-up with a `DefinitionError`, since it could not be redacted.
    """

    def __init__(
        self,
        names: Iterable[str],
        *,
        redactor: Redactor,
        secrets_dir: str | Path | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        directory = secrets_dir if secrets_dir is not None else env.get(SECRETS_DIR_ENV)
        self.directory = Path(directory) if directory else None
        self._values: dict[str, str | None] = {}
        for name in names:
            if not name or "/" in name or name.startswith("."):
                raise DefinitionError(f"secret name {name!r} is not a plain name")
            value = env.get(name)
            if value is None and self.directory is not None:
                path = self.directory / name
                if path.is_file():
                    value = path.read_text(encoding="utf-8").removesuffix("\n")
            if value and len(value) < MIN_SECRET_CHARS:
                raise DefinitionError(
                    f"secret {name} is {len(value)} characters long: under {MIN_SECRET_CHARS} it cannot be "
                    "redacted from results and logs without mangling other text; use a longer value"
                )
            self._values[name] = value or None
            if value:
                redactor.add(value)

    @property
    def declared(self) -> frozenset[str]:
        return frozenset(self._values)

    def get(self, name: str, allowed: frozenset[str]) -> str | None:
        """The value of a declared secret, or None when it is not set."""
        if name not in allowed or name not in self._values:
            raise SecretNotDeclared(f"secret {name!r} is not declared by this tool or its server")
        return self._values[name]

    def require(self, name: str, allowed: frozenset[str]) -> str:
        """The value of a declared secret; a model-safe `ToolError` naming it when it is not set."""
        value = self.get(name, allowed)
        if value is None:
            where = f" or in the file {name} of the secrets directory" if self.directory else ""
            raise ToolError(
                f"The secret {name} is not configured; the operator must set the environment variable {name}"
                f"{where} and restart the server."
            )
        return value
