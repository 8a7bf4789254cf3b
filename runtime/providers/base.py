"""The one interface every model provider implements.

The engine builds a :class:`ChatRequest` for each model call and awaits
``provider.complete(request)``; it gets a :class:`ChatReply` back, and hands
it to :meth:`Provider.finish`, which moves ``<think>`` blocks to ``reasoning``
and rescues tool calls the model wrote as text. So a provider of yours only
turns a request into the model's raw answer::

    class EchoProvider(Provider):
        async def complete(self, request: ChatRequest) -> ChatReply:
            text = await my_client.chat([m.model_dump() for m in request.messages])
            return ChatReply(content=text, usage=Usage(prompt_tokens=..., completion_tokens=...))

Fakes (:class:`~runtime.providers.scripted.ScriptedProvider`,
:class:`~runtime.providers.function.FunctionProvider`) are real classes of this
interface, so the engine never knows whether a model is real.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from flowtui.runtime.construct import builders, copy_with
from flowtui.runtime.messages import Message, ToolCall, estimate_tokens
from flowtui.runtime.providers.rescue import find_tool_calls, strip_think


# A native tool call whose arguments were not a JSON object keeps the raw text
# under this key, so the engine can tell the model what was wrong.
RAW_ARGUMENTS_KEY = "__raw_arguments__"


class ChatRequest(BaseModel):
    """One model call: the agent's messages (prompt first) and its tools."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    agent: str = ""
    turn: int = Field(default=1, description="1-based count of this agent's turns in the run")
    messages: list[Message]
    tools: list[dict[str, Any]] = Field(
        default_factory=list, description="OpenAI-style function schemas"
    )
    tool_names: frozenset[str] = frozenset()
    sampling: dict[str, Any] = Field(default_factory=dict)
    # Called by streaming providers with each text fragment as it arrives.
    on_delta: Callable[[str], None] | None = None
    # Called by providers that retry, once per attempt that failed.
    on_attempt: Callable[["AttemptInfo"], None] | None = None


def tool_names_of(request: ChatRequest) -> frozenset[str]:
    """The names of the tools ``request`` sends, read from its ``tools`` (a copy a middleware made without
    a tool keeps the ``tool_names`` of the request it came from)."""
    names = set()
    for schema in request.tools:
        if isinstance(schema, dict):
            inner = schema.get("function") if isinstance(schema.get("function"), dict) else schema
            if isinstance(inner.get("name"), str):
                names.add(inner["name"])
    return frozenset(names)


class AttemptInfo(BaseModel):
    """A failed attempt of one logical call, reported before the retry."""

    attempt: int
    error: str
    status: int | None = None
    retry_in_s: float | None = None


class Usage(BaseModel):
    """Tokens one model call used (the budget and the run totals add them up)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0


class ChatReply(BaseModel):
    """What one model call produced.

    A provider may return the raw text in ``content``: :meth:`Provider.finish`
    moves ``<think>`` blocks to ``reasoning`` and, with no native
    ``tool_calls``, rescues calls written as text (``tool_call_source``
    ``"rescued"``).
    """

    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_source: Literal["native", "rescued"] | None = None
    reasoning: str | None = None
    usage: Usage = Field(default_factory=Usage)
    # The server sent no usage (some proxies and local servers do not): the counts are estimates.
    usage_estimated: bool = False
    cost_usd: float = 0.0
    attempts: int = 1
    model: str | None = None
    # Why the model stopped, as the server said ("stop", "length", "tool_calls", "content_filter"...);
    # None when it did not say. "length": the answer was cut at max_tokens (a reply all the same).
    finish_reason: str | None = None


class TokenCount(BaseModel):
    """A request's size in tokens, counted by the model's own tokenizer (:meth:`Provider.count_tokens`)."""

    model: str = Field(description="the model whose tokenizer counted")
    tokenizer: str = Field(description="the tokenizer's name, e.g. o200k_base")
    messages: list[int] = Field(description="each message's tokens, in order")
    total: int = Field(description="the whole request: its messages, the tool schemas and what every reply "
                                   "starts with (what the provider bills as prompt tokens)")


# Replies already through finish_reply: id -> a weak reference to the reply, so a provider that
# finished its own replies (litellm's, scripted ones) is not scanned twice. Not a field: it must not
# change equality. Plain weak references (no callback, unlike a WeakValueDictionary's, which cost
# more than the rest of finishing a short reply); the entries of replies gone are dropped now and
# then, so the table stays about as large as the replies alive.
_FINISHED: dict[int, weakref.ref] = {}
_prune_at = 256


def _finished(reply: ChatReply) -> bool:
    ref = _FINISHED.get(id(reply))
    return ref is not None and ref() is reply


def _mark_finished(reply: ChatReply) -> None:
    global _prune_at
    if len(_FINISHED) >= _prune_at:
        for key, ref in list(_FINISHED.items()):
            if ref() is None and _FINISHED.get(key) is ref:
                _FINISHED.pop(key, None)
        _prune_at = max(256, 2 * len(_FINISHED))
    _FINISHED[id(reply)] = weakref.ref(reply)


def finish_reply(request: ChatRequest, reply: ChatReply, *, rescue: bool) -> ChatReply:
    """``reply`` with ``<think>`` blocks moved from the content to ``reasoning`` (after any
    the provider sent apart), tool calls written as text rescued when there are no
    native ones (only names among ``request.tools``, else ``request.tool_names``; off with ``rescue=False``), and
    ids ``call_<turn>_<i>`` for calls without one, so a replayed conversation is
    byte-identical to the recorded one."""
    if _finished(reply):
        return reply
    content, think = strip_think(reply.content)
    if reply.reasoning and reply.reasoning.strip():
        think = reply.reasoning.strip() + ("\n\n" + think if think else "")
    calls, source = reply.tool_calls, reply.tool_call_source or ("native" if reply.tool_calls else None)
    if not calls and rescue and (names := tool_names_of(request) if request.tools else request.tool_names):
        calls, content = find_tool_calls(content, names)
        source = "rescued" if calls else None
    if not calls and content is reply.content and think is reply.reasoning and reply.tool_call_source is None:
        done = reply  # a plain answer: nothing to move, rescue or name (the usual reply of a fast model)
    else:
        calls = [c if c.id else c.model_copy(update={"id": f"call_{request.turn}_{i}"})
                 for i, c in enumerate(calls)] if calls else []
        done = copy_with(reply, {"content": content, "reasoning": think, "tool_calls": calls,
                                 "tool_call_source": source})
    _mark_finished(done)
    return done


def sent_sampling(defaults: Mapping[str, Any], own: Mapping[str, Any]) -> dict[str, Any]:
    """The sampling a model call sends: a provider's ``defaults`` under the agent's ``own``, key by key
    (``None``: not sent)."""
    return {k: v for k, v in {**defaults, **own}.items() if v is not None}


# The messages of the request a turn built last, their number and their estimated tokens (:func:`counted`):
# estimating a reply's prompt then costs nothing per message of a long history. Messages that are not
# those (a middleware's, a parallel agent's) are added up.
_counted: tuple[list | None, int, int] = (None, 0, 0)


def counted(messages: list[Message], tokens: int) -> None:
    """``messages`` (a request's, as built) are ``tokens`` tokens, estimated."""
    global _counted
    _counted = (messages, len(messages), tokens)


def prompt_estimate(messages: list[Message]) -> int:
    """``messages``' size in tokens, estimated as the app's "what the model sees", ``prompt.tokens`` and
    ``ContextWindow`` estimate it (:func:`estimate_tokens`: one estimate, so the pane says what the
    totals and a token budget count)."""
    known, n, tokens = _counted
    if known is messages and len(messages) == n:
        return tokens
    return sum(estimate_tokens(m) for m in messages)


def with_estimated_usage(request: ChatRequest, reply: ChatReply) -> ChatReply:
    """``reply`` counted at about four characters a token (as a scripted reply is) when it says no
    usage (a function standing in for the model, a provider of the flow's own): a token budget still
    trips, and the totals are no zeros. Marked ``usage_estimated``; a reply that has counts is kept."""
    usage = reply.usage
    if usage.prompt_tokens or usage.completion_tokens or reply.usage_estimated:
        return reply
    said = len(reply.content) + len(reply.reasoning or "")
    if reply.tool_calls:
        said += sum(len(c.name) + len(str(c.args)) for c in reply.tool_calls)
    counts = builders[Usage]({"prompt_tokens": prompt_estimate(request.messages),
                              "completion_tokens": (said + 3) // 4})
    return copy_with(reply, {"usage": counts, "usage_estimated": True})


class Provider:
    """Base class of providers. Subclasses implement :meth:`complete`.

    A provider given to ``@agent`` as a class is instantiated with no
    arguments once per run; one given as an instance is :meth:`fork`-ed per
    run, so runs never share cursors or counters. Set ``rescue_tool_calls =
    False`` on a provider whose model never writes tool calls as text.
    """

    rescue_tool_calls: bool = True

    async def complete(self, request: ChatRequest) -> ChatReply:  # pragma: no cover
        """One model call: ``request.messages`` (prompt first) and ``request.tools`` in, the
        model's answer out. Raise :class:`~runtime.errors.ProviderError` for a failure."""
        raise NotImplementedError

    def finish(self, request: ChatRequest, reply: ChatReply) -> ChatReply:
        """What the engine does to every reply of this provider (see :func:`finish_reply`); one that
        says no usage is estimated (:func:`with_estimated_usage`)."""
        if not isinstance(reply, ChatReply):  # a provider of the flow's own: say which, and what it owes
            raise TypeError(f"{type(self).__name__}.complete() returned {type(reply).__name__} "
                            f"({reply!r:.80}), not a ChatReply; return ChatReply(content=...) "
                            "(from flowtui import ChatReply)")
        return with_estimated_usage(request, finish_reply(request, reply, rescue=self.rescue_tool_calls))

    def fork(self) -> "Provider":
        """A copy for one run. Stateless providers return ``self``."""
        return self

    def skip(self, request: ChatRequest, reply: ChatReply) -> None:
        """``request`` was answered with ``reply`` from a journal, not by this provider (a run
        re-executed with ``--resume-from``): move on as if you had answered it, so the run
        continues live where the journal's prefix ends. Stateless providers do nothing; a
        :class:`~flowtui.runtime.providers.scripted.ScriptedProvider` moves to its next reply,
        a replayed cassette to its next exchange."""

    def count_tokens(self, messages: list[Message], tools: list[dict[str, Any]]) -> TokenCount | None:
        """``messages`` (and ``tools``) counted by the model's own tokenizer, or None when this
        provider has none at hand (the default: "what the model sees" then shows estimates).
        Called in a thread, never on the run's event loop; it must not reach the network."""
        return None

    def override_model(self, model: str) -> "Provider":
        """A copy that calls ``model`` instead (``--model``). Fakes ignore it."""
        return self

    def describe(self) -> str:
        return type(self).__name__

    def sampling_defaults(self) -> dict[str, Any]:
        """The sampling parameters this provider sends under the agent's own (``LiteLLMProvider(sampling=
        ...)``): the journal records them with each request. None by default."""
        return {}
