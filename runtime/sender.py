"""Writing to one attached socket client without ever holding the run's event loop.

A client that stops reading fills its socket's buffer; writing to it from the
event loop then blocks the run, its commands and its ctrl-C for good. A
:class:`Sender` queues what goes to the client and writes it from a thread of
its own, a piece at a time. What a client is owed on attaching (``hello``, the
backlog) goes first, read from what it is given a piece at a time (nothing
copied: the backlog is kept packed), and never counts as the client being
behind. A client that takes more than ``timeout`` seconds to take a write, or
lets more than ``behind`` bytes queue up after that, is dropped (``on_gone``):
the next client to attach gets every event from the worker's backlog, so
nothing is lost.
"""

from __future__ import annotations

import json
import select
import socket
import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from flowtui.runtime import spawn

SEND_TIMEOUT_S = 30.0  # a write the client does not take within this long: it stopped reading
MAX_BEHIND = 64 * 1024 * 1024  # bytes queued since attaching that the client has not taken yet
PIECE = 1024 * 1024  # bytes joined into one write: a backlog of any size is never copied whole


def fitted(data: bytes) -> bytes:
    """``data`` as a client reads it: a reply longer than a line it may read (a value of 70 MB fetched whole)
    refused in its place, saying so. Sent whole, it was more than the client may fall behind by: the client
    was dropped, and its app said the run had ended."""
    ident = spawn.reply_id(data[:64]) if len(data) > spawn.LINE_MAX else None
    if ident is None:
        return data
    error = spawn.too_long_said(len(data), spawn.LINE_MAX, "to an attached client")
    return json.dumps({"type": "reply", "id": ident, "ok": False, "error": error}).encode() + b"\n"


class Sender:
    """``sender(data)`` queues ``data`` for the client, after the lines it is ``owed``; :meth:`finish`
    sends what is queued, then closes; :meth:`abort` closes at once. ``on_gone(why)`` is called once
    when the client is dropped or its connection fails (never after ``finish`` or ``abort``)."""

    def __init__(self, conn: socket.socket, on_gone: Callable[[str], None], owed: Iterable[bytes] = (), *,
                 timeout: float = SEND_TIMEOUT_S, behind: int = MAX_BEHIND) -> None:
        self._conn = conn
        self._on_gone = on_gone
        self._timeout = timeout
        self._behind = behind
        self._owed = iter(owed)  # read by the writer only, before the queue: never counted as behind
        self._owing = True
        self._queue: deque[bytes] = deque()
        self._queued = 0  # bytes queued, not taken yet
        self._wake = threading.Condition()
        self._state = "open"  # open, finishing, closed
        self._thread = threading.Thread(target=self._write, name="flowtui-sender", daemon=True)
        self._thread.start()

    def __call__(self, data: bytes, at_once: bool = False) -> None:
        data = fitted(data)
        with self._wake:
            if self._state != "open":
                return
            self._queue.append(data)
            self._queued += len(data)
            self._wake.notify()
            over = self._queued > self._behind
        if over:
            self._drop(f"it fell {self._queued // (1024 * 1024)} MiB behind")

    def finish(self, wait: float = 0.0) -> None:
        """Send what is queued, then close; ``wait``: for up to that long (the process is ending)."""
        with self._wake:
            if self._state == "open":
                self._state = "finishing"
            self._wake.notify()
        if wait:
            self._thread.join(wait)

    def abort(self) -> None:
        with self._wake:
            self._state = "closed"
            self._queue.clear()
            self._wake.notify()
        close(self._conn)

    def _write(self) -> None:
        while True:
            owed = self._owing and self._owed_piece()
            if owed:
                piece, size = owed, 0  # (owed: never counted in _queued)
            else:
                with self._wake:
                    while not self._queue and self._state == "open":
                        self._wake.wait()
                    if self._state == "closed" or not self._queue:  # aborted, or finished and all sent
                        break
                    piece = [self._queue.popleft()]  # a piece at a time: the socket paces what is taken
                    size = len(piece[0])
                    while self._queue and size < PIECE:
                        piece.append(self._queue.popleft())
                        size += len(piece[-1])
            if self._state == "closed":
                break
            try:
                self._send_all(b"".join(piece))
            except TimeoutError:
                self._drop(f"it took no data for {self._timeout:g} s")
                return
            except (OSError, ValueError):  # ValueError: closed under us (abort)
                self._drop("its connection failed")
                return
            with self._wake:
                self._queued -= size
        close(self._conn)

    def _owed_piece(self) -> list[bytes]:
        """The next piece of what the client is owed (empty: all of it is sent)."""
        piece, size = [], 0
        for line in self._owed:
            piece.append(line)
            size += len(line)
            if size >= PIECE:
                return piece
        self._owing = False
        return piece

    def _send_all(self, data: bytes) -> None:
        """``sendall`` that gives up when the client takes nothing for ``timeout`` seconds (the
        socket itself stays blocking: the listener reads commands from it)."""
        view = memoryview(data)
        while view:
            if not select.select([], [self._conn], [], self._timeout)[1]:
                raise TimeoutError
            try:
                view = view[self._conn.send(view, socket.MSG_DONTWAIT):]
            except BlockingIOError:
                continue

    def _drop(self, why: str) -> None:
        with self._wake:
            if self._state == "closed":  # finished, aborted or dropped already: nobody to tell
                return
            self._state = "closed"
            self._queue.clear()
            self._wake.notify()
        self._on_gone(why)  # first: the hang-up ends the listener's reading, which lets the client go unsaid
        close(self._conn)


def close(conn: socket.socket) -> None:
    """Hang up ``conn`` (both ways first, so a reader on it sees its end)."""
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    conn.close()


class Owed:
    """The replies each attached client is owed for commands answered later (a worker process's
    replies, a token count): its ``detach`` is answered after them, in order, and each goes to the
    client that sent its command, never to the next one to attach. All on the event loop."""

    def __init__(self) -> None:
        self._owed: dict[Any, int] = {}
        self._then: dict[Any, list[Callable[[], None]]] = {}

    def owe(self, sender: Any) -> None:
        self._owed[sender] = self._owed.get(sender, 0) + 1

    def paid(self, sender: Any) -> None:
        left = self._owed[sender] - 1
        if left:
            self._owed[sender] = left
            return
        del self._owed[sender]
        for then in self._then.pop(sender, ()):
            then()

    def then(self, sender: Any, then: Callable[[], None]) -> None:
        """``then()`` once ``sender`` is owed nothing (at once when it is owed nothing now)."""
        if self._owed.get(sender):
            self._then.setdefault(sender, []).append(then)
        else:
            then()
