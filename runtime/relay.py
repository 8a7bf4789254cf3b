"""``flowtui run FLOW --listen``: the run in a worker process of its own, served on a socket.

The serving process is the worker's client, as the app is: it never imports
the flow, so whatever the flow does (a tool that never returns, a hook that
exits, a segfault) it still answers the attached client, stops the run on
``stop`` or ctrl-C within the grace period (the ``stop`` command, then
``SIGTERM``, then ``SIGKILL``), and writes the ``run.end`` the worker could
not. :class:`Relay` is what the :class:`~flowtui.runtime.listen.Listener`
serves in that case: the worker's ``hello`` and events passed on (every
event so far to whoever attaches), the client's commands forwarded under ids
of the channel's own, and their replies sent back under the client's.
"""

from __future__ import annotations

import asyncio
from typing import Any

from flowtui.runtime import protocol as p
from flowtui.runtime.channel import Channel
from flowtui.runtime.linestore import Lines
from flowtui.runtime.sender import Owed


class Relay:
    """A worker process, as the Listener's worker: see the module's docstring."""

    backlog: Lines  # every event so far (packed), and
    send: Any  # the attached client's sender: both set by the Listener it is given to

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self._set: dict[str, list[str]] = {}  # breakpoints and watches, as the worker last listed them
        self.owed = Owed()  # the replies on their way from the worker process, per client

    def hello(self) -> p.Hello:
        assert self.channel.hello is not None
        # started before anyone can attach; what a client set before this one is what is set now
        return self.channel.hello.model_copy(update={"started": True, **self._set})

    def relay(self, lines: list[bytes]) -> None:
        """Event lines of the run, in its order: kept for later clients, sent to the attached one."""
        for line in lines:
            data = line + b"\n"
            self.backlog.append(data)
            self.send(data, False)

    def log(self, text: str) -> None:
        """A line the flow printed (redacted already)."""
        self.send(p.encode(p.Log(text=text)), True)

    def reply(self, command: Any, error: str | None = None, value: Any = None) -> None:
        self.send(p.encode(p.Reply(id=command.id, ok=error is None, error=error, value=value)), True)

    def handle(self, command: Any) -> None:
        if command.type == "stop":  # made sure of here: the worker may be held by code that never returns
            if self.run_over():
                self.reply(command, "the run has ended")
                return
            self.reply(command)
            self.channel.begin_stop(command.reason)  # before whatever the client sent after it
            asyncio.ensure_future(self.channel.stop(reason=command.reason, begun=True))
            return
        sender = self.send  # the reply goes to the client that asked, also once it has detached

        def answered(reply: Any) -> None:
            if reply.ok and command.type in ("breakpoint", "watch") and isinstance(reply.value, list):
                self._set["breakpoints" if command.type == "breakpoint" else "watches"] = reply.value
            sender(p.encode(reply.model_copy(update={"id": command.id})), True)
            self.owed.paid(sender)

        self.owed.owe(sender)
        self.channel.forward(command, answered)

    def unsent(self) -> int:
        """Bytes of commands written to the worker process and not read by it yet."""
        return self.channel.unsent()

    def unanswered(self) -> int:
        """Commands forwarded to the worker process and not answered yet."""
        return self.channel.unanswered()

    def run_over(self) -> bool:
        return self.channel.ended or self.channel.closed.is_set() or self.channel.stopping_since is not None

    def pause_for_next(self) -> None:
        """The client left: the run pauses at its next pause point and waits for the next one."""
        if not self.run_over():
            self.channel.send(p.Pause())
