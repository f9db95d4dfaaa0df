"""sqlite-vec on a SQLite connection: the extension is loaded through the C API only, never by SQL.

The `sqlite-vec` wheel ships the loadable extension (`vec0`). CPython's `sqlite3` offers
`enable_load_extension` only when it was built with `--enable-loadable-sqlite-extensions`, which
many builds (pyenv's default among them) are not; the SQLite library itself supports loading. So,
where the method is missing, the extension is loaded with ctypes through the library the `_sqlite3`
module links: `sqlite3_db_config(SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION)` turns on loading for the C
API only (the SQL function `load_extension()` stays off), `sqlite3_load_extension` loads the file,
and loading is turned off again before the connection serves any statement. Either way the
authorizer also refuses `load_extension` (it is on the never list).
"""

from __future__ import annotations

import ctypes
import sqlite3
import sys
from functools import cache
from typing import Any, Final

from mcpkit.sql.errors import SqlConfigError

__all__ = ["load_sqlite_vec", "sqlite_vec_path"]

_ENABLE_LOAD_EXTENSION: Final = 1005  # SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION


def sqlite_vec_path() -> str:
    """The loadable extension the pinned `sqlite-vec` wheel ships.

    Raises:
        SqlConfigError: the package is not installed.
    """
    try:
        import sqlite_vec
    except ImportError:  # pragma: no cover - a dependency of mcpkit
        raise SqlConfigError("similar_rows on SQLite needs the sqlite-vec package") from None
    return str(sqlite_vec.loadable_path())


@cache
def _library() -> Any:
    import _sqlite3

    lib = ctypes.CDLL(_sqlite3.__file__)  # resolves the symbols of the libsqlite3 it links
    lib.sqlite3_db_config.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    lib.sqlite3_db_config.restype = ctypes.c_int
    lib.sqlite3_load_extension.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.POINTER(ctypes.c_char_p),
    ]
    lib.sqlite3_load_extension.restype = ctypes.c_int
    lib.sqlite3_free.argtypes = [ctypes.c_void_p]
    return lib


def _handle(conn: sqlite3.Connection) -> int:
    # CPython's pysqlite_Connection starts with `sqlite3 *db` right after the object header
    # (3.8 to 3.14); nothing else exposes it before 3.15.
    if sys.implementation.name != "cpython":
        raise SqlConfigError("loading sqlite-vec needs CPython or a sqlite3 module with load_extension")
    handle = ctypes.c_void_p.from_address(id(conn) + object.__basicsize__).value
    if not handle:
        raise SqlConfigError("the SQLite connection is closed")
    return handle


def load_sqlite_vec(conn: sqlite3.Connection) -> None:
    """Load sqlite-vec into `conn`, leaving extension loading off afterwards.

    Raises:
        SqlConfigError: the extension could not be loaded.
    """
    path = sqlite_vec_path()
    if hasattr(conn, "enable_load_extension"):
        conn.enable_load_extension(True)
        try:
            conn.load_extension(path)
        except sqlite3.Error as exc:
            raise SqlConfigError(f"sqlite-vec could not be loaded: {exc}") from None
        finally:
            conn.enable_load_extension(False)
        return
    lib, db = _library(), _handle(conn)
    if lib.sqlite3_db_config(db, _ENABLE_LOAD_EXTENSION, 1, None) != 0:
        raise SqlConfigError("this SQLite library refuses to load extensions")
    error = ctypes.c_char_p()
    try:
        rc = lib.sqlite3_load_extension(db, path.encode(), None, ctypes.byref(error))
    finally:
        lib.sqlite3_db_config(db, _ENABLE_LOAD_EXTENSION, 0, None)
    if rc != 0:
        detail = (error.value or b"").decode(errors="replace")
        if error.value is not None:
            lib.sqlite3_free(ctypes.cast(error, ctypes.c_void_p))
        raise SqlConfigError(f"sqlite-vec could not be loaded: {detail or rc}")
