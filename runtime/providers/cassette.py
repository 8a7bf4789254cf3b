"""Record a run's model exchanges to a cassette, and replay them offline.

A cassette is a JSON-lines file: a header line, then one line per exchange::

    {"flowtui_cassette": 1}
    {"agent": "Revisor", "turn": 1, "request": {"messages": [...], "tools": [...],
     "sampling": {...}}, "reply": {...}}

Recording never touches an existing cassette until the run ends: exchanges
are appended (and flushed) to a hidden ``.NAME.recording`` file beside it as
they happen, so a crashed run keeps what it recorded there, and
:meth:`Cassette.commit` renames that file over ``NAME`` atomically at the end.
Nothing secret is written: requests hold messages, tool schemas and sampling
only, never provider settings such as an API key, and every value is redacted
(:mod:`flowtui.runtime.secrets`) before it is written. Replay redacts the live
request the same way before matching, so a redacted cassette still replays.

Replay matches on (agent, turn, messages) and ignores tool schemas and
sampling, so tools, hooks and ``until`` can change between runs as long as the
conversation the model sees stays the same. Tool-call ids are ignored when
comparing, since a rerun may number them differently. A request that the
cassette does not hold raises :class:`~runtime.errors.CassetteMissError`;
there is no network fallthrough.
"""

from __future__ import annotations

import difflib
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from flowtui.runtime.errors import CassetteMissError, ConfigError
from flowtui.runtime.files import FILE_MODE, private_dir
from flowtui.runtime.messages import Message
from flowtui.runtime.providers.base import ChatReply, ChatRequest, Provider, TokenCount
from flowtui.runtime.secrets import redact_data, secret_values

__all__ = ["Cassette", "Exchange", "RecordingProvider", "ReplayProvider"]

_HEADER = {"flowtui_cassette": 1}
_DIFF_LINES = 40


@dataclass
class Exchange:
    """One recorded model call."""

    agent: str
    turn: int
    messages: list[dict[str, Any]]
    reply: dict[str, Any]
    tools: list[dict[str, Any]] = field(default_factory=list)
    sampling: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, request: ChatRequest, reply: ChatReply) -> "Exchange":
        """The exchange as it is written: every value redacted."""
        secrets = secret_values()
        return cls(agent=request.agent, turn=request.turn,
                   messages=redact_data([m.model_dump(mode="json") for m in request.messages], secrets),
                   reply=redact_data(reply.model_dump(mode="json"), secrets),
                   tools=list(request.tools), sampling=redact_data(dict(request.sampling), secrets))

    def to_json(self) -> dict[str, Any]:
        return {"agent": self.agent, "turn": self.turn,
                "request": {"messages": self.messages, "tools": self.tools,
                            "sampling": self.sampling},
                "reply": self.reply}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Exchange":
        req = d["request"]
        return cls(agent=str(d["agent"]), turn=int(d["turn"]), messages=list(req["messages"]),
                   reply=dict(d["reply"]), tools=list(req.get("tools") or []),
                   sampling=dict(req.get("sampling") or {}))


class Cassette:
    """A cassette file. ``Cassette.new(path)`` starts an empty one for recording
    (shared by every agent's recorder of a run; :meth:`commit` puts it in place);
    ``Cassette.load(path)`` reads one for replay."""

    def __init__(self, path: str | Path, exchanges: list[Exchange] | None = None) -> None:
        self.path = Path(path)  # as given, for what is said of it
        # where it is, whatever the flow's code does to the working folder later (a tool's os.chdir
        # left the recording beside the old one and put its end, world-writable, in the new one)
        self._file = Path(os.path.abspath(path))
        self.exchanges: list[Exchange] = exchanges or []
        self._lock = threading.Lock()
        self._recording: Path | None = None
        self._atomic = False  # new(): record beside the file, commit() puts it in place

    @classmethod
    def new(cls, path: str | Path) -> "Cassette":
        """A cassette to record into ``path``: nothing touches ``path`` until :meth:`commit`."""
        cassette = cls(Path(path))
        cassette._atomic = True
        return cassette

    @property
    def recording_path(self) -> Path:
        return self._file.parent / f".{self._file.name}.recording"

    def commit(self, *, whole: bool = True) -> tuple[str, Path] | None:
        """Put what was recorded in place of ``path`` atomically: ("wrote" or "replaced", the file). Of a run
        that did not finish (``whole`` false), a file there is kept and the recording goes beside it:
        ("kept", that file; see :func:`partial_of`). None when nothing was recorded."""
        from flowtui.runtime.files import partial_of

        with self._lock:
            tmp, self._recording = self._recording, None
            if tmp is None:
                return None
            existed = self._file.exists()
            target = partial_of(self._file, "cassette") if existed and not whole else self._file
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
            os.replace(tmp, target)
            return ("kept" if target != self._file else "replaced" if existed else "wrote"), target

    @classmethod
    def load(cls, path: str | Path) -> "Cassette":
        """Read a cassette; a missing or damaged file is a :class:`ConfigError`
        naming the file (and line)."""
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"cassette {str(p)!r} does not exist: record one first with --record")
        exchanges: list[Exchange] = []
        try:
            text = p.read_bytes().decode("utf-8-sig")
        except UnicodeDecodeError:
            raise ConfigError(f"cassette {str(p)!r} is not a cassette (not text); record one with --record") from None
        # lines end at "\n" only: a reply may hold U+2028 or NEL, which splitlines() also breaks at
        for n, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                if isinstance(d, dict) and "flowtui_cassette" in d:
                    version = d["flowtui_cassette"]  # (a newer flowtui's, or forged: true is no 1)
                    if type(version) is not int or version != _HEADER["flowtui_cassette"]:
                        raise ConfigError(f"cassette {str(p)!r} line {n} says version "
                                          f"{str(d['flowtui_cassette'])[:40]!r}; this flowtui reads version "
                                          f"{_HEADER['flowtui_cassette']}: re-record it")
                    continue
                if isinstance(d, dict) and "seq" in d and "type" in d:  # (what a --journal holds)
                    raise ConfigError(f"cassette {str(p)!r} line {n} is an event of a journal, not a recorded "
                                      "exchange: give a cassette made with --record")
                exchange = Exchange.from_json(d)
                ChatReply.model_validate(exchange.reply)  # checked now, not when the run reaches it (a NaN
                exchanges.append(exchange)  # of tokens failed the run mid-way, naming neither file nor line)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(map(str, first["loc"]))
                raise ConfigError(f"cassette {str(p)!r} line {n} is not a recorded exchange (its reply's "
                                  f"{where or 'value'}: {first['msg']}); re-record it") from None
            except ConfigError:
                raise
            except KeyError as exc:
                raise ConfigError(f"cassette {str(p)!r} line {n} is not a recorded exchange (it has no "
                                  f"{exc.args[0]!r}); re-record it") from None
            except (ValueError, TypeError, RecursionError) as exc:
                raise ConfigError(f"cassette {str(p)!r} line {n} is not a recorded exchange "
                                  f"({type(exc).__name__}: {exc}); re-record it") from None
        if not text.strip():  # (an empty file ran, and its first model call failed: "no exchange at all")
            raise ConfigError(f"cassette {str(p)!r} is empty, not a cassette: record one with --record")
        return cls(p, exchanges)

    def append(self, exchange: Exchange) -> None:
        """Add an exchange and write it to the recording at once (see :meth:`commit`)."""
        line = json.dumps(exchange.to_json(), ensure_ascii=False)
        with self._lock:
            self.exchanges.append(exchange)
            target = self._file
            if self._atomic:
                if self._recording is None:
                    self._recording = self.recording_path
                    _create(self._recording, truncate=True)
                target = self._recording
            elif not target.exists():
                _create(target, truncate=False)
            with target.open("a", encoding="utf-8") as f:
                f.write(line + "\n")


def _create(path: Path, *, truncate: bool) -> None:
    """A new cassette file (owner-only) holding the header line."""
    private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if truncate else 0), FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(json.dumps(_HEADER) + "\n")


def _cassette(c: Cassette | str | Path, *, load: bool) -> Cassette:
    if isinstance(c, Cassette):
        return c
    return Cassette.load(c) if load else Cassette(c)


class RecordingProvider(Provider):
    """Wraps ``inner`` and appends every successful exchange to ``cassette``.

    Give several recorders the same :class:`Cassette` to record a whole run in
    one file. A path appends to that file (creating it).
    """

    def __init__(self, inner: Provider, cassette: Cassette | str | Path) -> None:
        self.inner = inner
        self.cassette = _cassette(cassette, load=False)

    async def complete(self, request: ChatRequest) -> ChatReply:
        # Recorded as the inner provider finishes it (its own rescue setting), as it is replayed.
        reply = self.inner.finish(request, await self.inner.complete(request))
        self.cassette.append(Exchange.of(request, reply))
        return reply

    def fork(self) -> "RecordingProvider":
        return RecordingProvider(self.inner.fork(), self.cassette)

    def skip(self, request: ChatRequest, reply: ChatReply) -> None:
        """Served from a journal: recorded all the same, so the cassette holds the whole run."""
        self.inner.skip(request, reply)
        self.cassette.append(Exchange.of(request, reply))

    def override_model(self, model: str) -> "RecordingProvider":
        return RecordingProvider(self.inner.override_model(model), self.cassette)

    def count_tokens(self, messages: list[Message], tools: list[dict[str, Any]]) -> TokenCount | None:
        return self.inner.count_tokens(messages, tools)

    def describe(self) -> str:
        return f"recording {self.inner.describe()} to {self.cassette.path.name}"

    def sampling_defaults(self) -> dict[str, Any]:
        return self.inner.sampling_defaults()


class ReplayProvider(Provider):
    """Serves recorded replies for matching (agent, turn, messages); never calls out.

    With ``request.on_delta`` set, the reply's content is handed over as one
    fragment, so a streaming UI shows it the same way. ``counter``: the provider
    the cassette stands in for, never called; it only counts tokens
    (:meth:`Provider.count_tokens`), which needs no network.
    """

    def __init__(self, cassette: Cassette | str | Path, *, counter: Provider | None = None) -> None:
        self.cassette = _cassette(cassette, load=True)
        self.counter = counter
        self._used: set[int] = set()
        self._lock = threading.Lock()

    def fork(self) -> "ReplayProvider":
        return ReplayProvider(self.cassette, counter=self.counter)

    def count_tokens(self, messages: list[Message], tools: list[dict[str, Any]]) -> TokenCount | None:
        return self.counter.count_tokens(messages, tools) if self.counter is not None else None

    def describe(self) -> str:
        return f"replaying {self.cassette.path.name}"

    def sampling_defaults(self) -> dict[str, Any]:
        return self.counter.sampling_defaults() if self.counter is not None else {}

    def skip(self, request: ChatRequest, reply: ChatReply) -> None:
        """Served from a journal: the exchange it matches counts as used, so the next request
        is answered by the exchange after it."""
        want = _normalize(redact_data([m.model_dump(mode="json") for m in request.messages], secret_values()))
        with self._lock:
            index = self._find(request, want)
            if index is not None:
                self._used.add(index)

    async def complete(self, request: ChatRequest) -> ChatReply:
        # redacted like the recorded side, so a request that echoes a credential still matches
        want = _normalize(redact_data([m.model_dump(mode="json") for m in request.messages], secret_values()))
        with self._lock:
            index = self._find(request, want)
            if index is None:
                raise CassetteMissError(self._miss_message(request, want), agent=request.agent)
            self._used.add(index)
        reply = ChatReply.model_validate(self.cassette.exchanges[index].reply)
        if request.on_delta is not None and reply.content:
            request.on_delta(reply.content)
        return reply

    def _find(self, request: ChatRequest, want: list[dict[str, Any]]) -> int | None:
        fallback = None
        for i, ex in enumerate(self.cassette.exchanges):
            if ex.agent != request.agent or ex.turn != request.turn:
                continue
            if _normalize(ex.messages) != want:
                continue
            if i not in self._used:
                return i
            fallback = i  # the same request asked again (e.g. a second run): serve it again
        return fallback

    def _miss_message(self, request: ChatRequest, want: list[dict[str, Any]]) -> str:
        where = (f"cassette {str(self.cassette.path)!r} has no recorded reply for agent "
                 f"{request.agent!r} turn {request.turn}")
        mine = [ex for ex in self.cassette.exchanges if ex.agent == request.agent]
        if not mine:
            agents = sorted({ex.agent for ex in self.cassette.exchanges})
            return (f"{where}: it holds no exchange of that agent at all (agents recorded: "
                    f"{', '.join(agents) or 'none'}). Re-record with --record.")
        new_lines = _render(want)
        same_turn = [ex for ex in mine if ex.turn == request.turn]
        candidates = same_turn or mine
        nearest = max(candidates, key=lambda ex: difflib.SequenceMatcher(
            None, _render(_normalize(ex.messages)), new_lines, autojunk=False).ratio())
        diff = list(difflib.unified_diff(_render(_normalize(nearest.messages)), new_lines,
                                         fromfile=f"recorded (turn {nearest.turn})",
                                         tofile=f"requested (turn {request.turn})",
                                         lineterm="", n=1))
        if len(diff) > _DIFF_LINES:
            diff = diff[:_DIFF_LINES] + [f"... ({len(diff) - _DIFF_LINES} more diff lines)"]
        if not diff:
            why = "the same messages were recorded for a different turn"
        else:
            why = "the conversation differs from the nearest recorded request"
        return (f"{where}: {why}. Re-record with --record if the change is intended.\n"
                + "\n".join(diff))


def _normalize(messages: Any) -> list[dict[str, Any]]:
    """Messages with tool-call ids dropped: a rerun may number calls differently."""
    out = []
    for m in messages:
        m = {k: v for k, v in dict(m).items() if k != "tool_call_id"}
        m["tool_calls"] = [{k: v for k, v in dict(c).items() if k != "id"}
                           for c in (m.get("tool_calls") or [])]
        m.setdefault("content", "")
        m.setdefault("tool_name", None)
        m.setdefault("is_error", False)
        out.append(m)
    return out


def _render(messages: list[dict[str, Any]]) -> list[str]:
    """Messages as lines for a readable diff: a header per message, then its
    content line by line (so a change deep in a long prompt still shows)."""
    lines = []
    for i, m in enumerate(messages):
        head = f"[{i}] {m.get('role')}" + (" (error)" if m.get("is_error") else "") + ":"
        lines.append(head)
        for row in str(m.get("content", "")).splitlines() or [""]:
            lines.append("    " + (row if len(row) <= 200 else row[:199] + "…"))
        for c in m.get("tool_calls") or []:
            lines.append(f"    -> {c.get('name')}({json.dumps(c.get('args'), sort_keys=True)[:200]})")
    return lines
