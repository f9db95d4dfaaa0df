"""The audit log: one record per call of the SQL server, answered or refused, written off the call path.

`CallAudit(AuditLog(open_store(path or dsn))).attach()` records every call of every server in the
process; tool handlers add what only they know (`note`, `noting`). `mcpkit audit` reads it back.
"""

__all__ = [
    "OUTCOMES",
    "TABLE_NAME",
    "AuditLog",
    "AuditRecord",
    "AuditStore",
    "CallAudit",
    "open_store",
]

from mcpkit.sql.audit.calls import CallAudit
from mcpkit.sql.audit.log import AuditLog
from mcpkit.sql.audit.record import OUTCOMES, AuditRecord
from mcpkit.sql.audit.store import TABLE_NAME, AuditStore, open_store
