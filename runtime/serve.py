"""What a re-execution's prefix gets in place of the world: recorded model replies and tool results.

:class:`Server` belongs to one :class:`~flowtui.runtime.resume.Resume`. Up to
event K, every model call is answered with the reply the journal holds for the
node it re-executes (:class:`ServedProvider` wraps each provider of the run,
its child runs' too, and tells the provider, :meth:`Provider.skip`, so that
after K it goes on as if it had answered), and every tool call gets the tool's
recorded result with the tool's recorded effects on the run made again
(``ctx`` fields, workflow-state fields, ``ctx.state`` changes, ``ctx.stop()``)
without running it. A tool declared ``replay="rerun"`` runs, and so does a
tool that runs a child workflow (whose own model calls and tools are served in
turn); what they do is checked like the rest. Once the run diverged, anything
live waits (``on_divergence="pause"``) or stops the run first.
"""

from __future__ import annotations

import inspect
import json
import re
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from flowtui.runtime.bus import current_node, tool_notes
from flowtui.runtime.errors import FatalToolError, ProviderError
from flowtui.runtime.events import Difference
from flowtui.runtime.journal import reason_of
from flowtui.runtime.messages import Message, ToolCall, ToolOutput
from flowtui.runtime.providers.base import AttemptInfo, ChatReply, ChatRequest, Provider, TokenCount, Usage

if TYPE_CHECKING:
    from flowtui.runtime.engine import Run
    from flowtui.runtime.resume import Resume


# An object a journal could only describe: its default repr, without its address (context.stable_repr):
# <module.Class object>, <unlocked _thread.lock object>
_AN_OBJECT = re.compile(r"<[^<>\n]*(?:<[^<>\n]*>[^<>\n]*)* object>")
_OUT_OF_MEMORY = re.compile(r"MemoryError(?:$| |: )")  # a tool's MemoryError as describe_error said it


def _object_text(value: Any, depth: int = 0) -> str | None:
    if isinstance(value, str):
        return value if _AN_OBJECT.fullmatch(value) else None
    if depth < 20 and isinstance(value, (list, dict)):
        for item in value.values() if isinstance(value, dict) else value:
            found = _object_text(item, depth + 1)
            if found is not None:
                return found
    return None


class Server:
    """The recorded replies and results of one re-execution, served while its prefix is checked."""

    def __init__(self, resume: "Resume") -> None:
        self.resume = resume
        self.node_map: dict[str, str] = {}  # node id now -> the recorded node it re-executes
        self._executions: dict[str, int] = {}  # tool node id now -> times its tool was asked to run
        self._served: dict[int, ChatReply] = {}

    def _recorded_node(self) -> tuple[str | None, dict[str, Any] | None]:
        """The recorded node the current node re-executes, and its node.end (None: not in the prefix)."""
        recorded = self.resume.recorded
        rec = self.node_map.get(current_node.get()[0] or "")
        end = recorded.ends.get(rec) if rec is not None else None
        if end is None or end["seq"] > recorded.at:
            return rec, None
        return rec, end

    async def model_reply(self, request: ChatRequest) -> ChatReply | None:
        """The recorded reply to this model call, or None to call the model (after the prefix)."""
        resume = self.resume
        if resume.checking and resume.diverged is None:
            rec, end = self._recorded_node()
            if end is not None:
                await resume.in_turn(rec or "")
        if resume.halted:
            await resume.hold("chat", request.agent)
            return None
        if not resume.checking:
            return None
        rec, end = self._recorded_node()
        if end is None:
            return None
        for ev in resume.recorded.inside.get(rec or "", ()):
            if ev["type"] == "chat.attempt" and request.on_attempt is not None:
                request.on_attempt(AttemptInfo(attempt=ev.get("attempt", 1), error=ev.get("error", ""),
                                               status=ev.get("status"), retry_in_s=ev.get("retry_in_s")))
        data = end.get("data") or {}
        if end.get("status") == "error":  # the recorded call failed: it fails again, as recorded
            raise _served_failure(str(end.get("error") or "ProviderError"), request.agent, data.get("attempts"))
        reply = recorded_reply(data)
        self._served[id(reply)] = reply
        return reply

    def served(self, reply: ChatReply) -> bool:
        """True for a reply served from the journal (it is final as recorded)."""
        return self._served.pop(id(reply), None) is reply

    def tool(self, run: "Run", tspec: Any, execute: Any) -> Any:
        """What ``_run_tool`` calls in place of ``execute``: the recorded result, in the prefix."""
        if not self.resume.checking and not self.resume.halted:
            return execute

        async def served(**kwargs: Any) -> Any:
            return await self._serve_tool(run, tspec, execute, kwargs)

        return served

    async def _serve_tool(self, run: "Run", tspec: Any, execute: Any, kwargs: dict[str, Any]) -> Any:
        resume = self.resume
        if resume.halted:
            await resume.hold("tool", tspec.name)
            return await _call(execute, kwargs)
        rec, end = self._recorded_node() if resume.checking else (None, None)
        if end is None or tspec.replay == "rerun" or _runs_children(run, tspec):
            return await _call(execute, kwargs)  # after the prefix, or re-run and checked like the rest
        await resume.in_turn(rec or "")  # (see Resume.in_turn)
        if resume.halted:  # another branch diverged meanwhile
            await resume.hold("tool", tspec.name)
            return await _call(execute, kwargs)
        if not resume.checking:  # the prefix ended meanwhile
            return await _call(execute, kwargs)
        data = end.get("data") or {}
        error = str(end.get("error") or "")
        if "executed" not in data and end.get("status") == "error" and error.startswith("FatalToolError: "):
            raise FatalToolError(error.removeprefix("FatalToolError: "))
        if "executed" not in data and end.get("status") == "error" and _OUT_OF_MEMORY.match(error):
            # (it ended the run: raised again, said as recorded, its line the tool's, not flowtui's)
            out_of_memory = MemoryError()
            out_of_memory.recorded_as = error  # type: ignore[attr-defined]
            raise out_of_memory
        if end.get("status") == "error" and "executed" not in data and "is_error" not in data:
            raise RecordedFailure(error)  # (it gave no result: what it raised ended the run)
        node = current_node.get()[0] or ""
        k = self._executions[node] = self._executions.get(node, 0) + 1
        results = self._results(rec or "", data)
        if k > len(results):
            resume.diverge_at(end, Difference(
                field="tool", recorded="not run", now="runs",
                why=f"the recorded run did not run tool {tspec.name} here (a middleware, before_tool, its schema "
                    "or an unknown name answered in its place); the code now runs it"),
                recorded=f"tool {tspec.name} not run", current=f"tool {tspec.name} runs")
            await resume.hold("tool", tspec.name)
            return await _call(execute, kwargs)
        if k == 1:
            kept = self._object_kept_as_text(rec or "", tspec.name)
            if kept is not None:  # made again, the field would hold that text: the tool runs, live, instead
                name, shown, what = kept
                resume.diverge_at(end, Difference(
                    field=f"ctx.{name}", recorded=shown, now="(not made again)",
                    why=f"tool {tspec.name} set ctx.{name} to {what}: "
                        f"re-executed, ctx.{name} would be that (and what the tool registered with "
                        f"ctx.on_dispose, not registered); give the tool replay=\"rerun\" so a re-execution runs "
                        "it again, or fork before it"),
                    recorded=f"tool {tspec.name} served", current=f"tool {tspec.name} runs")
                await resume.hold("tool", tspec.name)
                return await _call(execute, kwargs)
            self._effects(run, tspec.name, rec or "")
            registered = data.get("cleanups")  # (its cleanups, not registered now: see Resume._fewer_cleanups)
            if type(registered) is int and run is resume.run:
                resume.cleanups_served += registered
            if data.get("stop"):
                run.ctx.stop()
        content, is_error = results[k - 1]
        raised, notes = data.get("raised"), tool_notes.get()
        if is_error and k == len(results) and isinstance(raised, str) and notes is not None:
            notes.raised.append(raised)  # (what the recorded tool raised, and where: its node says it again)
        return ToolOutput(content=content, is_error=is_error)

    def _results(self, rec: str, data: dict[str, Any]) -> list[tuple[str, bool]]:
        """What the recorded tool's own code returned each time it ran."""
        results = data.get("results")
        if isinstance(results, list):
            if not all(isinstance(r, dict) for r in results):
                raise ValueError("data.results holds something other than the tool's results")
            return [(str(r.get("content", "")), bool(r.get("is_error"))) for r in results]
        final = ("", bool(data.get("is_error")))
        for ev in self.resume.recorded.inside.get(rec, ()):
            item = ev.get("item")
            if ev["type"] == "state.append" and isinstance(item, dict) and item.get("role") == "tool":
                final = (str(item.get("content", "")), bool(item.get("is_error")))
        executed = data.get("executed", 1)  # a journal from before "executed": once
        if not isinstance(executed, int) or isinstance(executed, bool) or not 0 <= executed <= 1_000_000:
            raise ValueError("data.executed is not how many times the tool ran")
        return [final] * executed

    def check(self) -> None:
        """Refuse, before anything runs, a recorded reply or tool result of the prefix that could not be
        served as recorded (a journal edited or damaged): :class:`ResumeError` naming its line."""
        recorded = self.resume.recorded
        for node, end in recorded.ends.items():
            if end["seq"] > recorded.at or end.get("status") == "error":
                continue
            data = end.get("data") or {}
            try:
                if end.get("kind") == "chat":
                    recorded_reply(data)
                elif end.get("kind") == "tool":
                    self._results(node, data)
            except ValueError as exc:
                raise recorded.damaged(end["seq"], str(exc)) from None
            for ev in recorded.inside.get(node, ()):  # the tool's effects, made again when it is served
                try:
                    if ev["type"] == "state.append":
                        as_item(ev["bucket"], ev["item"])
                    elif ev["type"] == "state.set":
                        [as_item(ev["bucket"], x) for x in ev["items"]]
                except ValidationError as exc:
                    raise recorded.damaged(ev["seq"], reason_of(exc, at="item")) from None

    def _object_kept_as_text(self, rec: str, name: str) -> tuple[str, str, str] | None:
        """(field, the recorded text, what it is) of a ``ctx`` field the recorded tool set to an object
        with no JSON form (a connection, a client), or to a list or mapping holding one: the journal
        holds ``<module.Class object>`` for it; or to a value its JSON form is not (a datetime, a
        tuple: the event says its ``typed``)."""
        for ev in self.resume.recorded.inside.get(rec, ()):
            if ev["type"] == "ctx.set" and ev.get("origin") == f"tool:{name}":
                found = _object_text(ev.get("value"))
                if found is not None:
                    return str(ev.get("name")), found, "an object the journal keeps only as its description"
                if ev.get("typed"):
                    return (str(ev.get("name")), json.dumps(ev.get("value"), ensure_ascii=False)[:80],
                            f"a {ev['typed']} the journal keeps only as its JSON form")
        return None

    def _effects(self, run: "Run", name: str, rec: str) -> None:
        """Make again what the recorded tool did to the run (in order, attributed to it)."""
        mine = [ev for ev in self.resume.recorded.inside.get(rec, ()) if ev.get("origin") == f"tool:{name}"]
        messages = [i for i, ev in enumerate(mine) if ev["type"] == "state.append" and ev.get("bucket") == "history"
                    and isinstance(ev.get("item"), dict) and ev["item"].get("role") == "tool"]
        if messages:
            del mine[messages[-1]]  # its result's message: the runtime appends that one itself
        for ev in mine:
            t = ev["type"]
            if t == "ctx.set":
                setattr(run.ctx, ev["name"], ev.get("value"))
            elif t == "workflow_state.change":
                set_field(run, ev["path"], ev.get("new"))
            elif t == "state.append":
                run.state.append(ev["bucket"], as_item(ev["bucket"], ev["item"]))
            elif t == "state.set":
                run.state.set(ev["bucket"], [as_item(ev["bucket"], x) for x in ev["items"]])


class ServedProvider(Provider):
    """A run's provider in a re-execution: in the prefix, each call is answered from the journal
    (and the provider told, :meth:`Provider.skip`); after it, the provider answers."""

    def __init__(self, inner: Provider, server: Server) -> None:
        self.inner, self._server = inner, server
        self.rescue_tool_calls = inner.rescue_tool_calls

    async def complete(self, request: ChatRequest) -> ChatReply:
        reply = await self._server.model_reply(request)
        if reply is None:
            return await self.inner.complete(request)
        self.inner.skip(request, reply)
        return reply

    def finish(self, request: ChatRequest, reply: ChatReply) -> ChatReply:
        return reply if self._server.served(reply) else self.inner.finish(request, reply)

    def skip(self, request: ChatRequest, reply: ChatReply) -> None:
        self.inner.skip(request, reply)

    def fork(self) -> "ServedProvider":
        return ServedProvider(self.inner.fork(), self._server)

    def override_model(self, model: str) -> "ServedProvider":
        return ServedProvider(self.inner.override_model(model), self._server)

    def count_tokens(self, messages: list[Message], tools: list[dict[str, Any]]) -> TokenCount | None:
        return self.inner.count_tokens(messages, tools)

    def describe(self) -> str:
        return self.inner.describe()

    def sampling_defaults(self) -> dict[str, Any]:
        return self.inner.sampling_defaults()


def recorded_reply(data: dict[str, Any]) -> ChatReply:
    """The reply a model call's recorded ``node.end`` holds (its ``data``); ValueError when that is not
    a reply (a journal edited by hand)."""
    said = data.get("reply") or {}
    if not isinstance(said, dict):
        raise ValueError("data.reply is not a reply (a JSON object)")
    calls, usage = said.get("tool_calls") or [], said.get("usage") or {}
    if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
        raise ValueError("data.reply.tool_calls is not a list of calls")
    if not isinstance(usage, dict):
        raise ValueError("data.reply.usage is not a JSON object")
    try:
        return ChatReply(
            content=said.get("content") or "", tool_calls=[ToolCall(**c) for c in calls],
            usage=Usage(**usage), usage_estimated=data.get("usage_estimated") is True, reasoning=data.get("reasoning"),
            tool_call_source=data.get("tool_call_source"), cost_usd=data.get("cost_usd") or 0.0,
            attempts=data.get("attempts") or 1, model=data.get("model"),
            finish_reason=said.get("finish_reason") if isinstance(said.get("finish_reason"), str) else None)
    except ValidationError as exc:
        raise ValueError(reason_of(exc, at="data.reply")) from None


class RecordedFailure(BaseException):
    """What a tool raised that ended the recorded run (a ``SystemExit``, a ``KeyboardInterrupt``, a
    ``BaseException`` of the flow's own), raised again where it was and said as the journal says it: served
    an empty result in its place, the re-execution of unchanged code diverged there."""

    def __init__(self, recorded_as: str) -> None:
        super().__init__(recorded_as)
        self.recorded_as = recorded_as


def _served_failure(error: str, agent: str, attempts: Any) -> Exception:
    """The recorded failure of a model call, raised again under its recorded name. One that says no attempts
    was no provider's error (a flow's stand-in for the model raised a ValueError): raised again as one, not
    as a ProviderError, whose attempts the re-executed end said, and diverged from the recorded one."""
    name, sep, message = error.partition(": ")
    if not sep or not name.isidentifier():
        name, message = "ProviderError", error
    if attempts is None and name != "ProviderError":
        return type(name, (Exception,), {"__module__": __name__, "__doc__": "A model call's recorded failure."})(
            message)
    cls = type(name, (ProviderError,), {"__module__": __name__, "__doc__": "A model call's recorded failure."})
    return cls(message, agent=agent, attempts=attempts if isinstance(attempts, int) else 1)


async def _call(fn: Any, kwargs: dict[str, Any]) -> Any:
    result = fn(**kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result


def _runs_children(run: "Run", tspec: Any) -> bool:
    """A tool whose constructor takes a WorkflowRuntime: it runs child workflows, so it runs again
    (the children's model calls and tools are served in turn)."""
    plan = run.plans.ctor_plans.get(tspec.target) if tspec.form == "class" else None
    return bool(plan) and any(want != "state" for _, want in plan)


def as_item(bucket: str, value: Any) -> Any:
    """A ``ctx.state`` item as journaled, typed again (a message in ``history``, text elsewhere)."""
    return Message.model_validate(value) if bucket == "history" else str(value)


def set_field(run: "Run", path: str, value: Any, note: str | None = None) -> None:
    """Set workflow-state field ``path`` to its recorded (JSON) value, typed as the field is, the change said
    with ``note`` (a person's undo)."""
    from flowtui.runtime.observe import field_type, set_noted

    obj = run.workflow_state
    if obj is None:
        return
    try:
        value = TypeAdapter(field_type(run.spec.state, path)).validate_python(value)
    except Exception:  # not of its type (any more): the comparison that follows says so
        pass
    set_noted(obj, run.observer, path, value, note)
