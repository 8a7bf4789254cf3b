"""Bytes from the terminal that are no UTF-8 do not end the app.

Textual's Linux driver decodes the terminal's input strictly: one byte that is
no UTF-8 (a terminal set to Latin-1 typing ``ç``, binary pasted, a stray
``\\xff``) raised in its input thread, and the app closed with a traceback, the
run with it. :class:`TolerantInput` (the apps) makes Textual's Linux driver
:func:`tolerant`: the same input loop, decoding with
``errors="replace"``, so such a byte arrives as ``�`` and the keys after it
as keys (a bracketed paste stays one paste).

The loop is Textual 8.2.8's ``LinuxDriver.run_input_thread`` with that one
change (textual is pinned; ``tests/tui/test_terminal_safety.py`` sends such
bytes through a real terminal).
"""

from __future__ import annotations

import os
import selectors
from codecs import getincrementaldecoder
from functools import cache
from typing import Any

from textual.driver import Driver


@cache
def tolerant(linux_driver: type[Driver]) -> type[Driver]:
    """Textual's Linux driver, whose input loop replaces what is no UTF-8 instead of raising (made
    when Textual picks that driver: its module needs termios, which Windows lacks)."""

    class TolerantLinuxDriver(linux_driver):  # type: ignore[valid-type,misc]
        run_input_thread = _run_input_thread

    return TolerantLinuxDriver


def _run_input_thread(self) -> None:
    """``LinuxDriver.run_input_thread``, decoding with ``errors="replace"``."""
    from textual._parser import ParseError
    from textual._xterm_parser import XTermParser

    selector = selectors.SelectSelector()
    selector.register(self.fileno, selectors.EVENT_READ)
    parser = XTermParser()
    decode = getincrementaldecoder("utf-8")(errors="replace").decode

    def process(selected: list, final: bool = False) -> None:
        for i, (_key, mask) in enumerate(selected):
            if mask & selectors.EVENT_READ:
                text = decode(os.read(self.fileno, 1024 * 4), final=final and i == len(selected) - 1)
                if not text:  # stdin piped, and at its end
                    break
                for event in parser.feed(text):
                    self.process_message(event)
        for event in parser.tick():
            self.process_message(event)

    try:
        while not self.exit_event.is_set():
            process(selector.select(0.1))
        selector.unregister(self.fileno)
        process(selector.select(0.1), final=True)
    finally:
        selector.close()
        try:
            for _event in parser.feed(""):
                pass
        except (EOFError, ParseError):
            pass


class TolerantInput:
    """Mixin of the apps: Textual's driver for this platform, its Linux one made :func:`tolerant` (a
    driver chosen through ``TEXTUAL_DRIVER``, the headless one of tests: as they are). An app that
    panics all the same (Textual closes it with a traceback) says so: ``panicked``, and the command's
    exit code 1, where Textual's return code stayed 0."""

    panicked = False

    def panic(self, *renderables: Any) -> None:
        self.panicked = True
        super().panic(*renderables)  # type: ignore[misc]

    @property
    def exit_code(self) -> int:
        """What the command exits with: the app's return code, 1 after a panic."""
        return self.return_code or (1 if self.panicked else 0)  # type: ignore[attr-defined]

    def get_driver_class(self) -> type[Driver]:
        chosen = super().get_driver_class()  # type: ignore[misc]
        if chosen.__module__ == "textual.drivers.linux_driver" and chosen.__name__ == "LinuxDriver":
            return tolerant(chosen)
        return chosen
