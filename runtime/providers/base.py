"""The one interface every model provider implements.

The engine builds a :class:`ChatRequest` for each model call and awaits
``provider.complete(request)``; it gets a :class:`ChatReply` back. Fakes
(:class:`~runtime.providers.scripted.ScriptedProvider`,
:class:`~runtime.providers.function.FunctionProvider`) are real classes of this
interface, so the engine never knows whether a model is real.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from flowtui.runtime.messages import Message, ToolCall


# A native tool call whose arguments were not a JSON object keeps the raw text
# under this key, so the engine can tell the model what was wrong.
RAW_ARGUMENTS_KEY = "__raw_arguments__"


class ChatRequest(BaseModel):
    """One model call: the agent's messages (prompt first) and its tools."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    agent: str
    turn: int = Field(description="1-based count of this agent's turns in the run")
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


class AttemptInfo(BaseModel):
    """A failed attempt of one logical call, reported before the retry."""

    attempt: int
    error: str
    status: int | None = None
    retry_in_s: float | None = None


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ChatReply(BaseModel):
    """What one model call produced."""

    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_source: Literal["native", "rescued"] | None = None
    reasoning: str | None = None
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float = 0.0
    attempts: int = 1
    model: str | None = None


class Provider:
    """Base class of providers. Subclasses implement :meth:`complete`.

    A provider given to ``@agent`` as a class is instantiated with no
    arguments once per run; one given as an instance is :meth:`fork`-ed per
    run, so runs never share cursors or counters.
    """

    async def complete(self, request: ChatRequest) -> ChatReply:  # pragma: no cover
        raise NotImplementedError

    def fork(self) -> "Provider":
        """A copy for one run. Stateless providers return ``self``."""
        return self

    def override_model(self, model: str) -> "Provider":
        """A copy that calls ``model`` instead (``--model``). Fakes ignore it."""
        return self

    def describe(self) -> str:
        return type(self).__name__
