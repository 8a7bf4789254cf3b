"""Untrusted text made inert: what a model, a tool or a journal wrote never drives a terminal.

One rule, applied wherever flowtui draws or prints text it did not write
(model replies, reasoning, tool names, arguments and output, errors, memory,
tasks, state and ``ctx`` values, journals recorded elsewhere, file names):

- C0 control characters other than newline and tab, and DEL, become their
  Unicode Control Pictures (``ESC`` → ``␛``, ``BEL`` → ``␇``, a lone carriage
  return → ``␍``); ``\\r\\n`` is a newline;
- C1 control characters (``\\x80``–``\\x9f``: CSI ``\\x9b``, OSC ``\\x9d``, ST
  ``\\x9c`` ...) and the bidirectional overrides and isolates (U+202A–U+202E,
  U+2066–U+2069) become ``\\x9b``-style escapes, since they have no pictures.

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

_PICTURES = {c: chr(0x2400 + c) for c in range(0x20) if c not in (0x09, 0x0A)}
_PICTURES[0x7F] = "\u2421"  # ␡
_ESCAPES = {c: f"\\x{c:02x}" for c in range(0x80, 0xA0)}
_ESCAPES.update({c: f"\\u{c:04x}" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))})
_TABLE = str.maketrans({**_PICTURES, **_ESCAPES})
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_FORMS = {form: chr(c) for c, form in {**_PICTURES, **_ESCAPES}.items()}
_FORM_RE = re.compile("|".join(re.escape(f) for f in sorted(_FORMS, key=len, reverse=True)))


def visible(text: str) -> str:
    """``text`` with every control character shown, never sent (see the module docstring)."""
    if not _UNSAFE.search(text):
        return text
    return text.replace("\r\n", "\n").translate(_TABLE)


def is_inert(text: str) -> bool:
    """True when ``text`` holds nothing a terminal would act on (other than newline and tab)."""
    return _UNSAFE.search(text) is None


def unvisible(edited: str, original: str) -> str:
    """``edited`` (typed over ``visible(original)``) with the shown control characters put back.

    Only as many of each character as the original held come back, so a person who
    typed ``␛`` on purpose into a text that had none keeps it.
    """
    if visible(original) == original:
        return edited
    held = [m.group(0) for m in _UNSAFE.finditer(original.replace("\r\n", "\n"))]
    if not held:
        return edited
    pending = list(held)

    def back(m: re.Match[str]) -> str:
        char = _FORMS[m.group(0)]
        if char in pending:
            pending.remove(char)
            return char
        return m.group(0)

    return _FORM_RE.sub(back, edited)
