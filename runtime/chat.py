"""One model call: the request an agent's turn sends, and sending it through the middlewares.

:func:`build_request` is the one place a turn's request is made (the agent's
prompt, then ``ctx.state.to_messages()``; see
:func:`~runtime.conversation.model_messages`, which "what the model sees"
uses too). :func:`call_model` sends it inside a ``chat`` node: through the
app's model middlewares, to the provider, and back through
:meth:`~runtime.providers.base.Provider.finish`; the node records what a
middleware changed (``changed_by``, ``sent``, ``trimmed``), tokens and cost.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, model_serializer

from flowtui.runtime.construct import TEXT_OR_NONE, bad_fields, builders
from flowtui.runtime.decorators import AgentSpec
from flowtui.runtime.errors import ConversationError, ProviderError
from flowtui.runtime.events import ChatAttempt, ChatDelta
from flowtui.runtime.invoke import raise_cancelled
from flowtui.runtime.messages import ARGS_ARE_JSON, Message, ToolCall, args_fault
from flowtui.runtime.middleware import through
from flowtui.runtime.nodes import NodeScope
from flowtui.runtime.providers.base import (
    AttemptInfo,
    ChatReply,
    ChatRequest,
    Provider,
    Usage,
    counted,
    tool_names_of,
)
from flowtui.runtime.wellformed import problems

if TYPE_CHECKING:
    from flowtui.runtime.engine import Run


def next_turn(run: "Run", spec: AgentSpec) -> int:
    n = run._turns[spec.name] = run._turns.get(spec.name, 0) + 1
    return n


def build_request(run: "Run", spec: AgentSpec, prompt: str) -> ChatRequest:
    """The request of this agent's next turn, before any middleware. Raises
    :class:`~flowtui.runtime.errors.ConversationError` when the history is no valid conversation
    (a provider would refuse it with a 400)."""
    found = run.state.history_problems()
    if found:
        raise ConversationError(spec.name, found)
    emit = run.emitter.emit
    on_delta = Streamed(emit)

    def on_attempt(info: AttemptInfo) -> None:
        if not isinstance(info, AttemptInfo):  # (a provider of the flow's own: it failed on info.attempt)
            raise TypeError(f"request.on_attempt(...) takes an AttemptInfo(attempt=, error=, status=, retry_in_s=) "
                            f"(from flowtui import AttemptInfo), not {type(info).__name__} {info!r:.60}")
        on_delta.pieces.clear()  # the retry streams its reply again from the start
        emit(ChatAttempt, attempt=info.attempt, error=info.error, status=info.status, retry_in_s=info.retry_in_s)

    tools = run.plans.tool_specs[spec.cls]
    messages, tokens = run.state.counted_messages(prompt=prompt)
    counted(messages, tokens)
    # its own tools and sampling where a middleware may change them in place (one that set
    # request.sampling["temperature"], or a tool's description, set it for every later call of the agent)
    layered = bool(run.model_layers)
    return builders[ChatRequest](dict(
        agent=spec.name, turn=next_turn(run, spec), messages=messages,
        tools=own_copy(tools.schemas) if layered else tools.schemas, tool_names=tools.names,
        sampling=own_copy(spec.sampling) if layered else dict(spec.sampling), on_delta=on_delta,
        on_attempt=on_attempt))


def own_copy(value: Any) -> Any:
    """``value``'s dicts and lists copied all the way down, anything else shared: what a middleware may
    change in place is its own (deepcopy failed on what it cannot copy, a lock in a tool's schema)."""
    if isinstance(value, dict):
        return {k: own_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [own_copy(v) for v in value]
    return value


class Streamed:
    """A turn's ``on_delta``: each piece of its streamed reply is a ``chat.delta`` event (not journaled),
    and is kept until the call ends, so a call cut short (stopped, failed) journals what had arrived,
    as its chat node's ``partial``: what the app showed live, a replay shows too."""

    __slots__ = ("emit", "pieces")

    def __init__(self, emit: Callable[..., Any]) -> None:
        self.emit, self.pieces = emit, []

    def __call__(self, text: str) -> None:
        if not isinstance(text, str):  # (a provider of the flow's own: its chat.delta was refused on its way to the
            # app, which then said the events after it never arrived)
            raise TypeError(f"request.on_delta(text) takes the reply's next piece of text (str), not "
                            f"{type(text).__name__} {text!r:.60}")
        self.pieces.append(text)
        self.emit(ChatDelta, text=text)


async def call_model(run: "Run", spec: AgentSpec, request: ChatRequest, *, prompt: str | None = None,
                     built: bool = False) -> ChatReply:
    """Send ``request`` for ``spec``'s agent: a ``chat`` node around the middlewares and the provider.
    ``built``: the request is :func:`build_request`'s (its messages are the history's, checked when
    they joined it), not one user code made."""
    provider = run.providers[spec.cls]
    if prompt is not None:
        run.next_prompt = (spec.name, prompt)
    # what comes before the history in a turn's request (its prompt, the memory-and-tasks note), as sent:
    # another branch or a person may change memory while the call is out
    lead = len(request.messages) - run.state._history_length() if built else None
    resume = run.root.resume
    start = {"turn": request.turn, "messages": len(request.messages), "prompt": prompt,
             "request": recorded(request, provider, built=built)}
    with NodeScope(run, "chat", spec.name, data=start) as scope:
        del scope.data["prompt"], scope.data["request"]  # on node.start only: node.end need not repeat them
        answered: list[ChatReply] = []  # each reply the provider gave (a middleware may call it again: a retry)

        async def send(final: ChatRequest) -> ChatReply:
            if answered and run.gate_needed():  # called again: a budget reached by the calls so far stops it
                await run.gate()
            if built and final is request and resume is not None and (  # (once: the calls after it are live)
                    resume.diverged is not None and not resume.held or resume.edits_at(run, "chat", spec.name)):
                final = await _after_divergence(run, spec, request, prompt, scope)
            if final is not request or shapes.get(id(final), start_shape) != start_shape:  # a middleware changed
                # it (a copy, or in place): what really left is recorded too
                by = ", ".join(scope.data.get("changed_by", [])) or "a middleware"
                held = final.messages
                if not isinstance(held, (list, tuple)) or not all(isinstance(m, Message) for m in held):
                    # (validated as a recorded request: a text was a list of its characters, ten faults)
                    odd = held if not isinstance(held, (list, tuple)) else next(
                        m for m in held if not isinstance(m, Message))
                    raise TypeError(f"{by} passed on a request whose messages hold {type(odd).__name__} "
                                    f"{odd!r:.60}; request.messages is a list of Message (from flowtui import "
                                    f"Message)")
                scope.data["sent"] = len(final.messages)
                scope.data["sent_request"] = recorded(final, provider)
                # (one with no message at all: a provider refuses it, as it does a call left unanswered)
                found = problems(final.messages, name="messages") if final.messages else ["it holds no message"]
                if found:
                    raise ConversationError(spec.name, found, where=f"the request {by} passed on",
                                            fix=f"fix {by}: it passes on what the model is sent")
            try:
                answer = await provider.complete(final)
            except asyncio.CancelledError as exc:  # a task the provider awaited was cancelled, or the run
                raise_cancelled(exc, f"provider {provider.describe()}")
            if isinstance(answer, ChatReply):  # (before finish, which reads them)
                _well_made(answer, f"provider {provider.describe()} for {spec.name} returned")
            done = provider.finish(final, answer)
            if isinstance(done, ChatReply):  # each call counts, in the budget and the totals (the second of a
                # middleware that called twice spent money no budget saw)
                prompt_tokens, completion_tokens, cost = spent(done, f"provider {provider.describe()}")
                run.tracker.add_chat(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, cost_usd=cost)
                answered.append(done)
            return done

        def on_pass(name: str, received: Any, passed: Any) -> None:
            before = shapes.get(id(received)) or _shape(received)
            fault = _request_fault(passed, before[1])
            if fault is not None:  # (said as Python's own: "'NoneType' object is not iterable", naming no one)
                raise TypeError(f"model middleware {name!r} passed on {fault}")
            now = shapes[id(passed)] = _shape(passed)
            if passed is received and now == before:
                return
            changed = scope.data.setdefault("changed_by", [])
            if name not in changed:
                changed.append(name)
            dropped = before[0] - now[0]  # (one changed in place: what it held as it came in)
            if dropped > 0:  # visible as such in "what the model sees": who left out how much
                trimmed = scope.data.setdefault("trimmed", {"dropped": 0, "by": []})
                trimmed["dropped"] += dropped
                trimmed["by"].append(name)

        layers = run.model_layers
        # what each request a middleware got held as it came in (messages, tools, sampling): one that changed
        # it in place, not as a copy, sent what the journal never said, and a broken history went unchecked
        start_shape = _shape(request) if layers else None
        shapes: dict[int, tuple] = {id(request): start_shape} if layers else {}
        try:  # with no model middleware, through() would only call send
            reply = await (through(layers, request, send, on_pass=on_pass, returned=_a_reply) if layers
                           else send(request))
        except ProviderError as exc:
            exc.agent = exc.agent or spec.name
            if lead is not None and "sent" not in scope.data:  # (what a middleware sent is not the history's order)
                _name_message(exc, request, lead, bool(prompt))
            scope.data["attempts"] = exc.attempts
            _keep_partial(scope, request)
            raise
        except BaseException:  # stopped, or a middleware failed
            _keep_partial(scope, request)
            raise
        if not isinstance(reply, ChatReply):  # (a provider's own: its complete/finish returned something else)
            raise TypeError(f"provider {provider.describe()} returned {type(reply).__name__}, not a ChatReply")
        usage = reply.usage
        if not answered:  # a middleware answered in the provider's place (a cache): counted as one call, as ever
            prompt_tokens, completion_tokens, cost = spent(reply, "a model middleware, in the provider's place,")
            run.tracker.add_chat(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, cost_usd=cost)
        elif len(answered) > 1:  # what each call answered, for the journal: the one passed on is the reply below
            scope.data["provider_replies"] = [{"content": r.content, "tool_calls": [_call(c) for c in r.tool_calls],
                                               "usage": _usage(r.usage)} for r in answered]
        scope.data.update(
            prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
            cost_usd=reply.cost_usd, attempts=reply.attempts, tool_calls=len(reply.tool_calls),
            tool_call_source=reply.tool_call_source, model=reply.model)
        if reply.usage_estimated:
            scope.data["usage_estimated"] = True
        if reply.reasoning:
            scope.data["reasoning"] = reply.reasoning
        scope.data["reply"] = {"content": reply.content, "tool_calls": [_call(c) for c in reply.tool_calls],
                               "usage": _usage(usage)}
        if reply.finish_reason is not None:  # as the server said it (a provider that says nothing: none)
            scope.data["reply"]["finish_reason"] = reply.finish_reason
    run.publish_budget()
    return reply


def spent(reply: ChatReply, who: str) -> tuple[int, int, float]:
    """The prompt and completion tokens and the cost ``reply`` says it spent, for the budget and the totals:
    whole numbers of tokens and a finite cost, none below 0, else a ``ValueError`` naming ``who`` and the
    value. A provider's NaN cost made the run's totals no number: the app and ``flowtui run`` dropped
    the run's end and waited for ever, and a budget never tripped (so it did not for a negative count)."""
    usage = reply.usage
    prompt, completion, cost = usage.prompt_tokens, usage.completion_tokens, reply.cost_usd
    if _count(prompt) and _count(completion) and isinstance(cost, (int, float)) and not isinstance(cost, bool) \
            and 0 <= cost < math.inf:
        return prompt, completion, cost
    for name, value in (("usage.prompt_tokens", prompt), ("usage.completion_tokens", completion)):
        if not _count(value):
            raise ValueError(f"{who} returned a ChatReply with {name}={value!r}: a count of tokens is a whole "
                             "number, 0 or more (0 when unknown: flowtui then estimates it)")
    raise ValueError(f"{who} returned a ChatReply with cost_usd={cost!r}: a cost is a finite number of dollars, "
                     "0 or more (0.0 when unknown)")


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _request_fault(passed: Any, received: tuple[int, ...]) -> str | None:
    """What is wrong with a request a middleware passed on (None: nothing): no request at all, a field of
    another type (set in place: pydantic does not check an assignment), a message it made whose values are
    not of their declared types (``model_copy(update={"content": 5})``: the provider was sent it).
    ``received``: the ids of the messages the request it got held (those were checked before)."""
    if not isinstance(passed, ChatRequest):
        return (f"{type(passed).__name__} {passed!r:.40}, not a ChatRequest (pass the request it got, or "
                "request.model_copy(update=...))")
    if not isinstance(passed.messages, (list, tuple)):  # (as send() says of a list holding something else)
        return (f"a request whose messages hold {type(passed.messages).__name__} {passed.messages!r:.60}; "
                "request.messages is a list of Message (from flowtui import Message)")
    for field, kinds, said in (("tools", (list, tuple), "a list of tool schemas (dicts)"),
                               ("sampling", dict, "a dict of sampling parameters")):
        value = getattr(passed, field)
        if not isinstance(value, kinds):
            return f"a request whose {field} is {type(value).__name__} {value!r:.40}, not {said}"
    odd = next((t for t in passed.tools if not isinstance(t, dict)), None)
    if odd is not None:
        return f"a request whose tools hold {type(odd).__name__} {odd!r:.40}, not a tool schema (a dict)"
    kept = set(received)
    for i, m in enumerate(passed.messages):
        if isinstance(m, Message) and id(m) not in kept and (wrong := bad_fields(m)) is not None:
            return f"a request whose messages[{i}].{wrong}"
    return None


def _shape(request: Any) -> tuple:
    """What a request holds, to tell one changed in place: its messages (frozen: by identity), its tools
    and its sampling (by value: a schema's description, or a list in the sampling, may change in place)."""
    messages = request.messages
    return (len(messages), tuple(map(id, messages)), tools_digest(request.tools, cached=False),
            json.dumps(request.sampling, sort_keys=True, default=repr))


def _a_reply(name: str, reply: Any) -> None:
    """What model middleware ``name`` returned is a reply (else said, naming it), its fields of their types:
    ``model_copy(update={"content": 5})`` is not validated, and the run failed on a raw pydantic error about
    a Message, or an AttributeError for a tool call given as a dict."""
    if not isinstance(reply, ChatReply):
        raise TypeError(f"model middleware {name!r} returned {type(reply).__name__}, not a ChatReply (return "
                        "what call_next(request) gave, or a ChatReply of your own)")
    wrong = bad_fields(reply)
    odd = next((c for c in reply.tool_calls if not isinstance(c, ToolCall)), None) if wrong is None else None
    if odd is not None:
        wrong = f"tool_calls hold a {type(odd).__name__}, not a ToolCall(name=..., args=..., id=...)"
    if wrong is not None:
        raise TypeError(f"model middleware {name!r} returned a ChatReply whose {wrong} (a model_copy(update=...) "
                        "is not validated: give each field a value of its type)")
    _json_args(reply, f"model middleware {name!r} returned")


def _well_made(reply: ChatReply, who: str) -> None:
    """Refuse a provider's reply made without validation (``ChatReply.model_construct``, a ``model_copy``) that
    holds what its fields refuse, naming ``who``: ``usage=None`` failed the run on an AttributeError inside
    flowtui, a usage count whose repr raised on that error."""
    fields, usage = reply.__dict__, reply.__dict__.get("usage")
    if fields.get("content").__class__ is not str or fields.get("reasoning").__class__ not in TEXT_OR_NONE \
            or not isinstance(fields.get("tool_calls"), list) or usage.__class__ is not Usage \
            or usage.__dict__.get("prompt_tokens").__class__ is not int \
            or usage.__dict__.get("completion_tokens").__class__ is not int:
        wrong = bad_fields(reply)  # (a usage made so is taken as it is: looked at on its own)
        if wrong is None and usage.__class__ is Usage and (wrong := bad_fields(usage)) is not None:
            wrong = f"usage.{wrong}"
        if wrong is not None:
            raise TypeError(f"{who} a ChatReply whose {wrong} (model_construct and model_copy do not validate: give "
                            "each field a value of its type)")
    if reply.tool_calls:
        _json_args(reply, who)


def _json_args(reply: ChatReply, who: str) -> None:
    """Refuse tool calls whose arguments a model could not have sent (see ``args_fault``), naming ``who``."""
    for call in reply.tool_calls:
        fault = args_fault(call.args) if isinstance(call, ToolCall) else None
        if fault is not None:
            raise TypeError(f"{who} a tool call {call.name!r:.40} whose {fault}; {ARGS_ARE_JSON}")


_MESSAGE_INDEX = re.compile(r"messages\.?\[(\d{1,9})\]")  # OpenAI's 'messages[1].content', (messages.[3].role)


def _name_message(exc: ProviderError, request: ChatRequest, lead: int, prompted: bool) -> None:
    """A provider that refused a turn's request naming ``messages[N]`` is told which message that is: the
    agent prompt, the memory-and-tasks note, or ``history[K]`` (the index ``ctx.state.history`` has).
    ``lead``: the request's messages before its history (model_messages': the prompt, when ``prompted``,
    then the note)."""
    text = str(exc)
    found = _MESSAGE_INDEX.search(text)
    n = int(found[1]) if found else -1
    if not 0 <= n < len(request.messages) or not prompted <= lead <= 2:
        return
    if n < lead:
        said = "the agent prompt" if prompted and n == 0 else "the memory-and-tasks note"
    else:
        m = request.messages[n]
        said = f"history[{n - lead}], " + (f"the result of tool {m.tool_name}" if m.role == "tool" else
                                           f"the {m.role} message" + (f" of {m.agent}" if m.agent else ""))
    exc.args = (f"{text} ({found[0]} is {said})", *exc.args[1:])


async def _after_divergence(run: "Run", spec: AgentSpec, request: ChatRequest, prompt: str | None,
                            scope: NodeScope) -> ChatRequest:
    """A turn's model call in a re-execution that diverged: it waits for the person first (the divergence
    was found in its request, as it was built). What they edited there reaches this call: its request is
    built again, and recorded as sent (the model got the request from before the edit, the panes showed
    the edited one). A re-execution of such a run makes those edits again there (it waited for them for
    ever: no pause point was reached)."""
    resume = run.root.resume
    assert resume is not None
    if resume.diverged is not None:
        await resume.hold("chat", spec.name)
    else:
        await run.pause("chat", spec.name, inside=True)  # (the recorded edits are made again: no wait)
    messages = run.state.to_messages(prompt=prompt)
    if messages == request.messages:
        return request
    scope.data.setdefault("changed_by", []).append("the person, at the divergence pause")
    return request.model_copy(update={"messages": messages})


def _keep_partial(scope: NodeScope, request: ChatRequest) -> None:
    """What arrived of a streamed reply that never came whole, on its chat node's end."""
    streamed = request.on_delta
    if type(streamed) is Streamed and streamed.pieces:
        scope.data["partial"] = "".join(streamed.pieces)


def recorded(request: ChatRequest, provider: Provider, *, built: bool = False) -> "Sent":
    """A request as the journal keeps it: every message as sent, the tools by name, the model
    (the provider's description) and the sampling parameters: the agent's (the request's) and the
    provider's own under them (what was sent is both, the agent's winning key by key).

    A request :func:`build_request` made (``built``) holds only messages: validating them again
    cost a pass over the whole history every turn, so a long run got slower turn after turn. It
    is recorded without validation when the few values user code gave (the provider's
    description, the sampling keys) have their declared types too; any other request is
    validated, so a malformed one fails as it always did."""
    # (the tools a request made elsewhere sends, by the names it gives them: a middleware's copy without a
    # tool, an agent's own run() with tools=[...], whose tool_names said the turn's or none)
    tools = sorted(request.tool_names if built else tool_names_of(request))
    model, sampling = provider.describe(), dict(request.sampling)
    if any(isinstance(v, (list, dict)) for v in sampling.values()):  # (as it was: a middleware may change it after)
        sampling = own_copy(sampling)
    defaults = provider.sampling_defaults()
    fields = dict(messages=list(request.messages), tools=tools, model=model, sampling=sampling,
                  provider_sampling=defaults,
                  tools_digest=tools_digest(request.tools, cached=built) if request.tools else None)
    if built and type(model) is str and (not sampling or all(type(k) is str for k in sampling)) \
            and (not tools or all(type(t) is str for t in tools)) and type(defaults) is dict \
            and all(type(k) is str for k in defaults):
        return builders[Sent](fields)
    return Sent(**fields)


class Sent(BaseModel):
    """A recorded request. Its messages are written out only when the event is (to the journal,
    to the app), as a provider gets them: who wrote one and its reasoning are for people only.
    A turn pays for copying the list, not for serializing a long history nobody reads."""

    messages: list[Message]
    tools: list[str]
    model: str
    sampling: dict[str, Any]
    provider_sampling: dict[str, Any] = {}  # the provider's, under the agent's: what was sent is both
    # what the model was told of the tools (descriptions, argument schemas), as a digest: a re-execution
    # or a diff of code that changed them saw the same request (the names alone were recorded)
    tools_digest: str | None = None

    @model_serializer
    def _as_sent(self) -> dict[str, Any]:
        out = {"messages": [message_sent(m) for m in self.messages], "tools": self.tools, "model": self.model,
               "sampling": self.sampling, "provider_sampling": self.provider_sampling}
        if self.tools_digest is not None:
            out["tools_digest"] = self.tools_digest
        return out


_DIGESTS: dict[int, tuple[Any, str]] = {}  # id of a list of schemas -> (that list, its digest): an agent's is
# one list, made once, so a turn pays a lookup


def tools_digest(schemas: Any, *, cached: bool = True) -> str:
    """A short digest of the tool schemas a request sends (as JSON, keys sorted); not ``cached``: of what
    the list holds now (a middleware may have changed it in place)."""
    known = _DIGESTS.get(id(schemas)) if cached else None
    if known is not None and known[0] is schemas:
        return known[1]
    text = json.dumps(schemas, sort_keys=True, ensure_ascii=False, default=repr)
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    if len(_DIGESTS) >= 256:  # (a middleware that makes new lists each call)
        _DIGESTS.clear()
    _DIGESTS[id(schemas)] = (schemas, digest)
    return digest


def message_sent(m: Message) -> dict[str, Any]:
    """A message as a provider gets it (and the journal records it)."""
    out: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        out["tool_calls"] = [_call(c) for c in m.tool_calls]
    if m.role == "tool":
        out["tool_call_id"] = m.tool_call_id
    return out


def _usage(usage: Usage) -> dict[str, Any]:
    """``usage.model_dump()``: built by hand for a plain Usage of ints (what its serializer gives)."""
    prompt, completion = usage.prompt_tokens, usage.completion_tokens
    if type(usage) is Usage and type(prompt) is int and type(completion) is int:
        return {"prompt_tokens": prompt, "completion_tokens": completion}
    return usage.model_dump()


def _call(call: Any) -> dict[str, Any]:
    return {"id": call.id, "name": call.name, "args": dict(call.args)}


class AgentProvider(Provider):
    """``self.provider`` inside an agent's ``run()``: the agent's provider, called like a turn's
    model call (a chat node, the app's middlewares, the budget). ``agent`` and ``turn`` are
    filled in when the request leaves them unset."""

    def __init__(self, run: "Run", spec: AgentSpec) -> None:
        self._run, self._spec = run, spec
        self.inner = run.providers[spec.cls]

    async def complete(self, request: ChatRequest) -> ChatReply:
        run, spec = self._run, self._spec
        if not request.agent:
            request = request.model_copy(update={"agent": spec.name, "turn": next_turn(run, spec)})
        if run.pauses:  # a pause point before each of its model calls, as before a turn's: s stops there
            await run.pause("chat", spec.name, request=recorded(request, self.inner).model_dump())
        if run.gate_needed():
            await run.gate()
        return await call_model(run, spec, request)

    def describe(self) -> str:
        return self.inner.describe()

    def sampling_defaults(self) -> dict[str, Any]:
        return self.inner.sampling_defaults()
