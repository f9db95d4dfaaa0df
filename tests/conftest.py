"""Shared fixtures: real services on this machine, skipped locally and required under CI=true."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
ROOT = Path(__file__).resolve().parent.parent

PG_URL = os.environ.get("MCPKIT_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
MYSQL_URL = os.environ.get("MCPKIT_TEST_MYSQL", "mysql://root@127.0.0.1:3306/test")
REDIS_URL = os.environ.get("MCPKIT_TEST_REDIS", "redis://127.0.0.1:6379/0")

# SQL servers the tests start keep their audit here, not in the user's state directory.
os.environ.setdefault("MCPKIT_AUDIT", str(Path(tempfile.mkdtemp(prefix="mcpkit-test-audit-")) / "audit.db"))
# The shared PostgreSQL has no data limit per backend (it must stay so): the servers the tests start
# accept that (`--allow unbounded-memory`); tests/sql/test_sql_pg_backend_memory.py starts its own
# clusters, limited and not, and clears this for the refusal.
os.environ.setdefault("MCPKIT_SQL_ALLOW", "unbounded-memory")


def need(what: str, reason: str) -> None:
    """Skip with `reason` locally; fail under CI, where every service must be present."""
    message = f"{what} unavailable: {reason}"
    if IN_CI:
        pytest.fail(message + " (CI=true requires it)", pytrace=False)
    pytest.skip(message)


def pg_address() -> tuple[str, int]:
    """The host and port of MCPKIT_TEST_PG (tests that reach the server other than by its URL)."""
    url = urlsplit(PG_URL)
    return url.hostname or "127.0.0.1", url.port or 5432


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def pg_url() -> str:
    """A SQLAlchemy URL for the PostgreSQL `test` database (superuser, trust auth): MCPKIT_TEST_PG, any
    version mcpkit supports (docs/security.md, "Supported PostgreSQL versions")."""
    host, port = pg_address()
    if not _reachable(host, port):
        need("PostgreSQL", f"nothing listens on {host}:{port} (MCPKIT_TEST_PG)")
    return PG_URL


@pytest.fixture(scope="session")
def mysql_url() -> str:
    """A SQLAlchemy URL for the MariaDB `test` database (root, empty password)."""
    if not _reachable("127.0.0.1", 3306):
        need("MariaDB", "nothing listens on 127.0.0.1:3306")
    return MYSQL_URL


@pytest.fixture(scope="session")
def redis_url() -> str:
    """A URL for the local Redis."""
    if not _reachable("127.0.0.1", 6379):
        need("Redis", "nothing listens on 127.0.0.1:6379")
    return REDIS_URL


@pytest.fixture(scope="session")
def npm_bin() -> Path:
    """The `.tools/node_modules/.bin` directory `make npm-tools` fills."""
    bin_dir = ROOT / ".tools" / "node_modules" / ".bin"
    if shutil.which("npm") is None:
        need("npm", "npm is not installed")
    if not (bin_dir / "mcp-inspector").exists() and not (bin_dir / "conformance").exists():
        need("npm tools", "run `make npm-tools` (make test does) to install the Inspector and conformance")
    return bin_dir


@pytest.fixture
def anyio_backend() -> str:
    """Async tests run on asyncio, like the SDK's servers."""
    return "asyncio"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with the servers its fixtures reach (`postgres`, `mysql`).

    `make test` runs the serial tests of PostgreSQL beside the others: a PostgreSQL fingerprint does
    not see MariaDB and the reverse. Only the `alone` ones, which measure the machine, run by themselves.
    """
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if "pg_url" in names:
            item.add_marker(pytest.mark.postgres)
        if "mysql_url" in names:
            item.add_marker(pytest.mark.mysql)
