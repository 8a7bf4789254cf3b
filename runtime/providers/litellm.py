"""Real models through litellm: any model string litellm knows.

    class Fast(LiteLLMProvider):
        model = "openai/gpt-4o-mini"
        sampling = {"temperature": 0.2}
        timeout = 30

    local = LiteLLMProvider("ollama/qwen2.5-coder:7b", api_base="http://localhost:11434",
                            stream=True, retry=Retry(attempts=5))

litellm itself is imported on the first call (see ``_litellm``), so importing
this module is cheap. Retries are ours, not litellm's or the OpenAI SDK's:
one logical call, N attempts, each failed attempt reported through
``request.on_attempt`` before the wait.
"""

from __future__ import annotations

import asyncio
import copy
import json
import math
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from flowtui.runtime.errors import ConfigError, FlowtuiError, ProviderError
from flowtui.runtime.messages import Message
from flowtui.runtime.context_window import estimate_tokens
from flowtui.runtime.providers.base import (AttemptInfo, ChatReply, ChatRequest, Provider, TokenCount, Usage,
                                           sent_sampling)
from flowtui.runtime.providers.failures import (
    RETRYABLE_STATUS, EmptyStream, classify, cut, is_connection, is_malformed, is_missing_key, is_timeout,
    refused_here, retry_after_s, said, unencodable, unreachable,
)
from flowtui.runtime.secrets import credentials_given, redact, secret_values

__all__ = ["LiteLLMProvider", "Retry", "RETRYABLE_STATUS", "SAMPLING_KEYS"]

SAMPLING_KEYS = frozenset({"temperature", "top_p", "seed", "max_tokens", "stop"})

_UNSET: Any = object()


@dataclass(frozen=True)
class Retry:
    """Retry policy: ``attempts`` in all (1 = no retry); the wait before retry
    *n* is uniform in ``[0, min(max_delay_s, base_delay_s * 2**(n-1))]`` (full
    jitter), unless the server sent ``Retry-After``, which wins up to
    ``max_retry_after_s``: a server that asks for a longer wait (an hour, forever)
    fails the call at once, saying so, instead of holding the run."""

    attempts: int = 3
    base_delay_s: float = 0.5
    max_delay_s: float = 20.0
    max_retry_after_s: float = 60.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ConfigError(f"Retry(attempts={self.attempts}): attempts must be at least 1")
        if self.base_delay_s < 0 or self.max_delay_s < 0 or self.max_retry_after_s < 0:
            raise ConfigError("Retry delays must not be negative")

    def backoff_s(self, failed_attempt: int) -> float:
        """The wait after the ``failed_attempt``-th attempt (1-based) failed."""
        cap = min(self.max_delay_s, self.base_delay_s * (2 ** (failed_attempt - 1)))
        return random.uniform(0.0, cap)


class LiteLLMProvider(Provider):
    """A provider that calls ``litellm.acompletion``.

    Configure by subclassing (class attributes) or by constructor keywords;
    keywords win. ``sampling`` keys (temperature, top_p, seed, max_tokens,
    stop) may also be given as plain keywords. Only what was set is sent; an
    agent's own ``sampling`` overrides the provider's key by key (``None``
    unsets a key). Other keywords (``api_key``, ``api_version``, headers...)
    go to litellm as they are; ``api_key`` is never shown anywhere.

    ``retry``: ``True`` (3 attempts), ``False`` (1), an int (that many) or a
    :class:`Retry`. Every failed attempt is reported to ``request.on_attempt``
    (the last one with ``retry_in_s=None``) before any wait. With ``stream``,
    raw text fragments go to ``request.on_delta`` as they arrive; after a
    failed attempt the next attempt streams again from the start.
    """

    model: str | None = None
    sampling: Mapping[str, Any] = {}
    api_base: str | None = None
    timeout: float | None = None
    retry: bool | Retry = True
    cost_per_1k: Mapping[str, float] | None = None
    stream: bool = False
    extra: Mapping[str, Any] = {}

    # How retry waits happen; tests replace it to record or skip the waits.
    sleep = staticmethod(asyncio.sleep)

    def __init__(self, model: str | None = _UNSET, *, sampling: Mapping[str, Any] | None = _UNSET,
                 api_base: str | None = _UNSET, timeout: float | None = _UNSET,
                 retry: bool | Retry = _UNSET, cost_per_1k: Mapping[str, float] | None = _UNSET,
                 rescue_tool_calls: bool = _UNSET, stream: bool = _UNSET, **extra: Any) -> None:
        cls = type(self)
        # Instance attributes shadow the class defaults (a subclass's configuration).
        self.model = cls.model if model is _UNSET else model
        from flowtui.runtime.checks import check_sampling

        merged = dict(cls.sampling)
        if sampling is not _UNSET and sampling is not None:
            merged.update(check_sampling(sampling, f"{cls.__name__}(...)"))
        for key in SAMPLING_KEYS & extra.keys():
            merged[key] = extra.pop(key)
        self.sampling = {k: v for k, v in merged.items() if v is not None}
        self.api_base = _url(cls.api_base if api_base is _UNSET else api_base, cls.__name__)
        self.timeout = _seconds(cls.timeout if timeout is _UNSET else timeout, cls.__name__)
        self.retry = cls.retry if retry is _UNSET else retry
        self.cost_per_1k = cls.cost_per_1k if cost_per_1k is _UNSET else cost_per_1k
        self.rescue_tool_calls = (cls.rescue_tool_calls if rescue_tool_calls is _UNSET
                                  else rescue_tool_calls)
        self.stream = cls.stream if stream is _UNSET else stream
        # Our retries are the only retries: litellm's/the SDK's would be invisible.
        for hidden in ("num_retries", "max_retries"):
            if hidden in extra:
                raise ConfigError(f"LiteLLMProvider: pass retry=Retry(attempts=...) instead of {hidden}=")
        self.extra = {**cls.extra, **extra}
        credentials_given(self.extra)  # api_key=vault.key(): redacted wherever a server echoes it
        self._policy = _policy(self.retry)
        if self.cost_per_1k is not None:
            unknown = set(self.cost_per_1k) - {"prompt", "completion"}
            if unknown:
                raise ConfigError(f"cost_per_1k keys are 'prompt' and 'completion', not {sorted(unknown)}")

    # -- Provider interface ------------------------------------------------------
    def override_model(self, model: str) -> "LiteLLMProvider":
        """A copy that calls ``model`` (``--model``), everything else unchanged."""
        twin = copy.copy(self)
        twin.model = model
        return twin

    def describe(self) -> str:
        return f"{type(self).__name__}({self.model or 'no model'})"

    def sampling_defaults(self) -> dict[str, Any]:
        return dict(self.sampling)

    def count_tokens(self, messages: list[Message], tools: list[dict[str, Any]]) -> TokenCount | None:
        """Counted by litellm with the model's own tokenizer: an OpenAI model's tiktoken encoding,
        which litellm ships; None for any other model (never a download)."""
        if not self.model:
            return None
        from flowtui.runtime.providers._litellm import count_tokens

        return count_tokens(self.model, messages, tools)

    def __repr__(self) -> str:  # never show extra kwargs: they may hold an api_key
        return f"<{self.describe()}>"

    async def complete(self, request: ChatRequest) -> ChatReply:
        """One logical call with retries; raises :class:`ProviderError` for good failures."""
        if not self.model:
            raise ProviderError(
                f"agent {request.agent!r}: no model set for {type(self).__name__}; give "
                "LiteLLMProvider(model='provider/name'), set `model = ...` on the subclass, "
                "or run with --model", agent=request.agent)
        if not request.messages:  # (every API refuses it, "messages must be a non-empty array", with a 400)
            raise ProviderError(
                f"agent {request.agent!r}: the model call was not sent: it holds no message (the agent's prompt "
                "is empty and the run has no input, memory or history yet); give the agent a prompt, or the run "
                "an input (--input)", agent=request.agent)
        from flowtui.runtime.providers import _litellm

        litellm = await _litellm.aload_litellm()
        kwargs = self._call_kwargs(request)
        attempts = self._policy.attempts
        started = time.monotonic()
        for attempt in range(1, attempts + 1):
            try:
                if self.stream:
                    resp = await self._streamed(litellm, kwargs, request)
                else:
                    resp = await self._whole(litellm, kwargs)
                reply = _litellm.parse_response(resp, request, rescue=self.rescue_tool_calls)
                if not any(map(_litellm.token_count, _litellm.usage_as_sent(resp))):  # none, or none usable
                    self._estimate_usage(request, reply)  # (-5000 and -3 counted 0: no token or cost budget tripped)
            except FlowtuiError:
                raise
            except _CallbackFailed as failed:
                raise failed.original from None
            except Exception as exc:  # noqa: BLE001 - every litellm/httpx failure is classified below
                status, retryable = classify(exc)
                final = not retryable or attempt == attempts
                wait = None if final else self._wait_s(exc, attempt)
                detail = cut(self._redact(said(exc)))  # redacted whole: a cut leaves no piece of a key
                if wait is not None and not wait <= self._policy.max_retry_after_s:  # (inf and nan too)
                    detail += (f" (the server asked to wait {wait:,.0f} s before a retry, more than "
                               f"Retry(max_retry_after_s={self._policy.max_retry_after_s:g}) allows)")
                    final, wait = True, None
                if request.on_attempt is not None:
                    request.on_attempt(AttemptInfo(attempt=attempt, error=detail,
                                                   status=status, retry_in_s=wait))
                if final:
                    raise ProviderError(
                        self._failure_message(request, exc, status, retryable, attempt, detail,
                                              time.monotonic() - started),
                        agent=request.agent, status=status, attempts=attempt) from None
                await self.sleep(wait)
                continue
            reply.attempts = attempt
            reply.cost_usd = self._cost(litellm, resp, reply)
            return reply
        raise AssertionError("unreachable")  # pragma: no cover

    # -- internals ---------------------------------------------------------------
    def _call_kwargs(self, request: ChatRequest) -> dict[str, Any]:
        from flowtui.runtime.providers._litellm import to_openai_messages

        kwargs: dict[str, Any] = dict(self.extra)
        kwargs.update(sent_sampling(self.sampling, request.sampling))
        kwargs["model"] = self.model
        kwargs["messages"] = to_openai_messages(request.messages)
        if request.tools:
            kwargs["tools"] = request.tools
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.timeout is not None:
            kwargs["timeout"] = self.timeout
        if self.stream:
            kwargs["stream"] = True
            # Ask for real usage in the stream where the provider can send it;
            # elsewhere litellm's chunk builder counts tokens itself.
            if "stream_options" not in kwargs and _supports(self.model, "stream_options"):
                kwargs["stream_options"] = {"include_usage": True}
        # The OpenAI SDK retries twice by default; those attempts would be invisible.
        kwargs["max_retries"] = 0
        return kwargs

    async def _whole(self, litellm: Any, kwargs: dict[str, Any]) -> Any:
        """A reply not streamed. ``timeout`` bounds the whole wait: a server that sends a byte now
        and then (keep-alive comments, whitespace, as OpenRouter does while the model works) never
        lets the client's read timeout fire."""
        if self.timeout is None:
            return await litellm.acompletion(**kwargs)
        return await _bounded(litellm.acompletion(**kwargs), self.timeout,
                              f"no whole reply arrived within {self.timeout:g} s")

    async def _streamed(self, litellm: Any, kwargs: dict[str, Any], request: ChatRequest) -> Any:
        """Stream the reply, handing text to ``request.on_delta`` as it comes,
        and rebuild one full response (tool-call fragments joined) at the end."""
        from flowtui.runtime.providers._litellm import build_streamed

        if self.timeout is None:
            stream = await litellm.acompletion(**kwargs)
        else:
            stream = await _bounded(litellm.acompletion(**kwargs), self.timeout,
                                    f"the stream did not start within {self.timeout:g} s")
        stalled = None if self.timeout is None else \
            f"no piece of the streamed reply arrived within {self.timeout:g} s"
        chunks = []
        pieces = stream.__aiter__()
        while True:
            try:  # timeout bounds each wait for a piece: keep-alive comments alone do not count
                chunk = await _bounded(pieces.__anext__(), self.timeout, stalled)
            except StopAsyncIteration:
                break
            chunks.append(chunk)
            if request.on_delta is not None and chunk.choices:
                text = getattr(chunk.choices[0].delta, "content", None)
                if text:
                    try:
                        request.on_delta(text)
                    except Exception as exc:  # the engine's bug, not the provider's failure
                        raise _CallbackFailed(exc) from exc
        if not chunks:
            raise EmptyStream("the stream ended before any data arrived")
        resp = build_streamed(litellm, chunks, kwargs["messages"])
        sent = getattr(stream, "chunks", None)  # (litellm's record of the chunks as the server sent them)
        if isinstance(sent, list) and sent and all(getattr(c, "usage", None) is None for c in sent):
            # the server sent no usage: litellm made one up, counting the messages alone (no tool schemas),
            # which was taken as the server's and undercounted a token or cost budget
            resp.usage = None
        return resp

    def _wait_s(self, exc: BaseException, failed_attempt: int) -> float:
        after = retry_after_s(exc)
        return after if after is not None else self._policy.backoff_s(failed_attempt)

    def _estimate_usage(self, request: ChatRequest, reply: ChatReply) -> None:
        """Count a reply that came with no usage (litellm says 0 and 0; streamed, it made one up from the
        messages alone): estimated, so a token budget still trips and the cost adds up. The prompt, tool
        schemas included, is counted with the model's tokenizer when litellm ships it, else at about four
        characters a token."""
        counted = self.count_tokens(request.messages, list(request.tools or ()))
        prompt = counted.total if counted is not None else sum(estimate_tokens(m) for m in request.messages) \
            + (len(json.dumps(request.tools, default=str)) + 3) // 4 * bool(request.tools)
        said = Message(role="assistant", content=reply.content + (reply.reasoning or ""),
                       tool_calls=tuple(reply.tool_calls))
        reply.usage = Usage(prompt_tokens=prompt, completion_tokens=estimate_tokens(said))
        reply.usage_estimated = True

    def _cost(self, litellm: Any, resp: Any, reply: ChatReply) -> float:
        if self.cost_per_1k is not None:
            return _money((reply.usage.prompt_tokens * float(self.cost_per_1k.get("prompt", 0.0))
                           + reply.usage.completion_tokens * float(self.cost_per_1k.get("completion", 0.0))
                           ) / 1000.0)
        from flowtui.runtime.providers._litellm import token_count, usage_as_sent

        if reply.usage_estimated or any(sent is not None and token_count(sent) != sent
                                        for sent in usage_as_sent(resp)):
            # no counts, which litellm priced at 0, or a count that is no whole number of 0 or more,
            # which litellm priced as it was (a negative count, a negative cost): price the counts
            # the run takes instead
            try:
                prompt, completion = litellm.cost_per_token(
                    model=self.model, prompt_tokens=reply.usage.prompt_tokens,
                    completion_tokens=reply.usage.completion_tokens)
                return _money(prompt + completion)
            except Exception:  # noqa: BLE001 - a model missing from the price table costs 0
                return 0.0
        # litellm already priced the response while building it; pricing it again
        # doubled the cost of a call (measured by bench/litellm_bench.py).
        # None there means the model is not in the price table: it costs 0.
        hidden = getattr(resp, "_hidden_params", None) or {}
        if "response_cost" in hidden:
            return _money(hidden["response_cost"])
        try:
            return _money(litellm.completion_cost(completion_response=resp))
        except Exception:  # noqa: BLE001 - a model missing from the price table costs 0
            return 0.0

    def _redact(self, text: str) -> str:
        return redact(text, secret_values(self.extra))

    def _failure_message(self, request: ChatRequest, exc: BaseException, status: int | None,
                         retryable: bool, attempts: int, detail: str, elapsed: float) -> str:
        who = f"agent {request.agent!r} (turn {request.turn}, model {self.model!r})"
        if is_missing_key(exc):
            what = f"no API key: {self._key_hint()}"
        elif unencodable(exc):  # (litellm's own 500: raised before anything was sent)
            what = f"the request could not be written as JSON, so nothing was sent: {self._not_json(request)}"
        elif refused_here(exc):  # (litellm's own 500: nothing was sent)
            what = ("the api_base holds a user and password (user:password@host) and an API key is given too: "
                    "a request carries one Authorization, so nothing was sent; keep one of them")
        elif "LLM Provider NOT provided" in str(exc):  # litellm's own 400: nothing was sent
            what = (f"litellm cannot tell which provider serves {self.model!r}, so nothing was sent: name it "
                    "provider/model, e.g. openai/gpt-4o-mini or anthropic/claude-3-5-haiku-latest")
        elif status == 401:
            what = f"the API key was rejected (HTTP 401): {self._key_hint(rejected=True)}"
        elif status == 403:
            what = "the API key has no access to this model (HTTP 403)"
        elif status == 404:
            what = "the model or endpoint was not found (HTTP 404): check the model name and api_base"
        elif is_timeout(exc):
            what = f"the model did not answer within timeout={self.timeout}s"
        elif is_malformed(exc):  # a 200 with no answer in it: litellm's own 500 is no server's
            what = "the server's reply held no usable answer"
        elif (why := unreachable(exc)) is not None:  # (a mistyped api_base: said, with the address tried)
            what = f"the model's server could not be reached at {self.api_base or 'its default address'}: " \
                   f"{why}; check api_base"
        elif is_connection(exc):
            what = "the model's server could not be reached, or it dropped the connection"
        elif status is not None and not retryable:
            what = f"the request was refused (HTTP {status})"
        else:
            what = "the call failed" + (f" (HTTP {status})" if status else "")
        tries = (f" after {attempts} attempts in {elapsed:.1f}s" if attempts > 1
                 else " (not retried)" if not retryable else "")
        return f"{who}: {what}{tries}. Provider said: {detail}"

    def _not_json(self, request: ChatRequest) -> str:
        """Which value of ``request`` JSON cannot hold, and where it comes from."""
        from flowtui.runtime.checks import not_json

        sampling = sent_sampling(self.sampling, request.sampling)
        found = not_json(sampling, "sampling")
        if found:
            return (f"{found}; fix the agent's or the provider's sampling=, or the model middleware that "
                    "set it")
        found = not_json(request.tools, "tools")
        if found:
            return f"{found}; fix that tool's schema, or the model middleware that changed it"
        return "a value in it has no JSON form (the provider's words below)"

    def _key_hint(self, *, rejected: bool = False) -> str:
        """Which environment variable litellm reads for this model (names only, never values)."""
        names: list[str] = []
        try:
            from flowtui.runtime.providers._litellm import load_litellm

            env = load_litellm().validate_environment(model=self.model)
            names = [n for n in env.get("missing_keys", []) if n.endswith(("_KEY", "_TOKEN"))]
            if not names and self.model:  # set but rejected: guess the name to check
                prefix = self.model.split("/", 1)[0].upper().replace("-", "_")
                names = [f"{prefix}_API_KEY"]
        except Exception:  # noqa: BLE001 - only a hint
            pass
        where = " or ".join(names) if names else "the provider's API key variable"
        if rejected:
            return f"check the key given by {where} in the environment or by api_key="
        return f"set {where} in the environment, or pass api_key= to the provider"


class _CallbackFailed(Exception):
    """``request.on_delta`` raised: re-raised as it is, never retried or blamed on the model."""

    def __init__(self, original: Exception) -> None:
        super().__init__(str(original))
        self.original = original


def _supports(model: str | None, param: str) -> bool:
    try:
        from flowtui.runtime.providers._litellm import load_litellm

        return param in (load_litellm().get_supported_openai_params(model=model) or ())
    except Exception:  # noqa: BLE001 - unknown model: do not send optional extras
        return False


def _seconds(timeout: Any, who: str) -> float | None:
    """``timeout``, refused at load unless it is a number of seconds above 0 (or None, no bound): a text
    failed every call with Python's words, and 0, a negative one or NaN failed each attempt at once."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
        raise ConfigError(f"{who}(timeout={timeout!r}): give the seconds a reply may take, a number above 0 "
                          "(timeout=30), or None for no bound")
    return timeout


def _url(api_base: Any, who: str) -> str | None:
    """``api_base``, refused at load unless it is an http(s) URL: one with no scheme
    (``127.0.0.1:8000/v1``) failed every attempt as "HTTP 500: /127.0.0.1:8000/v1/chat/completions",
    retried, naming no api_base."""
    if api_base is None:
        return None
    parts = urlsplit(api_base) if isinstance(api_base, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        given = redact(repr(api_base), secret_values())  # (a URL may hold a key: ?key=...)
        raise ConfigError(f"{who}(api_base={given}): give the server's URL with its scheme, "
                          "like api_base=\"http://127.0.0.1:8000/v1\"")
    return api_base


def _policy(retry: bool | Retry) -> Retry:
    if retry is True:
        return Retry()
    if retry is False or retry is None:
        return Retry(attempts=1)
    if isinstance(retry, Retry):
        return retry
    if isinstance(retry, int):
        return Retry(attempts=retry)
    raise ConfigError(f"retry must be True, False or Retry(...), not {retry!r}")


def _bounded(awaitable: Any, timeout: float | None, why: str | None) -> Any:
    """``awaitable``, given up after ``timeout`` seconds (None: no bound) with a TimeoutError saying ``why``."""
    if timeout is None:
        return awaitable

    async def bounded() -> Any:
        bound = asyncio.timeout(timeout)
        try:
            async with bound:
                return await awaitable
        except Exception as exc:  # a TimeoutError, or the error the client made of its cancellation
            if bound.expired() or is_timeout(exc):  # (the client's own timeout, the same bound, fired first:
                raise TimeoutError(why) from exc  # "APITimeoutError - Request timed out. Error_str: ...")
            raise

    return bounded()


def _money(value: Any) -> float:
    """A cost: a finite amount of 0 or more, else 0."""
    try:
        cost = float(value or 0.0)
    except (TypeError, ValueError):
        return 0.0
    return cost if math.isfinite(cost) and cost > 0 else 0.0
