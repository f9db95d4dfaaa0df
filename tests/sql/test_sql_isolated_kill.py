"""A SQLite worker seen gone is never signalled (review R7): workers are the zygote's children, reaped
at once (SIGCHLD ignored), so the pid of one that died by itself (its data limit, the OOM killer) may
belong to another process by the time the parent notices; only a worker still holding its socket
(nothing to read on ours) is killed."""

from __future__ import annotations

import socket
from multiprocessing.connection import Connection as Pipe

import pytest

from mcpkit.sql.engines import isolated


def _worker(pid: int) -> tuple[isolated._Worker, socket.socket]:
    ours, theirs = socket.socketpair()
    return isolated._Worker(pid, Pipe(ours.detach()), (0, False)), theirs


def test_a_worker_whose_socket_ended_is_closed_not_signalled(monkeypatch: pytest.MonkeyPatch) -> None:
    signalled: list[int] = []
    monkeypatch.setattr(isolated.os, "kill", lambda pid, _sig: signalled.append(pid))
    gone, theirs = _worker(2_000_001)
    theirs.close()  # the worker ended: its end of the socket closed with it
    gone.kill()
    assert signalled == [] and gone.pipe.closed
    running, theirs = _worker(2_000_002)  # still holding its end, nothing said: killed
    running.kill()
    assert signalled == [2_000_002] and running.pipe.closed
    theirs.close()
