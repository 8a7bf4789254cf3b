"""The app ends as with ``q`` when it is told to (``SIGTERM``) or its terminal goes (``SIGHUP``):
the run is stopped and its journal ends, and the terminal is given back as it was (Python's
default ended the process at once, leaving the terminal in the alternate screen with the mouse
reported and the cursor hidden). Brought back after a stop (``SIGTSTP``, then ``fg``), the app
is drawn whole again (Textual gives the terminal back and takes it again, but repaints only
what changes afterwards: the key bar and the panes stayed blank)."""

from __future__ import annotations

import asyncio
import signal
from typing import Any


def quit_on_signals(app: Any) -> None:
    """From the app's ``on_mount``: ``SIGTERM`` and ``SIGHUP`` run its quit action."""
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(signum, lambda: app.call_next(app.action_quit))
    app.app_resume_signal.subscribe(app, lambda _: app.refresh(repaint=True, layout=True))
