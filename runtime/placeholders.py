"""Putting back what a shown text hid, after a person edited it.

A text is shown with stand-ins (``[redacted]`` for a credential, ``␛`` for an
escape character); a person edits the shown form; what they left untouched
must go back to what it stood for, *where it stood*. Filling the stand-ins in
order was wrong as soon as one was deleted (the next credential moved into its
place) or the text already held a stand-in's form literally. So each stand-in
is followed through the edit: the shown and the edited text are aligned
(:class:`difflib.SequenceMatcher`), and a stand-in inside a stretch the person
left as it was goes back; one typed, moved or retyped stays as typed.
"""

from __future__ import annotations

# Past this many characters changed on each side, the changed stretch is not aligned (a quadratic
# cost): stand-ins in it stay as typed; the unchanged start and end still get theirs back.
_ALIGNED = 20_000


def put_back(edited: str, shown: str, hidden: dict[int, tuple[int, str]], *, after: int | None = None) -> str:
    """``edited`` (typed over ``shown``) with each stand-in left untouched replaced by what it hid.

    ``hidden`` maps where a stand-in starts in ``shown`` to (its length, what it stands for). ``after``:
    how many characters follow the cursor in ``edited``, where the person typed last. Text typed just as a
    stretch of ``shown`` reads (``\\u202e`` before the escape it looks like) aligns with it at either end;
    what follows the cursor is the text left as it was, so the end is aligned first, up to the cursor."""
    if not hidden:
        return edited
    tail = 0 if after is None else min(_common_prefix(shown[::-1], edited[::-1]), max(after, 0))
    head = _common_prefix(shown[:len(shown) - tail], edited[:len(edited) - tail])
    # (then the rest of the end: with the cursor at the end, an edit near the start left all of it as it was)
    tail += _common_prefix(shown[head:len(shown) - tail][::-1], edited[head:len(edited) - tail][::-1])
    # stretches left as they were: (start in shown, start in edited, length)
    same = [(0, 0, head), (len(shown) - tail, len(edited) - tail, tail)]
    middle_shown, middle_edited = shown[head:len(shown) - tail], edited[head:len(edited) - tail]
    if len(middle_shown) <= _ALIGNED and len(middle_edited) <= _ALIGNED:
        from difflib import SequenceMatcher  # (an edit's, not every start's)

        matcher = SequenceMatcher(None, middle_shown, middle_edited, autojunk=False)
        same += [(head + a, head + b, n) for a, b, n in matcher.get_matching_blocks() if n]
    back = []
    for at, (size, what) in hidden.items():
        for a, b, n in same:
            if a <= at and at + size <= a + n:
                back.append((b + at - a, size, what))
                break
    return _replaced(edited, back)


def shown_with(text: str, stand_ins: list[tuple[int, int, str]]) -> tuple[str, dict[int, tuple[int, str]]]:
    """``text`` with each (start, end, stand-in) span replaced, and the map :func:`put_back` takes."""
    parts, hidden, at, last = [], {}, 0, 0
    for start, end, form in stand_ins:
        parts.append(text[last:start])
        at += start - last
        hidden[at] = (len(form), text[start:end])
        parts.append(form)
        at += len(form)
        last = end
    parts.append(text[last:])
    return "".join(parts), hidden


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    lo, hi = 0, n  # the longest prefix, found by halving (slices compare at C speed)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _replaced(text: str, spans: list[tuple[int, int, str]]) -> str:
    out, last = [], 0
    for at, size, what in sorted(spans):
        out += (text[last:at], what)
        last = at + size
    out.append(text[last:])
    return "".join(out)
