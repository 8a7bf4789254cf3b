"""The run journal: every event as one JSON line, written as it happens, read back whatever happened.

Writing (:class:`JournalWriter`): each event is encoded by
:func:`~flowtui.runtime.encoding.encode_event` (credentials redacted, valid
UTF-8 that this reader reads back whatever a value held, inert in a terminal)
and written with one ``write`` on an unbuffered file: a crash loses nothing
already emitted, and tears at most the line being written. Streamed fragments
(``chat.delta``) stay out: the assembled reply is journaled, redacted whole.

Reading (:func:`read_journal`): the file is read as bytes, line by line. A BOM
is accepted; a torn or undecodable line is skipped and reported as a
:class:`Skipped` notice naming its line number; a line that is JSON but not a
valid event is kept as an :class:`Invalid` event (shown in the event log with
the reason, skipped by the fold), and an event of a type this flowtui does not
know (from a newer one) as an :class:`Unknown` event, shown by its type.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import fcntl
import json
import os
import sys
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from flowtui.runtime.compare import one_line
from flowtui.runtime.encoding import encode_event
from flowtui.runtime.errors import ConfigError
from flowtui.runtime.events import EVENT_TYPES, parse_event, validate_event
from flowtui.runtime.files import cannot_write, not_a_file, open_append  # noqa: F401 (theirs, here too)
from flowtui.runtime.secrets import Redactor, environment_secrets, redact

class JournalIncomplete(OSError):
    """The journal stopped being written mid-run (a full disk): said by the ``subscriber.error`` its
    writer raises, which the app and ``flowtui run`` then say at the run's end."""


class JournalWriter:
    """A sink that appends each event to ``path`` as a JSON line.

    An existing file is appended to (a run after the runs it holds); a torn
    last line left by a crash is closed first, so the new run stands apart.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        why = not_a_file(self.path)
        if why:
            raise ConfigError(cannot_write(self.path, f"it {why}"))
        self.appended_to = runs_in(self.path)  # runs already in the file
        if not self.appended_to and self.path.is_file() and self.path.stat().st_size:
            raise ConfigError(cannot_write(self.path, "it holds something other than a flowtui journal (no run "
                                                      "starts in it), and it is left as it is"))
        try:
            self._file = open_append(self.path)
        except OSError as exc:  # said as what it is, before the run starts: nothing of it is lost
            what = "it is a folder" if self.path.is_dir() else exc.strerror or type(exc).__name__
            raise ConfigError(cannot_write(self.path, what)) from None
        try:  # one run at a time: two interleaved their lines, and neither could be re-executed after
            fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._file.close()
            raise ConfigError(cannot_write(self.path, "another run is writing it right now (two runs in one "
                                                      "journal would interleave their lines)")) from None
        _writers.add(self)
        self._redactor = Redactor.from_environment()

    def __call__(self, event: Any) -> None:
        # Streamed fragments stay out: a credential split over fragments could not be redacted in each.
        if self._file.closed or event.type == "chat.delta" or in_a_fork:
            return
        line = encode_event(event, self._redactor) + b"\n"
        try:
            written = self._file.write(line)
            if written is not None and written < len(line):  # (a full disk takes part of it, then nothing)
                with contextlib.suppress(OSError):  # the part is taken back: the file ends with a whole line
                    os.ftruncate(self._file.fileno(), os.fstat(self._file.fileno()).st_size - written)
                raise OSError(errno.ENOSPC, "no space left for the whole event")
        except OSError as exc:
            # A journal with a hole would read as a run that never was: it stops at the last event
            # written whole, and the run's end says it is incomplete (the run itself goes on).
            self._file.close()
            raise JournalIncomplete(f"the journal {self.path} could not be written from event {event.seq} on "
                                    f"({exc.strerror or exc}); it holds the events before") from None

    def close(self) -> None:
        self._file.close()


def ended_by_flowtui(run_id: str, seq: int, status: str, why: str, duration_ms: float = 0.0) -> Any:
    """The ``run.end`` flowtui writes for a run that could not write its own (origin ``flowtui``): a
    failure's ``why`` is its error, another end's its reason."""
    from flowtui.runtime.bus import build_event
    from flowtui.runtime.events import RunEnd

    fields = {"error": why, "reason": None} if status == "failed" else {"error": None, "reason": why}
    return build_event(RunEnd, dict(seq=seq, ts=time.time(), run_id=run_id, node_id=None, parent_id=None,
                                    origin="flowtui", status=status, output=None, duration_ms=duration_ms, **fields))


# A process the flow forked (``os.fork`` in a tool) carries a copy of the run: whatever that copy
# does is not the run's, and none of it is journaled (it used to append the run's end again).
in_a_fork = False


_writers: "weakref.WeakSet[JournalWriter]" = weakref.WeakSet()  # this process's, open or closed


def _forked() -> None:
    global in_a_fork
    in_a_fork = True
    for writer in list(_writers):  # its copy of the file would hold the run's lock on it after the run
        writer._file.close()


os.register_at_fork(after_in_child=_forked)


COUNTED_UP_TO = 64 << 20  # bytes of a journal read to count its runs (a gigabyte took 2.5 s: a run waited on it)


def runs_before(path: Path) -> int | None:
    """:func:`runs_in`, for a file of at most :data:`COUNTED_UP_TO` bytes; None past it (not read)."""
    try:
        if path.stat().st_size > COUNTED_UP_TO:
            return None
    except OSError:
        pass
    return runs_in(path)


def runs_in(path: Path) -> int:
    """How many runs a journal file already holds (each starts with the event of seq 1)."""
    if not_a_file(path):  # a pipe or a device is not read (it may never end)
        return 0
    try:
        with path.open("rb") as f:
            return sum(1 for line in lines_of(f) if isinstance(line, bytes) and _starts_a_run(line))
    except OSError:
        return 0


def _starts_a_run(line: bytes) -> bool:
    """Whether a journal line is the event of seq 1: at a glance as flowtui writes one; read, when
    written otherwise (a journal that went through another tool: spaces, keys in another order)."""
    if line.startswith(b'{"seq":1,'):
        return True
    if line[7:8].isdigit() and line.startswith(b'{"seq":'):  # flowtui's own line, of another event
        return False
    if b'"seq"' not in line or b'"run.start"' not in line:
        return False
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and type(data.get("seq")) is int and data["seq"] == 1 \
        and data.get("type") == "run.start"


# --- reading ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Skipped:
    """A line of a journal that could not be read (torn by a crash, not UTF-8, not JSON)."""

    line: int
    reason: str


@dataclass(frozen=True)
class Mended(Skipped):
    """Not a line left out: what reading a journal edited by hand did about it (lines moved put back in
    order) or found (events missing, lines taken out)."""


class ReadWithout(Mended):
    """A line read without the fields of it that could not be read (a run.start's malformed memory):
    the event is there, those fields are not, so they were not compared either."""


@dataclass(frozen=True)
class Invalid:
    """A journal line that is JSON but not a valid event: shown in the event log, skipped by the fold."""

    line: int
    reason: str
    data: dict[str, Any] = field(default_factory=dict)
    type: str = "invalid"
    origin: str = "?"

    @property
    def seq(self) -> int:
        seq = self.data.get("seq")
        return seq if isinstance(seq, int) and not isinstance(seq, bool) else 0

    @property
    def run_id(self) -> str:
        return str(self.data.get("run_id", ""))

    node_id = None
    parent_id = None


@dataclass(frozen=True)
class NonStandard(Invalid):
    """A valid event on a line holding a bare NaN or infinity (see :func:`non_standard`)."""


@dataclass(frozen=True)
class Unknown(Invalid):
    """An event of a type this flowtui does not know (written by a newer one): kept and shown by type."""

    type: str = "unknown"


def read_journal(path: str | Path, *, notices: list[Skipped] | None = None,
                 progress: Callable[[int], None] | None = None, numbers: list[int] | None = None) -> Iterator[Any]:
    """The events of a journal file, in order: valid events, :class:`Invalid` and :class:`Unknown` ones
    (``numbers`` receives each one's line number).

    Lines that cannot be read at all are skipped; each one is added to
    ``notices`` (when given). ``progress`` is told how many bytes are read, each MB or so. Raises
    ``OSError`` for a file that cannot be opened.
    """
    done, told = 0, 0
    with Path(path).open("rb") as f:
        for n, raw in enumerate(lines_of(f), 1):
            if progress is not None:
                done = done + len(raw) if isinstance(raw, bytes) else f.tell()
                if done > told:
                    progress(done)
                    told = done + _PIECE
            if isinstance(raw, Skipped):
                if notices is not None:
                    notices.append(Skipped(n, raw.reason))
                continue
            line = raw.strip()
            if not line:
                continue
            item = parse_line(line, n)
            if isinstance(item, Invalid) and item.data.get("type") == "run.start":
                item = _mended_start(item, notices)
            if isinstance(item, Skipped) and not raw.endswith(b"\n"):
                item = Skipped(n, f"{item.reason}{TORN}")
            if isinstance(item, Skipped):
                if notices is not None:
                    notices.append(item)
                continue
            if numbers is not None:
                numbers.append(n)
            yield item


# What a run.start may go without: the run reads on from its workflow and ids (an empty memory, no
# state shown, no data), where without the event the run showed nothing at all.
_START_EXTRAS = frozenset({"input", "memory", "state", "file", "data", "resumed_from"})


def _mended_start(item: Invalid, notices: list[Skipped] | None) -> Any:
    """A run.start one of whose extras is malformed (a journal edited by hand, or from elsewhere):
    the event without them, and a notice naming them; else ``item`` as it was. One holding a bare NaN is read
    as it is, and said (a run is read from its start)."""
    if isinstance(item, NonStandard):
        if notices is not None:
            notices.append(Mended(item.line, item.reason))
        return validate_event(item.data)
    try:
        return validate_event(item.data)  # its JSON is an event (its bytes were not: a lone surrogate, a deep value)
    except ValidationError as exc:
        bad = {str(e["loc"][1]) for e in exc.errors() if len(e["loc"]) > 1}
        if not bad or not bad <= _START_EXTRAS:
            return item  # a fault elsewhere (its seq, its workflow): no run can be read from it
    except (ValueError, RecursionError):
        return item
    try:
        event = validate_event({k: v for k, v in item.data.items() if k not in bad})
    except (ValidationError, ValueError):
        return item
    if notices is not None:
        notices.append(ReadWithout(item.line, f"run.start's {', '.join(sorted(bad))} could not be read "
                                              f"({item.reason.removeprefix('run.start: ')}): the run is read without "
                                              "them"))
    return event


BOM = b"\xef\xbb\xbf"  # an editor may save a journal with one: taken at the file's start only
TORN = ", and the last line, cut short (the writer was killed?)"  # said of a last line that is no event
INNER_BOM = "a byte-order mark at its start (only the file's first line may have one: the file was re-encoded?)"
_PIECE = 1 << 20
MAX_LINE = 1 << 30  # an event line longer than this (1 GiB) is skipped without being held


def lines_of(f: Any) -> Iterator[bytes | Skipped]:
    """The lines of ``f``, each whole, or a :class:`Skipped` for one that cannot be an event and is
    read to its end without being held: it does not start like JSON (a sparse file's zeros, a
    binary), or it is longer than ``MAX_LINE``. A byte-order mark is taken off the first line; a
    later line starting with one is skipped (every reader of a journal reads it so)."""
    first = True
    while raw := f.readline(_PIECE):
        whole = raw.endswith(b"\n") or len(raw) < _PIECE
        if raw.startswith(BOM):
            if not first:
                yield Skipped(0, INNER_BOM)
                while not raw.endswith(b"\n") and (raw := f.readline(16 * _PIECE)):
                    pass  # (the rest of a long one, read, not held)
                continue
            raw = raw[3:]
        first = False
        if whole:
            yield raw
            continue
        like_json = raw.lstrip().startswith(b"{")
        parts: list[bytes] | None = [raw] if like_json else None
        size = len(raw)
        while not raw.endswith(b"\n") and (raw := f.readline(_PIECE if parts is not None else 16 * _PIECE)):
            size += len(raw)
            if parts is not None:
                parts.append(raw)
                if size > MAX_LINE:
                    parts = None
        if parts is not None:
            yield b"".join(parts)
        else:
            yield Skipped(0, f"not an event: a line of {size:,} bytes that "
                             + ("is longer than any event" if like_json else "does not start like JSON"))


def not_json(exc: BaseException) -> str:
    """Why ``json.loads`` refused a line: JSON that Python cannot hold is said as such, not as no JSON."""
    if isinstance(exc, RecursionError):
        return "JSON nested deeper than Python reads"
    if "digits" in str(exc):  # (CPython's limit on int(text))
        return f"JSON with a number of over {sys.get_int_max_str_digits():,} digits, more than Python reads"
    return "not JSON"


class _NonStandard(ValueError):
    pass


def _refuse(word: str) -> Any:
    raise _NonStandard(word)


def non_standard(line: bytes) -> str | None:
    """Why a line of JSON is none flowtui writes, when it holds a bare NaN or infinity (which Python's reader
    takes, and flowtui writes as null): a journal edited by hand, or written by another program."""
    if b"NaN" not in line and b"Infinity" not in line:  # (the common case: a search of the bytes)
        return None
    try:
        json.loads(line, parse_constant=_refuse)
    except _NonStandard as exc:
        return f"holds a bare {exc}, which flowtui never writes (it writes null): edited by hand?"
    except (ValueError, RecursionError):
        pass  # (said as what it is by the reader)
    return None


def parse_line(line: bytes, n: int = 0) -> Any:
    """One journal line as an event, an :class:`Invalid`/:class:`Unknown` one, or a :class:`Skipped` notice."""
    try:  # a valid event, the common case, is parsed once (a long run's journal is hundreds of MB)
        event = parse_event(line)
    except (ValidationError, ValueError, RecursionError):
        pass  # what it is instead, read apart
    else:
        why = non_standard(line)
        return event if why is None else NonStandard(n, f"{event.type}: {why}", json.loads(line),
                                                     origin=_label(event.origin, 80))
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Skipped(n, f"not UTF-8 text (byte {exc.start})")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return Skipped(n, not_json(exc))
    if not isinstance(data, dict) or "type" not in data:
        return Skipped(n, "not an event (no 'type')")
    kind = data.get("type")
    if not isinstance(kind, str) or kind not in EVENT_TYPES:  # (a list or an object is no type either)
        return Unknown(n, f"an event type this flowtui does not know: {_label(kind, 80)}", data,
                       type=_label(kind, 80), origin=_label(data.get("origin", "?"), 80))
    try:  # (from the JSON read: pydantic's reader refuses a lone surrogate, "\ud800", which json reads)
        return validate_event(data)
    except (ValidationError, ValueError, RecursionError) as exc:
        return Invalid(n, f"{_label(kind, 40)}: {reason_of(exc)}", data, origin=_label(data.get("origin", "?"), 80))


def _label(value: Any, n: int) -> str:
    """A name a journal gave, as a notice quotes it: at most ``n`` characters, redacted before the
    cut (what the cut leaves of a credential would match no rule), and its start only: a 50 MB
    name costs what its head does."""
    return redact(str(value)[:n + 512], environment_secrets())[:n]


def reason_of(exc: Exception, *, at: str = "") -> str:
    """Why an event did not validate, in a line: its first three faults, each at its field (within
    ``at``, for a value inside an event, else without the event type pydantic puts first)."""
    if isinstance(exc, ValidationError):
        parts = []
        for e in exc.errors()[:3]:
            loc = ".".join([at] + [str(p) for p in e["loc"]] if at else [str(p) for p in e["loc"][1:]])
            msg = e["msg"].removeprefix("Value error, ")
            parts.append(f"{loc}: {msg}" if loc else msg)
        return "; ".join(parts)
    return str(exc).splitlines()[0]


def last_seq(path: Path) -> int:
    """The ``seq`` of the last complete event line of a journal (0 when there is none)."""
    try:
        with path.open("rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - (1 << 16)))
            tail = f.read()
    except OSError:
        return 0
    for line in reversed(tail.split(b"\n")[1 if size > (1 << 16) else 0:]):
        try:
            seq = json.loads(line).get("seq")
        except (ValueError, AttributeError):
            continue
        if isinstance(seq, int):
            return seq
    return 0


class JournalError(Exception):
    """A journal file that cannot be replayed; the message names the file (and line)."""


GIVE_A_JOURNAL = "give a journal a run wrote (.flowtui/runs/*.jsonl, or flowtui run --journal FILE)"


def load_runs(path: str | Path, *, notices: list[Any] | None = None, hint: str = GIVE_A_JOURNAL,
              progress: Callable[[int], None] | None = None, starts: list[int] | None = None) -> list[list[Any]]:
    """The runs recorded in a journal, each a list of events. Raises :class:`JournalError`.

    A journal normally holds one run; a file written to twice holds several,
    each restarting its sequence numbers at 1. Lines that cannot be read (torn
    by a crash, not UTF-8) are skipped and added to ``notices``; events that do
    not validate stay in their run as invalid ones. ``hint`` ends the message about a file that is
    no journal (what to give instead). ``progress``: see :func:`read_journal`. ``starts``: given, it
    gets each run's first line number, in the order of the runs.
    """
    hint = f"; {hint}" if hint else ""
    p = Path(path)
    path = one_line(str(path))  # as said: a name's line break printed a second line of its own on stderr
    why = not_a_file(p)
    if why:
        raise JournalError(f"{path}: {why}{hint}")
    skipped: list[Any] = []
    numbers: list[int] = []
    try:
        events = list(read_journal(p, notices=skipped, progress=progress, numbers=numbers))
    except FileNotFoundError:
        raise JournalError(f"{path}: no such file") from None
    except OSError as exc:
        raise JournalError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    if all(isinstance(ev, Invalid) for ev in events):
        if skipped or events:
            first = skipped[0] if skipped else events[0]
            raise JournalError(f"{path}: not a flowtui journal (line {first.line}: {first.reason}){hint}")
        raise JournalError(f"{path}: empty, no events recorded")
    # lines said already: those skipped, and those that are no valid event (not "missing" either)
    unreadable = sorted([notice.line for notice in skipped]
                        + [numbers[i] for i, ev in enumerate(events) if isinstance(ev, Invalid)])
    runs = []
    for members in _runs_of(events, numbers, skipped):
        if starts is not None:
            starts.append(numbers[members[0]])
        members = _early_ends_left_out(members, events, numbers, skipped, unreadable)
        run = _in_order([events[i] for i in members], [numbers[i] for i in members], skipped, unreadable)
        _say_broken_links(run, {id(events[i]): numbers[i] for i in members}, skipped)
        runs.append(run)
    if notices is not None:
        notices.extend(sorted(skipped, key=lambda notice: notice.line))
    return runs


def _runs_of(events: list[Any], numbers: list[int], notices: list[Skipped]) -> list[list[int]]:
    """The positions of each run's events, the runs in the order they ran: a run's events carry its id
    (its child runs', ids under it). A run whose lines come apart (another run's between them) is read
    whole all the same, and that is said in ``notices``."""
    groups: dict[str, list[int]] = {}
    first_ts: dict[str, float] = {}
    apart: set[str] = set()
    current = ""
    leading: list[int] = []  # invalid events before any run's: the first run's (a damaged run.start made a run of
    for i, ev in enumerate(events):  # its own, "run 1 of 2", said nowhere else, and the diff compared "run 2")
        if isinstance(ev, Invalid) and not current:
            leading.append(i)
            continue
        if not isinstance(ev, Invalid):
            root = ev.run_id.partition(".")[0]
            members = groups.get(root)
            if members is None:
                groups[root], first_ts[root] = leading, ev.ts
                leading = []
            elif root != current and root not in apart:  # (said once a run)
                apart.add(root)
                notices.append(Mended(numbers[i], f"run {root}'s lines go on here, after another run's (lines moved "
                                                  "by hand?): read run by run"))
            current = root
            first_ts[root] = min(first_ts[root], ev.ts)
        groups.setdefault(current, []).append(i)  # (an invalid event stays with the run around it)
    return [groups[root] for root in sorted(groups, key=lambda root: first_ts.get(root, 0.0))]


def _early_ends_left_out(members: list[int], events: list[Any], numbers: list[int], notices: list[Skipped],
                         unreadable: list[int]) -> list[int]:
    """``members`` without a top-level ``run.end`` numbered before another of the run's events: a run
    says nothing after its end, so one there was put in by hand (flowtui diff compared the run as
    ended there, saying the runs were the same, or took its error for the run's)."""
    valid = [i for i in members if not isinstance(events[i], Invalid)]
    if not valid:
        return members
    last = max(events[i].seq for i in valid)
    early = {i for i in valid if events[i].type == "run.end" and "." not in events[i].run_id and events[i].seq < last}
    for i in sorted(early):
        notices.append(Skipped(numbers[i], f"a run.end (event #{events[i].seq}) before the run's last event, "
                                           f"#{last} (put in by hand?): left out"))
        bisect.insort(unreadable, numbers[i])  # (said: no gap is said where it was)
    return [i for i in members if i not in early] if early else members


def _say_broken_links(run: list[Any], line_of: dict[int, int], notices: list[Skipped]) -> None:
    """A node whose parent does not start before it (its parent_id changed by hand: nodes linked in a circle,
    or to one no line holds), or that ends without a start: said, since comparing runs leaves node ids out,
    and "the same" hid it."""
    started: set[Any] = set()
    for ev in run:
        kind = getattr(ev, "type", None)
        if kind == "node.end" and ev.node_id not in started:
            notices.append(Mended(line_of.get(id(ev), 0), f"node {ev.node_id} ends, but no node.start before it "
                                  "begins it (taken out, or its id changed by hand?): what it ended is unsure"))
        if kind != "node.start":
            continue
        if ev.parent_id is not None and ev.parent_id not in started:
            notices.append(Mended(line_of.get(id(ev), 0), f"node {ev.node_id}'s parent {ev.parent_id} does not "
                                  "start before it (a link changed by hand?): where it sits in the tree is unsure"))
        started.add(ev.node_id)


def _in_order(run: list[Any], lines: list[int], notices: list[Skipped], unreadable: list[int]) -> list[Any]:
    """One run's events by their numbers, what a hand made of its lines said in ``notices``: lines moved
    are put back in order, a line repeated is left out, events missing (lines taken out) are named."""
    seqs = [ev.seq for ev in run if not isinstance(ev, Invalid)]
    mended = any(b <= a for a, b in zip(seqs, seqs[1:]))
    gaps = bool(seqs) and seqs[-1] - seqs[0] + 1 != len(seqs)
    if not (mended or gaps):  # (the common case)
        return run
    valid = [(n, ev) for n, ev in zip(lines, run) if not isinstance(ev, Invalid)]
    if mended:  # lines repeated or moved by hand
        valid = _sorted_once(valid, notices)
    if valid[-1][1].seq - valid[0][1].seq + 1 != len(valid):
        _say_gaps(valid, notices, unreadable)
    return _merge(run, valid) if mended else run


def _sorted_once(valid: list[tuple[int, Any]], notices: list[Skipped]) -> list[tuple[int, Any]]:
    """``valid`` by event number, each number once (a repeat is left out): both said in ``notices``."""
    seen: set[int] = set()
    firsts = [(n, ev) for n, ev in valid if not (ev.seq in seen or seen.add(ev.seq))]
    if any(b.seq < a.seq for (_, a), (_, b) in zip(firsts, firsts[1:])):
        moved = [firsts[i][0] for i in _out_of_place([ev.seq for _, ev in firsts])]
        shown = ", ".join(map(str, moved[:5])) + (f" and {len(moved) - 5} more" if len(moved) > 5 else "")
        notices.append(Mended(moved[0], f"line{'s' if len(moved) > 1 else ''} {shown} out of order (moved by "
                                        "hand?): read by event number"))
    kept = {id(ev) for _, ev in firsts}
    first = {ev.seq: (n, ev) for n, ev in firsts}
    for n, ev in valid:
        if id(ev) not in kept:
            line, same = first[ev.seq]
            if ev == same:
                notices.append(Skipped(n, f"event #{ev.seq} again: a line repeated by hand? left out"))
            else:  # not a harmless repeat: what the other said is not read at all
                notices.append(Skipped(n, f"event #{ev.seq} again, unlike line {line} (edited by hand?): left out"))
    return sorted(firsts, key=lambda item: item[1].seq)


def _say_gaps(valid: list[tuple[int, Any]], notices: list[Skipped], unreadable: list[int]) -> None:
    """Name the events missing from ``valid`` (in order), but those whose lines could not be read
    (``unreadable``: said already)."""
    steps = ((ev.seq, ev.type, ev.kind if ev.type in ("node.start", "node.end") else None, ev.node_id, ev.origin)
             for _, ev in valid)
    for first, gone, i in gaps(steps):
        if not _between(unreadable, valid[i - 1][0], valid[i][0]):
            what = f"event #{first} is" if first == gone else f"events #{first} to #{gone} are"
            notices.append(Mended(valid[i][0], f"{what} missing before it (lines taken out by hand?)"))


def gaps(events: Iterable[tuple[int, str, str | None, str | None, str | None]]) -> Iterator[tuple[int, int, int]]:
    """The numbers a run's journaled events skip, given as (seq, type, node kind, node id, origin), in
    order: (first missing, last missing, the position of the event after them). A journal leaves out
    only a model call's streamed fragments (inside its chat node), and a ``run.end`` flowtui wrote
    for a run whose journal could not be written to its end follows what could be written: neither
    is a gap."""
    chats: set[str | None] = set()  # the chat nodes open
    previous = None
    for i, (seq, kind, node_kind, node, origin) in enumerate(events):
        if previous is not None and seq > previous + 1 and not chats \
                and not (kind == "run.end" and origin == "flowtui"):
            yield previous + 1, seq - 1, i
        if node_kind == "chat":
            (chats.add if kind == "node.start" else chats.discard)(node)
        previous = seq


def _between(lines: list[int], a: int, b: int) -> bool:
    """Whether sorted ``lines`` hold one strictly between ``a`` and ``b``."""
    i = bisect.bisect_right(lines, a)
    return i < len(lines) and lines[i] < b


def _out_of_place(seqs: list[int]) -> list[int]:
    """The positions not on a longest non-decreasing run of ``seqs``: the fewest lines that were moved."""
    tails: list[int] = []  # tails[k]: the position ending the best non-decreasing run of length k + 1
    values: list[int] = []  # ... and its number
    before = [-1] * len(seqs)
    for i, seq in enumerate(seqs):
        k = bisect.bisect_right(values, seq)
        before[i] = tails[k - 1] if k else -1
        tails[k:k + 1], values[k:k + 1] = [i], [seq]
    kept, i = set(), tails[-1] if tails else -1
    while i >= 0:
        kept.add(i)
        i = before[i]
    return [i for i in range(len(seqs)) if i not in kept]


def _merge(run: list[Any], ordered: list[tuple[int, Any]]) -> list[Any]:
    """The events of ``ordered`` in the valid events' places of ``run``, its invalid ones where they were
    (a repeated line left out leaves one place fewer)."""
    placed = iter(ordered)
    out: list[Any] = []
    for ev in run:
        if isinstance(ev, Invalid):
            out.append(ev)
        else:
            nxt = next(placed, None)
            if nxt is not None:
                out.append(nxt[1])
    return out
