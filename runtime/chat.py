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

from typing import TYPE_CHECKING, Any

from flowtui.runtime.construct import build
from flowtui.runtime.decorators import AgentSpec
from flowtui.runtime.errors import ProviderError
from flowtui.runtime.events import ChatAttempt, ChatDelta
from flowtui.runtime.middleware import through
from flowtui.runtime.nodes import NodeScope
from flowtui.runtime.providers.base import AttemptInfo, ChatReply, ChatRequest, Provider

if TYPE_CHECKING:
    from flowtui.runtime.engine import Run


def next_turn(run: "Run", spec: AgentSpec) -> int:
    n = run._turns[spec.name] = run._turns.get(spec.name, 0) + 1
    return n


def build_request(run: "Run", spec: AgentSpec, prompt: str) -> ChatRequest:
    """The request of this agent's next turn, before any middleware."""
    emit = run.emitter.emit

    def on_delta(text: str) -> None:
        emit(ChatDelta, text=text)

    def on_attempt(info: AttemptInfo) -> None:
        emit(ChatAttempt, attempt=info.attempt, error=info.error, status=info.status, retry_in_s=info.retry_in_s)

    tools = run.plans.tool_specs[spec.cls]
    return build(ChatRequest, dict(
        agent=spec.name, turn=next_turn(run, spec), messages=run.state.to_messages(prompt=prompt),
        tools=tools.schemas, tool_names=tools.names, sampling=spec.sampling, on_delta=on_delta,
        on_attempt=on_attempt))


async def call_model(run: "Run", spec: AgentSpec, request: ChatRequest, *, prompt: str | None = None) -> ChatReply:
    """Send ``request`` for ``spec``'s agent: a ``chat`` node around the middlewares and the provider."""
    start = {"turn": request.turn, "messages": len(request.messages), "prompt": prompt}
    with NodeScope(run, "chat", spec.name, data=start) as scope:
        del scope.data["prompt"]  # on node.start only: node.end need not repeat it
        provider = run.providers[spec.cls]

        async def send(final: ChatRequest) -> ChatReply:
            if final is not request:
                scope.data["sent"] = len(final.messages)
            return provider.finish(final, await provider.complete(final))

        def on_pass(name: str, received: Any, passed: Any) -> None:
            if passed is received:
                return
            changed = scope.data.setdefault("changed_by", [])
            if name not in changed:
                changed.append(name)
            dropped = len(received.messages) - len(passed.messages)
            if dropped > 0:  # visible as such in "what the model sees": who left out how much
                trimmed = scope.data.setdefault("trimmed", {"dropped": 0, "by": []})
                trimmed["dropped"] += dropped
                trimmed["by"].append(name)

        try:
            reply = await through(run.model_layers, request, send, on_pass=on_pass)
        except ProviderError as exc:
            exc.agent = exc.agent or spec.name
            scope.data["attempts"] = exc.attempts
            raise
        if not isinstance(reply, ChatReply):
            raise TypeError(f"a model middleware returned {type(reply).__name__}, not a ChatReply "
                            f"(return what call_next(request) gave, or a ChatReply of your own)")
        usage = reply.usage
        run.tracker.add_chat(prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                             cost_usd=reply.cost_usd)
        scope.data.update(
            prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
            cost_usd=reply.cost_usd, attempts=reply.attempts, tool_calls=len(reply.tool_calls),
            tool_call_source=reply.tool_call_source, model=reply.model)
        if reply.reasoning:
            scope.data["reasoning"] = reply.reasoning
    run.publish_budget()
    return reply


class AgentProvider(Provider):
    """``self.provider`` inside an agent's ``run()``: the agent's provider, called like a turn's
    model call (a chat node, the app's middlewares, the budget). ``agent`` and ``turn`` are
    filled in when the request leaves them unset."""

    def __init__(self, run: "Run", spec: AgentSpec) -> None:
        self._run, self._spec = run, spec
        self.inner = run.providers[spec.cls]

    async def complete(self, request: ChatRequest) -> ChatReply:
        if not request.agent:
            request = request.model_copy(update={"agent": self._spec.name, "turn": next_turn(self._run, self._spec)})
        return await call_model(self._run, self._spec, request)

    def describe(self) -> str:
        return self.inner.describe()
