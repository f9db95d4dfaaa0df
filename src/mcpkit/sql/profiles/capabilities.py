"""What else a profile answers for the modules around the engine: the generic behaviour.

`Profile` inherits these (`base.py` holds the session, verification, catalog and cost); an
engine's profile overrides the ones its database does differently. Callers ask the profile
instead of testing a dialect name.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from mcpkit.sql.clipping import Clipping

__all__ = ["Capabilities"]


class Capabilities:
    """The generic answers: nothing to undo, no clipping in SQL, no role switching, no vectors."""

    # --- re-verification ----------------------------------------------------------------

    @contextmanager
    def undone(self, conn: Connection) -> Iterator[None]:
        """Run a block (the re-verification inside a call's session) whose session changes are
        undone after, so none reaches the call's SQL. Generic: the checks change nothing."""
        yield

    # --- clipping -------------------------------------------------------------------------

    def clipping(self) -> Clipping | None:
        """How cells are clipped inside the SQL sent (`mcpkit.sql.clipping`); None: not known here."""
        return None
