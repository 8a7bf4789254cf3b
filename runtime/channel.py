"""The client's end of a worker: start one (or connect to one), read what it says, send it commands,
and stop it whatever the flow is doing.

Used by the app (:mod:`flowtui.tui.client`) and by ``flowtui run``; nothing
here imports textual. A :class:`Channel` owns one worker for one run:

- :meth:`Channel.spawn` starts ``python -m flowtui.runtime.worker`` in its own
  session (the terminal's ctrl-C is the client's to handle) and waits for its
  ``hello`` or ``load.error`` (:class:`LoadTimeout` after ``load_timeout`` s);
- protocol messages are parsed as they arrive (replies complete the
  :meth:`command` that asked); event lines go to ``on_lines`` as they came, for
  the consumer to parse when it folds them (:func:`parse_events`);
- :meth:`stop` is graceful, then forceful, with a stated grace period: a
  ``stop`` command, then ``STOP_SIGNAL`` (the worker unwinds the code that
  does not return), then ``SIGKILL``;
- when the worker is gone without a ``run.end`` (killed, crashed, exited from
  a hook), :meth:`ending` says why, and the journal gets the ``run.end`` the
  worker could not write.
"""

from __future__ import annotations

import asyncio
import codecs
import os
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from flowtui.runtime.spawn import (
    CHUNK, EXIT_FD_CLOSED, LINE_MAX, STOP_GRACE_S, STOP_SIGNAL, WHOLE_LINE_MAX, Options, Started, reply_id,
    take_over, too_long_said,
)

if TYPE_CHECKING:
    from flowtui.runtime import protocol as p

T = TypeVar("T")


async def within(awaitable: Awaitable[T], seconds: float | None) -> T:
    """``asyncio.wait_for(awaitable, seconds)`` without its Python 3.11 flaw: a cancel that comes as the
    wait ends was swallowed, and what was cancelled (the app quitting, a run's branch) went on."""
    async with asyncio.timeout(seconds):
        return await awaitable


def elided_of(event: Any) -> Any:
    """The strings cut on the wire, from the event's extra fields (a plain lookup: every event passes here)."""
    extra = getattr(event, "__pydantic_extra__", None)
    return extra.get("elided") if extra else None


def parse_events(lines: list[bytes], on_bad: Callable[[str], None] | None = None) -> list[tuple[bytes, Any]]:
    """Event lines parsed in one call (a bad one then line by line, and left out with a word)."""
    try:
        return list(zip(lines, _p().parse_worker_lines(lines)))
    except ValueError:
        out = []
        for line in lines:
            try:
                out.append((line, _p().parse_worker_line(line)))
            except ValueError as exc:
                if on_bad is not None:
                    on_bad(f"a line from the run's process is not an event ({_p().what_is_wrong(exc, sent_by='run')}); "
                           "it was left out")
        return out


def seq_of(line: bytes) -> int | None:
    """The ``seq`` of an event line as the runtime writes it (``{"seq":12,...``); None for another line."""
    if not line.startswith(b'{"seq":'):
        return None
    end = line.find(b",", 7)
    try:
        return int(line[7:end])
    except ValueError:
        return None


def _p():
    """The protocol module, imported when first needed: a client starts its worker first, so the
    worker boots while this process builds the protocol's validators."""
    from flowtui.runtime import protocol

    return protocol


def _environment_secrets() -> tuple[str, ...]:
    from flowtui.runtime.secrets import environment_secrets

    return environment_secrets()


LOAD_TIMEOUT_S = 30.0  # a flow whose import has not finished by then is a load error
ATTACH_TIMEOUT_S = 10.0  # a served run that has not answered ``flowtui attach`` by then is not one
# q waits this long for a served run to answer ``detach`` (a real one does in milliseconds); then it hangs
# up, which the run takes as the client gone: it pauses for the next one all the same
DETACH_WAIT_S = 0.5
LOG_LINE_MAX = 4096  # a printed line longer than this reaches the client cut
LOG_PARTIAL_S = 1.0  # a printed line without its newline for this long is said as it stands
MAY_BE_LOST = 16  # events a skip in seq may stand for when the journal cannot show them (see in_order)
TEARDOWN_S = 0.05  # a worker whose code has all run (its output closed) may exit this long before it is cut short
LINGER_S = 0.5  # after the worker exits, how long its pipes may stay silent before they are let go
# and its printed output's, once its events' pipe has ended: a flat wait, not one renewed while it
# prints (a process outside the group printing for ever would hold q up)
LOG_LINGER_S = 0.1
MUTED = ("the flow closed the pipe the run's events go out on (os.close or os.closerange in its code?): "
         "the run could no longer be followed, so its process was ended")


class LoadTimeout(Exception):
    """The flow's import did not finish within the limit."""


class Channel:
    """One worker process (or socket) and the client's side of the protocol."""

    def __init__(self, on_lines: Callable[[list[bytes]], None],
                 on_log: Callable[[str], None] | None = None,
                 on_warning: Callable[[str], None] | None = None,
                 secrets: Callable[[], Iterable[str]] | None = None) -> None:
        self.on_lines = on_lines  # event lines as they came, in order (parse them with parse_events)
        self.on_log = on_log or (lambda text: None)  # what the flow printed
        self.on_warning = on_warning or self.on_log  # what the run's process sent that is not the protocol
        self.secrets = secrets or _environment_secrets  # what a line printed in pieces is redacted of
        self.proc: Started | None = None
        self.hello: p.Hello | None = None
        self.load_error: p.LoadError | None = None
        self.journal: str | None = None
        self.grace = STOP_GRACE_S
        self._writer: Any = None
        self._ids = 0
        self._pending: dict[int, Any] = {}  # id -> the Future of command(), or forward()'s callback
        self._greeted = asyncio.Event()
        self.closed = asyncio.Event()  # the worker is gone (its output ended)
        self.run_id: str | None = None  # the top-level run, from its run.start
        self.started_ts = 0.0  # ... and when it started (the run.end written for it says how long it ran)
        self.ended = False  # the top-level run.end went by
        self.stopping_since: float | None = None  # when stop() began, for what run.end says
        self.killed_at: float | None = None  # and when the worker was killed
        self.stop_reason: str | None = None  # what stop() was given as why (else: stopped by user)
        self.killed = False
        self.killed_by: str | None = None
        self.muted = False  # the worker lived on after the pipe its events go out on closed (see _exit_or_mute)
        self.paused = asyncio.Event()  # set by the consumer's flow control: read on
        self.paused.set()
        self._progress = asyncio.Event()  # set on each batch of lines and at the end
        self._tasks: list[asyncio.Task] = []

    # --- starting --------------------------------------------------------------------------
    async def spawn(self, options: Options, *, load_timeout: float = LOAD_TIMEOUT_S,
                    started: subprocess.Popen | None = None) -> p.Hello | p.LoadError:
        """Start a worker for ``options`` (or take over ``started``, the worker
        :meth:`Options.start_now` started for them) and wait until the flow has loaded (or failed to)."""
        self.keep_journal(options.journal)
        self.grace = options.grace
        self.proc, self._writer, out, err = await take_over(started or options.start_now())
        self._tasks = [asyncio.ensure_future(self._read(out)), asyncio.ensure_future(self._read_log(err))]
        return await self._greeting(load_timeout)

    async def connect(self, host: str, port: int, token: str, *, take_over: bool = False,
                      timeout: float = ATTACH_TIMEOUT_S) -> p.Hello | p.LoadError:
        """Attach to a worker listening on ``host:port`` (``take_over``: detaching the client attached
        now, if any); a wrong token is a :class:`PermissionError`."""
        reader, writer = await within(asyncio.open_connection(host, port, limit=1 << 24), timeout)
        self._writer = writer
        self._peer = True
        writer.write(_p().encode(_p().Auth(token=token, take_over=take_over)))
        self._tasks = [asyncio.ensure_future(self._read(reader))]
        hello = await self._greeting(timeout)
        spoken = getattr(hello, "protocol", _p().PROTOCOL_VERSION)
        if spoken != _p().PROTOCOL_VERSION:  # another flowtui's run: its messages may mean other things
            writer.close()
            raise PermissionError(f"the run at {host}:{port} speaks protocol {spoken}; this flowtui speaks "
                                  f"{_p().PROTOCOL_VERSION}: attach with the flowtui version that serves it")
        return hello

    async def _greeting(self, timeout: float) -> p.Hello | p.LoadError:
        waiter = asyncio.ensure_future(self._greeted.wait())
        gone = asyncio.ensure_future(self.closed.wait())
        try:
            done, _ = await asyncio.wait([waiter, gone], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            gone.cancel()
        if self.hello is not None:
            return self.hello
        if self.load_error is not None:
            return self.load_error
        if not done:
            await self.kill()
            if self.proc is None:
                sent = (f"it sent {self._bytes_read:,} bytes but no line of the protocol" if self._bytes_read
                        else "no answer")  # (80 MB without a newline was said as no answer)
                raise LoadTimeout(f"{sent} within {timeout:g} s (is it a run served by flowtui run --listen?)")
            raise LoadTimeout(f"the flow did not finish loading within {timeout:g} s (an endless loop or a "
                              "blocking call at import?)")
        if self.refused:
            raise PermissionError(self.refused)
        await self.wait()
        return _p().LoadError(message=f"the worker process ended before the flow loaded ({self.ending()[1]})")

    refused: str | None = None
    _bytes_read = 0  # from the run's process or the peer, so far
    let_go: str | None = None  # attached: why the server let this client go (another took the run over)

    # --- reading ---------------------------------------------------------------------------
    async def _read(self, stream: asyncio.StreamReader) -> None:
        pending = bytearray()  # the start of a line whose end has not arrived (a long one: many chunks)
        head = b""  # the start of a line too long to keep: what it is
        skipped = 0  # bytes of a line longer than self.line_max read so far (it is not kept)
        try:
            while True:
                await self.paused.wait()  # the consumer's flow control: the worker blocks, not us
                chunk = await stream.read(CHUNK if len(pending) < CHUNK else 1 << 22)
                if not chunk:
                    break
                self._bytes_read += len(chunk)
                if skipped or len(pending) + len(chunk) > self.line_max:
                    first = chunk.find(b"\n")  # where the line in progress ends, if it does in this chunk
                    if skipped or len(pending) + (len(chunk) if first < 0 else first) > self.line_max:
                        if not skipped:  # (what it is: a reply is answered as refused, not waited for for ever)
                            head = bytes((pending + chunk)[:64])
                        skipped += len(pending) + (len(chunk) if first < 0 else first)  # read to its end, not kept
                        pending = bytearray()
                        if first < 0:
                            continue
                        self._left_out(head, skipped)
                        skipped, chunk = 0, chunk[first + 1:]
                end = chunk.rfind(b"\n")
                if end < 0:
                    pending += chunk
                    continue
                pending += chunk[:end]
                lines = [bytes(line) for line in pending.split(b"\n") if line.strip()]
                pending = bytearray(chunk[end + 1:])
                if lines:
                    self._dispatch(lines)
                    self._progress.set()
            if pending.strip():
                self._dispatch([bytes(pending)])
            if skipped:
                self._left_out(head, skipped)
        except (ConnectionError, OSError):
            pass
        finally:
            self._progress.set()
            for id_, future in self._pending.items():
                if callable(future):
                    future(_p().Reply(id=id_, ok=False, error="the run's process has ended"))
                elif not future.done():
                    future.set_exception(ConnectionError("the worker is gone"))
            self.closed.set()

    _peer = False  # attached: the run is a peer that may not be flowtui

    @property
    def line_max(self) -> int:
        """A longer line is read to its end and left out, said: a peer's (flowtui attach) may be 64 MiB; the
        process of one's own may send a value whole that long (flowtui run's: a 100 MB tool result; an app's:
        one fetched whole), and its run's end is never lost (it cuts a longer line's values)."""
        return LINE_MAX if self._peer else WHOLE_LINE_MAX

    def _left_out(self, head: bytes, size: int) -> None:
        """A line longer than :attr:`line_max`, read to its end and not kept: said; a reply answers its command as
        refused (a fetch of a value longer than a line was waited for until it timed out, said as a busy run)."""
        self.on_warning(f"a line of {size:,} bytes from the run's process was left out (a line may be "
                        f"{self.line_max:,} bytes)")
        ident = reply_id(head)
        future = self._pending.get(ident) if ident is not None else None
        if isinstance(future, asyncio.Future) and not future.done():
            del self._pending[ident]
            future.set_result(_p().Reply(id=ident, ok=False, error=too_long_said(size, self.line_max, "from the run")))

    def _dispatch(self, lines: list[bytes]) -> None:
        """Protocol messages are handled now; event lines go to the consumer as they came, to be
        parsed when it folds them (in slices of its own choosing)."""
        if self._peer and not self._greeted.is_set():
            if self.refused is not None:  # refused already: what was read after is not looked at
                return
            lines = self._greeting_lines(lines)
            if not lines:
                return
        blob = b"\n".join(lines)  # what is rare in a flood is looked for once a chunk, not once a line
        if not blob.startswith(b'{"type":') and b'\n{"type":' not in blob and b'"type":"run.' not in blob:
            self._events(lines)
            return
        events = []
        for line in lines:
            if line.startswith(b'{"type":'):  # hello, reply, log, load.error (an event starts with its seq)
                msg = self._parse_one(line)
                if msg is not None:
                    self._message(msg)
                continue
            if b'"type":"run.start"' in line or b'"type":"run.end"' in line:
                self._watch(line)
            events.append(line)
        if events:
            self._events(events)

    def _greeting_lines(self, lines: list[bytes]) -> list[bytes]:
        """Attached, before the run's hello: anything but a hello, a load error, a reply (a refused
        token) or a log line means the peer is not a run served by flowtui (a malformed hello, events
        first): the connection is closed and that said, before the app shows or sends anything."""
        for i, line in enumerate(lines):
            msg = self._parse_one(line) if line.startswith(b'{"type":') else None
            if msg is None or msg.type not in ("hello", "load.error", "reply", "log"):
                what = (f"a {msg.type} message" if msg is not None else "a malformed message"
                        if line.startswith(b'{"type":') else "an event" if line.startswith(b'{"seq":')
                        else "a line that is no protocol message")
                self.refused = (f"it sent {what} before its hello: not a run served by flowtui run --listen "
                                "(or another version's)")
                if self._writer is not None:
                    self._writer.close()
                self.closed.set()
                return []
            self._message(msg)
            if self._greeted.is_set():
                return lines[i + 1:]
            if self.refused is not None:  # (a refused token): what follows cannot say otherwise
                if self._writer is not None:
                    self._writer.close()
                self.closed.set()
                return []
        return []

    def _events(self, events: list[bytes]) -> None:
        try:
            self.on_lines(events)
        except Exception as exc:  # the consumer's bug must not cut the run off: say it, read on
            self.on_warning(f"could not show an event: {type(exc).__name__}: {exc}")

    def _message(self, msg: Any) -> None:
        kind = msg.type
        if kind == "reply":
            future = self._pending.pop(msg.id, None)
            if callable(future):  # a relayed command's: passed on as it comes, in order with the events
                future(msg)
            elif future is not None and not future.done():
                future.set_result(msg)
            elif not msg.ok and self.hello is None:
                self.refused = msg.error
            elif not msg.ok and msg.id == 0:
                self.let_go = msg.error
            elif future is None and not 0 < msg.id <= self._ids:  # (a peer answering what was never asked: it
                # was ignored without a word; a command sent without waiting for its reply has an id of ours)
                self.on_warning(f"the run's process sent a reply to a command this app never sent (id {msg.id}); it "
                                "was ignored")
        elif kind in ("hello", "load.error") and (self.hello is not None or self.load_error is not None):
            # said once: a second one (a peer of flowtui attach's) would make the app ask for a first
            # message the run's process asked for in its place ("paste your key")
            first = "hello" if self.hello is not None else "load.error"
            self.on_warning(f"the run's process sent a {kind} after its {first}; it was ignored")
        elif kind == "hello":
            self.hello = msg
            self._greeted.set()
        elif kind == "load.error":
            self.load_error = msg
            self._greeted.set()
        elif kind == "log":
            self.on_log(msg.text)

    def _watch(self, line: bytes) -> None:
        """The top-level run's start (its id) and end (the worker said how it ended)."""
        ev = self._parse_one(line)
        if ev is None:
            return
        if ev.type == "run.start" and self.run_id is None and ev.parent_id is None:
            self.run_id, self.started_ts = ev.run_id, ev.ts
        elif ev.type == "run.end" and (ev.run_id == self.run_id or self.run_id is None and ev.parent_id is None):
            self.ended = True  # (a run.start that could not be read held its client for ever)

    def _parse_one(self, line: bytes) -> Any:
        try:
            return _p().parse_worker_line(line)
        except ValueError as exc:
            self.on_warning(f"a line from the run's process is not a protocol message "
                            f"({_p().what_is_wrong(exc, sent_by='run')}); it was left out")
            return None

    async def _read_log(self, stream: asyncio.StreamReader) -> None:
        """What the flow printed (the worker's stderr), a line at a time. A line longer than
        ``LOG_LINE_MAX`` is cut (the rest read and dropped, its size said): no line, however long,
        stops the reading, and with it the worker, which would block on a full pipe.

        A carriage return rewrites the line, as on a terminal: a progress bar's ``\\rprogress 40%``
        keeps its last state, said with the ``\\r`` in front (shown ``␍``: what came before it was
        written over). A line left without its newline for ``LOG_PARTIAL_S`` is said as it stands: a
        progress bar, or ``print(..., end="")``, was never shown while the run went on. What comes
        after is said as going on with it (``…rest``), or as writing it over (``␍next``) when it
        ended with a ``\\r`` (``print(state, end="\\r")`` between pauses).

        A line said in pieces is redacted as one text arriving (:class:`StreamRedactor`): a key
        printed a few characters a second was said a piece at a time, each too short to be found."""
        from flowtui.runtime.secrets import StreamRedactor

        line, dropped, since, cr, goes_on = bytearray(), 0, 0.0, False, False
        lead = ""  # what the line is said after: "…" (it goes on with one said as it stood), "\r" (written over)
        told: StreamRedactor | None = None  # the line's redaction, once a piece of it was said
        clock = asyncio.get_running_loop().time

        def add(piece: bytes) -> None:
            nonlocal line, dropped, since, cr, goes_on, lead, told
            if not (line or dropped or lead):
                since = clock()
                # the rest of a line said as it stood (or only what was held back of it: a key's start)
                if goes_on and (piece or told is not None) and not piece.startswith(b"\r"):
                    lead = "…"
                goes_on = False
            if cr and piece:  # a \r that was no \r\n: the line is written over
                line, dropped, lead, told = bytearray(), 0, "\r", None
            cr = piece.endswith(b"\r")  # (a \n may follow in the next chunk)
            piece = piece.rstrip(b"\r")  # (\r\r\n ends a line as \r\n does)
            rewritten = piece.rfind(b"\r")
            if rewritten >= 0:  # what comes after the last \r is the line now
                line, dropped, piece, lead, told = bytearray(), 0, piece[rewritten + 1:], "\r", None
            room = LOG_LINE_MAX - len(line)
            line.extend(piece[:room])
            dropped += max(0, len(piece) - room)

        def say(partial: bool = False) -> None:
            """Say the line; ``partial``: as it stands, without its end (what comes next goes on with it,
            shown ``…``, or writes it over, shown ``␍``, when it ended with a \r)."""
            nonlocal line, dropped, since, cr, goes_on, lead, told
            tail = b""  # a character cut where the line stands: said with the rest, not as two undecodables
            if partial or dropped:
                decoder = codecs.getincrementaldecoder("utf-8")("replace")
                text = decoder.decode(bytes(line), final=False)
                tail = decoder.getstate()[0] if partial and not dropped else b""  # (cut by LINE_MAX: left out)
            else:
                text = line.decode("utf-8", "replace")
            if partial or told is not None:
                secrets = tuple(self.secrets())
                told = told or StreamRedactor(words=False)
                text = told.feed(text, secrets)
                if not partial or told.held > LOG_LINE_MAX:  # (a word that never ends is not held forever)
                    text += told.end(secrets)
            said = bool(text or dropped or lead == "\r")
            if said:
                self.on_log(lead + text + (f"… ({len(line) + dropped:,} bytes, cut)" if dropped else ""))
            goes_on = partial and not cr and (said or goes_on or lead == "…")
            if not partial:
                told = None
            line, dropped, cr, lead = bytearray(tail), 0, partial and cr, lead if partial and not said else ""
            if tail:  # the line goes on from its kept bytes: said a while later, as going on with this
                since = clock()
                if goes_on:
                    lead, goes_on = "…", False

        while True:
            waited = None if not (line or dropped) else max(0.0, since + LOG_PARTIAL_S - clock())
            try:
                chunk = await within(stream.read(CHUNK), waited)
            except asyncio.TimeoutError:  # a line still without its newline: said as it stands
                say(partial=True)
                continue
            if not chunk:
                break
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                add(chunk[start:end])  # (a \r\n's \r: only ever at the end, taken off)
                say()
                start = end + 1
            add(chunk[start:])
            if (line or dropped) and clock() - since >= LOG_PARTIAL_S:  # printed to without a pause
                say(partial=True)
        say()

    # --- commands ------------------------------------------------------------------------------
    async def command(self, command: p.BaseModel, *, timeout: float | None = None) -> p.Reply:
        """Send ``command`` and wait for its reply (``ConnectionError`` when the worker is gone)."""
        future = asyncio.get_running_loop().create_future()
        if not self._write(command, future):
            raise ConnectionError("the run's process has ended")
        return await within(future, timeout)

    def forward(self, command: p.BaseModel, on_reply: Callable[[p.Reply], None]) -> None:
        """Send a command someone else made (a client of a run served on a socket) under an id of
        ours; ``on_reply`` gets its reply when it comes (one saying so if the worker is gone)."""
        if not self._write(command, on_reply):
            on_reply(_p().Reply(id=0, ok=False, error="the run's process has ended"))

    def send(self, command: p.BaseModel) -> None:
        """Send ``command`` without waiting for its reply."""
        self._write(command, None)

    def unanswered(self) -> int:
        """Commands written to the worker and not answered yet (read from any thread: one number)."""
        return len(self._pending)

    def unsent(self) -> int:
        """Bytes written to the worker and not taken by it yet (read from any thread: one number)."""
        writer = self._writer
        return writer.transport.get_write_buffer_size() if writer is not None and not writer.is_closing() else 0

    def _write(self, command: p.BaseModel, waiter: Any) -> bool:
        """Number ``command`` and write it, its reply to go to ``waiter`` (a future, a callback, or
        None: unheard); False when it cannot go out. Not once the worker's input has closed: asyncio
        then warns on stderr at each write, and a stderr nobody reads would block us."""
        if self.closed.is_set() or self._writer is None or self._writer.is_closing():
            return False
        self._ids += 1
        if waiter is not None:
            self._pending[self._ids] = waiter
        try:
            self._writer.write(_p().encode(command.model_copy(update={"id": self._ids})))
        except (ConnectionError, RuntimeError):
            self._pending.pop(self._ids, None)
            return False
        return True

    # --- stopping ------------------------------------------------------------------------------
    def begin_stop(self, reason: str | None = None) -> None:
        """Send the ``stop`` command now: the commands written after it reach the worker after it (a
        client's ``step`` sent behind its ``stop`` ran a tool once the stop was answered)."""
        if self.stopping_since is None:
            self.stopping_since, self.stop_reason = time.monotonic(), reason
        self.paused.set()  # read on whatever the consumer's backlog: a worker blocked writing could not end
        self.send(_p().Stop(reason=reason))

    async def stop(self, grace: float | None = None, reason: str | None = None, *, begun: bool = False) -> None:
        """Stop the run within about ``grace`` seconds whatever it is doing: a ``stop`` command (sent
        already by :meth:`begin_stop` when ``begun``), then ``STOP_SIGNAL`` (the worker unwinds the code
        that does not return), then ``SIGKILL``."""
        grace = self.grace if grace is None else grace
        if not begun:
            self.begin_stop(reason)
        if await self._ends_within(grace):
            return
        # its code did not return in time (or, its run ended, a thread the flow left running holds its exit):
        # the signal unwinds it (or ends the process, saying which thread)
        self._signal(STOP_SIGNAL)
        if await self._ends_within(grace / 2):  # (its code unwound: its run says its end, and its process goes)
            return
        await self.kill()

    async def _ends_within(self, seconds: float) -> bool:
        """Whether the worker exited within ``seconds`` (up to twice that: once its run has said its end,
        its exit is given ``seconds`` again). Its run's end said, its process is let go: it would wait for
        its input to close (to serve fetch), and be signalled, then killed, its atexit handlers never run:
        every q and x took the whole grace. A socket's run ends in the process serving it: True once the
        connection closes, or after three times ``seconds``."""
        t0 = time.monotonic()
        if self.proc is not None and await self._ended_within(seconds):
            if self._writer is not None and not self.closed.is_set():
                self._writer.close()
            return await self._exited_within(seconds, done_when_closed=True)
        return await self._exited_within(max(seconds - (time.monotonic() - t0), 0.0))

    async def finish(self, grace: float | None = None) -> None:
        """Let go of a worker whose run has ended (it serves ``fetch`` until then): close its input,
        then kill it if it has not exited within ``grace``. One whose events stopped coming before
        its run ended is stopped first (:meth:`_exit_or_mute`)."""
        grace = self.grace if grace is None else grace
        if self.proc is not None and self.closed.is_set() and not (self.ended or self.killed
                                                                   or self.stopping_since is not None):
            await self._exit_or_mute()
        if self._writer is not None and not self.closed.is_set():
            self._writer.close()
        # (a stop under way ends the process its own way, saying what held it: it is given the time)
        if not await self._exited_within(2 * grace if self.stopping_since is not None else grace,
                                         done_when_closed=self.ended):
            if self.ended and self.stopping_since is None:  # (its run's end is said: what was cut short is the
                # process's own clean-up; a stop says what held it, if anything did: see stop)
                self.on_warning(f"the run's process had not exited {grace:.1f} s after its run ended (a thread the "
                                "flow started, an atexit hook, or a middleware's dispose() that did not return): "
                                "it was ended")
            await self.kill()
        code = await self.wait()
        if self.ended and not self.killed and code not in (None, 0, 1, -signal.SIGKILL):
            self.on_warning(f"the run's process exited with code {code} after its run ended (in a middleware's "
                            "dispose()?)")

    async def ended_or_gone(self) -> None:
        """Until the run has ended (its run.end went by) or the worker is gone."""
        while not (self.ended or self.closed.is_set()):
            self._progress.clear()
            await self._progress.wait()

    async def detach(self) -> None:
        """Leave a run served on a socket: it pauses and waits for the next client."""
        if not self.closed.is_set() and self._writer is not None:
            try:
                await within(self.command(_p().Detach()), DETACH_WAIT_S)
            except (ConnectionError, asyncio.TimeoutError):
                pass
            self._writer.close()

    async def kill(self, by: str | None = None) -> None:
        """End the worker now (``by``: who asked, which the run's end then says)."""
        self.killed = True
        self.killed_by = self.killed_by or by
        self.killed_at = self.killed_at or time.monotonic()
        if self.proc is None:  # a socket: hang up (a peer that never answers would never close it)
            if self._writer is not None:
                self._writer.close()
            self.closed.set()
            return
        self._signal(signal.SIGKILL)
        await self.wait()

    def _signal(self, signum: int) -> None:
        if self.proc is not None and self.proc.returncode is None:
            try:
                os.killpg(self.proc.pid, signum)  # the worker and anything the flow started
            except ProcessLookupError:
                pass

    async def _ended_within(self, seconds: float) -> bool:
        """Whether the run said its end (or the worker went) within ``seconds``."""
        try:
            await within(self.ended_or_gone(), seconds)
        except asyncio.TimeoutError:
            return False
        return self.ended

    async def _exited_within(self, seconds: float, *, done_when_closed: bool = False) -> bool:
        """Whether the worker exited within ``seconds``. ``done_when_closed``: its run has ended, so
        its output closing means all its code has run (its last atexit handler closes it); what is
        left, the interpreter's teardown, is cut short (its group killed) rather than waited for."""
        if self.proc is None:  # a socket: the run's process ends its run itself (it terminates its own code)
            try:
                await within(self.closed.wait(), 3 * seconds)
            except asyncio.TimeoutError:
                pass
            return True
        exited = asyncio.ensure_future(self.proc.wait())
        closed = asyncio.ensure_future(self.closed.wait())
        try:
            await asyncio.wait([exited, closed] if done_when_closed else [exited], timeout=seconds,
                               return_when=asyncio.FIRST_COMPLETED)
            if done_when_closed and not exited.done() and closed.done():
                await asyncio.wait([exited], timeout=TEARDOWN_S)
                self._signal(signal.SIGKILL)
                return True
            return exited.done()
        finally:
            exited.cancel()
            closed.cancel()

    async def wait(self) -> int | None:
        """Until the worker has exited and its output is read; its exit code.

        What the flow started and left behind in the worker's process group is killed with it. A
        process that left the group (``os.setsid``) may still hold the output pipes: once the
        worker has exited and they give nothing for ``LINGER_S`` (while the consumer is not
        holding them back; ``LOG_LINGER_S`` for the printed output once the events' pipe has ended),
        they are let go instead of waited on for ever."""
        if self.proc is None:
            await self.closed.wait()
        else:
            if self.load_error is not None:  # said why, its pipe closed: what is left is its teardown
                if not await self._exited_within(self.grace, done_when_closed=True):
                    await self.kill()
            elif not (self.ended or self.killed or self.stopping_since is not None):  # (not while we stop it)
                await self._exit_or_mute()
            code = await self.proc.wait()
            self._end_group()
            # (the printed output too: a process that left the group holds it after the events' pipe,
            # which the worker closes in a child it forks, has ended; what the worker printed is in the
            # pipe by the time it exits, so that is waited on for less)
            while not all(task.done() for task in self._tasks):
                self._progress.clear()
                try:
                    await within(self._progress.wait(), LOG_LINGER_S if self.closed.is_set() else LINGER_S)
                except asyncio.TimeoutError:
                    if self.paused.is_set():
                        self.proc.let_go()
                        break
            if not self._tasks:  # started, never read (its start was cancelled)
                self.closed.set()
        for task in self._tasks:
            if not task.done():
                await asyncio.wait([task], timeout=1.0)
        return code if self.proc is not None else None

    def _exit_or_mute(self) -> Awaitable[None]:
        """Until the worker exits, or its event pipe closes while it lives on: its flow closed it
        (``os.closerange`` in a tool, say). Such a run can no longer be followed: its process is
        killed, and the run ends failed saying why (``muted``). One watch, however many wait."""
        if self._exit_watch is None:
            self._exit_watch = asyncio.ensure_future(self._watch_exit())
        return asyncio.shield(self._exit_watch)

    _exit_watch: asyncio.Future | None = None

    async def _watch_exit(self) -> None:
        assert self.proc is not None
        exited = asyncio.ensure_future(self.proc.wait())
        closed = asyncio.ensure_future(self.closed.wait())
        try:
            await asyncio.wait([exited, closed], return_when=asyncio.FIRST_COMPLETED)
            if exited.done() or self.killed or self.stopping_since is not None:
                return
            if await self._exited_within(LINGER_S):  # a worker that ends closes its pipe just before
                return
            self.muted = True
            self.on_warning("the flow closed the pipe the run's events go out on: the run's process is ended")
            await self.kill()  # it is not the run the journal shows any more: no grace to go on in
        finally:
            exited.cancel()
            closed.cancel()

    def _end_group(self) -> None:
        """Kill what is left of the worker's process group (the worker has exited)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def ending(self, busy: str | None = None) -> tuple[str, str]:
        """(status, why) of a run whose worker is gone without a ``run.end``; ``busy``: what its run was
        busy with as last seen (``tool t``), what a stop that had to kill it says did not return."""
        code = self.proc.returncode if self.proc is not None else None
        if self.muted or code == EXIT_FD_CLOSED:
            return "failed", MUTED
        if self.stopping_since is not None:  # (how long it had when it was killed, not when that was seen)
            waited = (self.killed_at or time.monotonic()) - self.stopping_since
            why = f"{self.stop_reason} (" if self.stop_reason else ""
            if self.killed_by:
                return "stopped", f"{why}killed {waited:.1f} s after the stop: {self.killed_by}{')' if why else ''}"
            return "stopped", (f"{why}killed after {waited:.1f} s: {busy or 'a tool or hook'} did not return"
                               f"{')' if why else ''}")
        if code is None:
            return "failed", "the connection to the run was lost"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return "failed", f"the flow process was killed by {name} ({-code})"
        return "failed", f"the flow process exited with code {code}"

    def keep_journal(self, path: str | None) -> None:
        """The run about to start journals to ``path``: what the file holds already (earlier runs)
        is not this run's, so :meth:`recover` and :meth:`journaled` read only what comes after."""
        self.journal = path
        try:
            self._journal_from = os.path.getsize(path) if path is not None else 0
        except OSError:
            self._journal_from = 0

    _journal_from = 0

    def _journaled_since(self, after: int) -> list[tuple[int, bytes]]:
        """(seq, line) of this run's journal lines with a seq past ``after``, in order. Read from the
        end back, a block at a time, only as far as needed: the lines asked for are the last ones."""
        if self.journal is None:
            return []
        try:
            with open(self.journal, "rb") as f:
                end = f.seek(0, os.SEEK_END)
                start, block, lines = end, 1 << 16, []
                while start > self._journal_from:
                    start = max(self._journal_from, start - block)
                    f.seek(start)
                    lines = f.read(end - start).split(b"\n")
                    first = seq_of(lines[1] if start > self._journal_from and len(lines) > 1 else lines[0])
                    if first is not None and first <= after:
                        break
                    block *= 4
        except OSError:
            return []
        if start > self._journal_from:
            lines = lines[1:]  # the first may be the end of a line before the block
        lines = lines[:-1]  # after the last newline: nothing, or a line torn by a crash
        return [(seq, line) for line in lines if (seq := seq_of(line)) is not None and seq > after]

    def recover(self, after_seq: int) -> list[bytes]:
        """The events the dead worker journaled but never sent (its last batch): this run's lines of
        the journal after ``after_seq``. Its start and end among them are taken as from the pipe
        (its id; ``ended``)."""
        out = []
        for seq, line in self._journaled_since(after_seq):
            if b'"type":"run.start"' in line or b'"type":"run.end"' in line:
                self._watch(line)
            out.append(line)
        return out

    def in_order(self, batch: list[tuple[bytes, Any]], last: int) -> list[tuple[bytes, Any]]:
        """The events of ``batch`` (parsed, from :func:`parse_events`) in the run's order after event
        ``last``: each seq one past the one before. Each departure is said (``on_warning``). One
        that repeats or goes back is left out. The events missing before one that skips ahead are
        taken from the run's journal, which has them (a line written into the pipe by something
        else lost them); without them, a skip of a few events is taken as they were lost, and a
        longer one (no lost line explains it) is left out, so one stray seq cannot make the run's
        own events look late."""
        if not batch or [ev.seq for _, ev in batch] == list(range(last + 1, last + 1 + len(batch))):
            return batch
        out = []
        for line, ev in batch:
            if ev.seq <= last:
                self.on_warning(f"event {ev.seq} ({ev.type}) came after event {last}: it was left out "
                                "(something besides the run writes to its pipe?)")
                continue
            missing = ev.seq - last - 1
            if missing:
                found = self.journaled(last, ev.seq)
                if len(found) < missing and missing > MAY_BE_LOST:
                    self.on_warning(f"event {ev.seq} ({ev.type}) skips ahead of event {last}: it was left out "
                                    "(something besides the run writes to its pipe?)")
                    continue
                out += found
                self.on_warning(f"events {last + 1}-{ev.seq - 1} never arrived: "
                                + ("taken from the journal" if len(found) == missing
                                   else f"{len(found)} of them taken from the journal" if found
                                   else "the run goes on without them"))
            out.append((line, ev))
            last = ev.seq
        return out

    def journaled(self, after: int, before: int) -> list[tuple[bytes, Any]]:
        """This run's journaled events with a seq between ``after`` and ``before`` (neither
        included), parsed: what the pipe lost of them."""
        return parse_events(self.journaled_lines(after, before))

    def journaled_lines(self, after: int, before: int) -> list[bytes]:
        """The lines of those events, as the journal holds them."""
        return [line for seq, line in self._journaled_since(after) if seq < before and len(line) <= self.line_max]

    def write_run_end(self, status: str, why: str, last_seq: int) -> Any:
        """The ``run.end`` the worker could not write, appended to the run's journal when it has one;
        None before the run started."""
        if self.run_id is None:
            return None
        from flowtui.runtime.encoding import encode_event
        from flowtui.runtime.files import open_append
        from flowtui.runtime.journal import ended_by_flowtui
        from flowtui.runtime.journal import last_seq as journal_last_seq
        from flowtui.runtime.secrets import Redactor

        journaled = self.journal is not None and Path(self.journal).exists()
        seq = max(last_seq, journal_last_seq(Path(self.journal)) if journaled else 0) + 1
        ran_ms = round(max(time.time() - self.started_ts, 0.0) * 1000, 3) if self.started_ts else 0.0
        event = ended_by_flowtui(self.run_id, seq, status, why, ran_ms)
        if journaled:
            with open_append(Path(self.journal)) as f:
                f.write(encode_event(event, Redactor.from_environment()) + b"\n")
        return event
