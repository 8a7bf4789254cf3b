"""What a parsed watchpoint is made of, and how each part evaluates (the parser is
:mod:`flowtui.runtime.watch`, the checker that calls them after every event
:mod:`flowtui.runtime.watching`).

A *subject* reads one value from a run (:class:`StateField`, :class:`Bucket`,
:class:`Len`, :class:`PromptTokens`, :class:`Total`, :class:`Repeat`); a
*condition* (:class:`Compare`, :class:`Changed`, :class:`Matches`,
:class:`Both`) evaluates to ``(true now, true because of this very event, what
made it so)``. Values compare like JSON: no Python object is ever evaluated.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import regex  # re's syntax, and a search that can time out

from flowtui.runtime.context import NON_FINITE_WORDS

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "(absent)"})()  # a field the run does not have

OPS = {"==": operator.eq, "!=": operator.ne, "<=": operator.le, ">=": operator.ge, "<": operator.lt,
       ">": operator.gt}


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# A number written as a text: how a Decimal is journaled (JSON numbers would go through a float)
_NUMBER_TEXT = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def compare(v: Any, op: str, lit: Any) -> bool:
    """JSON-like comparison: a number only with a number, a text with a text, true/false/null
    only with == and !=; anything else is unequal (and never ordered). An absent field is never true.
    A text that is a number (a Decimal, as it is journaled) is that number to a number."""
    if v is MISSING:
        return False
    if isinstance(v, str) and is_number(lit):
        if v in NON_FINITE_WORDS:
            v = NON_FINITE_WORDS[v]  # a float the run said in words (JSON has none for it): compared as the float
        elif len(v) <= 100 and _NUMBER_TEXT.fullmatch(v):
            if lit != lit:  # a NaN: unequal to all, ordered with none
                return op == "!="
            return OPS[op](Decimal(v), Decimal(repr(lit)) if isinstance(lit, float) else lit)  # (0.1 as typed)
    if op in ("==", "!="):
        same = (is_number(v) and is_number(lit)) or type(v) is type(lit)
        return (same and v == lit) == (op == "==")
    if (is_number(v) and is_number(lit)) or (isinstance(v, str) and isinstance(lit, str)):
        return OPS[op](v, lit)
    return False


def _show(v: Any, limit: int = 80) -> str:
    if v is MISSING:
        return "(absent)"
    text = "null" if v is None else "true" if v is True else "false" if v is False else repr(v)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def literal_text(v: Any) -> str:
    """A literal as a watchpoint writes it: null, true, 'text', 3."""
    return "null" if v is None else "true" if v is True else "false" if v is False else \
        repr(v) if isinstance(v, str) else str(v)


# --- subjects: what a condition reads -------------------------------------------------------------

@dataclass(frozen=True)
class Subject:
    dep = ""  # the kind of change that can move its value (see watching.Change)
    numeric = False  # compared with numbers only
    local = True  # read from one run (False: the run's totals)

    def value(self, track: Any, totals: Any) -> Any:
        raise NotImplementedError


@dataclass(frozen=True)
class StateField(Subject):
    parts: tuple[str | int, ...]
    column: int
    dep = "state"

    def __str__(self) -> str:
        return "state." + ".".join(str(p) for p in self.parts)

    def value(self, track: Any, totals: Any) -> Any:
        return dig(track.state.get(self.parts[0], MISSING), self.parts[1:])

    def change(self, change: Any) -> tuple[Any, Any] | None:
        """(old, new) when ``change`` changed this field (a sub-path: its part of the field)."""
        if change.path != self.parts[0]:
            return None
        old, new = dig(change.old, self.parts[1:]), dig(change.new, self.parts[1:])
        return None if old == new and type(old) is type(new) else (old, new)

    def gained(self, change: Any) -> list[str]:
        moved = self.change(change) if "state" in change.kinds else None
        if moved is None:
            return []
        old, new = moved
        if isinstance(new, list):
            return [x for x in new_items(old if isinstance(old, list) else [], new) if isinstance(x, str)]
        return [new] if isinstance(new, str) else []


def dig(value: Any, parts: tuple[str | int, ...]) -> Any:
    for part in parts:
        if isinstance(value, dict) and str(part) in value:  # (JSON's keys are text: state.counts.3 is key "3")
            value = value[str(part)]
        elif isinstance(value, list) and isinstance(part, int) and -len(value) <= part < len(value):
            value = value[part]
        else:
            return MISSING
    return value


def new_items(old: list, new: list) -> list:
    """The items of ``new`` that ``old`` did not hold (counting repeats)."""
    left = list(old)
    out = []
    for item in new:
        if item in left:
            left.remove(item)
        else:
            out.append(item)
    return out


@dataclass(frozen=True)
class Bucket(Subject):
    name: str

    @property
    def dep(self) -> str:  # type: ignore[override]
        return self.name

    def __str__(self) -> str:
        return self.name

    def value(self, track: Any, totals: Any) -> Any:
        return getattr(track, self.name)

    def gained(self, change: Any) -> list[str]:
        return change.added if self.name in change.kinds else []


@dataclass(frozen=True)
class Len(Subject):
    inner: Subject
    numeric = True

    @property
    def dep(self) -> str:  # type: ignore[override]
        return self.inner.dep

    def __str__(self) -> str:
        return f"len({self.inner})"

    def value(self, track: Any, totals: Any) -> Any:
        v = self.inner.value(track, totals)
        return len(v) if isinstance(v, (list, tuple, str, dict)) else MISSING


@dataclass(frozen=True)
class PromptTokens(Subject):
    dep = "prompt"
    numeric = True

    def __str__(self) -> str:
        return "prompt.tokens"

    def value(self, track: Any, totals: Any) -> Any:
        return MISSING if track.prompt_tokens is None else track.prompt_tokens


@dataclass(frozen=True)
class Total(Subject):
    name: str  # cost or tokens
    dep = "cost"
    numeric = True
    local = False

    def __str__(self) -> str:
        return self.name

    def value(self, track: Any, totals: Any) -> Any:
        return totals.cost if self.name == "cost" else totals.tokens


@dataclass(frozen=True)
class Repeat(Subject):
    tool: str
    dep = "calls"
    numeric = True

    def __str__(self) -> str:
        return f"repeat({self.tool})"

    def value(self, track: Any, totals: Any) -> Any:
        return track.streak if track.streak_tool == self.tool else 0


# --- conditions: each evaluates to (true now, true because of this very event, what made it so) ----

@dataclass(frozen=True)
class Compare:
    subject: Subject
    op: str
    literal: Any

    def __str__(self) -> str:
        return f"{self.subject} {self.op} {literal_text(self.literal)}"

    def subjects(self) -> list[Subject]:
        return [self.subject]

    def eval(self, track: Any, change: Any, totals: Any) -> tuple[bool, bool, str | None]:
        v = self.subject.value(track, totals)
        if compare(v, self.op, self.literal):
            return True, False, f"{self.subject} = {_show(v)}"
        return False, False, None


@dataclass(frozen=True)
class Changed:
    subject: StateField | Bucket

    def __str__(self) -> str:
        return str(self.subject)

    def subjects(self) -> list[Subject]:
        return [self.subject]

    def eval(self, track: Any, change: Any, totals: Any) -> tuple[bool, bool, str | None]:
        s = self.subject
        if isinstance(s, StateField):
            moved = s.change(change) if "state" in change.kinds else None
            if moved is not None:
                return True, True, f"{s}: {_show(moved[0])} → {_show(moved[1])}"
        elif s.name in change.kinds:
            return True, True, f"{s} changed ({change.what})"
        return False, False, None


@dataclass(frozen=True)
class Matches:
    subject: StateField | Bucket
    pattern: str
    flags: str

    def __str__(self) -> str:
        return f"{self.subject} ~ /{self.pattern}/{self.flags}"

    def subjects(self) -> list[Subject]:
        return [self.subject]

    @property
    def regex(self) -> Any:
        return compile_pattern(self.pattern, self.flags)

    def eval(self, track: Any, change: Any, totals: Any) -> tuple[bool, bool, str | None]:
        compiled = self.regex
        for item in self.subject.gained(change):
            try:
                found = compiled.search(item, timeout=PATTERN_TIMEOUT_S)
            except TimeoutError:
                raise PatternTooSlow(f"its pattern took over {PATTERN_TIMEOUT_S:g} s on {_show(item)} (it backtracks: "
                                     "write it without nested repeats); this watchpoint is off now") from None
            if found:
                return True, True, f"{self.subject} gained {_show(item)}"
        return False, False, None


PATTERN_TIMEOUT_S = 0.1  # a pattern's search of one text: past this, the watchpoint is taken off


class PatternTooSlow(Exception):
    """A watchpoint's pattern backtracked on a text past :data:`PATTERN_TIMEOUT_S` (``/(a|aa)+$/`` on a
    text the model wrote): the run would have hung in the search."""


@dataclass(frozen=True)
class Both:
    left: Any
    right: Any
    word: str  # and / or

    def __str__(self) -> str:
        return f"{_group(self.left, self.word)} {self.word} {_group(self.right, self.word)}"

    def subjects(self) -> list[Subject]:
        return self.left.subjects() + self.right.subjects()

    def eval(self, track: Any, change: Any, totals: Any) -> tuple[bool, bool, str | None]:
        a, fa, da = self.left.eval(track, change, totals)
        b, fb, db = self.right.eval(track, change, totals)
        if self.word == "and":
            if a and b:
                return True, fa or fb, f"{da}; {db}"
            return False, False, None
        if a or b:
            fresh = (a and fa) or (b and fb)
            detail = da if a and (fa or not (b and fb)) else db
            return True, fresh, detail
        return False, False, None


def _group(node: Any, word: str) -> str:
    return f"({node})" if isinstance(node, Both) and node.word != word else str(node)


_REGEX_CACHE: dict[tuple[str, str], Any] = {}


def compile_pattern(pattern: str, flags: str) -> Any:
    """``pattern`` as ``re`` reads it (``re.error`` where it does not), compiled by ``regex``, whose
    searches take a timeout."""
    key = (pattern, flags)
    found = _REGEX_CACHE.get(key)
    if found is None:
        bits = 0
        for f in flags:
            bits |= {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL}[f]
        re.compile(pattern, bits)  # re's syntax and its errors (where they are): what the README promises
        found = _REGEX_CACHE[key] = regex.compile(pattern, bits)
    return found

