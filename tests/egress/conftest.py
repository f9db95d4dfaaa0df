"""Fixtures for the egress tests: the anyio backend and a shared test CA."""

from __future__ import annotations

import pytest

from tests.egress.egress_support import TestCA


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def test_ca() -> TestCA:
    """A CA with one server certificate for api.test, token.test and other.test."""
    return TestCA(["api.test", "token.test", "other.test"])
