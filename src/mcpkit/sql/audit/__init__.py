"""The audit log: every call of the SQL server, answered or refused, stored before it runs and before
it answers, in a hash chain an operator can verify.

`CallAudit(AuditLog(open_store(path or dsn)))` records every call of a server built with
`middleware=[calls.stage]` (`build_server(..., calls=calls)` does it); tool handlers add what only
they know (`note`, `noting`). `mcpkit audit` reads it back, exports it and verifies the chain.
"""

__all__ = [
    "KEPT_CHARS",
    "OUTCOMES",
    "SYNC_MODES",
    "TABLE_NAME",
    "Anchor",
    "AuditLog",
    "AuditRecord",
    "AuditStore",
    "AuditUnavailable",
    "CallAudit",
    "open_store",
    "verify_chain",
]

from mcpkit.sql.audit.calls import CallAudit
from mcpkit.sql.audit.chain import Anchor, verify_chain
from mcpkit.sql.audit.log import AuditLog, AuditUnavailable
from mcpkit.sql.audit.record import KEPT_CHARS, OUTCOMES, AuditRecord
from mcpkit.sql.audit.store import SYNC_MODES, TABLE_NAME, AuditStore, open_store
