"""Starting a worker process: how (:class:`Options`), and, for one started before any event loop
ran (:meth:`Options.start_now`, the app's command line does it to win time), its pipes taken over as
the streams asyncio's own subprocesses have (:func:`take_over`). :class:`~flowtui.runtime.channel.Channel`
does the rest."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass, field

STOP_GRACE_S = 1.0  # a stop that has not ended the run by then: terminate, then kill
# What a client sends its worker when a stop reached no pause point in time: the worker unwinds the code
# that holds it and the run ends stopped. Not SIGTERM: that one comes from elsewhere (a supervisor, kill),
# and a run ended by it failed, saying so.
STOP_SIGNAL = signal.SIGUSR1
# The run's process ends with this code when the flow closed a file descriptor of its own (its event
# pipe, its event loop's): a client that saw no run.end says so, not "exited with code 1".
EXIT_FD_CLOSED = 9
UNSTARTED = "making its agents, tools and providers"  # what a run's start does before it is answered
CHUNK = 1 << 16
LINE_MAX = 1 << 26  # a protocol line from a peer longer than this (64 MiB) is read to its end and left out, said
WHOLE_LINE_MAX = 1 << 30  # and from a run's process of one's own (as a journal's line, 1 GiB)
PIPE_SIZE = 1 << 20  # the event pipe's capacity, where the system lets us set it
_REPLY_HEAD = re.compile(rb'\{\s*"type"\s*:\s*"reply"\s*,\s*"id"\s*:\s*(-?\d{1,18})\s*[,}]')


def reply_id(head: bytes) -> int | None:
    """The id of the reply a protocol line starts with (its first bytes are enough), or None."""
    found = _REPLY_HEAD.match(head)
    return int(found.group(1)) if found is not None else None


def too_long_said(size: int, limit: int, between: str) -> str:
    """Why a reply of ``size`` bytes is refused in its place: more than a line ``between`` may be."""
    return (f"its answer was {size:,} bytes, more than a line {between} may be ({limit:,}); the run's journal holds "
            "the value whole")


@dataclass
class Options:
    """How to start a worker (the command line's flow arguments)."""

    target: str
    model: str | None = None
    replies: str | None = None
    record: str | None = None
    replay: str | None = None
    journal: str | None = None
    snapshot: str | None = None
    breakpoints: list[str] = field(default_factory=list)
    grace: float = STOP_GRACE_S
    wire_limit: int | None = None  # None: the protocol's default; 0: never cut
    debug: bool = False
    env: dict[str, str] | None = None

    def argv(self) -> list[str]:
        # -P: the folder it starts in is not put first on the import path (a json.py there would
        # shadow the standard library for the whole worker, flowtui included)
        argv = [sys.executable, "-P", "-m", "flowtui.runtime.worker", self.target, "--grace", str(self.grace)]
        if self.wire_limit is not None:
            argv += ["--wire-limit", str(self.wire_limit)]
        if self.debug:
            argv.append("--debug")
        for flag in ("model", "replies", "record", "replay", "journal", "snapshot"):
            value = getattr(self, flag)
            if value is not None:
                argv += [f"--{flag}", str(value)]
        for name in self.breakpoints:
            argv += ["--breakpoint", name]
        return argv

    def environment(self) -> dict[str, str]:
        env = {**os.environ, **(self.env or {}), "PYTHONUNBUFFERED": "1"}
        # the token clients attach with is this process's: the flow's code, and whatever it starts (a
        # shell tool the model drives), could read it from its own environment and attach to the run
        env.pop("FLOWTUI_TOKEN", None)
        return env

    def start_now(self) -> subprocess.Popen:
        """Start the worker at once, before any event loop runs, for :meth:`Channel.spawn` to take over
        (``started=``): the app's command line does, so the flow loads while the app imports and
        draws its first frame. A worker nobody takes over ends when this process does (its input
        closes)."""
        popen = subprocess.Popen(self.argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 start_new_session=True, env=self.environment())
        _widen(popen.stdout)
        return popen


def _widen(pipe: object) -> None:
    """The event pipe made as wide as an unprivileged process may (Linux: 1 MiB; elsewhere, or past
    the system's limit, it stays as it is). In a flood the worker then goes on writing while the
    app draws a frame, instead of waiting on a 64 KiB pipe after every batch."""
    import fcntl

    if hasattr(fcntl, "F_SETPIPE_SZ"):
        try:
            fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        except OSError:
            pass


class Started:
    """A worker process (:meth:`Options.start_now`), seen as asyncio's ``Process`` is: its pid, its
    exit code once it has one, and a wait for it. Unlike asyncio's, the wait ends when the process
    does, not when every copy of its pipes is closed: a process the flow forked may keep them open
    for ever. :meth:`let_go` stops reading them."""

    def __init__(self, popen: subprocess.Popen, pipes: list[asyncio.BaseTransport] = ()) -> None:
        self._popen = popen
        self.pid = popen.pid
        self._pipes = list(pipes)

    def let_go(self) -> None:
        """Close this side of the worker's output pipes (their readers see their end)."""
        for pipe in self._pipes:
            pipe.close()

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    async def wait(self) -> int:
        while self._popen.poll() is None:
            await asyncio.sleep(0.02)
        return self._popen.returncode


async def take_over(popen: subprocess.Popen) -> tuple[Started, asyncio.StreamWriter, asyncio.StreamReader,
                                                       asyncio.StreamReader]:
    """``popen``'s pipes as the streams asyncio's own subprocesses have."""
    loop = asyncio.get_running_loop()
    out, err = asyncio.StreamReader(limit=CHUNK), asyncio.StreamReader(limit=CHUNK)
    out_pipe, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(out), popen.stdout)
    err_pipe, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(err), popen.stderr)
    protocol = asyncio.StreamReaderProtocol(asyncio.StreamReader())
    transport, _ = await loop.connect_write_pipe(lambda: protocol, popen.stdin)
    return Started(popen, [out_pipe, err_pipe]), asyncio.StreamWriter(transport, protocol, None, loop), out, err
