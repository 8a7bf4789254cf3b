"""The state of a run at any event: a fold of the events before it.

The TUI renders a :class:`RunView`, never the runtime's objects; replaying a
journal feeds the same class the same events, so a live run and a replay are
the same code. Only the top-level run's events change the buckets, the state
and ``ctx``; a child workflow's events add nodes to the tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flowtui.runtime.budget import RunTotals, TokenTotals
from flowtui.runtime.conversation import model_messages
from flowtui.runtime.messages import Message


@dataclass
class NodeView:
    id: str
    kind: str
    name: str
    parent_id: str | None
    run_id: str
    status: str = "running"  # running, ok, error, stopped
    duration_ms: float | None = None
    error: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)
    iterations_done: int = 0
    # A loop's current iteration: the one running, or the one just finished while the run is
    # paused after it (the next one starts when something inside the loop does). The runtime's
    # path says the same: ``loop 2/5`` from the start of iteration 2 until iteration 3 starts.
    iteration: int = 1

    @property
    def label(self) -> str:
        if self.kind == "loop":
            total = self.data.get("max_iterations", "?")
            if total is None:  # a loop with max_iterations=math.inf
                total = "∞"
            if self.status == "running":
                return f"{self.name} {self.iteration}/{total}"
            return f"{self.name} {self.data.get('iterations', self.iterations_done)}/{total}"
        return self.name


class RunView:
    """What the panes show, folded from events with :meth:`apply`."""

    def __init__(self) -> None:
        self.run_id: str | None = None
        self.workflow: str | None = None
        self.file: str | None = None
        self.history: list[Message] = []
        self.history_resets = 0  # bumps when history is replaced whole (not appended)
        self.memory: list[str] = []
        self.tasks: list[str] = []
        self.state: dict[str, Any] = {}
        self.data: dict[str, Any] = {}  # ctx.data: the run's own data, never sent to the model
        self.last_changed: str | None = None
        self.ctx: dict[str, Any] = {}
        self.nodes: dict[str, NodeView] = {}
        self.roots: list[str] = []
        self._active: list[str] = []
        self.status = "idle"  # idle, running, paused, finished, failed, stopped
        self.pause: Any = None
        self.prompt: str | None = None
        self.error: str | None = None
        self.reason: str | None = None
        self.output: str | None = None
        self.events = 0
        self.last_seq = 0
        self.streaming = ""  # the text of the model reply arriving now (chat.delta), "" between replies
        self.streaming_agent: str | None = None  # whose reply ``streaming`` is
        self.user_edits = 0
        # What the run consumed: counted from chat and tool nodes as they end (child workflows
        # included), then replaced by the run's own figures on run.end (elapsed_s, exceeded).
        self.totals = RunTotals()

    # --- folding -----------------------------------------------------------
    def apply(self, ev: Any) -> None:
        """Fold one event."""
        self.apply_many((ev,))

    def apply_many(self, events: Any) -> None:
        """Fold a batch of events (the TUI drains its buffer this way)."""
        handlers = _HANDLERS
        n = 0
        for ev in events:
            n += 1
            handler = handlers.get(ev.type)
            if handler is not None:
                handler(self, ev)
            self.last_seq = ev.seq
        self.events += n

    def _mine(self, ev: Any) -> bool:
        return ev.run_id == self.run_id

    def _on_run_start(self, ev: Any) -> None:
        if self.run_id is None:
            self.run_id, self.workflow, self.file = ev.run_id, ev.workflow, ev.file
            self.memory = list(ev.memory)
            self.state = dict(ev.state)
            self.data = dict(ev.data)
            self.status = "running"

    def _on_run_end(self, ev: Any) -> None:
        if self._mine(ev):
            self.status, self.error, self.reason, self.output = ev.status, ev.error, ev.reason, ev.output
            if ev.totals is not None:
                self.totals = ev.totals
            self.pause = None
            self._active.clear()

    def _on_node_start(self, ev: Any) -> None:
        node = NodeView(id=ev.node_id, kind=ev.kind, name=ev.name, parent_id=ev.parent_id, run_id=ev.run_id,
                        data=dict(ev.data))
        self.nodes[node.id] = node
        parent = self.nodes.get(ev.parent_id) if ev.parent_id and ev.parent_id != ev.node_id else None
        if parent is not None:
            parent.children.append(node.id)
            _next_iteration(parent)
        else:
            self.roots.append(node.id)
        self._active.append(node.id)
        if ev.kind == "chat":
            self.streaming = ""
            if ev.run_id == self.run_id and ev.data.get("prompt") is not None:
                self.prompt = ev.data["prompt"]  # the prompt this call sent (a journal without pauses has it too)
            self.streaming_agent = ev.name

    def _on_node_end(self, ev: Any) -> None:
        node = self.nodes.get(ev.node_id)
        if node is None:
            return
        node.status, node.duration_ms, node.error = ev.status, ev.duration_ms, ev.error
        node.data.update(ev.data)
        if ev.kind in ("chat", "tool"):
            self._count(ev)
        if ev.node_id in self._active:
            self._active.remove(ev.node_id)

    def _count(self, ev: Any) -> None:
        t, data = self.totals, ev.data
        if ev.kind == "tool" and "is_error" in data:  # a call that ran to a result (a fatal one did not)
            self.totals = t.model_copy(update={"tool_calls": t.tool_calls + 1})
        elif ev.kind == "chat" and "prompt_tokens" in data:  # a call that got a reply
            prompt, completion = data["prompt_tokens"] or 0, data["completion_tokens"] or 0
            tokens = TokenTotals(prompt=t.tokens.prompt + prompt, completion=t.tokens.completion + completion,
                                 total=t.tokens.total + prompt + completion)
            self.totals = t.model_copy(update={"chat_calls": t.chat_calls + 1, "tokens": tokens,
                                               "cost_usd": t.cost_usd + (data.get("cost_usd") or 0.0)})

    def _on_state_append(self, ev: Any) -> None:
        if not self._mine(ev):
            return
        self._bucket(ev.bucket).append(ev.item)
        self._count_user(ev)
        if ev.bucket == "history":
            self.streaming = ""

    def _on_state_set(self, ev: Any) -> None:
        if not self._mine(ev):
            return
        setattr(self, ev.bucket, list(ev.items))
        if ev.bucket == "history":
            self.history_resets += 1
        self._count_user(ev)

    def _on_workflow_state_change(self, ev: Any) -> None:
        if self._mine(ev):
            self.state[ev.path] = ev.new
            self.last_changed = ev.path
            self._count_user(ev)

    def _on_ctx_set(self, ev: Any) -> None:
        if not self._mine(ev):
            return
        self.ctx[ev.name] = ev.value
        if ev.name == "loop" and ev.node_id in self.nodes and isinstance(ev.value, dict):
            done = ev.value.get("iterations", 0)
            self.nodes[ev.node_id].iterations_done = done if isinstance(done, int) else 0

    def _on_chat_delta(self, ev: Any) -> None:
        self.streaming += ev.text

    def _on_chat_attempt(self, ev: Any) -> None:
        self.streaming = ""  # the retry streams again from the start

    def _on_run_pause(self, ev: Any) -> None:
        self.status, self.pause = "paused", ev
        if ev.point != "loop_iteration" and ev.node_id in self.nodes:  # about to run a step inside the loop
            _next_iteration(self.nodes[ev.node_id])
        if ev.prompt is not None:
            self.prompt = ev.prompt

    def _on_run_resume(self, ev: Any) -> None:
        self.status, self.pause = "running", None

    def _count_user(self, ev: Any) -> None:
        if ev.origin == "user":
            self.user_edits += 1

    def _bucket(self, name: str) -> list:
        return {"history": self.history, "memory": self.memory, "tasks": self.tasks}[name]

    # --- derived views -----------------------------------------------------
    def path(self) -> list[str]:
        """Where the run is: ``RevisaoWorkflow › loop 2/5 › RevisorAgent › chat``.

        While paused this is the pause point's own path, which names the agent
        or tool about to run (its node has not started yet).
        """
        if self.pause is not None and self.pause.path:
            return list(self.pause.path)
        if not self._active:
            return []
        labels: list[str] = []
        node = self.nodes.get(self._active[-1])
        seen: set[str] = set()
        while node is not None:
            if node.id in seen:  # a journal from elsewhere may link nodes in a circle: show it, stop
                labels.append(f"(broken link: {node.id} is its own ancestor)")
                break
            seen.add(node.id)
            labels.append("chat" if node.kind == "chat" else node.label)
            node = self.nodes.get(node.parent_id) if node.parent_id else None
        return labels[::-1]

    def status_line(self) -> str:
        """``paused before RevisorAgent``, ``running``, ``finished``, ``failed: …``, ``stopped``,
        ``stopped (killed after 1.0 s: a tool or hook did not return)``."""
        if self.status == "paused" and self.pause is not None:
            p = self.pause
            what = {"agent": f"before {p.name}", "chat": f"before the model call of {p.name}",
                    "tool": f"before tool {p.name}", "loop_iteration": f"after an iteration of {p.name}"}
            text = f"paused {what.get(p.point, p.name)}"
            return text + (" (breakpoint)" if p.reason == "breakpoint" else "")
        if self.status == "failed":
            return f"failed: {self.error}"
        if self.status in ("finished", "stopped") and self.reason and self.reason != "stopped by user":
            return f"{self.status} ({self.reason})"
        return self.status

    def model_sees(self) -> list[Message]:
        """The messages the next model call will build: prompt, memory/tasks note, history (the
        function a turn's request is built with; a model middleware may still change it, as the
        chat node's ``trimmed`` records)."""
        return model_messages(self.prompt, self.memory, self.tasks, self.history)


def _next_iteration(node: NodeView) -> None:
    """Something starts inside a loop: after an iteration has finished, that is the next one."""
    if node.kind == "loop" and node.status == "running" and node.iterations_done >= node.iteration:
        node.iteration = node.iterations_done + 1


# event type -> RunView method, looked up once per event (a hot path: every event goes through it)
_HANDLERS = {
    "run.start": RunView._on_run_start, "run.end": RunView._on_run_end,
    "node.start": RunView._on_node_start, "node.end": RunView._on_node_end,
    "state.append": RunView._on_state_append, "state.set": RunView._on_state_set,
    "workflow_state.change": RunView._on_workflow_state_change, "ctx.set": RunView._on_ctx_set,
    "chat.delta": RunView._on_chat_delta, "chat.attempt": RunView._on_chat_attempt,
    "run.pause": RunView._on_run_pause, "run.resume": RunView._on_run_resume,
}
