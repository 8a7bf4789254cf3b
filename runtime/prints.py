"""What a flow run in this very process prints (``flowtui run FLOW --listen``), kept off the terminal.

A flow run by a worker process prints into a pipe its client reads, redacts
and shows inertly. A served run's flow lives in the serving process itself, so
:class:`Prints` gives its file descriptors 1 and 2 a pipe of their own: a
thread reads it a line at a time, redacts credentials and makes control
characters visible, writes the line to the real stderr and sends it to the
attached client as a ``log`` message. The process's own messages go to
:attr:`Prints.out` and :attr:`Prints.err`, the real stdout and stderr.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import Any

from flowtui.runtime.channel import LOG_LINE_MAX
from flowtui.runtime.inert import visible
from flowtui.runtime.secrets import redact, secret_values


class Prints:
    def __init__(self) -> None:
        self.out = os.fdopen(os.dup(1), "w", buffering=1)
        self.err = os.fdopen(os.dup(2), "w", buffering=1)
        self.forward: Callable[[str], Any] | None = None  # a printed line to the attached client
        self._secrets = secret_values()
        self._mark = f"flowtui-settled-{os.urandom(8).hex()}\n".encode()
        self._settled = threading.Event()
        read, write = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(write, 1)
        os.dup2(write, 2)
        os.close(write)
        sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
        sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
        self._pump = threading.Thread(target=self._read, args=(read,), name="flowtui-prints", daemon=True)
        self._pump.start()

    def _read(self, fd: int) -> None:
        with os.fdopen(fd, "rb") as pipe:
            while line := pipe.readline(LOG_LINE_MAX + 1):
                if line == self._mark:
                    self._settled.set()
                    continue
                size = len(line)
                if not line.endswith(b"\n"):  # longer than the limit: the rest is read, not kept
                    while rest := pipe.readline(1 << 20):
                        size += len(rest)
                        if rest.endswith(b"\n"):
                            break
                text = line[:LOG_LINE_MAX].rstrip(b"\n").decode("utf-8", "replace")
                if size > LOG_LINE_MAX + 1:
                    text += f"… ({size:,} bytes, cut)"
                text = visible(redact(text, self._secrets))
                print(text, file=self.err, flush=True)
                if self.forward is not None:
                    self.forward(text)

    async def settle(self, wait: float = 2.0) -> None:
        """Until what was printed so far is shown and handed to :attr:`forward` (and its callbacks on
        this event loop have run): the run's last words reach the client before it is let go."""
        import asyncio

        sys.stdout.flush()
        sys.stderr.flush()
        self._settled.clear()
        os.write(1, self._mark)
        await asyncio.get_running_loop().run_in_executor(None, self._settled.wait, wait)
        await asyncio.sleep(0)

    def close(self, wait: float = 2.0) -> None:
        """Back to the real stdout and stderr, once what was printed is shown."""
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(self.out.fileno(), 1)
        os.dup2(self.err.fileno(), 2)  # the pipe's last writers gone: its reader ends
        sys.stdout, sys.stderr = self.out, self.err
        self._pump.join(wait)
