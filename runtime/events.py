"""Events: one small frozen pydantic model per kind, in one discriminated union.

Every change a run makes is an event, delivered in order to every subscriber.
Each event carries ``type``, ``seq`` (strictly increasing within a run's
stream), ``ts``, ``run_id``, ``node_id`` (the node it belongs to),
``parent_id`` (that node's parent) and ``origin`` (what caused it:
``runtime``, ``hook:Agent.after_response``, ``tool:name``, ``until``,
``user`` for edits made by hand).

The engine builds events with ``model_construct`` (no validation: it builds
them from values it already checked); ``parse_event`` validates a JSON line
read back from a journal.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_serializer, model_validator

from flowtui.runtime.budget import RunTotals
from flowtui.runtime.messages import Message

NodeKind = Literal["workflow", "loop", "parallel", "agent", "chat", "tool"]
NodeStatus = Literal["ok", "error", "stopped"]
RunStatus = Literal["finished", "failed", "stopped"]
Bucket = Literal["history", "memory", "tasks"]


class _Event(BaseModel):
    # extra fields are kept: ``elided`` on the wire (strings cut on the way to the app), and
    # whatever a newer flowtui adds to an event this one knows
    model_config = ConfigDict(frozen=True, extra="allow")

    # a positive JSON integer a reader can hold (not true, not -5, not 10**30): a journal from elsewhere
    # with those was read, and its events placed before the run's first or past its end
    seq: int = Field(strict=True, ge=1, le=2**53)
    ts: float
    run_id: str
    node_id: str | None = None
    parent_id: str | None = None
    origin: str = "runtime"


class ResumedFrom(BaseModel):
    """Where a re-executed run came from (``flowtui run FLOW --resume-from JOURNAL@K``)."""

    model_config = ConfigDict(frozen=True)

    journal: str = Field(description="the parent journal, as given")
    run_id: str = Field(description="the id of the recorded run re-executed")
    at: int = Field(description="K: the recorded events up to this seq were served and checked")
    before_tool: str | None = Field(default=None, description="the tool K stops before, which runs live: the "
                                    "recorded run never returned from it (stopped or killed inside it), or the K "
                                    "asked for fell inside its call")
    before_model: str | None = Field(default=None, description="the agent whose model call K stops before, which "
                                     "the model answers live: as for before_tool, the recorded run never returned "
                                     "from it, or the K asked for fell inside it (a reply is served only whole)")
    asked: int | None = Field(default=None, description="the K asked for, when it fell inside before_tool's or "
                              "before_model's call (whose own events come only from making it), or inside "
                              "inside_edit: K is then the event before that call or edit")
    inside_edit: str | None = Field(default=None, description="the person's edit the K asked for fell inside (a "
                                    "promote is two events), said as its first event's note")
    torn: int | None = Field(default=None, description="the journal's last line, cut short (its writer was "
                             "killed): the run was re-executed up to the last event written whole, then live")
    unended: bool | None = Field(default=None, description="true when the journal stops, lines whole, before the "
                                 "recorded run's end (its writer was killed, the machine stopped): re-executed "
                                 "to its last event, then live (one that stops inside a call says "
                                 "before_tool or before_model instead)")
    redacted: int | None = Field(default=None, description="how many events up to K carry a value the journal holds "
                                 "as [redacted] (a credential: an input, an edit, a tool's result, a reply): the "
                                 "re-executed run holds that text in its place, and a model or tool called live "
                                 "after K gets it")

    @property
    def call(self) -> str | None:
        """The call K stops before, in words: ``tool x``, ``the model call of A`` (None: none)."""
        if self.before_tool:
            return f"tool {self.before_tool}"
        return f"the model call of {self.before_model}" if self.before_model else None

    @model_serializer(mode="wrap")
    def _only_when_there(self, handler: Any) -> dict[str, Any]:
        data = handler(self)
        for name in ("before_tool", "before_model", "asked", "inside_edit", "torn", "unended", "redacted"):
            if data.get(name) is None:
                data.pop(name, None)
        return data


class RunStart(_Event):
    type: Literal["run.start"] = "run.start"
    workflow: str
    input: Any = None
    memory: list[str] = Field(default_factory=list)
    state: dict[str, Any] = Field(default_factory=dict, description="initial workflow state")
    file: str | None = None
    data: dict[str, Any] = Field(default_factory=dict, description="the run's data (ctx.data); never sent to the model")
    resumed_from: ResumedFrom | None = Field(default=None, description="a re-executed run: its parent journal")
    budget: dict[str, Any] | None = Field(default=None, description="the run's budget: the limits set "
                                          "(max_chat_calls, ...) and its mode; None without one")
    snapshot: dict[str, Any] | None = Field(default=None, description="the snapshot the run started from "
                                            "(--from-snapshot): its file and its [state]; None without one")


class RunEnd(_Event):
    type: Literal["run.end"] = "run.end"
    status: RunStatus
    output: str | None = None
    error: str | None = None
    reason: str | None = Field(default=None, description="e.g. 'budget' when a budget stopped it")
    duration_ms: float = 0.0
    totals: RunTotals | None = Field(default=None, description="what the run consumed")


class NodeStart(_Event):
    type: Literal["node.start"] = "node.start"
    kind: NodeKind
    name: str
    data: dict[str, Any] = Field(default_factory=dict)


class NodeEnd(_Event):
    type: Literal["node.end"] = "node.end"
    kind: NodeKind
    name: str
    status: NodeStatus = "ok"
    duration_ms: float = 0.0
    error: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)


def _check_items(bucket: str, items: list[Any]) -> None:
    """History holds messages, memory and tasks hold strings (checked when an event is read back)."""
    want = Message if bucket == "history" else str
    for i, item in enumerate(items):
        if not isinstance(item, want):
            raise ValueError(f"{bucket} item {i} is {type(item).__name__}; {bucket} holds "
                             f"{'messages' if want is Message else 'strings'}")


class StateAppend(_Event):
    """An item joined a ``ctx.state`` bucket."""

    type: Literal["state.append"] = "state.append"
    bucket: Bucket
    item: Message | str
    note: str | None = Field(default=None, description="what a person's edit did, in words")

    @model_validator(mode="after")
    def _item_fits(self) -> "StateAppend":
        _check_items(self.bucket, [self.item])
        return self


class StateSet(_Event):
    """A ``ctx.state`` bucket was replaced whole."""

    type: Literal["state.set"] = "state.set"
    bucket: Bucket
    items: list[Message] | list[str]
    note: str | None = Field(default=None, description="what a person's edit did, in words "
                                                       "(promoted #3 → memory[2] (removed #3, #4))")

    @model_validator(mode="after")
    def _items_fit(self) -> "StateSet":
        _check_items(self.bucket, list(self.items))
        return self


class WorkflowStateChange(_Event):
    """A field of the workflow state changed (``path`` like ``problemas`` or ``a.b``)."""

    type: Literal["workflow_state.change"] = "workflow_state.change"
    path: str
    old: Any = None
    new: Any = None
    note: str | None = Field(default=None, description="what a person's edit did, when its words say more "
                                                       "than the change (undone: set rodadas (as before it))")


class CtxSet(_Event):
    """A field of ``ctx`` was set (by the runtime or by user code)."""

    type: Literal["ctx.set"] = "ctx.set"
    name: str
    value: Any = None
    # the value's type, when its JSON form (``value``) reads back as another: a datetime, a Decimal, a
    # tuple, a model, a list holding one (a re-execution that serves the tool that set it says so)
    typed: str | None = None

    @model_validator(mode="after")
    def _runtime_fields_fit(self) -> "CtxSet":
        # The fields the runtime writes have a shape the app relies on; a journal from
        # elsewhere that breaks it is refused here (shown as invalid), not drawn.
        if self.value is not None and self.name in _RUNTIME_FIELDS:
            _RUNTIME_FIELDS[self.name]().model_validate(self.value, strict=True)
        return self


class ChatDelta(_Event):
    """A fragment of streamed model text."""

    type: Literal["chat.delta"] = "chat.delta"
    text: str


class ChatAttempt(_Event):
    """A model call attempt failed and may be retried."""

    type: Literal["chat.attempt"] = "chat.attempt"
    attempt: int
    error: str
    status: int | None = None
    retry_in_s: float | None = None


class WatchHit(BaseModel):
    """A watchpoint that fired: the expression as set, the event that made it true, in which run."""

    model_config = ConfigDict(frozen=True)

    expr: str
    seq: int = Field(description="the event that made the condition true")
    run_id: str = Field(description="the run whose condition it is (a child workflow's run id for a child)")
    workflow: str | None = None
    detail: str | None = Field(default=None, description="what made it true: 'state.rodadas = 3'")


class RunPause(_Event):
    """The run stopped at a pause point and waits for a command."""

    type: Literal["run.pause"] = "run.pause"
    point: str = Field(description="agent, chat, tool, loop_iteration, or end (the top-level run's steps are "
                                   "done: only when a watchpoint fired after the last pause point)")
    name: str
    reason: str = Field(description="start, step, next_turn, loop_once, pause, breakpoint, approval, watchpoint, "
                                    "resumed (after a re-executed prefix) or diverged")
    path: list[str] = Field(default_factory=list)
    prompt: str | None = Field(default=None, description="the agent prompt the next model call will send")
    prompt_hook: bool = Field(default=False, description="at an agent's pause: its before_prompt makes the prompt "
                                                        "its call sends; prompt is the one it declares")
    request: dict[str, Any] | None = Field(default=None, description="before a model call an agent's own run() "
                                           "makes: its request as it will be sent (messages, tools, model, "
                                           "sampling), which the history does not make")
    call: dict[str, Any] | None = Field(default=None, description="before a tool: the call about to run "
                                                                 "(id, name, args)")
    watch: list[WatchHit] | None = Field(default=None, description="the watchpoints that fired since the last "
                                                                     "pause point (reason watchpoint)")


class ToolDecision(_Event):
    """A person decided on a pending tool call: approved it, denied it (the model gets
    ``denied by the user: REASON``) or edited its arguments (``args``, were ``before``)."""

    type: Literal["tool.decision"] = "tool.decision"
    tool: str
    call_id: str | None = None
    decision: Literal["approved", "denied", "edited"]
    reason: str | None = None
    args: dict[str, Any] | None = None
    before: dict[str, Any] | None = None


class Difference(BaseModel):
    """One value a re-executed event has otherwise than the recorded one."""

    model_config = ConfigDict(frozen=True)

    field: str = Field(description="what differs: 'request.messages[0].content', 'state.rodadas', 'node'")
    recorded: Any = None
    now: Any = None
    why: str | None = Field(default=None, description="what changed, when it can be told "
                                                     "('prompt file revisor.agent.md changed')")


class RunDiverged(_Event):
    """A re-executed run (``--resume-from``) did otherwise than its journal: the first mismatch.

    ``at`` is the recorded event's ``seq`` (``now`` the seq of what the code emitted instead,
    none when the run ended short); ``path`` where it happened
    (``RevisaoWorkflow › loop 2 › RevisorAgent › chat``); ``recorded`` and ``current`` describe
    both events in a line; ``differences`` say what differs. ``action``: ``stopped`` (the run
    stops before doing anything live) or ``paused`` (it waits at the next pause point; continuing
    goes on live from there).
    """

    type: Literal["run.diverged"] = "run.diverged"
    at: int
    now: int | None = None
    path: str = ""
    recorded: str = ""
    current: str = ""
    differences: list[Difference] = Field(default_factory=list)
    action: Literal["stopped", "paused"] = "stopped"
    journal: str = ""
    edits_not_made: list[str] = Field(default_factory=list, description="the person's edits the recorded run "
                                      "holds up to K after this point, which are not made again (the run no "
                                      "longer follows its journal), each said as its note")


class RunResume(_Event):
    type: Literal["run.resume"] = "run.resume"
    command: str


class SubscriberError(_Event):
    """A subscriber raised; it was isolated and the run went on."""

    type: Literal["subscriber.error"] = "subscriber.error"
    subscriber: str
    error: str


class DisposeError(_Event):
    """A cleanup raised when the run ended (one of ``ctx.on_dispose``, or a child workflow's
    middleware ``dispose``); the other cleanups still ran."""

    type: Literal["dispose.error"] = "dispose.error"
    cleanup: str
    error: str


EVENT_CLASSES = (
    RunStart, RunEnd, NodeStart, NodeEnd, StateAppend, StateSet,
    WorkflowStateChange, CtxSet, ChatDelta, ChatAttempt, RunPause, RunResume, ToolDecision,
    SubscriberError, DisposeError, RunDiverged,
)
Event = Annotated[Union[EVENT_CLASSES], Field(discriminator="type")]

EVENT_TYPES = frozenset(cls.model_fields["type"].default for cls in EVENT_CLASSES)


def _turn() -> type:
    from flowtui.runtime.context import TurnInfo

    return TurnInfo


def _loop() -> type:
    from flowtui.runtime.context import LoopInfo

    return LoopInfo


def _budget() -> type:
    from flowtui.runtime.budget import BudgetUsage

    return BudgetUsage


_RUNTIME_FIELDS = {"turn": _turn, "loop": _loop, "budget": _budget}


@cache
def _adapter() -> TypeAdapter[Any]:
    return TypeAdapter(Event)  # built on first use: a run that only writes events never needs it


def parse_event(line: str | bytes) -> Any:
    """Validate one JSON line (as written by the journal) back into an event."""
    return _adapter().validate_json(line)


def validate_event(data: dict[str, Any]) -> Any:
    """Validate one event read as JSON (a dict) into an event: raises pydantic's ValidationError."""
    return _adapter().validate_python(data)


# A node's end worth a word beyond its status (the event log and `flowtui run`'s tree say it): the reply
# is not the whole of what the model would say, or a loop gave up on its tools.
_FINISHED_SHORT = {"length": "the reply was cut at the model's max_tokens",
                   "content_filter": "the provider's content filter withheld the reply, or part of it"}


def failure_said(ev: Any) -> str | None:
    """A ``node.end``'s error as people read it: for a tool, what its code raised and where (``data.raised``;
    the model's words, its ``error``, named neither), else its ``error``."""
    raised = ev.data.get("raised") if ev.kind == "tool" and isinstance(ev.data, dict) else None
    return raised if isinstance(raised, str) else ev.error


def end_note(ev: Any) -> str | None:
    """What a ``node.end`` says beyond ok / error: a model call cut short, a tool call changed on its way to
    the tool, a loop stopped by ``max_fails`` or at ``max_iterations``, an agent's failed turn that its ``on_error`` recovered."""
    data = ev.data if isinstance(ev.data, dict) else {}
    if ev.kind == "chat":
        reply = data.get("reply")
        reason = reply.get("finish_reason") if isinstance(reply, dict) else None
        return _FINISHED_SHORT.get(reason) if isinstance(reason, str) else None
    ran = data.get("ran")
    if ev.kind == "tool" and isinstance(ran, dict):
        args = json.dumps(ran.get("args"), ensure_ascii=False)
        args = args if len(args) <= 200 else args[:199] + "…"  # (the node's data holds them whole)
        return f"ran as {ran.get('name')} {args}: before_tool or a middleware changed the call"
    if ev.kind == "loop" and data.get("stopped_by") == "fails":
        return "stopped by max_fails: too many tool calls in a row failed"
    if ev.kind == "loop" and data.get("stopped_by") == "exhausted":
        n = data.get("iterations")
        ran = f"{n} iteration{'s' * (n != 1)}" if isinstance(n, int) else "its iterations"
        return f"stopped at max_iterations: {ran}" + (", until never held" if data.get("until") else "")
    if ev.kind == "agent" and data.get("recovered") is True:
        return "recovered by on_error: what it returned is the agent's answer"
    return None


def continues_edit(ev: Any) -> bool:
    """Whether event ``ev`` (an event, or one as a journal holds it) is a later part of the person's edit
    an event before it began, as :mod:`~flowtui.runtime.edits` writes them: a promote's memory item
    (``(added)``), an edited call's ``tool.decision`` (after the history that makes it), an undo's second
    bucket (``with the above``), a denied call's result (its decision said it). Such an edit is one
    step: a fork or a re-execution at ``K`` never splits it, and the status counts it once. (An undo in
    a journal of an older flowtui, whose notes did not say so, counts as many as its buckets.)"""
    get = ev.get if isinstance(ev, dict) else lambda name, default=None: getattr(ev, name, default)
    if get("origin") != "user":
        return False
    kind = get("type")
    if kind == "tool.decision":
        return get("decision") == "edited"
    if kind == "state.append" and get("bucket") == "history":  # a denied call's result: part of the deny
        return True
    note = get("note") or ""
    return note.endswith(", with the above)") or (kind == "state.append" and note.startswith("promoted #")
                                                   and note.endswith(" (added)"))
