"""Serving a run on a socket, so ``flowtui attach`` (or any client of the protocol) can drive it.

    flowtui run flows/revisao.py --listen 127.0.0.1:0       # prints: listening on 127.0.0.1:PORT, the token
    flowtui attach 127.0.0.1:PORT --token TOKEN              # the app, on that run
    await app.run(input=..., listen="127.0.0.1:0")           # a flow inside a service, attachable

The run starts paused and waits for a client. A client's first line must be
``auth`` with the token (compared in constant time); a wrong one is answered
``token rejected`` and the connection closed, and the run keeps waiting. Wrong
ones are counted on stderr. A token given (``--token``, ``FLOWTUI_TOKEN``) is
checked one at a time, a quarter second apart after a wrong one, so a weak one is
not guessed at a thousand tries a second; the random one made here cannot be
guessed at any rate, so it is checked at once: no flood of wrong ones keeps its
client out. Before
``auth`` a connection gets little: its first line may be 64 KiB at most, it
must arrive within ``auth_timeout`` seconds all told, and at most
``max_pending`` connections wait for theirs (one more lets the oldest go, so
connections that send nothing cannot keep a client out); each refusal says why
and closes the connection. After it, a command
line may be ``max_line`` bytes (64 MiB): a longer one is answered with why,
read on without being kept, and the connection goes on. What goes to the
client is written by a thread of its own (:mod:`runtime.sender`): a client
that stops reading never holds the run, and is detached. One
client at a time; on attaching it receives ``hello`` and every event so far,
then the events as they happen, and drives the run like the app drives its
own worker. When it detaches (``detach``, or the connection drops) the run
pauses at its next pause point and waits for the next client.

What is served is a worker's protocol: for ``flowtui run --listen``, a worker
process of the run's own, through :class:`~flowtui.runtime.relay.Relay` (the
flow never runs in the serving process, so it cannot hold it); for
``app.run(listen=...)``, the run in the caller's own process.

Listening on anything but loopback needs ``public=True`` (``--listen-public``)
and is warned about: the token is the only thing between the network and the
flow's process.
"""

from __future__ import annotations

import asyncio
import errno
import hmac
import ipaddress
import json
import itertools
import secrets
import shlex
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from flowtui.runtime import protocol as p
from flowtui.runtime.errors import ConfigError
from flowtui.runtime.linestore import Lines
from flowtui.runtime.sender import Sender
from flowtui.runtime.sender import close as _close

AUTH_TIMEOUT_S = 10.0  # from connecting to a valid ``auth`` line, all told
MAX_FIRST_LINE = 64 * 1024  # bytes: the ``auth`` line is short; a longer one is refused unread
MIN_TOKEN = 16  # characters: a shorter token given with --token is warned about
MAX_PENDING = 16  # connections waiting to authenticate; one more lets the oldest go
MAX_QUEUED = 64  # a client's commands read and not handled yet; it is read on as they are
MAX_UNSENT = 8 * 1024 * 1024  # bytes of commands handed on and not taken by the worker: past this, reading waits
# commands handed on and not answered: past this, another is refused at once (but a stop). The bytes above
# bounded a flood of small ones only once the worker stopped reading: 25 MiB of 60-byte edits read on at once
# grew the serving process by 290 MB and the run's by 390 MB, a command costing 10-20 times its size.
MAX_UNANSWERED = 1024
MAX_LINE = 64 * 1024 * 1024  # bytes: a command after ``auth`` (an edit may carry a long text)
RELEASE_WAIT_S = 1.0  # how long a new client waits for one that hung up without detaching to be let go
WRONG_SPACING_S = 0.25  # after a wrong token, the next token is checked no sooner than this
MAX_CHECKS_WAITING = 16  # connections whose token waits to be checked; more are refused unchecked
WRONG_SAID_EVERY_S = 10.0  # wrong tokens are counted on stderr at most this often (the first at once)
FLUSH_AT_CLOSE_S = 5.0  # the longest the run's end waits to reach its client when the process ends


def parse_address(address: str, option: str = "--listen") -> tuple[str, int]:
    """``"127.0.0.1:8765"`` → ("127.0.0.1", 8765); ``":0"`` listens on loopback, port chosen by the system.

    ``option`` names what the address was given as, in the error (``--listen``, or ``flowtui attach``'s
    ``address``)."""
    example = "127.0.0.1:0 (0 picks a free port)" if option.startswith(("--listen", "listen")) else "127.0.0.1:8765"
    said = f"{option}{address!r}" if option.endswith("=") else f"{option} {address!r}"
    if not isinstance(address, str):  # (from Python: run(listen=5) failed on int.rpartition)
        raise ConfigError(f"{said}: expected HOST:PORT as a text, e.g. {example}")
    host, sep, port = address.rpartition(":")
    if not sep or not (port.isascii() and port.isdigit()):  # (str.isdigit takes '٣٣' for 33)
        raise ConfigError(f"{said}: expected HOST:PORT, e.g. {example}")
    if int(port) > 65535:
        raise ConfigError(f"{said}: port {int(port)} is out of range: a port is 0-65535")
    return (host.strip("[]") or "127.0.0.1"), int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def too_long(token: str) -> bool:
    """Whether no auth line can hold ``token`` (as a client writes it: JSON, in UTF-8)."""
    return len(json.dumps(token, ensure_ascii=False).encode()) > MAX_FIRST_LINE - 64


def checked(address: str, *, public: bool = False, token: str | None = None,
            token_from: str = "--token") -> tuple[str, int]:
    """The host and port to serve on, from ``address``; raises ConfigError for an address that is no
    HOST:PORT, one beyond loopback without ``public``, or a token no one can type. ``flowtui run``
    checks before loading the flow, so a refusal leaves no journal behind."""
    python = token_from == "token="  # (given to App.run, not to flowtui run)
    host, port = parse_address(address, option="listen=" if python else "--listen")
    if not is_loopback(host) and not public:
        raise ConfigError(f"{'listen=' if python else '--listen '}{address}: {host} is not loopback; anyone who can "
                          "reach it and guess the token can run commands in this flow's process. Add "
                          f"{'listen_public=True' if python else '--listen-public'} to mean it")
    if token is not None and not token.strip():
        raise ConfigError(f"{token_from} is {'empty' if not token else 'only spaces'}: give one of at least 16 "
                          "characters, or leave it out for a random one")
    if token is not None and too_long(token):
        raise ConfigError(f"{token_from} is {len(token):,} characters: a client's auth line, which holds it, must "
                          f"be under {_size(MAX_FIRST_LINE)}, so no client could attach; give a shorter one")
    if token is not None and not (token.isprintable() and token == token.strip()):
        raise ConfigError(f"{token_from} holds control characters or spaces at its ends (it is printed for the "
                          "client to type): give printable characters, or leave it out for a random one")
    return host, port


class Listener:
    """Serves ``worker``'s protocol on a socket, one client at a time. ``worker``: a
    :class:`~flowtui.runtime.worker.Worker` or a :class:`~flowtui.runtime.relay.Relay` (``hello``,
    ``handle``, ``backlog``, ``send``, ``owed``: the replies each client is still owed, ``unsent`` and
    ``unanswered``: the bytes and the commands handed on not taken or not answered yet)."""

    def __init__(self, worker: Any, address: str, *, token: str | None = None, public: bool = False,
                 token_from: str = "--token", auth_timeout: float = AUTH_TIMEOUT_S, max_pending: int = MAX_PENDING,
                 max_line: int = MAX_LINE) -> None:
        host, port = checked(address, public=public, token=token, token_from=token_from)
        self.worker = worker
        self.token = token or secrets.token_hex(16)
        self.token_from = None if token is None else token_from  # who gave it (None: made here, at random)
        self.public = not is_loopback(host)
        try:
            self._sock = socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET)
        except OSError as exc:
            why = ("that port is in use: pick another, or port 0 for a free one" if exc.errno == errno.EADDRINUSE
                   else f"cannot listen there: {exc.strerror or exc}")
            raise ConfigError(f"--listen {address}: {why}") from None
        self.host, self.port = self._sock.getsockname()[:2]
        self._client: socket.socket | None = None
        self._lock = threading.Lock()
        self.auth_timeout = auth_timeout
        self.max_pending = max_pending
        self.max_line = max_line
        self._waiting: dict[socket.socket, None] = {}  # not authenticated yet, oldest first (a thread each)
        self._checking = threading.Lock()  # one token checked at a time, spaced after a wrong one
        self._checks_waiting = 0
        self._next_check = 0.0
        self._wrong = 0  # wrong tokens in all, and since the last time it was said
        self._wrong_unsaid = 0
        self._wrong_said_at = -WRONG_SAID_EVERY_S
        self._last_wrong = ""  # where the last wrong token came from
        self._away_unsaid = 0  # connections turned away unchecked, too many waiting for theirs, not said yet
        self._loop: asyncio.AbstractEventLoop | None = None
        worker.backlog = Lines()  # whoever attaches later gets every event so far (packed)
        worker.send = _nowhere

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def start(self) -> None:
        """Accept clients from now on (in a thread; commands reach the worker on this event loop)."""
        self._loop = asyncio.get_running_loop()
        threading.Thread(target=self._accept, name="flowtui-listen", daemon=True).start()

    def announce(self, out: Any = None) -> None:
        out = out or sys.stderr
        _tell(f"listening on {self.address}", out)
        # A token made here is said, for the client to type; one given is not repeated into the logs
        # that keep stderr (FLOWTUI_TOKEN is given so that even ps does not show it).
        given = self.token_from
        _tell(f"token: {self.token}" if given is None else f"token: the one given with {given}", out)
        where = self.address
        if ipaddress.ip_address(self.host).is_unspecified:  # every interface: the client names one of them
            where = f"THIS-MACHINE:{self.port}"
        token = (f" --token {shlex.quote(self.token)}" if given is None
                 else " (FLOWTUI_TOKEN set to the same token)" if given == "FLOWTUI_TOKEN" else " --token TOKEN")
        _tell(f"attach with: flowtui attach {where}{token}", out)
        if len(self.token) < MIN_TOKEN:
            _tell(f"warning: a token of {len(self.token)} characters can be guessed; leave --token and "
                  "FLOWTUI_TOKEN out for a random one", out)
        if self.public:
            _tell("warning: listening beyond loopback; keep the token secret", out)

    def close(self) -> None:
        """Stop listening; the attached client gets what is on its way (the run's end) first. The wrong
        tokens not said yet are said."""
        with self._lock:
            self._said_wrong(None)
        if isinstance(self.worker.send, Sender):
            self.worker.send.finish(wait=FLUSH_AT_CLOSE_S)
        for s in (self._client, self._sock):
            if s is not None:
                try:
                    s.close()
                except OSError:
                    pass

    # --- in the listener's threads ----------------------------------------------------------
    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:  # full: the oldest is let go, so silent connections cannot keep a client out
                oldest = next(iter(self._waiting)) if len(self._waiting) >= self.max_pending else None
                if oldest is not None:
                    del self._waiting[oldest]
                self._waiting[conn] = None
            if oldest is not None:
                _refuse(oldest, f"let go before authenticating: {self.max_pending} newer connections were waiting")
            threading.Thread(target=self._serve, args=(conn,), name="flowtui-client", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            first, rest = self._first_line(conn)
        finally:
            with self._lock:
                self._waiting.pop(conn, None)
        if first is None:
            return
        attached = False
        try:
            refused = self._checked(first, conn)
            if refused:
                _refuse(conn, refused)
                return
            # a client that hung up without detaching is let go on the event loop (one taken over, too):
            # a moment to finish it
            take_over = p.parse_command(first).take_over  # (checked by _checked)
            taken = self._client if take_over else None
            if taken is not None:
                self._call(self._taken_over, taken)
            deadline = time.monotonic() + RELEASE_WAIT_S
            while self._client is not None and (self._client is taken or _hung_up(self._client)) \
                    and time.monotonic() < deadline:
                time.sleep(0.01)
            with self._lock:
                if self._client is not None:
                    _refuse(conn, "another client attached at the same time as this one; try again" if take_over
                            else "another client is attached to this run (flowtui attach --take-over detaches it)")
                    return
                self._client = conn
            attached = True
            room = threading.Semaphore(MAX_QUEUED)
            self._call(self._attached, conn)
            for line in _lines(rest, conn.makefile("rb"), self.max_line, cut=_cut_short):
                if self._client is not conn:  # detached (it stopped reading what it is sent): no more commands
                    break
                if line is not None and not line.strip():
                    continue
                # At most MAX_QUEUED commands (or refusals) wait for the event loop: a client's flood never
                # holds back a stop, ctrl-C or another client behind it (its socket fills and it waits instead).
                while not room.acquire(timeout=1.0):
                    if self._client is not conn:
                        return
                if line is None:
                    self._call(self._refused, room, p.Reply(id=-1, ok=False, error=f"a command line must be under "
                                                            f"{_size(self.max_line)}; this one was read and dropped"))
                    continue
                try:
                    command = p.parse_command(line)
                except ValueError as exc:  # (pydantic's ValidationError is one)
                    self._call(self._refused, room, p.refusal(line, exc))
                    continue
                if command.type == "detach":
                    self._call(self._detach, conn, command)
                    room.release()
                    break
                if command.type == "auth":
                    self._call(self._refused, room, p.Reply(id=command.id, ok=False, error="already authenticated: "
                                                            "auth is the first line only"))
                    continue
                if command.type != "stop" and self.worker.unanswered() >= MAX_UNANSWERED:
                    self._call(self._refused, room, p.Reply(id=command.id, ok=False, error=f"{MAX_UNANSWERED} commands "
                                                            "are still to be answered: send this one again once their "
                                                            "replies came"))
                    continue
                # Nor what they carry waits unsent without end: a worker process slower than the socket
                # (800 edits of 1 MiB grew flowtui run to 2.2 GB).
                while self.worker.unsent() > MAX_UNSENT:
                    if self._client is not conn:
                        return
                    time.sleep(0.01)
                self._call(self._handle, command, room)
        except OSError:
            pass
        finally:
            if attached:
                self._call(self._detached, conn)

    def _first_line(self, conn: socket.socket) -> tuple[bytes | None, bytes]:
        """The connection's first line (``auth``), and what came after it; (None, b"") when the
        connection was refused (too long, too late) or closed first: it is closed then."""
        deadline = time.monotonic() + self.auth_timeout
        buf = b""
        try:
            while True:
                buf = buf.lstrip(b" \t\r\n")  # blank lines before it are let pass, as after it (at once: one
                end = buf.find(b"\n")  # slice a chunk, not one per line)
                if end >= 0:
                    conn.settimeout(None)
                    return buf[:end + 1], buf[end + 1:]
                if len(buf) > MAX_FIRST_LINE:
                    _refuse(conn, f"the first line must be auth, under {_size(MAX_FIRST_LINE)}")
                    return None, b""
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                conn.settimeout(left)
                chunk = conn.recv(MAX_FIRST_LINE + 1 - len(buf))
                if not chunk:  # gone before authenticating
                    _close(conn)
                    return None, b""
                buf += chunk
        except TimeoutError:
            _refuse(conn, f"no auth within {self.auth_timeout:g} s")
        except OSError:
            _close(conn)
        return None, b""

    def _checked(self, line: bytes, conn: socket.socket) -> str | None:
        """:meth:`_refusal`. A token given: one check at a time, and none sooner than ``WRONG_SPACING_S``
        after a wrong token, so guessing goes at a few tries a second however many connections try (and
        whoever floods it with wrong ones keeps the client waiting, or out); the random one, at once.
        Wrong tokens are said on stderr (the first, then a count at most every ``WRONG_SAID_EVERY_S``)."""
        if self.token_from is None:  # (made here: 128 random bits)
            refused = self._refusal(line)
            self._counted(refused, conn)
            return refused
        with self._lock:
            if self._checks_waiting >= MAX_CHECKS_WAITING:  # (said with the wrong tokens: the right one may be
                self._away_unsaid += 1  # among them, and the one who runs the server never knew)
                self._said_wrong(None, due=True)
                return "too many connections are authenticating (wrong tokens are being tried): try again"
            self._checks_waiting += 1
        try:
            with self._checking:
                wait = self._next_check - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                refused = self._refusal(line)
                if refused == "token rejected":
                    self._next_check = time.monotonic() + WRONG_SPACING_S
                self._counted(refused, conn)
                return refused
        finally:
            with self._lock:
                self._checks_waiting -= 1

    def _counted(self, refused: str | None, conn: socket.socket) -> None:
        with self._lock:  # (not the checking lock: the server's close must not wait behind spaced checks)
            if refused == "token rejected":
                self._said_wrong(conn)
            elif refused is None:  # a client gets in: the wrong tokens before it, all said
                self._said_wrong(None)

    def _said_wrong(self, conn: socket.socket | None, *, due: bool = False) -> None:
        """Count a wrong token (``conn``'s), saying the count now if it is due; None: say what is unsaid
        (``due``: if it is due)."""
        now = time.monotonic()
        if due and now - self._wrong_said_at < WRONG_SAID_EVERY_S:
            return
        if conn is not None:
            self._wrong += 1
            self._wrong_unsaid += 1
            try:
                self._last_wrong = "%s:%s" % conn.getpeername()[:2]
            except OSError:
                self._last_wrong = "a client that left"
            if now - self._wrong_said_at < WRONG_SAID_EVERY_S:
                return
        elif not (self._wrong_unsaid or self._away_unsaid):
            return
        said = []
        if self._wrong_unsaid:
            what = "a wrong token" if self._wrong_unsaid == 1 else f"{self._wrong_unsaid} wrong tokens"
            since = "" if self._wrong == self._wrong_unsaid else f" since the last count ({self._wrong} in all)"
            said.append(f"{what}{since}, the last from {self._last_wrong}")
        if self._away_unsaid:
            said.append(f"{self._away_unsaid:,} connection(s) turned away unchecked, {MAX_CHECKS_WAITING} waiting for "
                        "their check already (a client with the right token among them, if any, was told to try again)")
        _tell(f"flowtui: {'; '.join(said)}")
        self._wrong_unsaid, self._away_unsaid, self._wrong_said_at = 0, 0, now

    def _refusal(self, line: bytes) -> str | None:
        """Why the first line does not authenticate (None: it does)."""
        try:
            command = p.parse_command(line)
        except ValueError as exc:  # what is wrong with it, by name: a take_over of "yes" was told only the form
            return ('the first line must be {"type": "auth", "token": "..."} with the token the run printed '
                    f"({p.what_is_wrong(exc)})")
        if command.type != "auth":
            return 'the first line must be {"type": "auth", "token": "..."} with the token the run printed'
        return None if hmac.compare_digest(command.token.encode(), self.token.encode()) else "token rejected"

    def _call(self, fn: Any, *args: Any) -> None:
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop has closed: the run is over
            pass

    # --- on the event loop ---------------------------------------------------------------
    def _handle(self, command: Any, room: threading.Semaphore) -> None:
        try:
            self.worker.handle(command)
        finally:
            room.release()

    def _refused(self, room: threading.Semaphore, refusal: Any) -> None:
        """Send ``refusal``, the reply to a line or a command refused, and free its place in the queue."""
        try:
            self._send(p.encode(refusal))
        finally:
            room.release()

    def _send(self, data: bytes) -> None:
        self.worker.send(data, True)  # the client's sender as it is now (after _attached has run)

    def _attached(self, conn: socket.socket) -> None:
        # hello and every event so far go first, read a piece at a time from the packed backlog (never
        # unpacked whole): however large, what a client is owed on attaching is not it falling behind
        backlog = self.worker.backlog
        owed = itertools.chain([p.encode(self.worker.hello())], backlog.prefix(len(backlog)))
        self.worker.send = Sender(conn, lambda why: self._call(self._dropped, conn, why), owed)

    def _release(self, conn: socket.socket) -> Any:
        """The client's place is free again (the run waits, paused, for the next one); its sender,
        or None when ``conn`` had no place (any more)."""
        with self._lock:
            if self._client is not conn:
                return None
            self._client = None
        sender, self.worker.send = self.worker.send, _nowhere
        self.worker.pause_for_next()
        return sender

    def _detach(self, conn: socket.socket, command: Any) -> None:
        """``detach``: the place is free before the reply leaves, so the client may attach again at once;
        the reply comes after those to the client's earlier commands (a step sent just before it ran, and
        its reply was lost)."""
        sender = self._release(conn)
        if sender is not None:
            def answer() -> None:
                sender(p.encode(p.Reply(id=command.id, ok=True)))
                sender.finish()

            self.worker.owed.then(sender, answer)

    def _taken_over(self, conn: socket.socket) -> None:
        """A client attaching with ``take_over``: the one attached now is told why, and let go."""
        sender = self._release(conn)
        if sender is not None:
            sender(p.encode(p.Reply(id=0, ok=False, error="another client took this run over (flowtui attach "
                                                          "--take-over); the run goes on there")))
            sender.finish()
            _tell("flowtui: a client took the run over; the one attached before was detached")

    def _detached(self, conn: socket.socket) -> None:
        """The client's end was read (it hung up, or only shut its writing, as ``nc -N`` does): the
        replies to what it sent still go to it, then it is let go (a client that hung up takes nothing)."""
        sender = self._release(conn)
        if sender is not None:
            self.worker.owed.then(sender, sender.finish)

    def _dropped(self, conn: socket.socket, why: str) -> None:
        if self._release(conn) is not None:
            _tell(f"flowtui: the attached client was detached: {why}; the run waits, paused, for the next one "
                  "(it gets every event so far)")


def _tell(text: str, out: Any = None) -> None:
    """Say ``text`` on stderr (or ``out``). Whatever reads it may have gone (``2>&1 | head -2`` read
    the address and the token, then closed): the run is served all the same, not ended by a write."""
    try:
        print(text, file=out or sys.stderr, flush=True)
    except OSError:
        pass


def _hung_up(conn: socket.socket) -> bool:
    """The peer has closed the connection (what is left to read is its end), or it is closed here."""
    try:
        return conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def _size(n: int) -> str:
    """``67108864`` → "64 MiB", ``65536`` → "64 KiB"."""
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n:,} bytes"


def _nowhere(data: bytes, at_once: bool = False) -> None:
    """No client attached: events go to the backlog only."""


def _cut_short(line: bytes) -> None:
    _tell(f"flowtui: the attached client closed its connection inside a command line ({len(line):,} bytes, no "
          "line end): it was not carried out; a command ends with a line break")


def _lines(rest: bytes, reader: Any, limit: int, *, cut: Callable[[bytes], None] = lambda line: None) -> Any:
    """The lines a client sent after its ``auth`` line: those read with it, then the socket's; None
    for a line longer than ``limit`` (read to its end a piece at a time, never held whole). ``cut(line)``
    hears a last line the connection ended inside."""
    while b"\n" in rest:
        line, _, rest = rest.partition(b"\n")
        yield line + b"\n" if len(line) < limit else None
    while True:
        line = rest + reader.readline(limit + 1 - len(rest))
        rest = b""
        if not line:
            return
        if not line.endswith(b"\n") and len(line) <= limit:  # the connection ended inside a line: a command
            if line.strip():  # cut short, whose reply could not arrive anyway, is not carried out (but said)
                cut(line)
            return
        if len(line) <= limit:
            yield line
            continue
        while line and not line.endswith(b"\n"):  # the rest of the long line, dropped
            line = reader.readline(1 << 20)
        yield None


def _refuse(conn: socket.socket, why: str) -> None:
    try:
        conn.settimeout(1.0)  # a client that reads nothing does not hold us
        conn.sendall(p.encode(p.Reply(id=0, ok=False, error=why)))
    except OSError:
        pass
    _close(conn)


async def serve_app(app: Any, address: str, *, token: str | None, public: bool, input: Any = None,
                    **options: Any) -> Any:
    """``await app.run(..., listen=address)``: the run of a bootstrapped app, served to ``flowtui attach``."""
    from flowtui.runtime.worker import Worker

    snapshot = options.pop("snapshot", None)
    journal = options.pop("journal", None)
    worker = Worker(app, journal=str(journal) if journal is not None else None, breakpoints=[], grace=1.0,
                    send=_nowhere, snapshot=snapshot)
    worker.dispose_after = False  # the app is the caller's: it may run again
    worker.also = options.pop("on_event", None)
    listener = Listener(worker, address, token=token, public=public, token_from="token=")
    worker.start(input, options.pop("memory", None), data=options.pop("data", None), paused=True,
                 on_divergence="pause", **options)
    listener.start()
    listener.announce()
    try:
        assert worker.task is not None
        await worker.task
    finally:
        listener.close()
    if worker.run.error is not None and not worker.run.status == "stopped":
        raise worker.run.error
    return worker.run.ctx.get("output")
