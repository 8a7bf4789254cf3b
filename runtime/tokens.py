"""Exact token counts of a run's next model call, where its provider has the model's tokenizer.

"What the model sees" is drawn by the app from the run's events, with sizes
estimated at about four characters a token: the app never imports the flow
nor litellm. The run's process can do better: the ``count`` command (see
:mod:`flowtui.runtime.protocol`) asks the provider of the agent whose prompt
the next call sends to count the very messages that view shows
(:meth:`~flowtui.runtime.providers.base.Provider.count_tokens`); a provider
without a local tokenizer for its model answers None, and the estimates stay.
The ``prompt.tokens`` watchpoint measures with the same count when there is one
(:func:`prompt_tokens`).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from flowtui.runtime.messages import Message
from flowtui.runtime.providers.base import Provider, TokenCount

if TYPE_CHECKING:
    from flowtui.runtime.engine import Run


def next_call(run: "Run", agent: str, prompt: str | None) -> tuple[Provider, list[Message], list[dict[str, Any]]] | None:
    """What ``agent``'s next model call in ``run`` sends (before middlewares): its provider, the
    messages (built by the function a turn's request is built with) and the tool schemas."""
    spec = next((s for s in run.plans.agent_specs.values() if s.name == agent), None)
    if spec is None:
        return None
    return run.providers[spec.cls], run.state.to_messages(prompt=prompt), run.plans.tool_specs[spec.cls].schemas


async def count_call(run: "Run", agent: str, prompt: str | None) -> TokenCount | None:
    """:func:`next_call` counted by its provider, in a thread (a tokenizer may take a while to
    load); None when the provider cannot count, or says why not by raising."""
    found = next_call(run, agent, prompt)
    if found is None:
        return None
    provider, messages, tools = found
    counted = await asyncio.to_thread(provider.count_tokens, messages, tools)
    if counted is not None and not isinstance(counted, TokenCount):  # (a provider of the flow's own)
        raise TypeError(f"{provider.describe()}.count_tokens returned {type(counted).__name__} {counted!r:.40}, not "
                        "a TokenCount (from flowtui import TokenCount) or None")
    return counted


async def count_shown(run: "Run", run_id: str | None) -> TokenCount | None:
    """The next call of run ``run_id`` (this one or a child), as "what the model sees" shows it:
    with the prompt of its latest pause point or model call (:attr:`Run.next_prompt`)."""
    target = run.runs.get(run_id or run.id)
    if target is None or target.next_prompt is None:
        return None
    return await count_call(target, *target.next_prompt)


async def prompt_tokens(run: "Run", agent: str, prompt: str | None) -> int | None:
    """The ``prompt.tokens`` of ``agent``'s next call: the whole request as its model's tokenizer
    counts it, or None (the estimate is used) when the provider cannot count, or fails to."""
    try:
        counted = await count_call(run, agent, prompt)
    except Exception:  # noqa: BLE001 - a watchpoint never fails a run: it measures with the estimate
        return None
    return None if counted is None else counted.total
