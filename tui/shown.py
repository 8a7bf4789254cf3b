"""What reaches the screen: no credential, and nothing a terminal would act on.

Every text the app draws that it did not write itself (model replies, tool
names and output, errors, memory, tasks, state and ``ctx`` values, names from
the flow, journals recorded elsewhere, file names) goes through :func:`shown`:
the runtime's redaction rule (:mod:`flowtui.runtime.secrets`) and its
inertness rule (:mod:`flowtui.runtime.inert`: control characters shown as
``␛``, ``␇``, ``\\x9b``...). Widgets receive it as plain ``Text``/``Segment``
content, never as markup, and notifications are sent with ``markup=False``
(:class:`PlainNotify`).

An edit dialog shows the shown text too, and :func:`unshown` puts back, where
the person left them untouched, the credentials and control characters the
original held, so saving an edit loses nothing.
"""

from __future__ import annotations

import asyncio
import sys

from flowtui.runtime.inert import unvisible, visible
from flowtui.runtime.secrets import MARK, environment_secrets, redact, redact_streaming, restore

__all__ = ["MARK", "PlainNotify", "shown", "shown_apart", "shown_head", "shown_line", "shown_markup",
           "shown_streaming", "shown_tail", "unshown"]

APART_CHARS = 1_000_000  # a longer text is made safe in a process of its own (see ``shown_apart``)



def shown(text: str) -> str:
    """``text`` as it may be drawn."""
    return visible(redact(text, environment_secrets()))


async def shown_apart(text: str) -> str:
    """``shown(text)`` without holding the app up: a long text is made safe in a process of its own
    (50 MB full of escape sequences and keys took 5 s, which in the app's process froze it, and in
    a thread of it still stalled it 2 s: the expressions hold the interpreter)."""
    if len(text) < APART_CHARS:
        return shown(text)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-P", "-m", "flowtui.tui.shown", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    out, _ = await proc.communicate(text.encode("utf-8", "surrogatepass"))
    if proc.returncode != 0:  # (it could not start, or was killed): here, then
        return shown(text)
    return out.decode("utf-8", "surrogatepass")


def shown_markup(text: str) -> str:
    """``shown(text)`` for a place Textual reads as markup (the command palette's entries): its
    square brackets escaped, so a name like ``x[/]`` or ``[@click=app.quit]`` is drawn as written,
    never parsed (it crashed the palette, or ran the action when clicked). Textual's parser takes
    the backslash right before a ``[`` as its escape and every other backslash as written, so each
    ``[`` gets one and nothing else changes (``textual.markup.escape`` doubles backslashes the parser
    then draws doubled: ``A\\[b]`` was shown ``A\\\\[b]``)."""
    return shown(text).replace("[", "\\[")


def shown_line(text: str, limit: int) -> str:
    """``shown(text)`` on one row of at most ``limit`` characters: a line break as ``⏎``, a tab as ``⇥``
    (a raw tab reached the terminal, which moved the rest of the row), the end cut with ``…``. Only
    the head a row can show is made safe (a 20 MB value costs what its head does)."""
    line = shown_head(text, limit).replace("\n", " ⏎ ").replace("\t", "⇥")
    return line if len(line) <= limit else line[:limit - 1] + "…"


def shown_path(text: str, limit: int = 240) -> str:
    """A file's path made safe on one line (``⏎`` for a line break), its start and its end kept when long:
    a file's name is at the end of its path."""
    line = shown(text).replace("\n", " ⏎ ").replace("\r", " ⏎ ").replace("\t", "⇥")
    return line if len(line) <= limit else f"{line[:limit // 3]} … {line[-(limit - limit // 3 - 3):]}"


def shown_head(text: str, n: int) -> str:
    """At least the first ``n`` characters of ``shown(text)`` (when ``text`` has them), paying for
    those only: a 50 MB value costs what its head does. A credential that starts before the cut and
    ends after it is hidden all the same (the cut leaves room for the longest one, and hides the
    first characters of one it still ends inside)."""
    room = n + max(256, max(map(len, environment_secrets()), default=0))
    return shown(text) if len(text) <= room else shown_streaming(text[:room])


def shown_tail(text: str, n: int) -> str:
    """At least the last ``n`` characters of :func:`shown_streaming` ``(text)``, paying for those only: a
    reply of 30 MB streaming in costs what its end does. A credential the cut falls inside is hidden
    all the same: the cut is made with room for the longest one before it, redacted, and that room
    (where the credential's unhidden end would be) is dropped."""
    room = max(256, max(map(len, environment_secrets()), default=0))
    if len(text) <= n + 2 * room:
        return shown_streaming(text)
    return visible(redact_streaming(text[-(n + 2 * room):], environment_secrets())[room:])


def shown_streaming(text: str) -> str:
    """A reply still arriving, as it may be drawn: the first characters of a credential at its end hidden too."""
    return visible(redact_streaming(text, environment_secrets()))


def unshown(edited: str, original: str, *, after: int | None = None) -> str:
    """``edited`` (typed over ``shown(original)``) with what :func:`shown` hid put back where untouched;
    ``after``: how many characters follow the cursor (see :func:`flowtui.runtime.placeholders.put_back`)."""
    redacted = redact(original, environment_secrets())
    return restore(unvisible(edited, redacted, after=after), original, environment_secrets())


class PlainNotify:
    """App mixin: every notification is shown text, never parsed as markup."""

    def notify(self, message: str, *, title: str = "", severity: str = "information",  # type: ignore[override]
               timeout: float | None = None, markup: bool = False) -> None:
        super().notify(shown(message), title=shown(title), severity=severity, timeout=timeout,  # type: ignore[misc]
                       markup=False)

    def action_help_quit(self) -> None:
        """ctrl+c does not quit (it copies in a text field): say which keys do (Textual's own words
        carry markup, which a plain notification would show as written)."""
        keys = [key for key, active in self.active_bindings.items()  # type: ignore[attr-defined]
                if active.binding.action in ("quit", "app.quit")]
        if keys:
            self.notify(f"Press {' or '.join(keys)} to quit the app", title="Do you want to quit?")


if __name__ == "__main__":  # shown_apart's process: standard input made safe to standard output
    sys.stdout.buffer.write(shown(sys.stdin.buffer.read().decode("utf-8", "surrogatepass"))
                            .encode("utf-8", "surrogatepass"))
