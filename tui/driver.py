"""Bytes from the terminal that are no UTF-8 do not end the app.

Textual's Linux driver decodes the terminal's input strictly: one byte that is
no UTF-8 (a terminal set to Latin-1 typing ``ç``, binary pasted, a stray
``\\xff``) raised in its input thread, and the app closed with a traceback, the
run with it. :class:`TolerantInput` (the apps) makes Textual's Linux driver
:func:`tolerant`: the same input loop, decoding with
``errors="replace"``, so such a byte arrives as ``�`` and the keys after it
as keys.

And a bracketed paste is one paste, whatever it holds: Textual's parser reads
an escape sequence inside a paste as it reads one typed, and sends what it does
not know as keys (a line copied from coloured output, ``error: \x1b[Kc``,
pressed ``c`` and continued the run). :class:`Pastes` takes each paste out of
the input whole, before the parser sees it.

The loop is Textual 8.2.8's ``LinuxDriver.run_input_thread`` with those two
changes (textual is pinned; ``tests/tui/test_terminal_safety.py`` sends such
bytes through a real terminal).
"""

from __future__ import annotations

import os
import selectors
from codecs import getincrementaldecoder
from functools import cache
from typing import Any

from textual import events
from textual.driver import Driver

from flowtui.runtime.inert import pasted


@cache
def tolerant(linux_driver: type[Driver]) -> type[Driver]:
    """Textual's Linux driver, whose input loop replaces what is no UTF-8 instead of raising (made
    when Textual picks that driver: its module needs termios, which Windows lacks)."""

    class TolerantLinuxDriver(linux_driver):  # type: ignore[valid-type,misc]
        run_input_thread = _run_input_thread

    return TolerantLinuxDriver


PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"
HOLD_S = 0.02  # what may begin a paste's marker waits this long for the rest (an escape key, this late)


class Pastes:
    """Splits the terminal's input into what the parser reads (keys, mouse, replies) and bracketed
    pastes, each whole, however the reads cut it (a marker split between two reads included), its
    control characters made visible (:func:`~flowtui.runtime.inert.pasted`)."""

    def __init__(self) -> None:
        self.pasted: list[str] | None = None  # inside a paste: what it holds so far
        self.held = ""  # the end of a read that may begin a marker

    def feed(self, text: str) -> list[str | events.Paste]:
        """``text`` read: the text for the parser, and the pastes it ends, in order."""
        out: list[str | events.Paste] = []
        text, self.held = self.held + text, ""
        while text:
            if self.pasted is None:
                start = text.find(PASTE_START)
                if start < 0:
                    # (held a moment: the loop hands it on if nothing follows soon, an escape key)
                    keep = _marker_begun(text, PASTE_START, least=1)
                    out.append(text[:len(text) - keep])
                    self.held = text[len(text) - keep:]
                    break
                out.append(text[:start])
                self.pasted, text = [], text[start + len(PASTE_START):]
            else:
                end = text.find(PASTE_END)
                if end < 0:
                    keep = _marker_begun(text, PASTE_END, least=1)
                    self.pasted.append(text[:len(text) - keep])
                    self.held = text[len(text) - keep:]
                    break
                self.pasted.append(text[:end])
                # (NUL: as Textual drops it); its control characters as the panes show them (ESC as ␛): the
                # box drew a paste as it came, so "\x1b[2J" in it wiped the screen and "\x1b]0;…\x07" set
                # the window's title. What is saved is what the box showed.
                out.append(events.Paste(pasted("".join(self.pasted).replace("\x00", ""))))
                self.pasted, text = None, text[end + len(PASTE_END):]
        return [part for part in out if part != ""]

    def flush(self) -> str:
        """Nothing came for a while: a held start of a marker was not one (keys, for the parser)."""
        held, self.held = (self.held, "") if self.pasted is None else ("", self.held)
        return held


def _marker_begun(text: str, marker: str, *, least: int) -> int:
    """How many characters at the end of ``text`` begin ``marker`` (at least ``least``, else 0)."""
    for k in range(min(len(marker) - 1, len(text)), least - 1, -1):
        if text.endswith(marker[:k]):
            return k
    return 0


def _run_input_thread(self) -> None:
    """``LinuxDriver.run_input_thread``, decoding with ``errors="replace"``, pastes taken whole."""
    from textual._parser import ParseError
    from textual._xterm_parser import XTermParser

    selector = selectors.SelectSelector()
    selector.register(self.fileno, selectors.EVENT_READ)
    parser = XTermParser()
    pastes = Pastes()
    decode = getincrementaldecoder("utf-8")(errors="replace").decode

    def parse(text: str) -> None:
        for event in parser.feed(text):
            self.process_message(event)

    def process(selected: list, final: bool = False) -> None:
        for i, (_key, mask) in enumerate(selected):
            if mask & selectors.EVENT_READ:
                text = decode(os.read(self.fileno, 1024 * 4), final=final and i == len(selected) - 1)
                if not text:  # stdin piped, and at its end
                    break
                for part in pastes.feed(text):
                    if isinstance(part, str):
                        parse(part)
                    else:
                        self.process_message(part)
        if not selected and (held := pastes.flush()):  # (feeding "" would end the parser)
            parse(held)
        for event in parser.tick():
            self.process_message(event)

    try:
        while not self.exit_event.is_set():
            process(selector.select(HOLD_S if pastes.held else 0.1))
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
