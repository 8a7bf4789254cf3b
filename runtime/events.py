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

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from flowtui.runtime.budget import RunTotals
from flowtui.runtime.messages import Message

NodeKind = Literal["workflow", "loop", "parallel", "agent", "chat", "tool"]
NodeStatus = Literal["ok", "error", "stopped"]
RunStatus = Literal["finished", "failed", "stopped"]
Bucket = Literal["history", "memory", "tasks"]


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True)

    seq: int
    ts: float
    run_id: str
    node_id: str | None = None
    parent_id: str | None = None
    origin: str = "runtime"


class RunStart(_Event):
    type: Literal["run.start"] = "run.start"
    workflow: str
    input: Any = None
    memory: list[str] = Field(default_factory=list)
    state: dict[str, Any] = Field(default_factory=dict, description="initial workflow state")
    file: str | None = None
    data: dict[str, Any] = Field(default_factory=dict, description="the run's data (ctx.data); never sent to the model")


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


class StateAppend(_Event):
    """An item joined a ``ctx.state`` bucket."""

    type: Literal["state.append"] = "state.append"
    bucket: Bucket
    item: Message | str


class StateSet(_Event):
    """A ``ctx.state`` bucket was replaced whole."""

    type: Literal["state.set"] = "state.set"
    bucket: Bucket
    items: list[Message] | list[str]


class WorkflowStateChange(_Event):
    """A field of the workflow state changed (``path`` like ``problemas`` or ``a.b``)."""

    type: Literal["workflow_state.change"] = "workflow_state.change"
    path: str
    old: Any = None
    new: Any = None


class CtxSet(_Event):
    """A field of ``ctx`` was set (by the runtime or by user code)."""

    type: Literal["ctx.set"] = "ctx.set"
    name: str
    value: Any = None


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


class RunPause(_Event):
    """The run stopped at a pause point and waits for a command."""

    type: Literal["run.pause"] = "run.pause"
    point: str = Field(description="agent, chat, tool or loop_iteration")
    name: str
    reason: str = Field(description="start, step, next_turn, loop_once, pause or breakpoint")
    path: list[str] = Field(default_factory=list)
    prompt: str | None = Field(default=None, description="the agent prompt the next model call will send")


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


Event = Annotated[
    Union[
        RunStart, RunEnd, NodeStart, NodeEnd, StateAppend, StateSet,
        WorkflowStateChange, CtxSet, ChatDelta, ChatAttempt, RunPause, RunResume,
        SubscriberError, DisposeError,
    ],
    Field(discriminator="type"),
]

_ADAPTER: TypeAdapter[Any] = TypeAdapter(Event)


def parse_event(line: str | bytes) -> Any:
    """Validate one JSON line (as written by the journal) back into an event."""
    return _ADAPTER.validate_json(line)


def event_json(event: BaseModel) -> str:
    """One event as one JSON line (no newline)."""
    return event.model_dump_json(fallback=repr)
