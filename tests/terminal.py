"""A real terminal for tests: a command in a pseudo-terminal, every byte it writes kept, and a
VT100 screen (pyte) fed from them.

The bytes are what a terminal would receive; the screen is what a person would see, and its
``title`` is what the window title became. Used to prove that nothing a flow, a model or a
journal writes takes over the terminal.
"""

from __future__ import annotations

import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import fcntl
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pyte

ROOT = Path(__file__).resolve().parents[1]


class Terminal:
    """``argv`` running in a ``cols`` x ``rows`` pseudo-terminal."""

    def __init__(self, argv: list[str], *, cols: int = 120, rows: int = 40, cwd: Path | str = ROOT,
                 env: dict[str, str] | None = None) -> None:
        self.cols, self.rows = cols, rows
        self.screen = pyte.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)
        self.output = bytearray()
        self._lock = threading.Lock()
        self._last_output = time.monotonic()
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        full_env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(cols), "LINES": str(rows),
                    **(env or {})}
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=full_env,
                                     start_new_session=True, close_fds=True)
        os.close(slave)
        self.master = master
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @classmethod
    def flowtui(cls, *args: str, **kwargs) -> "Terminal":
        return cls([sys.executable, "-c", "from flowtui.tui.cli import main; main()", *args], **kwargs)

    def _read(self) -> None:
        while True:
            try:
                ready, _, _ = select.select([self.master], [], [], 0.1)
                if not ready:
                    if self.proc.poll() is not None:
                        return
                    continue
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            with self._lock:
                self.output.extend(data)
                self.stream.feed(data)
                self._last_output = time.monotonic()

    def send(self, keys: str | bytes) -> None:
        os.write(self.master, keys.encode() if isinstance(keys, str) else keys)

    def hang_up(self) -> None:
        """The terminal goes away (a closed window, a dropped ssh session): its side of the pty is
        closed, so whatever the program writes to it fails, and the program is sent ``SIGHUP``."""
        os.close(self.master)
        self.proc.send_signal(signal.SIGHUP)

    def clear(self) -> None:
        """Forget what the screen shows, as when another program (a shell) drew over it."""
        with self._lock:
            self.screen.reset()

    def text(self) -> str:
        """What the screen shows now, one line per row."""
        with self._lock:
            return "\n".join(self.screen.display)

    def wait_for(self, what: str | Callable[[], bool], timeout: float = 30.0) -> None:
        """Until the screen shows ``what`` (or ``what()`` holds); fails with the screen on a timeout.
        Then until the output pauses, so what follows reads a whole frame (see ``_settle``)."""
        check = what if callable(what) else (lambda: what in self.text())
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what!r}; the screen:\n{self.text()}")
            if self.proc.poll() is not None and not callable(what):
                time.sleep(0.2)
                if check():
                    return
                raise AssertionError(f"the program exited ({self.proc.returncode}) before showing {what!r}; "
                                     f"the screen:\n{self.text()}")
            time.sleep(0.05)
        self._settle()

    def _settle(self, quiet: float = 0.05, at_most: float = 1.0) -> None:
        """Until nothing was written for ``quiet`` seconds (``at_most`` for an app that never stops
        drawing). The pty hands a large frame over in pieces: what was waited for may be in the first,
        and the rest of the screen it redraws in the next (a test read it half drawn, on a loaded machine)."""
        deadline = time.monotonic() + at_most
        while time.monotonic() < deadline:
            with self._lock:
                since = time.monotonic() - self._last_output
            if since >= quiet:
                return
            time.sleep(quiet - since)

    def wait_exit(self, timeout: float = 30.0) -> int:
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=5)
        return code

    @property
    def title(self) -> str:
        return self.screen.title

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        self._reader.join(timeout=5)
        try:
            os.close(self.master)
        except OSError:
            pass

    def __enter__(self) -> "Terminal":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
