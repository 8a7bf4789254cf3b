"""A run as a tree of steps named by where they are, not when: what ``flowtui diff`` aligns.

A step is a place in the run: the workflow, each loop iteration
(``RevisaoWorkflow › loop 2``), each agent, each model call of it (``turn 1``),
each tool call (``tool registrar_problema``; the second call of that name in
the same turn is ``tool registrar_problema #2``, as is any second sibling of
one name), and a child workflow under the tool that ran it. Two runs of one
flow have the same places wherever they did the same things, whatever their
ids, timestamps and sequence numbers.

Each step holds *facts*, in the order they happened: what the model saw
(``prompt``, ``memory``, ``tasks``, ``history`` — or the whole ``messages``
when a request is not the usual projection — ``tools``, ``model``,
``sampling``) and answered (``reply``), a tool's ``args`` and ``result``,
what the step itself did to the buckets (``memory appended``, ``history
set``...), to the workflow state (``state.<field>``) and to ``ctx``
(``ctx.<name>``), and how it ended (``status``, ``error``). Ids, timestamps,
durations, sequence numbers, token counts and costs are left out. Built from
events as a journal holds them (validated, so their fields have the right
types; ``data`` mappings are checked here), it tolerates what a journal from
elsewhere may hold: unknown parents, missing starts, duplicate ids.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from flowtui.runtime.compare import model_key
from flowtui.runtime.conversation import model_messages
from flowtui.runtime.journal import Invalid
from flowtui.runtime.messages import Message
from flowtui.runtime.providers.base import sent_sampling


@dataclass
class Step:
    """A place in a run: its path segment, its facts and its sub-steps, in the order they happened."""

    label: str
    kind: str  # workflow, loop, iteration, parallel, agent, chat, tool, run
    facts: dict[str, Any] = field(default_factory=dict)
    children: dict[str, "Step"] = field(default_factory=dict)
    order: list[tuple[str, str]] = field(default_factory=list)  # ("fact", name) / ("step", label)
    turns: int = 0  # model calls so far (names the next one ``turn N``)
    # The run's workflow state and ctx fields when the step ended (``state.x``/``ctx.y`` keys): what
    # a step that did not set a field held for it, to compare with a run whose step did.
    after: dict[str, Any] | None = None

    def child(self, label: str, kind: str) -> "Step":
        """A new sub-step; a second sibling of one label is ``label #2``."""
        name, n = label, 1
        while name in self.children:
            n += 1
            name = f"{label} #{n}"
        step = self.children[name] = Step(name, kind)
        self.order.append(("step", name))
        return step

    def set(self, name: str, value: Any) -> None:
        """A fact; set twice, it keeps its first place and its last value (the step's outcome)."""
        if name not in self.facts:
            self.order.append(("fact", name))
        self.facts[name] = value

    def add(self, name: str, item: Any) -> None:
        """One more item of a list fact (what the step appended to a bucket)."""
        items = self.facts.get(name)
        if not isinstance(items, list):
            self.set(name, [])
        self.facts[name].append(item)


@dataclass
class _Node:
    run_id: str
    kind: str
    step: Step
    done: int = 0  # a loop: iterations finished
    between: bool = False  # a loop: after an iteration's end (its until, its ctx.loop), before the next


@dataclass
class _Run:
    root: Step
    memory: list[str] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)
    fields: dict[str, Any] = field(default_factory=dict)  # "state.x" and "ctx.y" as they are now
    paused: tuple[str | None, str] | None = None  # (its node, its point) while paused: where an edit is made


def build_tree(events: Iterable[Any], *, shared: dict[Any, Any] | None = None) -> Step:
    """The steps of one run (its child workflows included), from its events in order.

    Equal messages become one object (every request repeats the history before it), in
    ``shared`` when given: two trees built with one ``shared`` compare their messages by identity
    first, so comparing two long runs costs about their size, not their size times their turns."""
    builder = _Builder(shared if shared is not None else {})
    # A person's edits a re-execution made again where they were made, without pausing there: no pause
    # says where, the next event does (said at the run's root, they were differences with their own run)
    held: list[Any] = []
    for ev in events:
        handler = _HANDLERS.get(ev.type)
        if handler is None or isinstance(ev, Invalid):  # what does not validate is not compared
            continue
        if ev.origin == "user" and not ev.node_id and ev.run_id in builder.runs \
                and builder.runs[ev.run_id].paused is None:
            held.append(ev)
            continue
        if held:
            builder.forced = builder.next_place(ev)
            for edit in held:
                _HANDLERS[edit.type](builder, edit)
            builder.forced, held = None, []
        handler(builder, ev)
    for edit in held:
        _HANDLERS[edit.type](builder, edit)
    return builder.root or Step("(no run)", "run")


class _Builder:
    def __init__(self, shared: dict[Any, Any]) -> None:
        self.shared = shared
        self.root: Step | None = None
        self.runs: dict[str, _Run] = {}
        self.nodes: dict[str, _Node] = {}
        self.forced: Step | None = None  # where the edits held back are said (see build_tree)

    # --- where an event belongs ---------------------------------------------------------
    def run(self, run_id: str, *, label: str = "(run)", parent: str | None = None) -> _Run:
        run = self.runs.get(run_id)
        if run is None:
            if self.root is None:
                self.root = Step(label, "workflow")
                step = self.root
            else:  # a child workflow: under the tool that ran it
                node = self.nodes.get(parent) if parent else None
                step = (node.step if node is not None else self.root).child(label, "workflow")
            run = self.runs[run_id] = _Run(step)
        return run

    def owner(self, ev: Any) -> Step:
        """The step an event belongs to: its node's (a loop's current iteration), else its run's. An
        edit made by hand belongs where the run was paused (it is made from outside the run, with no
        node of its own: said at the run's root, it came last, after all the steps it came before)."""
        if self.forced is not None and ev.origin == "user":
            return self.forced
        node_id, point = ev.node_id, None
        if not node_id and ev.origin == "user" and ev.run_id in self.runs and self.runs[ev.run_id].paused:
            node_id, point = self.runs[ev.run_id].paused
        return self.at(ev.run_id, node_id, point)

    def at(self, run_id: str, node_id: str | None, point: str | None = None) -> Step:
        """The step of node ``node_id`` (a loop's current iteration; at a pause ``point`` before its
        next iteration's first step, that one), else of run ``run_id``."""
        node = self.nodes.get(node_id) if node_id else None
        if node is None or node.run_id != run_id:
            return self.run(run_id).root
        if node.kind == "loop":
            # (paused before the next iteration's first step: that iteration's, as the pause's path says)
            ahead = point is not None and point != "loop_iteration"
            return self.iteration(node, node.done if node.between and not ahead else node.done + 1)
        return node.step

    def next_place(self, ev: Any) -> Step:
        """The step the run is at as ``ev`` comes: a pause's, the one a node starts in, or ``ev``'s own."""
        if ev.type == "run.pause":
            return self.at(ev.run_id, ev.node_id, ev.point)
        parent = self.nodes.get(ev.parent_id) if ev.type == "node.start" and ev.parent_id else None
        if parent is not None and parent.run_id == ev.run_id:
            return self.iteration(parent, parent.done + 1) if parent.kind == "loop" else parent.step
        return self.owner(ev)

    def iteration(self, loop: _Node, i: int) -> Step:
        label = f"{loop.step.label} {max(i, 1)}"
        return loop.step.children.get(label) or loop.step.child(label, "iteration")

    # --- events ------------------------------------------------------------------------
    def on_run_start(self, ev: Any) -> None:
        if ev.run_id in self.runs:
            return
        run = self.run(ev.run_id, label=ev.workflow, parent=ev.parent_id)
        run.memory = list(ev.memory)
        run.fields = {f"state.{k}": v for k, v in ev.state.items()}
        step = run.root
        step.set("input", ev.input)
        step.set("memory", list(ev.memory))
        step.set("state", dict(ev.state))
        step.set("data", dict(ev.data))

    def on_run_end(self, ev: Any) -> None:
        run = self.run(ev.run_id)
        step = run.root
        step.after = dict(run.fields)
        step.set("status", ev.status)
        step.set("output", ev.output)
        if ev.error is not None:
            step.set("error", ev.error)
        if ev.reason is not None:
            step.set("reason", ev.reason)

    def on_node_start(self, ev: Any) -> None:
        if not ev.node_id:
            return
        run = self.run(ev.run_id)
        parent_node = self.nodes.get(ev.parent_id) if ev.parent_id else None
        if ev.kind == "workflow" and (parent_node is None or parent_node.run_id != ev.run_id):
            step = run.root  # the run's own workflow node: the step run.start began
            if step.label == "(run)":
                step.label = ev.name
        else:
            parent = self.owner_of_child(ev, parent_node, run)
            if ev.kind == "chat":
                parent.turns += 1
                label = f"turn {parent.turns}"
            else:
                label = f"tool {ev.name}" if ev.kind == "tool" else ev.name
            step = parent.child(label, ev.kind)
        self.nodes[ev.node_id] = _Node(ev.run_id, ev.kind, step)
        data = ev.data if isinstance(ev.data, dict) else {}
        if ev.kind == "chat":
            self.request_facts(step, data, run)
        elif ev.kind == "tool" and "args" in data:
            step.set("args", data["args"])

    def owner_of_child(self, ev: Any, parent: _Node | None, run: _Run) -> Step:
        if parent is None or parent.run_id != ev.run_id:
            return run.root
        if parent.kind == "loop":
            if parent.between:  # the next iteration begins
                parent.between = False
            return self.iteration(parent, parent.done + 1)
        return parent.step

    def request_facts(self, step: Step, data: dict[str, Any], run: _Run) -> None:
        """What the model saw: the prompt, memory, tasks and history when the request is the usual
        projection of them (so a memory item differs as ``memory[0]``, not as a message), else
        every message as sent."""
        request = data.get("request")
        if not isinstance(request, dict):
            return
        messages = request.get("messages")
        if isinstance(messages, list):
            sent = [self.message(m) for m in messages]
            prompt = data.get("prompt")  # none for a call an agent's own run() made: its messages are its own
            prefix = [self.message(m) for m in model_messages(prompt if isinstance(prompt, str) else None,
                                                         run.memory, run.tasks, [])]
            if isinstance(prompt, str) and sent[:len(prefix)] == prefix:
                step.set("prompt", prompt)
                step.set("memory", list(run.memory))
                step.set("tasks", list(run.tasks))
                step.set("history", sent[len(prefix):])
            else:
                step.set("messages", sent)
        for name in ("tools", "tools_digest"):  # (the digest: what the model is told of the tools)
            if name in request:
                step.set(name, request[name])
        # the model as compared: a cassette's wrapper ("recording M to c.jsonl") said which cassette, and
        # a run recorded or replayed differed from the same run without one at every model call
        if (model := model_key(request.get("model"))) is not None:
            step.set("model", model)
        sampling, defaults = request.get("sampling"), request.get("provider_sampling")
        if isinstance(defaults, dict) and isinstance(sampling, dict):  # what was sent: both, the agent's first
            sampling = sent_sampling(defaults, sampling)
        if "sampling" in request:
            step.set("sampling", sampling)

    def on_node_end(self, ev: Any) -> None:
        node = self.nodes.get(ev.node_id) if ev.node_id else None
        if node is None or node.run_id != ev.run_id:
            return
        step = node.step
        step.after = dict(self.run(ev.run_id).fields)
        data = ev.data if isinstance(ev.data, dict) else {}
        if ev.kind == "chat":
            reply = data.get("reply")
            if isinstance(reply, dict):
                step.set("reply", {"content": reply.get("content"), "tool_calls": calls(reply.get("tool_calls"))})
            for name in ("reasoning", "changed_by", "trimmed"):
                if name in data:
                    step.set(name, data[name])
            sent = data.get("sent_request")
            if isinstance(sent, dict) and isinstance(sent.get("messages"), list):
                step.set("sent messages", [self.message(m) for m in sent["messages"]])
        elif ev.kind == "loop":
            for name in ("iterations", "stopped_by"):
                if name in data:
                    step.set(name, data[name])
        elif ev.kind == "agent" and data.get("recovered"):
            step.set("recovered", True)
        if step is self.run(ev.run_id).root:  # the run's own workflow node: how it ended is run.end's to say
            return  # (a journal cut before run.end compared the node's "ok" with the other run's "finished")
        step.set("status", ev.status)
        if ev.error is not None:
            step.set("error", ev.error)

    def on_state_append(self, ev: Any) -> None:
        run, step = self.run(ev.run_id), self.owner(ev)
        if ev.bucket != "history":
            (run.memory if ev.bucket == "memory" else run.tasks).append(ev.item)
            step.add(f"{ev.bucket} appended", ev.item)
            return
        item = ev.item
        if step.kind == "tool" and item.role == "tool" and "result" not in step.facts:
            step.set("result", {"content": item.content, "is_error": item.is_error})
        elif step.kind == "agent" and item.role == "assistant" and ev.origin == f"agent:{item.agent}" \
                and _as_replied(step, self.message(item)):
            pass  # the turn's reply, compared where the model gave it
        else:  # (a reply kept other than the model gave it, in a journal edited by hand: the replay shows it)
            step.add("history appended", self.message(item))

    def on_state_set(self, ev: Any) -> None:
        run, step = self.run(ev.run_id), self.owner(ev)
        if ev.bucket == "memory":
            run.memory = list(ev.items)
        elif ev.bucket == "tasks":
            run.tasks = list(ev.items)
        step.set(f"{ev.bucket} set", [self.message(m) if ev.bucket == "history" else m for m in ev.items])

    def on_workflow_state_change(self, ev: Any) -> None:
        self.field(ev, f"state.{ev.path}", ev.new)

    def on_ctx_set(self, ev: Any) -> None:
        node = self.nodes.get(ev.node_id) if ev.node_id else None
        if (ev.name == "loop" and node is not None and node.kind == "loop" and node.run_id == ev.run_id
                and isinstance(ev.value, dict) and isinstance(ev.value.get("iterations"), int)):
            done, stopped = ev.value["iterations"], ev.value.get("stopped_by")
            if not (stopped and done == node.done and not node.between):  # (a stop inside the next iteration
                node.done = done  # keeps the count: its ctx.loop is that iteration's, not the one before)
                node.between = done > 0  # an iteration ended (0: the loop starts, before its first)
        if ev.name == "budget":  # what was spent: not compared (see compare.budget_use)
            return
        value = ev.value
        if ev.name == "loop" and isinstance(value, dict):  # a ceiling shows in what the loop did (compare._CEILING)
            value = {k: v for k, v in value.items() if k != "max_iterations"}
        self.field(ev, f"ctx.{ev.name}", value)

    def field(self, ev: Any, name: str, value: Any) -> None:
        """A workflow-state or ctx field set: a fact of the step that set it."""
        fields = self.run(ev.run_id).fields
        fields[name] = value
        step = self.owner(ev)
        step.set(name, value)
        if step.kind == "iteration":  # no node.end to take the snapshot: it is the last field set
            step.after = dict(fields)

    def message(self, m: Any) -> Any:
        """:func:`message`, one object for equal messages (keyed by exact values: only text, flags
        and none, so ``True`` and ``1`` never meet; tool calls by their JSON)."""
        out = message(m)
        if not isinstance(out, dict):
            return out
        try:
            key = tuple((k, json.dumps(v, sort_keys=True) if k == "tool_calls" else v) for k, v in out.items())
        except (TypeError, ValueError, RecursionError):
            return out
        if not all(type(v) in _EXACT for _, v in key):
            return out
        return self.shared.setdefault(key, out)

    def on_run_pause(self, ev: Any) -> None:
        self.run(ev.run_id).paused = (ev.node_id, ev.point)

    def on_run_resume(self, ev: Any) -> None:
        self.run(ev.run_id).paused = None

    def on_tool_decision(self, ev: Any) -> None:
        self.owner(ev).add("decisions", {"tool": ev.tool, "decision": ev.decision, "reason": ev.reason,
                                         "args": ev.args})


_EXACT = (str, bool, type(None))

_HANDLERS = {
    "run.start": _Builder.on_run_start, "run.end": _Builder.on_run_end,
    "node.start": _Builder.on_node_start, "node.end": _Builder.on_node_end,
    "state.append": _Builder.on_state_append, "state.set": _Builder.on_state_set,
    "workflow_state.change": _Builder.on_workflow_state_change, "ctx.set": _Builder.on_ctx_set,
    "tool.decision": _Builder.on_tool_decision, "run.pause": _Builder.on_run_pause,
    "run.resume": _Builder.on_run_resume,
}


def _as_replied(step: Step, kept: Any) -> bool:
    """The assistant message an agent step kept is its last model call's reply (its text and its calls)."""
    chat = next((step.children[label] for kind, label in reversed(step.order)
                 if kind == "step" and step.children[label].kind == "chat"), None)
    reply = chat.facts.get("reply") if chat is not None else None
    if not isinstance(reply, dict) or not isinstance(kept, dict):
        return False
    return reply.get("content") == kept.get("content") \
        and (reply.get("tool_calls") or []) == (kept.get("tool_calls") or [])


def message(m: Any) -> Any:
    """A message as compared: role, content, tool calls (name and arguments), a tool's name and
    error mark; no call ids (a real model's are random), no author, no reasoning."""
    if isinstance(m, Message):
        m = m.model_dump()
    if not isinstance(m, dict):
        return m
    out = {"role": m.get("role"), "content": m.get("content")}
    if m.get("tool_calls"):
        out["tool_calls"] = calls(m["tool_calls"])
    if m.get("tool_name"):
        out["tool_name"] = m["tool_name"]
    if m.get("is_error"):
        out["is_error"] = True
    return out


def calls(items: Any) -> Any:
    """Tool calls as compared: name and arguments (a message's, a tuple, too: its calls' random ids were compared)."""
    if not isinstance(items, (list, tuple)):
        return items
    return [{"name": c.get("name"), "args": c.get("args")} if isinstance(c, dict) else c for c in items]
