"""Two runs compared place by place: what differs, the first divergence first.

Each run becomes a tree of steps named by node path (:mod:`runtime.pathtree`:
``RevisaoWorkflow › loop 2 › RevisorAgent › turn 1``), so the runs are
aligned by *where* things happened, not by time or sequence number. The two
trees are walked together in the order things happened; every fact that
differs is a :class:`Difference` (its ``field`` a path into the value, like
``reply.tool_calls[0].args.descricao`` or ``memory[1]``), and a step present
in one run only (an extra loop iteration, an agent that no longer exists) is
one ``Difference`` with ``only`` set. Ids, timestamps, durations, sequence
numbers, token counts and costs are not compared.

A difference caused upstream shows up again downstream (a changed reply is in
every later request's history, and in ``ctx.output``); each such repeat keeps
a reference to the first place it was seen (``same_as``), so the report can
say it once.

Nothing here imports textual: ``flowtui diff`` (:mod:`runtime.diff_cli`) and
the app use the same functions.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flowtui.runtime.compare import one_line
from flowtui.runtime.journal import Invalid, Skipped, Unknown
from flowtui.runtime.pathtree import Step, build_tree

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "(absent)"})()
"""A fact one run has and the other has not."""

_DEPTH = 24  # values nested deeper than this are compared whole


class DiffError(Exception):
    """A journal that cannot be compared; the message names the file and what is wrong."""


@dataclass(frozen=True)
class Difference:
    """One thing that differs at one place. ``a``/``b`` are :data:`MISSING` when a run lacks it."""

    path: str
    field: str
    a: Any
    b: Any
    first: bool = False
    only: str | None = None  # "a" or "b": a whole step present in that run only
    same_as: int | None = None  # the index of an earlier difference with the same values

    def as_json(self) -> dict[str, Any]:
        absent = "a" if self.a is MISSING else "b" if self.b is MISSING else None
        return {"path": self.path, "field": self.field, "a": None if self.a is MISSING else self.a,
                "b": None if self.b is MISSING else self.b, "first": self.first, "only": self.only,
                "absent": absent, "same_as": self.same_as}


@dataclass(frozen=True)
class LoadedRun:
    """One run picked out of a journal: its events and where it came from."""

    path: str
    number: int  # 1-based
    total: int  # runs in the file
    events: list[Any]
    notices: list[Any]  # lines that could not be read

    @property
    def workflow(self) -> str:
        start = next((e for e in self.events if e.type == "run.start"), None)
        return start.workflow if start is not None else "?"

    @property
    def status(self) -> str:
        top = next((e.run_id for e in self.events if e.type == "run.start"), None) \
            or next((e.run_id.partition(".")[0] for e in self.events), None)  # (its run.start damaged: left out)
        end = next((e for e in reversed(self.events) if e.type == "run.end" and e.run_id == top), None)
        return end.status if end is not None else "did not end"


def read_runs(path: str | Path, *, notices: list[Any] | None = None,
              starts: list[int] | None = None) -> list[list[Any]]:
    """The runs recorded in a journal (the replay's reading, :func:`flowtui.runtime.journal.load_runs`).
    Raises :class:`DiffError` for a file that is not a journal."""
    from flowtui.runtime.journal import JournalError, load_runs

    try:
        return load_runs(path, notices=notices, starts=starts)
    except JournalError as exc:
        raise DiffError(str(exc)) from None


def load_run(path: str | Path, run: int | None = None, *, option: str = "--run",
             run_id: str | None = None) -> LoadedRun:
    """Run ``run`` (1-based; default: the last) of a journal, or the run of id ``run_id`` (a re-executed
    run's parent, in a journal it may share with the re-execution). Raises :class:`DiffError`."""
    notices: list[Any] = []
    starts: list[int] = []
    runs = read_runs(path, notices=notices, starts=starts)
    if run_id is not None:
        run = next((i for i, events in enumerate(runs, 1)
                    if events and getattr(events[0], "type", None) == "run.start" and events[0].run_id == run_id), None)
        if run is None:
            raise DiffError(f"{one_line(str(path))} no longer holds run {run_id}, the run this one was re-executed "
                            "from")
    if run is not None and not 1 <= run <= len(runs):
        path = one_line(str(path))
        held = f"{len(runs)} run{'s' if len(runs) != 1 else ''}"
        hint = "pick 1" if len(runs) == 1 else f"pick 1 to {len(runs)}"
        raise DiffError(f"{path}: {option} {run}: the file holds {held}; {hint}")
    number = run or len(runs)
    if len(runs) > 1:  # a line said of the file is the run's that was being written there (the one begun last
        # before it): a torn last line of run 1 was charged to a run appended after it too, never "the same"
        owner = sorted(range(len(starts)), key=starts.__getitem__)
        notices = [n for n in notices
                   if next((r for r in reversed(owner) if starts[r] <= n.line), owner[0]) == number - 1]
    # A line that is JSON but no valid event is not compared: it is said, with the unreadable ones,
    # so a line added or forged in one file never hides behind "the same".
    events = runs[number - 1]
    left_out = [Skipped(ev.line, ev.reason if isinstance(ev, Unknown) else f"not a valid event: {ev.reason}")
                for ev in events if isinstance(ev, Invalid)]
    if left_out:
        events = [ev for ev in events if not isinstance(ev, Invalid)]
        notices = sorted(notices + left_out, key=lambda n: n.line)
    return LoadedRun(str(path), number, len(runs), events, notices)


def diff_runs(a_events: list[Any], b_events: list[Any]) -> list[Difference]:
    """What differs between two runs, in the order it happened (the first divergence first)."""
    shared: dict[Any, Any] = {}
    a, b = build_tree(a_events, shared=shared), build_tree(b_events, shared=shared)
    found: list[Difference] = []
    if a.label != b.label:
        found.append(Difference(a.label, "workflow", a.label, b.label))
    _walk(a, b, [a.label], found, {})
    # A journal written elsewhere may hold a credential its writer did not know: the reader hides it, and
    # a difference it would show as the same on both sides ("[redacted]" → "[redacted]") is none.
    return _mark([d for d in found if not _same_when_hidden(d)])


def _same_when_hidden(d: Difference) -> bool:
    from flowtui.runtime.secrets import environment_secrets, redact_data

    if d.a is MISSING or d.b is MISSING:
        return False
    secrets = environment_secrets()
    try:
        return redact_data(d.a, secrets) == redact_data(d.b, secrets)
    except RecursionError:  # a value nested hundreds deep (only a forged journal holds one): a difference still
        return False


def _walk(a: Step, b: Step, path: list[str], out: list[Difference], memo: dict[int, str]) -> None:
    where = " › ".join(path)
    for kind, name in _merged(a.order, b.order):
        if kind == "fact":
            x, y = a.facts.get(name, MISSING), b.facts.get(name, MISSING)
            if name == "tools_digest" and (x is MISSING or y is MISSING):
                continue  # a journal from before it was recorded: not compared
            if name == "model" and (x is MISSING or y is MISSING):
                continue  # a replayed cassette's call names no model: the other's is not compared
            if name.startswith(("state.", "ctx.")):  # a step that left a field alone: what it held then
                x = a.after.get(name, MISSING) if x is MISSING and a.after is not None else x
                y = b.after.get(name, MISSING) if y is MISSING and b.after is not None else y
            for field, x, y in leaves(name, x, y, 0, memo):
                out.append(Difference(where, field, x, y))
            continue
        sa, sb = a.children.get(name), b.children.get(name)
        # a loop's iterations stand for the loop in their path: "loop 2", not "loop › loop 2"
        sub = path[:-1] + [name] if (sa or sb).kind == "iteration" else path + [name]
        if sa is not None and sb is not None:
            _walk(sa, sb, sub, out, memo)
        else:
            here = sa or sb
            side = "a" if sa is not None else "b"
            out.append(Difference(" › ".join(sub), "step", summary(here) if side == "a" else MISSING,
                                  summary(here) if side == "b" else MISSING, only=side))


def _merged(a: list[tuple[str, str]], b: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Both runs' items in one order: A's, with B's own ones where B had them."""
    if a == b:
        return a
    out: list[tuple[str, str]] = []
    in_a = set(a)
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        out.extend(a[i1:i2])
        if tag != "equal":
            out.extend(item for item in b[j1:j2] if item not in in_a)
    return out


def leaves(field: str, a: Any, b: Any, depth: int = 0,
           memo: dict[int, str] | None = None) -> list[tuple[str, Any, Any]]:
    """Where two values differ, as ``(field path, a part, b part)``: mappings key by key, lists
    item by item, anything else (or anything nested deeper than :data:`_DEPTH`) whole. Values
    are equal when their JSON is: ``1`` and ``true`` differ, key order does not matter."""
    if a is b and a is not MISSING:
        return []
    if type(a) is type(b) and type(a) in _SCALARS:
        return [] if a == b else [(field, a, b)]
    memo = {} if memo is None else memo
    if depth < _DEPTH and isinstance(a, dict) and isinstance(b, dict):
        found = []
        for key in [*a, *(k for k in b if k not in a)]:
            found += leaves(f"{field}.{key}", a.get(key, MISSING), b.get(key, MISSING), depth + 1, memo)
        return found
    if depth < _DEPTH and isinstance(a, list) and isinstance(b, list):
        return _list_leaves(field, a, b, depth, memo)
    return [] if _canon(a, memo) == _canon(b, memo) else [(field, a, b)]


_SCALARS = (str, int, float, bool, type(None))


def _list_leaves(field: str, a: list[Any], b: list[Any], depth: int,
                 memo: dict[int, str]) -> list[tuple[str, Any, Any]]:
    """Lists aligned item by item, so one item added at the front is one difference, not a shift
    of all the others: ``memory[0]`` absent in A, the rest equal. An item only B has is named by
    its index in B; any other by its index in A."""
    if len(a) == len(b) and all(x is y for x, y in zip(a, b)):
        return []  # the usual case: the same history, its messages shared (see build_tree)
    ca, cb = [_canon(x, memo) for x in a], [_canon(x, memo) for x in b]
    if ca == cb:
        return []
    found = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ca, cb, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        for k in range(max(i2 - i1, j2 - j1)):
            i, j = i1 + k, j1 + k
            x = a[i] if i < i2 else MISSING
            y = b[j] if j < j2 else MISSING
            found += leaves(f"{field}[{i if x is not MISSING else j}]", x, y, depth + 1, memo)
    return found


def _canon(value: Any, memo: dict[int, str] | None = None) -> str:
    """A value's JSON (keys sorted), remembered per object in ``memo`` while the trees live."""
    if value is MISSING:
        return "\0missing"
    if memo is not None and isinstance(value, (dict, list)):
        known = memo.get(id(value))
        if known is None:
            known = memo[id(value)] = _canon(value)
        return known
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)
    except (ValueError, RecursionError):
        return repr(value)


def _mark(found: list[Difference]) -> list[Difference]:
    """The first one marked; repeats of an earlier difference (the same values, where they are
    text or structure: a number or a flag says too little to be the same change) linked to it."""
    seen: dict[tuple[str, str], int] = {}
    out = []
    for i, d in enumerate(found):
        same = None
        if d.only is None and any(isinstance(v, (str, list, dict)) for v in (d.a, d.b)):
            key = (_canon(d.a), _canon(d.b))
            same = seen.get(key)
            if same is None:
                seen[key] = i
        out.append(Difference(d.path, d.field, d.a, d.b, first=i == 0, only=d.only, same_as=same))
    return out


def summary(step: Step) -> str:
    """A step one run has and the other has not, in a few words: ``EscritorAgent, RevisorAgent
    (2 model calls, 1 tool call)``."""
    chats = tools = 0
    stack = [step]
    while stack:
        s = stack.pop()
        chats += s.kind == "chat"
        tools += s.kind == "tool"
        stack.extend(s.children.values())
    counts = [f"{n} {what}{'s' if n != 1 else ''}" for n, what in ((chats, "model call"), (tools, "tool call")) if n]
    if step.kind in ("iteration", "loop", "parallel", "workflow"):
        names = ", ".join(step.children) or "nothing"
        head = f"{step.kind} {step.label}: {names}" if step.kind == "workflow" else names
    else:
        # (a tool's label already says so: "tool registrar_problema")
        head = step.label if step.kind == "chat" or step.label.startswith(f"{step.kind} ") else \
            f"{step.kind} {step.label}"
    return f"{head} ({', '.join(counts)})" if counts else head
