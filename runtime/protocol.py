"""The protocol between a run's worker process and its clients (the app, ``flowtui run``, ``flowtui attach``).

Newline-delimited JSON, one message a line, over the worker's pipes or a
socket. Every message is a pydantic model with a ``type``; the worker's
messages and the client's are two discriminated unions.

Worker → client:

============  ====================================================================
``hello``     the flow loaded: protocol version, workflow, file, agents, tools
``load.error`` the flow could not be loaded: file, line, class, message (then the worker exits 2)
events        every event of the run, exactly as the journal writes them
              (``run.start``, ``node.start``, ``state.append`` ...), except that
              strings longer than the wire's limit are cut and named in ``elided``
``reply``     the answer to a command: ``id``, ``ok``, ``error``, ``value``
``log``       a line the flow printed (for clients that do not read the worker's stderr)
============  ====================================================================

Client → worker (each with an ``id``; each answered by one ``reply``):

===================================  =========================================================
``auth`` {token}                     first message on a socket; a wrong token is refused
``start`` {input, memory, data,      start the run (paused unless ``paused`` is false), journaled
journal, approve, watch, on_watch,  to ``journal``; calls of the ``approve`` tools wait for a decision;
resume_from, on_divergence}          the ``watch`` watchpoints are set (``on_watch``: ``pause`` there,
                                     or ``stop`` the run there; a bad one refuses the start);
                                     ``resume_from`` re-executes a journal first (``run.diverged``)
``step`` ``next_turn`` ``loop_once`` move the run: to the next pause point, the next agent turn,
``continue`` ``pause`` ``stop``      the end of the loop iteration, the next breakpoint; pause; stop
``breakpoint`` {name, on}            set or clear a breakpoint on an agent, tool or loop
``watch`` {expr, on}                 set or clear a watchpoint (README, "Watchpoints"); answered with
                                     the list of watchpoints (without ``expr``: just the list); a
                                     malformed one is refused, ``value`` {expr, column} saying where
``promote`` {index, text}            move history message ``index`` to memory (``text``: edited)
``edit_message`` {index, text}       replace a history message's text
``delete_message`` {index,           delete a history message: an assistant message with its tool
with_call}                           results, a tool result with its call (unless ``with_call`` is false)
``edit_call`` {text}                 new arguments (JSON) for the tool call the run is paused before
``decide`` {decision, reason}        ``approve`` or ``deny`` that call, then go on
``set_item`` {bucket, index, text}   replace a memory item or task
``delete_item`` {bucket, index}      delete one
``add_item`` {bucket, text}          add one
``set_field`` {name, text}           set a workflow-state field (typed as JSON or plain text)
``undo``                             revert the last edit
``fetch`` {seq, path}                the whole of a string cut on the wire (``elided``)
``count`` {run_id}                   the next model call's size in tokens, counted by its model's own
                                     tokenizer: ``value`` {model, tokenizer, messages, total}, one
                                     count per message of "what the model sees" (prompt, memory and
                                     tasks note, history) and the whole request (tool schemas in);
                                     ``value`` null when litellm has no local tokenizer for the model
                                     (then only estimates exist); answered when counted, others first
``detach``                           an attached client leaves; the run waits for the next one
===================================  =========================================================

Edits apply to the run named by ``run_id`` (a child workflow's run id), or to
the top-level run when it is left out.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, StrictBool, TypeAdapter, ValidationError, field_validator
from pydantic_core import PydanticSerializationError, from_json

from flowtui.runtime.events import EVENT_CLASSES

PROTOCOL_VERSION = 1
WIRE_LIMIT = 64 * 1024  # strings longer than this many characters reach the app cut (see ``fetch``)


class _Message(BaseModel):
    model_config = ConfigDict(frozen=True)


# --- worker → client -------------------------------------------------------------------


class Hello(_Message):
    type: Literal["hello"] = "hello"
    protocol: int = PROTOCOL_VERSION
    workflow: str
    file: str | None = None
    agents: list[str] = Field(default_factory=list)
    tools: list[str] = Field(default_factory=list)
    pid: int = 0
    started: bool = Field(default=False, description="the run has started already (an attach)")
    notes: list[str] = Field(default_factory=list,
                             description="what a person should know about the load, e.g. agents --model does "
                                         "not apply to")
    breakpoints: list[str] = Field(default_factory=list, description="set now (an earlier client's too)")
    watches: list[str] = Field(default_factory=list, description="watchpoints set now (an earlier client's too)")
    model_middlewares: list[str] = Field(default_factory=list,
                                         description="the middlewares around every model call, outermost first: "
                                                     "what is sent may differ from what the model sees shows")


class LoadError(_Message):
    type: Literal["load.error"] = "load.error"
    message: str
    file: str | None = None
    line: int | None = None
    cls: str | None = None
    traceback: str | None = None
    option: str | None = None  # the option whose file is at fault (--replies, --replay, --record): file is that file
    choices: list[str] = Field(default_factory=list, description="the file's @workflow classes, when which one to "
                                                                 "run is what is wrong: FILE:NAME runs one")


class Reply(_Message):
    type: Literal["reply"] = "reply"
    id: int
    ok: bool = True
    error: str | None = None
    value: Any = None


class Log(_Message):
    type: Literal["log"] = "log"
    text: str


WorkerMessage = Annotated[Union[(Hello, LoadError, Reply, Log, *EVENT_CLASSES)], Field(discriminator="type")]


# Validators are built on first use: a worker never parses its own messages, a client never
# parses commands, and building one for a large union costs tens of milliseconds at start-up.
@cache
def _adapter(tp: Any) -> TypeAdapter[Any]:
    return TypeAdapter(tp)


def parse_worker_line(line: bytes | str) -> Any:
    """One line from a worker, validated. One nested deeper than pydantic's parser reads (200 levels:
    a state value of a run, which its process writes whole to 250 levels or so) is read by Python's
    own: its event was left out, and a run's start so left out held its client for ever."""
    if len(line) > _LONG_LINE:  # (a chat's request on a long history: read as JSON, then validated,
        try:  # it takes half the time; the same reader. What either refuses goes as below: said as it was)
            return _adapter(WorkerMessage).validate_python(from_json(line, cache_strings="keys"))
        except ValueError:
            pass
    try:
        return _adapter(WorkerMessage).validate_json(line)
    except ValidationError as exc:
        if "recursion limit" not in str(exc):
            raise
        try:
            data = json.loads(line)
        except (ValueError, RecursionError):
            raise exc from None
        return _adapter(WorkerMessage).validate_python(data)


def parse_worker_lines(lines: list[bytes]) -> list[Any]:
    """Many lines at once (one call into pydantic-core: a flood of events costs less); a long one
    apart, by :func:`parse_worker_line`."""
    if max(map(len, lines), default=0) <= _LONG_LINE:  # (the usual batch: no line looked at in Python)
        return _adapter(list[WorkerMessage]).validate_json(b"[" + b",".join(lines) + b"]")
    out: list[Any] = []
    short = 0  # the first line not parsed yet
    for i, line in enumerate(lines):
        if len(line) > _LONG_LINE:
            if short < i:
                out += _adapter(list[WorkerMessage]).validate_json(b"[" + b",".join(lines[short:i]) + b"]")
            out.append(parse_worker_line(line))
            short = i + 1
    if short < len(lines):
        out += _adapter(list[WorkerMessage]).validate_json(b"[" + b",".join(lines[short:]) + b"]")
    return out


_LONG_LINE = 8192  # bytes


# --- client → worker -------------------------------------------------------------------


class _Command(_Message):
    # strict: an index of true (1) or "0", a with_call of "no" (False) were taken as what they resembled;
    # no key the command does not take: a misspelt one ("reasn"), or a run_id on a breakpoint, did nothing
    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")

    # a JSON integer (not true, not 26 digits), from 1: the replies of id 0 and -1 are the server's own
    id: int = Field(default=0, strict=True, ge=1, le=2**53)


class Auth(_Command):
    id: int = Field(default=0, strict=True, ge=0, le=2**53)  # (not needed: answered with hello, or id 0)
    type: Literal["auth"] = "auth"
    token: str
    take_over: StrictBool = Field(default=False, description="detach the client attached now, if one is (a frozen "
                                                       "terminal's), and attach instead")


class Start(_Command):
    type: Literal["start"] = "start"
    input: Any = None
    memory: list[str] | dict[str, str] | None = None
    data: dict[str, Any] | None = Field(default=None, description="the run's ctx.data, never sent to the model")
    paused: bool = True
    journal: str | None = Field(default=None, description="append the run's events to this file")
    approve: list[str] = Field(default_factory=list, description="tools whose every call waits for a "
                                                                "decision ('all': every tool)")
    watch: list[str] = Field(default_factory=list, description="watchpoints, e.g. 'state.rodadas >= 3'")
    on_watch: Literal["pause", "stop"] = Field(default="pause", description="what a watchpoint that fires "
                                                                            "does: pause the run, or stop it")
    resume_from: str | None = Field(default=None, description="JOURNAL[@K]: re-execute that journal's run "
                                                              "up to event K, checked, then go on live")
    on_divergence: Literal["stop", "pause"] = Field(default="stop", description="a re-execution that diverges: "
                                                    "stops, or waits at the next pause point (run.diverged says)")
    resume_run: str | None = Field(default=None, description="the journal's run resume_from re-executes, by its "
                                   "run_id (another may have been appended after it); none: its last run")


class Step(_Command):
    type: Literal["step"] = "step"


class NextTurn(_Command):
    type: Literal["next_turn"] = "next_turn"


class LoopOnce(_Command):
    type: Literal["loop_once"] = "loop_once"


class Continue(_Command):
    type: Literal["continue"] = "continue"


class Pause(_Command):
    type: Literal["pause"] = "pause"


class Stop(_Command):
    type: Literal["stop"] = "stop"
    reason: str | None = Field(default=None, max_length=200)  # what the run's end says (else stopped by user)


class SetBreakpoint(_Command):
    type: Literal["breakpoint"] = "breakpoint"
    name: str = Field(max_length=300)
    on: bool = True

    @field_validator("name")
    @classmethod
    def _a_name(cls, name: str) -> str:  # "", "   " or one with control characters was taken, and never hit
        from flowtui.runtime.inert import is_inert  # (C1's CSI, a bidi override: what no terminal may be sent)

        if not name.strip() or not is_inert(name) or any(ord(c) < 0x20 for c in name):  # (a line break, a tab)
            raise ValueError("an agent, tool or loop name: not blank, no control or invisible characters")
        return name


class SetWatch(_Command):
    type: Literal["watch"] = "watch"
    expr: str | None = Field(default=None, description="the watchpoint; none: only answer with the list")
    on: bool = True


class _Edit(_Command):
    run_id: str | None = None


class Promote(_Edit):
    type: Literal["promote"] = "promote"
    index: int
    text: str | None = None


class EditMessage(_Edit):
    type: Literal["edit_message"] = "edit_message"
    index: int
    text: str


class DeleteMessage(_Edit):
    type: Literal["delete_message"] = "delete_message"
    index: int
    with_call: bool = Field(default=True, description="deleting a tool result removes its call too")


class EditCall(_Edit):
    type: Literal["edit_call"] = "edit_call"
    text: str = Field(description="the pending tool call's new arguments, a JSON object")


class Decide(_Edit):
    type: Literal["decide"] = "decide"
    decision: Literal["approve", "deny"]
    reason: str = ""


class SetItem(_Edit):
    type: Literal["set_item"] = "set_item"
    bucket: Literal["memory", "tasks"]
    index: int
    text: str


class DeleteItem(_Edit):
    type: Literal["delete_item"] = "delete_item"
    bucket: Literal["memory", "tasks"]
    index: int


class AddItem(_Edit):
    type: Literal["add_item"] = "add_item"
    bucket: Literal["memory", "tasks"]
    text: str


class SetField(_Edit):
    type: Literal["set_field"] = "set_field"
    name: str
    text: str


class Undo(_Edit):
    type: Literal["undo"] = "undo"


class Fetch(_Command):
    type: Literal["fetch"] = "fetch"
    seq: int
    path: str


class Count(_Command):
    type: Literal["count"] = "count"
    run_id: str | None = Field(default=None, description="a child workflow's run; none: the top-level run")


class Detach(_Command):
    type: Literal["detach"] = "detach"


COMMANDS = (Auth, Start, Step, NextTurn, LoopOnce, Continue, Pause, Stop, SetBreakpoint, SetWatch, Promote,
            EditMessage,
            DeleteMessage, EditCall, Decide, SetItem, DeleteItem, AddItem, SetField, Undo, Fetch, Count, Detach)
Command = Annotated[Union[COMMANDS], Field(discriminator="type")]
_COMMANDS = {c.model_fields["type"].default: c for c in COMMANDS}  # (a command's type, as an error's place says it)


def parse_command(line: bytes | str) -> Any:
    """One line from a client, validated (raises ``ValueError``: pydantic's ``ValidationError``, or
    a key given twice in one object)."""
    text = line.decode("utf-8", "surrogateescape") if isinstance(line, bytes) else line
    try:
        command = _adapter(Command).validate_json(line)
    except ValueError:
        try:  # a key given twice is said first: it is why a key looks wrong ({"type": "auth", ..., "type": "step"})
            _once.decode(text)
        except (ValueError, RecursionError) as exc:
            if isinstance(exc, KeyGivenTwice):
                raise exc from None
        raise
    _once.decode(text)
    if "id" not in command.model_fields_set and command.type != "auth":  # (carried out, it was answered with id 0:
        # what a wrong token and a take-over are answered with)
        raise ValueError(f"{_a(command.type)} command needs an id: a JSON integer from 1, which its reply carries back")
    return command


class KeyGivenTwice(ValueError):
    pass


def _each_key_once(pairs: list[tuple[str, Any]]) -> None:
    if len(pairs) > 1:
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:  # JSON parsers differ on which one wins: {"type": "pause", "type": "stop"} stopped
                raise KeyGivenTwice(f"the key {key!r} is given twice in one object; give each key once")
            seen.add(key)


# (what it decodes is thrown away: the command is pydantic's; this only checks the keys)
_once = json.JSONDecoder(object_pairs_hook=_each_key_once)


def refusal(line: bytes, error: Exception) -> Reply:
    """The answer to a line that is not a command: its ``id`` when it has one, and why."""
    import orjson  # its parser has a depth limit: a line nested 50,000 deep is an error, not a crash

    try:
        data = orjson.loads(line)
    except ValueError:  # orjson takes no lone surrogate ("\ud800"), which Python's own parser reads, nor a
        # byte that is no UTF-8 (its id is answered all the same: a client waiting for that id waited for ever)
        try:
            data = json.loads(line.decode("utf-8", "replace") if isinstance(line, bytes) else line)
        except (ValueError, RecursionError):
            data = None
    ident = data.get("id") if isinstance(data, dict) else None
    valid = type(ident) is int and 1 <= ident <= 2**53  # else not an id the client could give: -1
    return Reply(id=ident if valid else -1, ok=False, error=f"not a command: {what_is_wrong(error)}")


def what_is_wrong(error: Exception, *, sent_by: str = "client") -> str:
    """What is wrong with a line, in a few words: where and what (not the validator's inner names); what it
    quotes of the line shown inert, credentials redacted (a key sent as a command's name was sent back whole).
    ``sent_by``: ``client`` (a command) or ``run`` (what a run's process sends: an event, a hello, a reply...)."""
    from flowtui.runtime.inert import visible
    from flowtui.runtime.secrets import redact, secret_values

    return visible(redact(_what_is_wrong(error, sent_by), secret_values()))


def _what_is_wrong(error: Exception, sent_by: str) -> str:
    errors = error.errors() if hasattr(error, "errors") else None
    if not errors:
        return str(error).splitlines()[0] if str(error) else type(error).__name__
    first = errors[0]
    where = ".".join(str(x) for x in first.get("loc", ()) if not str(x).startswith(("tagged-union", "function")))
    said = first.get("msg", "not valid")
    kind = str((first.get("loc") or ("",))[0])
    if first.get("type") == "extra_forbidden" and kind in _COMMANDS:
        said = f"{_a(kind)} command takes no such key (it takes {', '.join(_COMMANDS[kind].model_fields)})"
    elif first.get("type") in ("union_tag_not_found", "union_tag_invalid"):  # (pydantic's words: "Unable to
        # extract tag using discriminator 'type'", and every tag, the first line's auth too)
        tag = (first.get("ctx") or {}).get("tag")
        if sent_by == "run":  # (a run's line of an unknown type was said to be no command, listing the commands)
            said = f"no event or message is of type {tag!r}" if tag is not None else 'it has no "type"'
        else:
            said = (f"no command is called {tag!r}" if tag is not None else 'it has no "type"') + \
                f" (the commands: {', '.join(name for name in _COMMANDS if name != 'auth')})"
    elif first.get("type") == "json_invalid" and "hex escape" in said:  # ("\ud800b": "unexpected end of hex
        # escape", said of a line whose escapes are whole)
        said += (" (a \\u escape is four hex digits, and one of \\ud800-\\udfff is half of a character, whose "
                 "other half must follow: send text as UTF-8, or escape whole characters)")
    return f"{where + ': ' if where else ''}{said}"


def _a(word: str) -> str:
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"


def encode(message: BaseModel) -> bytes:
    """A protocol message (not an event: those go through :mod:`flowtui.runtime.encoding`) as one line.
    A lone surrogate (a file name that is not UTF-8, as ``os`` gives it) becomes U+FFFD, as in an event:
    the line stays UTF-8 JSON (it made the worker's hello fail, and the flow never loaded)."""
    try:
        return message.model_dump_json().encode("utf-8") + b"\n"
    except PydanticSerializationError:
        text = json.dumps(message.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":"))
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8") + b"\n"
