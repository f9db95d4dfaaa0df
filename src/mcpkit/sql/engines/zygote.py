"""A fork server for SQLite workers: one clean interpreter that imported mcpkit once, forked per worker.

A new interpreter per worker spent seconds importing mcpkit (10 s on a loaded 2-core box); forking
the threaded server is unsafe. The zygote is started once per process as a new interpreter (never a
fork), stays single-threaded, and forks a worker for each request, handing it the socket the parent
sent (SCM_RIGHTS); it answers the worker's pid. Children are reaped by the kernel (SIGCHLD ignored).
The zygote ends when the parent's end of its socket closes; a worker dies with the zygote
(`PR_SET_PDEATHSIG`) and ends by itself when its own socket closes.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from typing import Final

__all__ = ["start_worker", "warm"]

_MAIN: Final = "import sys; from mcpkit.sql.engines.zygote import serve; serve(int(sys.argv[1]))"
_PR_SET_PDEATHSIG: Final = 1
_READY_WAIT_S: Final = 120.0  # importing mcpkit took 7-10 s on a loaded 2-core box
_FORK_DATA_MAX: Final = 256 * 1024 * 1024
"""Fork the zygote from this process only while its data segment leaves a worker room under its cap."""


class _Zygote:
    lock = threading.Lock()
    control: socket.socket | None = None
    process: subprocess.Popen[bytes] | None = None
    forked: int | None = None  # the zygote's pid when forked from this process (`_fork`)
    ready = False


def warm() -> None:
    """Start the zygote unless it runs already, and wait until it has imported mcpkit (once per process:
    a call's timing never includes it). A zygote that fails to start is started again by `start_worker`."""
    with _Zygote.lock:
        if not _running():
            _spawn()
        with contextlib.suppress(OSError):
            _ready()


def start_worker(conn: socket.socket) -> int:
    """Fork a worker that serves `conn` (`worker.worker_main`); returns its pid.

    Raises:
        OSError: the zygote could not be started or did not answer.
    """
    with _Zygote.lock:
        for attempt in (1, 2):
            if _Zygote.control is None or not _running():
                _spawn()
            control = _Zygote.control
            assert control is not None
            try:
                _ready()
                socket.send_fds(control, [b"w"], [conn.fileno()])
                answer = b""
                while len(answer) < 4:
                    chunk = control.recv(4 - len(answer))
                    if not chunk:
                        raise OSError("the SQLite worker zygote ended")
                    answer += chunk
                pid: int = struct.unpack("!i", answer)[0]
                return pid
            except OSError:
                _stop()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover


def _running() -> bool:
    """Under the lock: whether the zygote (a new interpreter or a fork) has not ended."""
    if _Zygote.process is not None:
        return _Zygote.process.poll() is None
    if _Zygote.forked is None:
        return False
    try:
        pid, _ = os.waitpid(_Zygote.forked, os.WNOHANG)
    except ChildProcessError:
        pid = _Zygote.forked
    if pid:
        _Zygote.forked = None
    return not pid


def _ready() -> None:
    """Under the lock: wait for the zygote's imports (its first byte) unless seen already."""
    control = _Zygote.control
    if _Zygote.ready or control is None:
        return
    control.settimeout(_READY_WAIT_S)
    if control.recv(1) != b"r":
        raise OSError("the SQLite worker zygote did not start")
    control.settimeout(None)
    _Zygote.ready = True


def _spawn() -> None:
    _stop()
    ours, theirs = socket.socketpair()
    if threading.active_count() == 1 and _data_bytes() < _FORK_DATA_MAX:
        _fork(ours, theirs)
        return
    try:  # stdout stays closed (it may be the MCP stdio channel); stderr is the server's log
        _Zygote.process = subprocess.Popen(  # noqa: S603 (this interpreter, a fixed module)
            [sys.executable, "-P", "-c", _MAIN, str(theirs.fileno())],  # -P: never the working directory
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
    finally:
        theirs.close()
    _Zygote.control, _Zygote.ready = ours, False


def _data_bytes() -> int:
    """This process's data segment (`VmData`, what `RLIMIT_DATA` counts); large when unreadable."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return _FORK_DATA_MAX


def _fork(ours: socket.socket, theirs: socket.socket) -> None:
    """The zygote as a fork of this process, still single-threaded (a server before it serves):
    milliseconds instead of an interpreter's imports. It forgets this process's SQLite heap shares
    and stdio (stdout may be the MCP channel)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover: runs in the zygote process
        try:
            ours.close()
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, 0)
            os.dup2(devnull, 1)
            from mcpkit.sql.profiles import sqlite_heap

            sqlite_heap.forget_all()
            serve(theirs.detach())
        finally:
            os._exit(0)
    theirs.close()
    _Zygote.control, _Zygote.ready, _Zygote.process, _Zygote.forked = ours, False, None, pid


def _stop() -> None:
    if _Zygote.control is not None:
        _Zygote.control.close()  # the zygote ends at EOF
        _Zygote.control = None
    if _Zygote.process is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            _Zygote.process.wait(0.1)
        if _Zygote.process.poll() is None:
            _Zygote.process.kill()
            _Zygote.process.wait(5.0)
        _Zygote.process = None
    if _Zygote.forked is not None:
        pid, _Zygote.forked = _Zygote.forked, None
        for _ in range(10):  # it ends at the EOF above
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0] == 0:
                    time.sleep(0.01)
                    continue
            return
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def serve(fd: int) -> None:  # pragma: no cover: runs in the zygote process
    """The zygote: import what workers need, then fork one per request until the parent goes."""
    from mcpkit.sql.engines import worker

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    control = socket.socket(fileno=fd)
    control.sendall(b"r")
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, 16, 1)
        except OSError:
            return
        if not message or not fds:
            return
        pid = os.fork()
        if pid == 0:
            control.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            with contextlib.suppress(Exception):
                ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            try:
                worker.worker_main(fds[0])
            finally:
                os._exit(0)
        os.close(fds[0])
        control.sendall(struct.pack("!i", pid))
