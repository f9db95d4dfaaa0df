"""How MariaDB compares routine names: by `utf8mb3_general_ci`, case- AND accent-blind (red team rt34 F6).

`mysql.proc.name` and the routine lookup use that collation, so `rt34_t\u0131ck(x)` (dotless i),
`rt34_tíck` and `rt34_t\u0130ck` all call the stored `rt34_tick`, while Python's casefold keeps them
apart; `ß` and the long s (U+017F) weigh as `S`. Masking therefore keys each stored function by the
server's own weight of its name (`WEIGHT_STRING`, one UCS-2 weight a character), so an ASCII call
names it as MariaDB would, and a call whose name is not ASCII counts as a per-row one whatever it
names (`Profile.accent_blind_routines`). An ASCII name weighs as its upper case: no query for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

__all__ = ["mysql_routine_keys"]

_WEIGHT: Final = "SELECT WEIGHT_STRING(CONVERT(:name USING utf8mb3) COLLATE utf8mb3_general_ci)"


def mysql_routine_keys(conn: Connection, names: Iterable[str]) -> frozenset[str]:
    """The case-folded spellings an ASCII call may name each of `names` by: the name and, for one
    that is not ASCII, the server's weight of it read back as text (`tíck` -> `tick`)."""
    out: set[str] = set()
    for name in names:
        out.add(name.casefold())
        if not name.isascii():
            weight = conn.execute(text(_WEIGHT), {"name": name}).scalar()
            if isinstance(weight, bytes | bytearray) and len(weight) % 2 == 0:
                out.add(bytes(weight).decode("utf-16-be", errors="replace").casefold())
    return frozenset(out)
