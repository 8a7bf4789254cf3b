"""The state of a run at any event: a fold of the events before it.

The TUI renders a :class:`RunView`, never the runtime's objects; replaying a
journal feeds the same class the same events, so a live run and a replay are
the same code. Each run (a child workflow's too) keeps its own buckets, state
and ``ctx`` (:class:`RunState`); the panes show one of them (``RunView.shown``).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from flowtui.runtime.budget import RunTotals, TokenTotals
from flowtui.runtime.conversation import model_messages
from flowtui.runtime.events import continues_edit, failure_said
from flowtui.runtime.messages import Message
from flowtui.runtime.run_state import NodeView, RunState


_NO_RUN = RunState()


def _shown(name: str) -> property:
    return property(lambda view: getattr(view.shown, name), doc=f"The shown run's {name}.")


class RunView:
    """What the panes show, folded from events with :meth:`apply`.

    Every run (the top-level one and each child workflow's) has its own
    :class:`RunState` in ``runs``; the panes show ``shown``: the run the app's
    cursor chose (``focus``), else the run paused right now, else the top-level
    run. ``history``, ``memory``, ``prompt``... read the shown run's.
    """

    history = _shown("history")
    memory = _shown("memory")
    tasks = _shown("tasks")
    state = _shown("state")
    data = _shown("data")
    ctx = _shown("ctx")
    prompt = _shown("prompt")
    last_changed = _shown("last_changed")
    workflow = _shown("workflow")
    file = _shown("file")
    budget = _shown("budget")

    def __init__(self) -> None:
        self.run_id: str | None = None  # the top-level run's
        self.runs: dict[str, RunState] = {}
        self.focus: str | None = None  # the run the app's cursor is on (None: follow the run)
        self.nodes: dict[str, NodeView] = {}
        self.roots: list[str] = []
        self._active: list[str] = []
        self.status = "idle"  # idle, running, paused, finished, failed, stopped (the top-level run's)
        self.pause: Any = None
        # where the run last paused, or the last edit made there (where a fork of a stopped run goes)
        self.last_pause_seq: int | None = None
        self.ran_since_pause = False  # a step started after that pause (else a stop there only unwound the run)
        self.error: str | None = None
        self.reason: str | None = None
        self.output: str | None = None
        self.events = 0
        self.last_seq = 0
        # The model reply arriving now (chat.delta), in the pieces it came in: a reply of megabytes in
        # thousands of pieces is kept without copying it whole at each one. Empty between replies.
        self._streamed: list[str] = []
        self.streaming_length = 0
        self.streaming_cut: str | None = None  # "stopped", "failed": the call ended before its reply did
        self.streaming_agent: str | None = None  # whose reply ``streaming`` is
        self.user_edits = 0
        self.retrying: Any = None  # the chat.attempt a model call waits to retry after (its wait may be long)
        self.resumed_from: Any = None  # a re-executed run: where it came from (run.start's resumed_from)
        self.divergence: Any = None  # a re-executed run that diverged: the run.diverged event
        self.waits_diverged: int | None = None  # the seq of the pause after it: the run waits there, nothing live
        self.journal_error: str | None = None  # the journal stopped being written (a full disk): why
        # The middlewares around every model call (the worker's hello says them): what the model sees
        # shows is what they are given.
        self.model_middlewares: tuple[str, ...] = ()
        # What the run consumed: counted from chat and tool nodes as they end (child workflows
        # included), then replaced by the run's own figures on run.end (elapsed_s, exceeded).
        self.totals = RunTotals()

    @property
    def shown(self) -> RunState:
        runs = self.runs
        if self.focus is not None and self.focus in runs:
            return runs[self.focus]
        pause = self.pause
        if pause is not None and pause.run_id in runs:
            return runs[pause.run_id]
        return runs.get(self.run_id, _NO_RUN) if self.run_id else _NO_RUN

    @property
    def history_resets(self) -> tuple[str | None, int]:
        """Changes when the shown history is replaced whole, or another run is shown."""
        shown = self.shown
        return shown.run_id, shown.history_resets

    def clone(self) -> "RunView":
        """A copy that further folding of either leaves the other untouched.

        Events and messages are frozen and state values are replaced, never
        changed in place, so copying the containers is enough. A node that has
        ended is never changed again by the fold (only running nodes gain
        children, data and iterations; an old chat node's request is dropped by
        replacing the node), so ended nodes are shared and only running ones copied.
        """
        twin = copy.copy(self)
        for name, value in vars(self).items():
            if isinstance(value, (list, dict, set)):
                setattr(twin, name, copy.copy(value))
        twin.runs = {run_id: run.clone() for run_id, run in self.runs.items()}
        twin.nodes = {node_id: node if node.status != "running"
                      else dataclasses.replace(node, data=dict(node.data), children=list(node.children))
                      for node_id, node in self.nodes.items()}
        return twin

    @property
    def streaming(self) -> str:
        """The text of the model reply arriving now ("" between replies)."""
        if len(self._streamed) > 1:
            self._streamed[:] = ["".join(self._streamed)]
        return self._streamed[0] if self._streamed else ""

    def streaming_tail(self, n: int) -> str:
        """At least the last ``n`` characters of :attr:`streaming` (all of it when it is shorter), joining
        only the pieces that hold them."""
        pieces, size = [], 0
        for piece in reversed(self._streamed):
            pieces.append(piece)
            size += len(piece)
            if size >= n:
                break
        return "".join(reversed(pieces))

    def _stream_anew(self) -> None:
        self._streamed = []
        self.streaming_length = 0
        self.streaming_cut = None

    def parent_of(self, run: RunState) -> RunState | None:
        return self.runs.get(run.parent_run) if run.parent_run else None

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

    def _on_run_start(self, ev: Any) -> None:
        if ev.run_id in self.runs:
            return
        run = self.runs[ev.run_id] = RunState(ev.run_id, ev.workflow)
        run.file, run.memory, run.state, run.data = ev.file, list(ev.memory), dict(ev.state), dict(ev.data)
        run.budget = ev.budget if isinstance(getattr(ev, "budget", None), dict) else None
        run.memory_from = [(ev.seq, "input")] * len(run.memory)  # seeded by the run's start (--memory)
        if self.run_id is None:
            self.run_id = ev.run_id
            self.status = "running"
            self.resumed_from = getattr(ev, "resumed_from", None)
        else:
            parent = self.nodes.get(ev.parent_id) if ev.parent_id else None
            run.parent_node = ev.parent_id
            run.parent_run = parent.run_id if parent is not None else self.run_id

    def _on_subscriber_error(self, ev: Any) -> None:
        if ev.subscriber == "JournalWriter" and self.journal_error is None:
            self.journal_error = ev.error.partition(": ")[2] or ev.error  # (its type's name first)

    def _on_run_diverged(self, ev: Any) -> None:
        if self.divergence is None:  # the first mismatch is the one that counts
            self.divergence = ev

    def _on_run_end(self, ev: Any) -> None:
        run = self.runs.get(ev.run_id)
        if run is not None:
            run.status = ev.status
        # (a run.start damaged, left out: the run's end still says how it ended, not "no run.end")
        top = ev.run_id == self.run_id or (self.run_id is None and "." not in ev.run_id)
        if top:  # a child run the top-level one outlived did not end on its own either
            for child in self.runs.values():
                if child.status == "running":
                    child.status = ev.status
        self._close_open_nodes(ev, every_run=top)
        if top:
            self.status, self.error, self.reason, self.output = ev.status, ev.error, ev.reason, ev.output
            if self._streamed and self.streaming_cut is None:  # (its process killed before the call's end)
                self.streaming_cut = ev.status if ev.status != "finished" else "stopped"
            if ev.totals is not None:
                self.totals = ev.totals
            self.pause = None
            self._active.clear()

    def _close_open_nodes(self, ev: Any, *, every_run: bool) -> None:
        """A run ended: the nodes it left open (its process crashed or was killed, or a stop cut
        them short) will never get their node.end, so they end here with the run's status and are
        marked unfinished, instead of showing as running forever. The top-level run's end closes
        every run's nodes."""
        status = _UNFINISHED.get(ev.status, "stopped")
        why = {"failed": "the run failed", "stopped": "the run was stopped"}.get(
            ev.status, f"the run ended ({ev.status})")
        nodes = self.nodes
        for node_id, node in list(nodes.items()):
            if node.status != "running" or not (every_run or node.run_id == ev.run_id):
                continue
            # replaced, not changed: a clone may share the node once it has ended
            nodes[node_id] = dataclasses.replace(node, status=status, unfinished=True,
                                                 error=node.error or f"unfinished: {why}")
            if node_id in self._active:
                self._active.remove(node_id)

    def _on_node_start(self, ev: Any) -> None:
        self.ran_since_pause = True
        data = dict(ev.data)
        node = NodeView(id=ev.node_id, kind=ev.kind, name=ev.name, parent_id=ev.parent_id, run_id=ev.run_id,
                        data=data)
        nodes = self.nodes
        nodes[node.id] = node
        parent = nodes.get(ev.parent_id) if ev.parent_id and ev.parent_id != ev.node_id else None
        if parent is not None:
            parent.children.append(node.id)
            _next_iteration(parent)
        else:
            self.roots.append(node.id)
        self._active.append(node.id)
        if ev.kind == "chat":
            self._stream_anew()
            self.streaming_agent = ev.name
            run = self.runs.get(ev.run_id)
            if run is not None:
                if data.get("prompt") is not None:
                    run.prompt = data["prompt"]  # the prompt this call sent (a journal without pauses has it too)
                    run.prompt_from = (ev.seq, f"agent:{ev.name}")
                self._keep_request(run, node.id)

    def _keep_request(self, run: RunState, node_id: str) -> None:
        """Only a run's latest chat node keeps its request whole (a long run's requests would
        otherwise pile up its history once per turn); the older one keeps the message count."""
        old = self.nodes.get(run.last_chat) if run.last_chat else None
        run.last_chat = node_id
        if old is None or "request" not in old.data:
            return
        data = {k: v for k, v in old.data.items() if k not in ("request", "sent_request")}
        self.nodes[old.id] = dataclasses.replace(old, data=data)  # replaced, not changed: clones share ended nodes

    def _on_node_end(self, ev: Any) -> None:
        if self.retrying is not None and ev.node_id == self.retrying.node_id:  # the call ended: no more waiting
            self.retrying = None
        node = self.nodes.get(ev.node_id)
        if node is None:
            return
        node.status, node.duration_ms, node.error = ev.status, ev.duration_ms, failure_said(ev)
        node.data.update(ev.data)
        if ev.kind in ("chat", "tool"):
            self._count(ev)
        if ev.kind == "chat" and ev.status != "ok":
            partial = ev.data.get("partial")
            # read back, its pieces are not journaled; live, the run held back a last piece that may have begun a
            # credential, which the partial holds (redacted): what the replay shows, the pane shows too
            if isinstance(partial, str) and partial and (not self._streamed or len(partial) >= self.streaming_length):
                self._streamed, self.streaming_length, self.streaming_agent = [partial], len(partial), ev.name
            if self._streamed:  # what arrived stays, said cut short
                self.streaming_cut = "failed" if ev.status == "error" else ev.status
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
        run = self.runs.get(ev.run_id)
        if run is None:
            return
        run.bucket(ev.bucket).append(ev.item)
        getattr(run, f"{ev.bucket}_from").append((ev.seq, ev.origin))
        self._count_user(ev)
        if ev.bucket == "history":
            self._stream_anew()

    def _on_state_set(self, ev: Any) -> None:
        run = self.runs.get(ev.run_id)
        if run is None:
            return
        run.carry(ev.bucket, ev.items, ev)
        setattr(run, ev.bucket, list(ev.items))
        if ev.bucket == "history":
            run.history_resets += 1
        self._count_user(ev)

    def _on_workflow_state_change(self, ev: Any) -> None:
        run = self.runs.get(ev.run_id)
        if run is not None:
            run.state[ev.path] = ev.new
            run.last_changed = ev.path
            self._count_user(ev)

    def _on_ctx_set(self, ev: Any) -> None:
        run = self.runs.get(ev.run_id)
        if run is None:
            return
        run.ctx[ev.name] = ev.value
        if ev.name == "loop" and ev.node_id in self.nodes and isinstance(ev.value, dict):
            node = self.nodes[ev.node_id]
            done = ev.value.get("iterations", 0)
            node.iterations_done = done if isinstance(done, int) else 0
            node.loop, node.loop_seq = ev.value, ev.seq

    def loop_shown(self) -> Any:
        """``ctx.loop`` as the code where the run is paused reads it: in a branch of a parallel step, the
        loop that branch set last (the runtime keeps one per branch; the run's last ctx.loop was often
        another branch's, which the pane showed), else the shown run's most recent loop."""
        shown = self.shown.ctx.get("loop")
        pause = self.pause
        node = self.nodes.get(pause.node_id) if pause is not None and pause.node_id else None
        chain = []
        while node is not None and node.run_id == pause.run_id:
            chain.append(node)
            node = self.nodes.get(node.parent_id) if node.parent_id else None
        at = next((i for i, n in enumerate(chain) if n.kind == "parallel" and i > 0), None)
        if at is None:
            return shown
        best, stack = None, [chain[at - 1].id]  # the branch: the node under the nearest parallel step
        while stack:
            n = self.nodes[stack.pop()]
            if n.kind == "loop" and n.loop_seq and (best is None or n.loop_seq > best.loop_seq):
                best = n
            stack.extend(c for c in n.children if c in self.nodes and self.nodes[c].run_id == n.run_id)
        if best is not None:
            return best.loop
        above = next((n for n in chain[at:] if n.kind == "loop" and n.loop_seq), None)  # as the step began
        return above.loop if above is not None else shown

    def _on_chat_delta(self, ev: Any) -> None:
        if self.retrying is not None:
            self.retrying = None
        self._streamed.append(ev.text)
        self.streaming_length += len(ev.text)

    def _on_chat_attempt(self, ev: Any) -> None:
        self._stream_anew()  # the retry streams again from the start
        self.retrying = ev if ev.retry_in_s is not None else None

    def _on_run_pause(self, ev: Any) -> None:
        self.status, self.pause, self.retrying, self.last_pause_seq = "paused", ev, None, ev.seq
        if self.divergence is not None and self.waits_diverged is None:
            self.waits_diverged = ev.seq
        self.ran_since_pause = False
        if ev.point != "loop_iteration" and ev.node_id in self.nodes:  # about to run a step inside the loop
            _next_iteration(self.nodes[ev.node_id])
        run = self.runs.get(ev.run_id)
        if ev.prompt is not None and run is not None:
            run.prompt = ev.prompt
            run.prompt_from = (ev.seq, f"agent:{ev.name}")

    def _on_run_resume(self, ev: Any) -> None:
        self.status, self.pause = "running", None

    def _on_tool_decision(self, ev: Any) -> None:
        self._count_user(ev)

    def _count_user(self, ev: Any) -> None:
        if ev.origin == "user":
            if not continues_edit(ev):  # (a promote is two events, and one edit)
                self.user_edits += 1
            if self.status == "paused":  # (a fork of a stopped run keeps what the person did there)
                self.last_pause_seq = ev.seq

    # --- derived views -----------------------------------------------------
    def fork_point(self, seq: int) -> tuple[int, str]:
        """Where a fork at event ``seq`` of this run goes, and why when elsewhere. Re-executed to its end, a run
        that is over would only end again (a stop there is made again: ``stopped (the app's terminal went
        away)``), so a fork at its last event goes where it last paused, with the edits made there; so does
        one anywhere after a pause the run was stopped at, when nothing ran after it."""
        over = self.status in ("stopped", "finished", "failed") and self.last_pause_seq is not None
        if over and (seq >= self.last_seq or (seq > self.last_pause_seq and not self.ran_since_pause)):
            return self.last_pause_seq, ", where the run last paused"
        return seq, ""

    def path(self) -> list[str]:
        """Where the run is: ``RevisaoWorkflow › loop 2/5 › RevisorAgent › chat``.

        While paused this is the pause point's own path, which names the agent
        or tool about to run (its node has not started yet).
        """
        if self.pause is not None and self.pause.path:
            return self._own_path(list(self.pause.path), self.runs.get(self.pause.run_id))
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

    def _own_path(self, path: list[str], run: RunState | None) -> list[str]:
        """Inside a child run, the path starts at the child: ``PesquisaWorkflow (child of
        CoordenadorWorkflow) › PesquisadorAgent``."""
        parent = self.parent_of(run) if run is not None else None
        if parent is None or run.workflow not in path:
            return path
        at = len(path) - 1 - path[::-1].index(run.workflow)
        return [f"{run.workflow} (child of {parent.workflow})", *path[at + 1:]]

    def status_line(self, *, waited_s: float = 0.0) -> str:
        """``paused before RevisorAgent``, ``running``, ``finished``, ``failed: …``, ``stopped``,
        ``stopped (killed after 1.0 s: a tool or hook did not return)``. ``waited_s``: how long the
        model call waiting to retry has waited so far (the live app counts it; a replay does not)."""
        if self.status == "paused" and self.pause is not None:
            p = self.pause
            what = {"agent": f"before {p.name}", "chat": f"before the model call of {p.name}",
                    "tool": f"before tool {p.name}", "loop_iteration": f"after an iteration of {p.name}",
                    "end": f"at the end of {p.name}"}
            text = f"paused {what.get(p.point, p.name)}"
            if p.watch:  # "paused before tool x (watchpoint repeat(x) >= 3, at #41)"
                more = f" +{len(p.watch) - 1} more" if len(p.watch) > 1 else ""
                waits = "waiting for approval; " if p.reason == "approval" else ""
                return text + f" ({waits}watchpoint {p.watch[0].expr}, at #{p.watch[0].seq}{more})"
            if p.reason == "resumed" and self.resumed_from is not None:  # the end of a re-executed prefix
                r = self.resumed_from
                inside = f"tool {r.before_tool}'s call" if r.before_tool else r.call or \
                    f"an edit ({getattr(r, 'inside_edit', None)})"
                why = (f", not #{r.asked}, which is inside {inside}" if r.asked is not None else
                       f", where the recorded run never returned from {r.call}" if r.call else
                       ", where it stops before the run's end" if r.torn or getattr(r, "unended", None) else "")
                hidden = getattr(r, "redacted", None)  # (the model got "[redacted]" for a key typed in an edit, unsaid)
                held = f"; {hidden} of its events hold [redacted] for a credential, as that text now" if hidden else ""
                return f"{text} (re-executed up to event #{r.at} of its journal{why}; live from here{held})"
            return text + {"breakpoint": " (breakpoint)", "approval": " (waiting for approval)",
                           "diverged": " (diverged from its journal)"}.get(p.reason, "")
        if self.status == "running" and self.retrying is not None:  # a wait the run's path alone left unsaid
            a = self.retrying
            node = self.nodes.get(a.node_id)
            http = f", HTTP {a.status}" if a.status else ""
            # the wait first: a narrow status line cuts its end
            left = max(a.retry_in_s - waited_s, 0.0)
            return (f"running: retrying the model call{f' of {node.name}' if node else ''} in {left:.0f} s "
                    f"(attempt {a.attempt + 1}; it failed: {a.error}{http})")
        if self.status == "running" and self.cleaning_up():
            return "running: its cleanups (ctx.on_dispose), after its steps"
        if self.status == "running" and self.ending():
            return "running: its steps are done, ending"
        if self.status == "failed":
            return f"failed: {self.error}"
        if self.status in ("finished", "stopped") and self.reason and self.reason != "stopped by user":
            return f"{self.status} ({self.reason})"
        return self.status

    def busy_with(self) -> str | None:
        """What a running run is busy with (the innermost step still going): ``tool web_search``; the
        status says it waits for it, and a run killed in it says it did not return."""
        if self.status != "running":
            return None
        for node in reversed(self.nodes.values()):
            if node.status == "running" and node.kind in ("tool", "chat", "agent"):
                return {"tool": f"tool {node.name}", "chat": f"the model call of {node.name}"}.get(
                    node.kind, f"agent {node.name}")
        return "its cleanups (ctx.on_dispose)" if self.cleaning_up() else None

    def cleaning_up(self) -> bool:
        """The top-level workflow's node has ended and the run has not, and it has ``ctx.on_dispose``
        cleanups to run (one that never returns showed a bare ``running`` for good)."""
        return self.ending() and self._top().data.get("cleanups") != 0  # (a journal before the count: maybe)

    def ending(self) -> bool:
        """The top-level workflow's node has ended and the run has not (its cleanups run, or its last
        events are written: a large output takes seconds)."""
        top = self._top()
        return top is not None and top.status != "running"

    def _top(self) -> Any:
        return next((self.nodes[i] for i in self.roots if self.nodes[i].run_id == self.run_id
                     and self.nodes[i].kind == "workflow"), None)

    def provenance(self, listed: int | None = None) -> list[tuple[int | None, str]]:
        """For each message of :meth:`model_sees`, (the event that put it there, its origin): the
        prompt's, one entry for the memory-and-tasks note (its items' events listed: the first
        ``listed`` of them, then counted, ``… 59,990 more``), the history's."""
        own = self.own_request()
        if own is not None:  # an agent's own run() made these messages, not the history
            return [(self.pause.seq, f"agent:{self.pause.name} run()")] * len(own)
        run = self.shown
        out: list[tuple[int | None, str]] = []
        if run.prompt:
            out.append(run.prompt_from or (None, "agent prompt"))
        if run.memory or run.tasks:
            froms = (*run.memory_from, *run.tasks_from)
            kept = froms if listed is None else froms[:listed]
            items = [f"#{seq} {origin}" for seq, origin in kept]
            if len(kept) < len(froms):
                items.append(f"… {len(froms) - len(kept):,} more")
            out.append((min((seq for seq, _ in froms), default=None), ", ".join(items)))
        out.extend(run.history_from[:len(run.history)])
        out.extend((None, "") for _ in range(len(run.history) - len(run.history_from)))
        return out

    def last_sent(self) -> dict[str, Any] | None:
        """The shown run's last model call, when a model middleware changed what it sent: ``changed_by``
        (names), ``messages`` (what the model sees had), ``sent`` and ``trimmed`` (as the chat node keeps
        them). None when it sent what it was given, or there was none."""
        run = self.shown
        node = self.nodes.get(run.last_chat) if run.last_chat else None
        data = node.data if node is not None else {}
        if not data.get("changed_by"):
            return None
        return {k: data.get(k) for k in ("changed_by", "messages", "sent", "trimmed")}

    def model_sees(self) -> list[Message]:
        """The messages the next model call will build: prompt, memory/tasks note, history (the
        function a turn's request is built with; a model middleware may still change it, as the
        chat node's ``trimmed`` records). Paused before a model call of an agent's own ``run()``:
        the messages that call sends, as the pause recorded them."""
        own = self.own_request()
        if own is not None:
            return own
        return model_messages(self.prompt, self.memory, self.tasks, self.history)

    def own_request(self) -> list[Message] | None:
        """Paused before a model call an agent's own ``run()`` makes: its messages (None otherwise, or
        when a journal's are no messages)."""
        pause = self.pause
        request = getattr(pause, "request", None) if pause is not None else None
        if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
            return None
        try:
            return [Message.model_validate(m) for m in request["messages"]]
        except ValueError:
            return None


def _next_iteration(node: NodeView) -> None:
    """Something starts inside a loop: after an iteration has finished, that is the next one."""
    if node.kind == "loop" and node.status == "running" and node.iterations_done >= node.iteration:
        node.iteration = node.iterations_done + 1


# a run's status -> the status of the nodes it left open when it ended
_UNFINISHED = {"failed": "error", "stopped": "stopped"}

# event type -> RunView method, looked up once per event (a hot path: every event goes through it)
_HANDLERS = {
    "run.start": RunView._on_run_start, "run.end": RunView._on_run_end,
    "node.start": RunView._on_node_start, "node.end": RunView._on_node_end,
    "state.append": RunView._on_state_append, "state.set": RunView._on_state_set,
    "workflow_state.change": RunView._on_workflow_state_change, "ctx.set": RunView._on_ctx_set,
    "chat.delta": RunView._on_chat_delta, "chat.attempt": RunView._on_chat_attempt,
    "run.pause": RunView._on_run_pause, "run.resume": RunView._on_run_resume,
    "tool.decision": RunView._on_tool_decision, "run.diverged": RunView._on_run_diverged,
    "subscriber.error": RunView._on_subscriber_error,
}
