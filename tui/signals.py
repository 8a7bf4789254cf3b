"""The app ends as with ``q`` when it is told to (``SIGTERM``) or its terminal goes (``SIGHUP``):
the run is stopped and its journal ends, and the terminal is given back as it was (Python's
default ended the process at once, leaving the terminal in the alternate screen with the mouse
reported and the cursor hidden). Brought back after a stop (``SIGTSTP``, then ``fg``), the app
is drawn whole again (Textual gives the terminal back and takes it again, but repaints only
what changes afterwards: the key bar and the panes stayed blank).

A terminal that is gone (a closed window, a dropped ssh session) takes no more output: a write
to it can block the app for good, in a frame or in giving the terminal back. So after
``SIGHUP`` the app has ``HANGUP_DEADLINE_S`` to quit; past it, it ends at once. Its run's
process, whose commands' pipe then closes, stops the run and ends the journal itself.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from typing import Any

HANGUP_DEADLINE_S = 3.0  # q takes at most about 1.6 s (commands.QUIT_GRACE_S, four times)


def quit_on_signals(app: Any) -> None:
    """From the app's ``on_mount``: ``SIGTERM`` and ``SIGHUP`` run its quit action."""
    loop = asyncio.get_running_loop()

    def quit_because(reason: str, signum: int) -> None:  # what the run's end says (q's: "stopped by user")
        app.quit_reason = app.quit_reason or reason
        app.signalled = app.signalled or signum
        app.call_next(app.action_quit)

    loop.add_signal_handler(signal.SIGTERM, quit_because, "the app received SIGTERM", signal.SIGTERM)

    def hung_up(signum: int, frame: Any) -> None:
        # A handler of Python's own, not the event loop's: it runs even while a write to the gone
        # terminal holds the loop (which would never run one of the loop's).
        threading.Timer(HANGUP_DEADLINE_S, os._exit, args=(128 + signal.SIGHUP,)).start()
        loop.call_soon_threadsafe(quit_because, "the app's terminal went away (SIGHUP)", signal.SIGHUP)

    signal.signal(signal.SIGHUP, hung_up)
    app.app_resume_signal.subscribe(app, lambda _: app.refresh(repaint=True, layout=True))
