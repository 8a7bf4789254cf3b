"""The recorded side of a re-execution: one run of a journal, read for ``--resume-from JOURNAL[@K]``.

A journal file holds one run, or several when it was appended to (each run's
``seq`` starts again at 1); the last one is re-executed. Its events are kept
as the JSON the journal holds (what the comparison needs), indexed by node:
each node's ``node.end`` (a model call's reply, a tool's result) and the
events that happened inside it (a tool's own effects, a model call's failed
attempts). Lines torn by a crash are skipped, as the replay skips them.

Errors name the file and ``K`` and say what to do (:class:`~flowtui.runtime.errors.ResumeError`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import from_json

from flowtui.runtime.compare import one_line
from flowtui.runtime.errors import ResumeError
from flowtui.runtime.events import EVENT_TYPES, continues_edit, validate_event
from flowtui.runtime.journal import TORN, Skipped, gaps, lines_of, non_standard, not_a_file, not_json, reason_of

_AT = re.compile(r"^(.*)@([0-9]+)$", re.DOTALL)  # ([0-9]: \d took "٣" for 3)


def parse_resume_arg(text: str | Path) -> tuple[Path, int | None]:
    """``runs/x.jsonl@40`` → (``runs/x.jsonl``, 40); ``runs/x.jsonl`` → (``runs/x.jsonl``, None).

    A path that itself ends in ``@digits`` and exists is taken whole."""
    raw = str(text)
    if not raw.strip():
        raise ResumeError("--resume-from needs a journal file, e.g. --resume-from .flowtui/runs/X.jsonl@40")
    m = _AT.match(raw)
    if _is_file(Path(raw)):
        return Path(raw), None
    if m is not None:
        return Path(m.group(1)), int(m.group(2))
    head, at, k = raw.rpartition("@")
    if at and head and _is_file(Path(head)):  # the journal is there: what follows @ is at fault
        what = "nothing follows @" if not k else f"K={k!r} is not an event number"
        raise ResumeError(f"--resume-from {raw}: {what}; in JOURNAL@K, K is a positive event number (the "
                          f"event to re-execute up to), e.g. --resume-from {head}@40, or give {head} alone "
                          "to re-execute the whole run")
    return Path(raw), None


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # a name too long: said where it is opened
        return False


class DamagedLine(ValueError):
    """An event of the prefix, read whole only when it is compared, turned out damaged."""


@dataclass
class Recorded:
    """One recorded run, ready to be re-executed up to event ``at`` (K)."""

    path: str  # the journal, as given
    run_id: str
    at: int  # K: the events with seq <= at are served and checked
    last: int  # the last seq of the recorded run
    events: list[dict[str, Any]]  # every event of the run (its child runs' too), in order
    start: dict[str, Any]  # its run.start
    ends: dict[str, dict[str, Any]] = field(default_factory=dict)  # node id -> its node.end
    inside: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # node id -> the events in it
    lines: dict[int, bytes] = field(default_factory=dict)  # seq -> the event's line, as the journal holds it
    lazy: set[int] = field(default_factory=set)  # seqs of node.start events read up to their name only
    line_of: dict[int, int] = field(default_factory=dict)  # seq -> its line in the journal
    # the call the prefix stops before, (kind, name): ("tool", its name) or ("chat", its agent's); it never
    # returned, or K fell inside it
    before: tuple[str, str] | None = None
    asked: int | None = None  # K as given, when it fell inside that call or edit (``at`` is then just before it)
    inside_edit: str | None = None  # the person's edit K fell inside (its first event's note)
    torn: int | None = None  # the journal's last line, cut short after the run's last event read (a crash)
    unended: bool = False  # re-executed whole, the run has no end in the journal, and no line was torn (a crash)

    def full(self, ev: dict[str, Any]) -> dict[str, Any]:
        """``ev`` with all its fields: a node.start read up to its name is read whole (in place), and
        checked as the other events were when the journal was read (:class:`DamagedLine`)."""
        seq = ev["seq"]
        if seq in self.lazy:
            try:
                whole = from_json(self.lines[seq])
                validate_event(whole)
            except ValueError as exc:  # pydantic's ValidationError among them
                why = reason_of(exc) if isinstance(exc, ValidationError) else f"not JSON ({exc})"
                raise DamagedLine(f"the journal's line {self.line_of.get(seq, '?')} (event #{seq}) is damaged: "
                                  f"{why}") from None
            ev.update(whole)
            self.lazy.discard(seq)
        return ev

    def damaged(self, seq: int, why: str) -> ResumeError:
        """The error for event ``seq`` of the prefix, which cannot be re-executed as recorded."""
        return ResumeError(f"--resume-from {self.path}: line {self.line_of.get(seq, '?')} (event #{seq}) is "
                           f"damaged: {why}; {_before(self.path, seq)}")

    def relative(self, run_id: str) -> str:
        """A run id as seen from the top-level run: ``""`` for it, ``".1"`` for its first child."""
        return relative_run(run_id, self.run_id)


def relative_run(run_id: str, root: str) -> str:
    if run_id == root:
        return ""
    return run_id[len(root):] if run_id.startswith(root + ".") else run_id


def load_recorded(source: str | Path, *, at: int | None = None, run_id: str | None = None) -> Recorded:
    """The last run of journal ``source`` (``"FILE@K"`` also accepted when ``at`` is not given), or
    the run of id ``run_id`` (the app forks the run it shows, whatever runs were appended after it).

    Raises :class:`ResumeError` naming the file (and K) for a missing file, a folder, a file
    that is not a flowtui journal, a journal without a ``run.start``, or K outside the run."""
    path, k = parse_resume_arg(source) if at is None else (Path(source), at)
    shown = one_line(str(path))  # (a name's line break printed a line of its own on stderr)
    why = not_a_file(path)
    if why:
        raise ResumeError(f"--resume-from {shown}: {why}; give a .jsonl file from .flowtui/runs/")
    try:
        with path.open("rb") as f:
            raw_lines = list(lines_of(f))  # a line that cannot be an event is not held (a sparse gigabyte)
    except FileNotFoundError:
        raise ResumeError(f"--resume-from {shown}: no such file; give a journal that `flowtui run` wrote "
                          "(see .flowtui/runs/)") from None
    except OSError as exc:
        raise ResumeError(f"--resume-from {shown}: cannot read it: {exc.strerror or exc}") from None
    read = _events(raw_lines)
    events = read.events
    if not events:
        first_bad = read.skipped[0] if read.skipped else None
        why = f" (line {first_bad[0]}: {first_bad[1]})" if first_bad else " (it is empty)"
        raise ResumeError(f"--resume-from {shown}: not a flowtui journal{why}; give a .jsonl file that "
                          "`flowtui run` or the app wrote")
    begin, end = _last_run(events), len(events)
    if run_id is not None:
        begin, end = _run_of(events, run_id, shown)
    moved = _moved_line(events, read.numbers, events[begin].get("run_id"))
    if moved is not None:
        raise ResumeError(f"--resume-from {shown}: {moved}: the journal's lines were moved or repeated by hand; "
                          "a run is re-executed only from its lines in the order flowtui wrote them (flowtui "
                          "diff and flowtui replay read this one by event number)")
    run = events[begin:end]
    numbers = read.numbers[begin:end]
    after = read.numbers[end] if end < len(events) else float("inf")  # (the next run's first line)
    start = run[0]
    if start.get("type") != "run.start":
        raise ResumeError(f"--resume-from {shown}: {_no_start(read, begin)}; a run can only be re-executed "
                          "from its start")
    root = start.get("run_id")
    # (its end: a line after it numbered 10**30 by hand let @5000 past the end of a run of 83 events)
    last = next((ev["seq"] for ev in run if ev.get("type") == "run.end" and ev.get("run_id") == root),
                None) or max(ev["seq"] for ev in run)
    torn, unended = None, False
    if k is None:
        # the whole run: lines after the last event read, when that is not the run's end, may have held its
        # next events, which would be done live again (a last line torn by a crash is not one: it was never
        # written whole, and is said; lines inside the run are looked at below)
        ended = run[-1].get("type") == "run.end" and run[-1].get("run_id") == root  # (not a child's)
        after_it = [] if ended else [(line, reason) for line, reason in read.skipped if numbers[-1] < line < after]
        unread = [(line, reason) for line, reason in after_it if not reason.endswith(TORN)]
        if unread:
            raise ResumeError(f"--resume-from {shown}: {len(unread)} line(s) after event #{last}, the last it "
                              f"could read, cannot be read (line {unread[0][0]}: {unread[0][1]}), and the run "
                              "does not end before them: what they recorded would be done live again; "
                              f"re-execute the events read (--resume-from {shown}@{last}), or run without "
                              "--resume-from")
        k = last
        torn = next((line for line, reason in after_it if reason.endswith(TORN)), None)
        unended = not ended and torn is None
    elif not 1 <= k <= last:
        where = "beyond its end" if k > last else "not an event number"
        # lines it could not read after the run's start may be where K was (a journal re-encoded, retyped)
        unread = [(line, reason) for line, reason in read.skipped if numbers[0] < line < after]
        said = (f" ({len(unread)} line(s) after its start could not be read: line {unread[0][0]}: {unread[0][1]})"
                if unread else "")
        raise ResumeError(f"--resume-from {shown}@{k}: K={k} is {where}: the recorded run {_shown_id(root)} has "
                          f"events 1..{last}{said}; give a K in that range, or none for the whole run")
    recorded = Recorded(path=str(path), run_id=str(root), at=k, last=last, events=run, start=start,
                        lines=dict(zip((ev["seq"] for ev in run), read.lines[begin:end])),
                        lazy={ev["seq"] for ev in run if id(ev) in read.lazy},
                        line_of=dict(zip((ev["seq"] for ev in run), numbers)), torn=torn, unended=unended)
    _check_prefix(recorded, numbers, read.skipped)
    started: set[Any] = set()
    orphans = []  # node.ends no node.start begins: its id changed by hand
    for ev in run:
        node = ev.get("node_id")
        if ev["type"] == "node.start":
            started.add(node)
        if ev["type"] == "node.end" and node is not None:
            if node not in started:
                orphans.append(ev)
            recorded.ends[node] = ev
        elif node is not None:
            recorded.inside.setdefault(node, []).append(ev)
    stopped = _stop_before_call(recorded)
    # (one in the events re-executed, or past them with a call the prefix stops before for want of its end: the
    # call read as one that never returned, and the rest of the run went live, made again from a forged file)
    orphan = next((ev for ev in orphans if ev["seq"] <= recorded.at or stopped), None)
    if orphan is not None:
        raise ResumeError(f"--resume-from {shown}: line {recorded.line_of[orphan['seq']]} (event #{orphan['seq']}) "
                          f"ends node {orphan['node_id']!r:.40}, which no node.start before it begins: the journal "
                          f"was edited by hand there; {_before(str(path), orphan['seq'])}")
    _whole_edit(recorded)
    return recorded


def _whole_edit(recorded: Recorded) -> None:
    """End the prefix before a person's edit that K falls inside (between a promote's history and its
    memory item, an undo's two buckets): the run re-executed up to K held a state nobody ever saw (the
    reply gone from the history and not in memory), and the edit could not be made again whole."""
    if recorded.asked is not None:
        return
    events = recorded.events
    i = next((n for n, ev in enumerate(events) if ev["seq"] == recorded.at), None)
    if i is None or i + 1 >= len(events) or events[i].get("origin") != "user" or not continues_edit(events[i + 1]):
        return
    while i > 0 and continues_edit(events[i]):
        i -= 1
    recorded.asked, recorded.at = recorded.at, events[i]["seq"] - 1
    recorded.inside_edit = str(events[i].get("note") or "an edit")


# What a call's node.end holds once it returned: a tool's result is served by "executed", a model call's by its reply.
_RETURNED = {"tool": "executed", "chat": "reply"}


def _stop_before_call(recorded: Recorded) -> bool:
    """End the prefix right before a tool or model call it cannot serve, which then runs live (the app pauses
    before it): one that never returned (the run was stopped or killed inside it), or one K falls inside (a
    tool's result and effects, a model's reply, are served only whole: the events inside the call, a tool's
    own effects, a model call's failed attempts, come only from making it). True: one that never returned."""
    ran_children = {ev.get("parent_id") for ev in recorded.events if ev["type"] == "run.start"}
    for ev in recorded.events:
        if ev["seq"] > recorded.at:
            return False
        kind = ev.get("kind")
        if ev["type"] != "node.start" or kind not in _RETURNED:
            continue
        node, call = ev.get("node_id") or "", (str(kind), str(ev.get("name")))
        if node in ran_children:
            # a tool that runs a child workflow runs again in the prefix anyway: K inside it (in its child's
            # steps) stays, whether the tool returned or not (a fork made while paused in the child stopped
            # the run there first), and a tool or model call of the child that K falls inside is met further on
            continue
        end = recorded.ends.get(node)
        if end is None or (end.get("status") == "stopped" and _RETURNED[kind] not in (end.get("data") or {})):
            recorded.at, recorded.before = ev["seq"] - 1, call  # (no end: its process died)
            return end is None
        if end["seq"] > recorded.at:
            recorded.asked, recorded.at, recorded.before = recorded.at, ev["seq"] - 1, call
            return False
    return False


# A node.start's line up to its data: a model call's carries the whole request, most of a long
# journal's bytes, and is compared as bytes while the re-execution agrees (Recorded.full reads it whole).
_STR = rb'"(?:[^"\\]|\\.)*"'
_NODE_START = re.compile(rb'\{"seq":(\d+),"ts":[-+.\deE]+,"run_id":(%s),"node_id":(%s|null),"parent_id":(%s|null),'
                         rb'"origin":(%s),"type":"node\.start","kind":"(\w+)","name":(%s),"data":\{' % ((_STR,) * 5))


@dataclass
class _Read:
    """A journal's events as JSON objects, each with its line and line number; the ids of the events
    read only up to their data (:data:`_NODE_START`); the lines that could not be read, with why."""

    events: list[dict[str, Any]] = field(default_factory=list)
    lines: list[bytes] = field(default_factory=list)
    numbers: list[int] = field(default_factory=list)
    lazy: set[int] = field(default_factory=set)
    skipped: list[tuple[int, str]] = field(default_factory=list)

    def add(self, data: dict[str, Any], line: bytes, n: int) -> None:
        self.events.append(data)
        self.lines.append(line)
        self.numbers.append(n)


def _events(lines: list[bytes | Skipped]) -> _Read:
    """The lines of a journal read as events (a model call's node.start only up to its data)."""
    read = _Read()
    for n, line in enumerate(lines, 1):
        if isinstance(line, Skipped):
            read.skipped.append((n, line.reason))
            continue
        torn = "" if line.endswith(b"\n") else TORN
        line = line.strip()
        if not line:
            continue
        head = _NODE_START.match(line) if line.endswith(b"}}") else None
        if head is not None:
            seq, run_id, node, parent, origin, kind, name = head.groups()
            data = {"seq": int(seq), "run_id": from_json(run_id), "node_id": from_json(node),
                    "parent_id": from_json(parent), "origin": from_json(origin), "type": "node.start",
                    "kind": kind.decode(), "name": from_json(name)}
            read.lazy.add(id(data))
            read.add(data, line, n)
            continue
        try:
            data = from_json(line)  # a long run's journal is megabytes: the fast reader
        except (ValueError, RecursionError):
            try:  # JSON the fast reader refuses: a lone surrogate ("\ud800"), a value nested deep
                data = json.loads(line)
            except (ValueError, RecursionError) as exc:
                read.skipped.append((n, (not_json(exc) if _is_text(line) else "not text") + torn))
                continue
        why = _not_an_event(data) or non_standard(line)
        if why:
            read.skipped.append((n, why))
            continue
        read.add(data, line, n)
    return read


def _not_an_event(data: Any) -> str:
    """Why a JSON value is not an event this reader can place in a run ("" when it is one)."""
    if not isinstance(data, dict):
        return "not a flowtui event: not a JSON object"
    kind, seq = data.get("type"), data.get("seq")
    if kind is None:
        return "not a flowtui event: no type"
    if not isinstance(kind, str):
        return f"not a flowtui event: its type is {type(kind).__name__}, not text"
    if kind not in EVENT_TYPES:
        return "an event type this flowtui does not know (a journal from a newer flowtui?)"
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        return "not a flowtui event: its seq is not a positive whole number"
    return ""


def _check_prefix(recorded: Recorded, numbers: list[int], skipped: list[tuple[int, str]]) -> None:
    """Refuse a prefix that cannot be re-executed as recorded: an event in it that does not validate
    (the re-execution would serve or compare what the run never held), or a line inside it that
    cannot be read or lines taken out of it (events missing: what they did would silently not be done
    again)."""
    events, k = recorded.events, recorded.at
    end_line = numbers[0]
    faults: list[tuple[int, ResumeError]] = []  # (line, why): the first line at fault is the one said
    for ev, n in zip(events, numbers):
        if ev["seq"] > k:
            continue
        end_line = max(end_line, n)
        if ev["seq"] in recorded.lazy or faults and faults[0][0] < n:
            continue  # its head matched the writer's own layout (the comparison reads the rest); or found past one
        try:
            validate_event(ev)
        except ValueError as exc:  # pydantic's ValidationError among them
            faults = [(n, recorded.damaged(ev["seq"], reason_of(exc)))]
    for n, why in skipped:
        if numbers[0] < n < end_line:
            before = max((ev["seq"] for ev, m in zip(events, numbers) if m < n), default=1)
            after = min((ev["seq"] for ev, m in zip(events, numbers) if m > n), default=before + 1)
            if after == before + 1:  # a line that is no event between two that follow on: none is missing
                continue
            faults.append((n, ResumeError(
                f"--resume-from {recorded.path}: line {n}, inside the events re-executed (1..{k}), cannot be read "
                f"({why}): an event of the run is missing there, and what it did would silently not be done "
                f"again; {_before(recorded.path, before + 1)}")))
            break
    if faults:  # (the one a person fixing the file meets first; the advice then holds for the others too)
        raise min(faults, key=lambda fault: fault[0])[1]
    prefix = [ev for ev in events if ev["seq"] <= k]
    gap = next(gaps((ev["seq"], ev["type"], ev.get("kind") if ev["type"] in ("node.start", "node.end") else None,
                     ev.get("node_id"), ev.get("origin")) for ev in prefix), None)
    if gap is not None:
        first, last, ev = gap[0], gap[1], prefix[gap[2]]
        what = f"event #{first} is" if first == last else f"events #{first} to #{last} are"
        raise ResumeError(f"--resume-from {recorded.path}: {what} missing before line {recorded.line_of[ev['seq']]} "
                          f"(event #{ev['seq']}), inside the events re-executed (1..{k}): lines were taken out "
                          f"there, and what they did would silently not be done again; {_before(recorded.path, first)}")


def _before(path: str, seq: int) -> str:
    """What to do about a fault at event ``seq``: re-execute the events before it, if there are any."""
    if seq <= 1:
        return "run the flow without --resume-from"
    return f"re-execute the events before it (--resume-from {path}@{seq - 1}), or run without --resume-from"


def _no_start(read: _Read, begin: int) -> str:
    """Why the last run of a journal does not begin with its run.start, as far as the lines say."""
    first = read.numbers[begin]
    if begin:
        return (f"its line {first} (event #{read.events[begin]['seq']}) follows event "
                f"#{read.events[begin - 1]['seq']} but is no run.start, and a run starts where the sequence "
                "numbers start again: the journal's lines were moved, joined or edited there")
    lost = [(n, why) for n, why in read.skipped if n < first]
    if lost:
        n, why = lost[0]
        return f"its run.start is missing: line {n} cannot be read ({why})"
    return f"it does not begin with run.start (line {first} is event #{read.events[0]['seq']}: the start of the file is missing?)"


def _shown_id(run_id: Any) -> str:
    return run_id if isinstance(run_id, str) else "(no run id)"


def _is_text(line: bytes) -> bool:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _moved_line(events: list[dict[str, Any]], numbers: list[int], root: Any) -> str | None:
    """The first line that breaks the order of run ``root``'s events (it and its child runs): one
    numbered no higher than an event of that run before it. None: they are in order."""
    if not isinstance(root, str):
        return None
    top = 0
    for ev, n in zip(events, numbers):
        run_id = ev.get("run_id")
        if run_id != root and not (isinstance(run_id, str) and run_id.startswith(root + ".")):
            continue
        if ev["seq"] <= top:
            return f"its line {n} (event #{ev['seq']}) comes after event #{top} of the same run"
        top = ev["seq"]
    return None


def _run_of(events: list[dict[str, Any]], run_id: str, shown: str) -> tuple[int, int]:
    """Where run ``run_id`` begins (its last ``run.start``, a file holding it twice) and ends (where
    the sequence numbers start again: the next run)."""
    begin = next((i for i in range(len(events) - 1, -1, -1) if events[i].get("type") == "run.start"
                  and events[i].get("run_id") == run_id), None)
    if begin is None:
        raise ResumeError(f"--resume-from {shown}: holds no run {_shown_id(run_id)} (the file was replaced, or "
                          "the run taken out of it); give the journal that run was written to")
    end = next((i for i in range(begin + 1, len(events)) if events[i]["seq"] <= events[i - 1]["seq"]), len(events))
    return begin, end


def _last_run(events: list[dict[str, Any]]) -> int:
    """Where the last of the runs a journal holds begins (where the sequence numbers start again)."""
    begin, last = 0, 0
    for i, ev in enumerate(events):
        if i and ev["seq"] <= last:
            begin = i
        last = ev["seq"]
    return begin
