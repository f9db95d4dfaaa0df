"""MySQL and MariaDB's catalog fingerprint: what a change by an administrator touches (`reverify`)."""

from __future__ import annotations

from typing import Final

__all__ = ["MYSQL_FINGERPRINT"]

MYSQL_FINGERPRINT: Final = (
    "SHOW GRANTS",
    "SELECT CONCAT_WS('/', "
    "(SELECT CONCAT(COUNT(*), ':', COALESCE(MD5(GROUP_CONCAT(CONCAT_WS(',', ROUTINE_SCHEMA, ROUTINE_NAME, "
    "SECURITY_TYPE, DEFINER, LAST_ALTERED, IS_DETERMINISTIC, SQL_DATA_ACCESS) ORDER BY ROUTINE_SCHEMA, "
    "ROUTINE_NAME)), '')) FROM information_schema.ROUTINES), "
    "(SELECT CONCAT(COUNT(*), ':', COALESCE(MD5(GROUP_CONCAT(CONCAT_WS(',', TABLE_SCHEMA, TABLE_NAME, "
    "SECURITY_TYPE, DEFINER) ORDER BY TABLE_SCHEMA, TABLE_NAME)), '')) FROM information_schema.VIEWS), "
    "CURRENT_USER(), CURRENT_ROLE())",
)
"""The account's `SHOW GRANTS`, and the routines (with their SQL SECURITY and last change) and views
it can see."""
