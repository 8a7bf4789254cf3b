"""Untrusted text made inert: what a model, a tool or a journal wrote never drives a terminal.

One rule, applied wherever flowtui draws or prints text it did not write
(model replies, reasoning, tool names, arguments and output, errors, memory,
tasks, state and ``ctx`` values, journals recorded elsewhere, file names):

- C0 control characters other than newline and tab, and DEL, become their
  Unicode Control Pictures (``ESC`` → ``␛``, ``BEL`` → ``␇``, a lone carriage
  return → ``␍``); ``\\r\\n`` is a newline;
- C1 control characters (``\\x80``–``\\x9f``: CSI ``\\x9b``, OSC ``\\x9d``, ST
  ``\\x9c`` ...), the bidirectional overrides, isolates and marks (U+202A–U+202E,
  U+2066–U+2069, U+200E, U+200F, U+061C) and the invisible ones (U+200B, U+2060–U+2064,
  U+FEFF, the soft hyphen, fillers, the line and paragraph separators, the tag characters)
  become ``\\x9b``-style escapes, since they have no pictures; so does a lone
  surrogate (``\\ud800``), which no terminal can be sent.

So ``"\\x1b]0;pwned\\x07"`` is shown as ``␛]0;pwned␇``: visible, and no
terminal acts on it. The model always receives the exact text; only what is
drawn or printed changes. :func:`unvisible` maps an edit made on the visible
form back, so editing a message that held control characters loses nothing.

Rich markup is the other half of the rule: untrusted text is always drawn as
plain ``Text``, never parsed as markup (the app's widgets never get a markup
string built from it).
"""

from __future__ import annotations

import re

from flowtui.runtime.placeholders import put_back, shown_with

_PICTURES = {c: chr(0x2400 + c) for c in range(0x20) if c not in (0x09, 0x0A)}
_PICTURES[0x7F] = "\u2421"  # ␡
_ESCAPES = {c: f"\\x{c:02x}" for c in range(0x80, 0xA0)}
_ESCAPES.update({c: f"\\u{c:04x}" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))})
# Invisible ones that no script needs to be drawn (zero-width joiners, which emoji and some scripts
# do need, stay): "zero\u200bwidth" looked like "zerowidth", a name spoofed in plain sight.
_ESCAPES.update({c: f"\\u{c:04x}" for c in (0x061C, 0x200B, 0x200E, 0x200F, *range(0x2060, 0x2065), 0xFEFF)})
# More that draw as nothing: the soft hyphen, the combining grapheme joiner, fillers (Hangul, Khmer,
# Mongolian), the line and paragraph separators (which a terminal does not break on), deprecated
# format characters, interlinear annotation marks; and the tag characters (U+E0000-U+E007F), which
# spell ASCII invisibly: "sunny<tags: IGNORE PREVIOUS INSTRUCTIONS> 21C" looked like "sunny 21C".
_ESCAPES.update({c: f"\\u{c:04x}" for c in (0x00AD, 0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180E, 0x2028,
                                            0x2029, *range(0x206A, 0x2070), 0x3164, 0xFFA0,
                                            *range(0xFFF9, 0xFFFC))})
_ESCAPES.update({c: f"\\U{c:08x}" for c in range(0xE0000, 0xE0080)})
# A lone surrogate (a journal's "\ud800") is no character: no terminal can be sent one (printing it
# raised UnicodeEncodeError, and flowtui diff ended in a traceback).
_ESCAPES.update({c: f"\\u{c:04x}" for c in range(0xD800, 0xE000)})
_TABLE = str.maketrans({**_PICTURES, **_ESCAPES})
# The characters above that are no control characters, as a regex class's body (a line of JSON escapes them too)
INVISIBLE = ("\xad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b\u200e\u200f\u2028\u2029\u202a-\u202e"
             "\u2060-\u2064\u2066-\u206f\u3164\ufeff\uffa0\ufff9-\ufffb\U000e0000-\U000e007f")
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f" + INVISIBLE + "\ud800-\udfff]")
_CRLF_OR_UNSAFE = re.compile("\r\n|" + _UNSAFE.pattern)


def visible(text: str) -> str:
    """``text`` with every control character shown, never sent (see the module docstring)."""
    if not _UNSAFE.search(text):
        return text
    return text.replace("\r\n", "\n").translate(_TABLE)


def pasted(text: str) -> str:
    """A paste as an edit box takes it: its line breaks as newlines (terminals send a paste's as
    ``\r``), every other character :func:`visible` shows as it shows it (``ESC`` as ``␛``, U+202E as
    ``\u202e``, a zero-width space as ``\u200b``), so the box never sends one to the terminal (an
    override drew the box's line reordered), and what it shows is what is saved: a zero-width space or
    a tag character (which spells ASCII invisibly) went to the model unseen, and the box showed it
    escaped only once reopened."""
    return visible(text.replace("\r\n", "\n").replace("\r", "\n"))


def is_inert(text: str) -> bool:
    """True when ``text`` holds nothing a terminal would act on (other than newline and tab)."""
    return _UNSAFE.search(text) is None


def unvisible(edited: str, original: str, *, after: int | None = None) -> str:
    """``edited`` (typed over ``visible(original)``) with the shown control characters put back.

    Each comes back where it was, if the person left it as it was (see
    :mod:`flowtui.runtime.placeholders`): a ``␛`` typed on purpose, or one the text held as it is,
    stays a ``␛``.
    """
    if is_inert(original):
        return edited
    # a \r\n is shown as a line break: one left where it was is a \r\n again, not a \n
    shown, hidden = shown_with(original, [(m.start(), m.end(), "\n" if m.group(0) == "\r\n" else
                                           m.group(0).translate(_TABLE))
                                          for m in _CRLF_OR_UNSAFE.finditer(original)])
    return put_back(edited, shown, hidden, after=after)
