"""What a divergence says: the recorded event, what the code did now, and what differs, in words.

:func:`explain` turns the first mismatching pair of events (as
:mod:`flowtui.runtime.compare` sees them) into the fields of a
:class:`~flowtui.runtime.events.RunDiverged` event; :func:`report` turns that
event into the text ``flowtui run`` prints on stderr (the app's divergence
screen shows the same fields). Where it can tell, a difference says what
changed: ``prompt file revisor.agent.md changed``, ``node EscritorAgent no
longer exists``, ``the loop's until now stops it after iteration 1``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flowtui.runtime.compare import MISSING, PATH, RUN, diff, items_said, one_line, show_path
from flowtui.runtime.events import Difference
from flowtui.runtime.middleware import layers
from flowtui.runtime.steps import LoopSpec, ParallelSpec

EXCERPT = 70  # characters of a value shown on each side
ABSENT = "(absent)"  # a field one side has and the other does not
# A chat node's start repeats its prompt and message count beside the request: said once, by the request.
SAID_BY = {"prompt": "request.messages[0].content", "messages": "request.messages[…]"}
# Differences said in words alone: a whole other event (the recorded and the current one say which),
# or an event that could not be compared (why says why).
EVENT_FIELDS = frozenset({"event", "node", "loop", "edit", "tool", "comparison"})


class Lookup:
    """What the current code has (its agents and every node name), for the hints."""

    def __init__(self, agent: Callable[[str], Any], known: Callable[[str], bool],
                 tool: Callable[[str], Any] = lambda name: None, tool_middlewares: tuple[str, ...] = ()) -> None:
        self.agent = agent  # name -> AgentSpec or None
        self.known = known  # is there a node of this name (workflow, loop, agent, tool)?
        self.tool = tool  # name -> ToolSpec or None
        self.tool_middlewares = tool_middlewares  # the names of the tool middlewares around every tool call


def explain(rec: dict[str, Any], new: dict[str, Any], lookup: Lookup) -> list[Difference]:
    """The differences between recorded event ``rec`` and event ``new`` (both :func:`comparable`)."""
    if _identity(rec) != _identity(new):
        return [_other_event(rec, new, lookup)]
    if rec.get("type") == "run.start" and rec.get("workflow") != new.get("workflow"):  # its state differs too
        return [Difference(field="workflow", recorded=rec.get("workflow"), now=new.get("workflow"),
                           why="the journal is a run of another workflow (a journal of another flow, "
                               "or the workflow was renamed)")]
    out: list[Difference] = []
    for key, name in ((RUN, "run"), (PATH, "path"), ("origin", "origin")):
        if rec.get(key) != new.get(key):
            shown = show_path if key == PATH else (lambda v: v or "the top-level run") if key == RUN else str
            out.append(Difference(field=name, recorded=shown(rec.get(key)), now=shown(new.get(key))))
    skip = {RUN, PATH, "origin", "type"}
    body_a = {k: v for k, v in rec.items() if k not in skip}
    body_b = {k: v for k, v in new.items() if k not in skip}
    found = diff(body_a, body_b)
    fields = {_field(rec, where) for where, _, _ in found}
    for where, a, b in found:
        field = _field(rec, where)
        if field in SAID_BY and SAID_BY[field] in fields:
            continue  # the same change, said better by the request's own field
        a_shown, b_shown = excerpts(a, b)
        out.append(Difference(field=field, recorded=a_shown, now=b_shown, why=_why(rec, new, field, b, lookup)))
    return out


def describe(ev: dict[str, Any] | None) -> str:
    """One line for an event: ``node.start chat RevisorAgent``, ``state.append history += assistant: "…"``."""
    if ev is None:
        return "nothing (the run ended)"
    t = ev.get("type", "?")
    if t in ("node.start", "node.end"):
        line = f"{t} {ev.get('kind')} {ev.get('name')}" + (f" {ev.get('status')}" if t == "node.end" else "")
    elif t == "state.append":
        item = ev.get("item")
        text = f"{item.get('role')}: {_short(item.get('content', ''))}" if isinstance(item, dict) else _short(item)
        line = f"state.append {ev.get('bucket')} += {text}"
    elif t == "state.set":
        line = f"state.set {ev.get('bucket')} ({items_said(len(ev.get('items') or []))})"
    elif t == "workflow_state.change":
        line = f"workflow_state.change {ev.get('path')}: {_short(ev.get('old'))} → {_short(ev.get('new'))}"
    elif t == "ctx.set":
        line = f"ctx.set {ev.get('name')} = {_short(ev.get('value'))}"
    elif t == "tool.decision":
        line = f"tool.decision {ev.get('tool')} {ev.get('decision')}"
    elif t == "run.end":
        line = f"run.end {ev.get('status')}"
    else:
        line = str(t)
    if ev.get("note"):
        line += f" ({_short(ev['note'])})"
    origin = ev.get("origin")
    return line + (f" [{origin}]" if origin and origin != "runtime" else "")


def report(ev: Any, *, journal: str | None = None) -> str:
    """The divergence as text (``flowtui run`` prints it on stderr, made inert and redacted)."""
    source = journal or ev.journal or "its journal"
    where = f" ({ev.path})" if ev.path else ""
    lines = [f"the run diverged from {source} at event #{ev.at}{where}",
             f"  recorded: {ev.recorded}",
             f"  now:      {ev.current}{numbered_now(ev)}"]
    for d in ev.differences:
        if d.field in EVENT_FIELDS:  # another event altogether: the two lines above say which
            lines.append(f"  {d.why or 'the code did another thing here'}")
        elif d.why:
            lines.append(f"  {d.field}: {d.why}: {_value(d.recorded)} → {_value(d.now)}")
        else:
            lines.append(f"  {d.field}: recorded {_value(d.recorded)}, now {_value(d.now)}")
    left = getattr(ev, "edits_not_made", None) or []
    if left:
        lines.append(f"  {edits_left(left)} that the recorded run holds after this point: not made again")
    if ev.action == "stopped" and ev.at <= 1:
        lines.append("  the run stopped there, before doing anything live; it differs from its very start: "
                     "run it without --resume-from")
    elif ev.action == "stopped":
        lines.append(f"  the run stopped there, before doing anything live; to go on live from before it: "
                     f"--resume-from {source}@{ev.at - 1}")
    else:
        lines.append("  the run waits at the next pause point: continue goes on live from there, stop cancels it")
    # each on one line and cut: a field named by a key of a million characters was a line of a million
    return "\n".join(one_line(line, REPORT_LINE) for line in lines)


REPORT_LINE = 400  # characters of a line of the report


def numbered_now(ev: Any) -> str:
    """Where the event is in the run now: its number differs from the recorded one's when the recorded
    run has events a re-execution does not repeat (its pauses and resumes; an older flowtui's)."""
    if not ev.now:
        return ""
    if ev.now == ev.at:
        return f" (event #{ev.now})"
    return f" (event #{ev.now} of this run: the recorded run's numbers count events a re-execution does not " \
           "repeat, such as its pauses)"


def edits_left(left: list[str], shown: int = 5) -> str:
    """``2 of your edits (added memory[1]: 'x'; set rounds to 7)``, the first ``shown`` of them."""
    listed = "; ".join(left[:shown]) + (f"; and {len(left) - shown} more" if len(left) > shown else "")
    return f"your edit ({listed})" if len(left) == 1 else f"{len(left)} of your edits ({listed})"


# --- the pieces -------------------------------------------------------------------------------


def _identity(ev: dict[str, Any]) -> tuple:
    """What makes two events "the same event" before their values are compared."""
    t = ev.get("type")
    if t in ("node.start", "node.end"):
        return t, ev.get("kind"), ev.get("name")
    if t in ("state.append", "state.set"):
        return t, ev.get("bucket")
    if t == "ctx.set":
        return t, ev.get("name")
    if t == "workflow_state.change":
        return t, ev.get("path")
    return (t,)


def _other_event(rec: dict[str, Any], new: dict[str, Any], lookup: Lookup) -> Difference:
    """The code did another thing than the recorded run here: say what, and why when it can be told."""
    a, b = describe(rec), describe(new)
    if rec.get("origin") == "user":
        return Difference(field="edit", recorded=a, now=b,
                          why="the recorded run was edited here by hand; the re-executed run did not reach the "
                              "pause point it was made at")
    loop = _loop_stop(rec) or _loop_stop(new)
    if loop is not None:
        stopped_now = _loop_stop(new) is not None
        n, by = loop
        why = (f"the loop now stops after iteration {n} ({by}); the recorded run went on" if stopped_now else
               f"the loop no longer stops after iteration {n} ({by}); the recorded run stopped there")
        return Difference(field="loop", recorded=a, now=b, why=why)
    if rec.get("type") == "node.start" and not lookup.known(str(rec.get("name"))):
        return Difference(field="node", recorded=a, now=b, why=f"node {rec.get('name')} no longer exists")
    if new.get("type") == "node.start" and rec.get("type") != "node.start":
        return Difference(field="node", recorded=a, now=b, why=f"node {new.get('name')} runs here now")
    return Difference(field="event", recorded=a, now=b)


def _loop_stop(ev: dict[str, Any]) -> tuple[int, str] | None:
    value = ev.get("value")
    if ev.get("type") == "ctx.set" and ev.get("name") == "loop" and isinstance(value, dict) \
            and value.get("stopped_by"):
        return int(value.get("iterations") or 0), str(value["stopped_by"])
    return None


def _field(ev: dict[str, Any], where: str) -> str:
    """A difference's place in words a person reads: ``request.messages[0].content``, ``state.rodadas``."""
    t = ev.get("type")
    if t in ("node.start", "node.end"):
        return where.removeprefix("data.") if where != "data" else "data"
    if t == "workflow_state.change":
        rest = where.removeprefix("new")
        return f"state.{ev.get('path')}{rest}" if where.startswith("new") else f"state.{ev.get('path')} ({where})"
    if t == "ctx.set":  # (a field of the event itself, beside its value: said apart, not glued to the name)
        return f"ctx.{ev.get('name')}{where.removeprefix('value')}" if where.startswith("value") \
            else f"ctx.{ev.get('name')} ({where})"
    if t == "state.append":
        return f"{ev.get('bucket')}[+]{where.removeprefix('item')}" if where.startswith("item") else where
    if t == "state.set":
        return f"{ev.get('bucket')}{where.removeprefix('items')}" if where.startswith("items") else where
    return where


def _why(rec: dict[str, Any], new: dict[str, Any], field: str, now: Any, lookup: Lookup) -> str | None:
    if rec.get("type") == "node.start" and rec.get("kind") == "chat":
        spec = lookup.agent(str(rec.get("name")))
        if field == "request.messages[0].content" and spec is not None:
            if now == spec.prompt:
                return (f"prompt file {Path(spec.prompt_file).name} changed" if spec.prompt_file
                        else f"the prompt of {spec.name} changed")
            if "before_prompt" in spec.hooks:
                return f"{spec.name}.before_prompt returned another prompt"
        if field == "request.tools_digest":
            return "what the model is told of the agent's tools changed (a description, or an argument's schema)"
        if field.startswith("request.tools"):
            return "the agent's tools changed"
        if field.startswith("request.sampling"):
            return "the agent's sampling changed"
        if field == "request.model":
            return "the model changed"
    if rec.get("type") == "run.start" and field.startswith("state"):  # (it blamed the code, unchanged)
        return ("the state the run starts with: its class's defaults changed, or the recorded run started from "
                "a snapshot (--from-snapshot) its journal does not name (one an older flowtui wrote)")
    if rec.get("type") == "node.end" and rec.get("kind") == "tool" and field.startswith("results"):
        return f"tool {rec.get('name')} (replay='rerun') returned another result"
    origin = str(rec.get("origin") or "")
    item = rec.get("item")
    if rec.get("type") == "state.append" and origin.startswith("tool:") and isinstance(item, dict) \
            and item.get("role") == "tool" and field.startswith("history[+].content"):
        name = origin.removeprefix("tool:")
        spec = lookup.tool(name)
        if spec is not None and spec.replay == "rerun":
            return f"tool {name} (replay='rerun') returned another result"
        agent = lookup.agent(str(item.get("agent")))
        changers = ([f"{agent.name}.after_tool"] if agent is not None and "after_tool" in agent.hooks else []) \
            + [f"tool middleware {m}" for m in lookup.tool_middlewares]
        if changers:
            return f"the result of tool {name} was changed after it ran ({' or '.join(changers)})"
        # (nothing of the code changes a result once its tool returned: it blamed a hook the flow does not have)
        return (f"the result of tool {name} is not the journal's, and nothing in the flow changes a result once its "
                "tool returned (no after_tool hook, no tool middleware): the journal was edited here, or the tool "
                "(a child workflow it runs) returned another result")
    return None


def excerpts(a: Any, b: Any) -> tuple[Any, Any]:
    """Both values as shown side by side: short ones whole, long strings around where they differ."""
    if isinstance(a, str) and isinstance(b, str) and (len(a) > EXCERPT or len(b) > EXCERPT):
        i = 0
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                break
        else:
            i = min(len(a), len(b))
        start = max(0, i - EXCERPT // 3)
        return _cut(a, start), _cut(b, start)
    return _shown(a), _shown(b)


def _cut(text: str, start: int) -> str:
    piece = text[start:start + EXCERPT]
    return ("…" if start else "") + piece + ("…" if start + EXCERPT < len(text) else "")


def _shown(value: Any) -> Any:
    if value is MISSING:
        return ABSENT
    if isinstance(value, str):
        return value if len(value) <= EXCERPT else value[:EXCERPT] + "…"
    if isinstance(value, (dict, list)):
        text = json.dumps(value, ensure_ascii=False)
        return value if len(text) <= EXCERPT else text[:EXCERPT] + "…"
    return value


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=repr)
    text = " ".join(text.split())
    return json.dumps(text[:48] + "…" if len(text) > 48 else text, ensure_ascii=False) if isinstance(value, str) \
        else (text[:48] + "…" if len(text) > 48 else text)


def _value(value: Any) -> str:
    if value == ABSENT:  # (not quoted: it was no value, nor the text "(none)" it read as)
        return ABSENT
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, default=repr)


def lookup_for(run: Any) -> Lookup:
    """What ``run``'s current code has (its child workflows' too), for the hints."""
    plans = [run.plans, *(app.plans for app in run.child_apps.values())]

    def agent(name: str) -> Any:
        return next((s for p in plans for s in p.agent_specs.values() if s.name == name), None)

    def known(name: str) -> bool:
        return any(name in _names(p) for p in plans)

    def tool(name: str) -> Any:
        return next((t.by_name[name] for p in plans for t in p.tool_specs.values() if name in t.by_name), None)

    # (a child workflow's own middlewares too: its tools' results go through them)
    children = tuple(name for app in run.child_apps.values() for name, _ in layers(app.middlewares, "tool"))
    return Lookup(agent, known, tool, tool_middlewares=(*(name for name, _ in run.tool_layers), *children))


def _names(plans: Any) -> set[str]:
    """Every node name a workflow can have: itself, its loops and parallel blocks, agents, tools."""
    names = {plans.spec.name}
    names.update(s.name for s in plans.agent_specs.values())
    names.update(n for tools in plans.tool_specs.values() for n in tools.names)

    def walk(steps: Any) -> None:
        for step in steps:
            if isinstance(step, (LoopSpec, ParallelSpec)):
                names.add(step.name)
                walk(step.steps)

    walk(plans.spec.steps)
    return names
