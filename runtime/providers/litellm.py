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
import email.utils
import json
import math
import random
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from flowtui.runtime.errors import ConfigError, FlowtuiError, ProviderError
from flowtui.runtime.messages import Message
from flowtui.runtime.providers._litellm import MalformedReply
from flowtui.runtime.providers.base import AttemptInfo, ChatReply, ChatRequest, Provider, TokenCount
from flowtui.runtime.secrets import MARK, credentials_given, redact, secret_values

__all__ = ["LiteLLMProvider", "Retry", "RETRYABLE_STATUS", "SAMPLING_KEYS"]

SAMPLING_KEYS = frozenset({"temperature", "top_p", "seed", "max_tokens", "stop"})
RETRYABLE_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})

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
        merged = dict(cls.sampling)
        if sampling is not _UNSET and sampling is not None:
            merged.update(sampling)
        for key in SAMPLING_KEYS & extra.keys():
            merged[key] = extra.pop(key)
        self.sampling = {k: v for k, v in merged.items() if v is not None}
        self.api_base = cls.api_base if api_base is _UNSET else api_base
        self.timeout = cls.timeout if timeout is _UNSET else timeout
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
            except FlowtuiError:
                raise
            except _CallbackFailed as failed:
                raise failed.original from None
            except Exception as exc:  # noqa: BLE001 - every litellm/httpx failure is classified below
                status, retryable = _classify(exc)
                final = not retryable or attempt == attempts
                wait = None if final else self._wait_s(exc, attempt)
                detail = _cut(self._redact(_said(exc)))  # redacted whole: a cut leaves no piece of a key
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

        sampling = {**self.sampling, **request.sampling}
        kwargs: dict[str, Any] = dict(self.extra)
        kwargs.update({k: v for k, v in sampling.items() if v is not None})
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
            raise _EmptyStream("the stream ended before any data arrived")
        return build_streamed(litellm, chunks, kwargs["messages"])

    def _wait_s(self, exc: BaseException, failed_attempt: int) -> float:
        after = _retry_after_s(exc)
        return after if after is not None else self._policy.backoff_s(failed_attempt)

    def _cost(self, litellm: Any, resp: Any, reply: ChatReply) -> float:
        if self.cost_per_1k is not None:
            return _money((reply.usage.prompt_tokens * float(self.cost_per_1k.get("prompt", 0.0))
                           + reply.usage.completion_tokens * float(self.cost_per_1k.get("completion", 0.0))
                           ) / 1000.0)
        from flowtui.runtime.providers._litellm import token_count, usage_as_sent

        if any(sent is not None and token_count(sent) != sent for sent in usage_as_sent(resp)):
            # a count that is no whole number of 0 or more, which litellm priced as it was (a negative
            # count, a negative cost): price the counts the run takes instead
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
        if _is_missing_key(exc):
            what = f"no API key: {self._key_hint()}"
        elif "LLM Provider NOT provided" in str(exc):  # litellm's own 400: nothing was sent
            what = (f"litellm cannot tell which provider serves {self.model!r}, so nothing was sent: name it "
                    "provider/model, e.g. openai/gpt-4o-mini or anthropic/claude-3-5-haiku-latest")
        elif status == 401:
            what = f"the API key was rejected (HTTP 401): {self._key_hint(rejected=True)}"
        elif status == 403:
            what = "the API key has no access to this model (HTTP 403)"
        elif status == 404:
            what = "the model or endpoint was not found (HTTP 404): check the model name and api_base"
        elif _is_timeout(exc):
            what = f"the model did not answer within timeout={self.timeout}s"
        elif _is_malformed(exc):  # a 200 with no answer in it: litellm's own 500 is no server's
            what = "the server's reply held no usable answer"
        elif _is_connection(exc):
            what = "the model's server could not be reached, or it dropped the connection"
        elif status is not None and not retryable:
            what = f"the request was refused (HTTP {status})"
        else:
            what = "the call failed" + (f" (HTTP {status})" if status else "")
        tries = (f" after {attempts} attempts in {elapsed:.1f}s" if attempts > 1
                 else " (not retried)" if not retryable else "")
        return f"{who}: {what}{tries}. Provider said: {detail}"

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


class _EmptyStream(Exception):
    """A streamed reply that closed with no chunk at all (retried like a drop)."""

    status_code = 502


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


def _classify(exc: BaseException) -> tuple[int | None, bool]:
    """(HTTP status if any, whether another attempt may succeed)."""
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        status = None
    if _is_missing_key(exc):  # reported as 500 by some paths; no retry will find a key
        return status, False
    if _is_timeout(exc) or _is_connection(exc) or _is_malformed(exc):
        return None, True  # no answer came, or none that can be used: litellm's 408 or 500 here is its own
    if status is None:
        return None, False
    return status, status in RETRYABLE_STATUS


def _is_timeout(exc: BaseException) -> bool:
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return True
    return any(c.__name__ in ("Timeout", "APITimeoutError", "TimeoutException", "ReadTimeout",
                              "ConnectTimeout") for c in type(exc).__mro__)


def _is_connection(exc: BaseException) -> bool:
    """A connection that failed or dropped, also where litellm reports it as an HTTP 500 of its own
    (an ``InternalServerError`` whose cause is the client's connection error)."""
    for cause in _causes(exc):
        if isinstance(cause, (ConnectionError, _EmptyStream)):
            return True
        if any(c.__name__ in ("APIConnectionError", "TransportError", "RemoteProtocolError",
                              "ClientConnectionError", "ServerDisconnectedError") for c in type(cause).__mro__):
            return True
    return False


# litellm's words for a 200 it could not turn into a response (a field missing, one of the wrong type),
# and for a stream that closed before the reply was finished
_INVALID = "Invalid response object"
_UNFINISHED = "Stream ended before a finish_reason was received"
# litellm's types of a response: a ValidationError of one is a reply that does not fit the API
_RESPONSE_TYPES = frozenset({"Usage", "ModelResponse", "ModelResponseStream", "Choices", "StreamingChoices",
                             "Message", "Delta", "Function", "ChatCompletionMessageToolCall",
                             "ChatCompletionDeltaToolCall"})


def _is_malformed(exc: BaseException) -> bool:
    """A reply that came (HTTP 200) but holds no usable answer: ours (:class:`MalformedReply`), or
    one litellm could not read (it calls that a 500 of its own, or a connection error)."""
    return _malformed(exc) is not None


def _malformed(exc: BaseException) -> str | None:
    """What is wrong with a reply that holds no usable answer, in words; None for other failures."""
    causes = list(_causes(exc))
    for cause in causes:
        if isinstance(cause, MalformedReply):
            return str(cause)
    if any(type(cause).__name__ == "HTTPStatusError" for cause in causes):
        return None  # the server answered with an error status: that is what it said
    for cause in causes:
        if isinstance(cause, json.JSONDecodeError):
            return f"the server's reply is not valid JSON ({cause})"
        if type(cause).__name__ == "ValidationError" and getattr(cause, "title", None) in _RESPONSE_TYPES:
            return f"the server's reply is not a valid chat completion ({_one_line(cause)})"
    for cause in causes:
        text = str(cause)
        if text.lstrip().startswith(_INVALID):
            root = causes[-1]
            why = "" if str(root).lstrip().startswith(_INVALID) else f" ({_one_line(root)})"
            return "the server's reply is not a valid chat completion" + why
        if _UNFINISHED in text:
            return "the server ended the stream before the reply was finished (no finish_reason came)"
    return None


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())


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
            if bound.expired():
                raise TimeoutError(why) from exc
            raise

    return bounded()


def _causes(exc: BaseException, depth: int = 8) -> Iterator[BaseException]:
    """``exc`` and what it was raised from or while handling, a few links deep."""
    seen: set[int] = set()
    while exc is not None and depth and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__
        depth -= 1


def _is_missing_key(exc: BaseException) -> bool:
    """litellm and the SDKs report a missing key in words, with varying statuses."""
    text = str(exc).lower()
    return ("missing credentials" in text or re.search(r"missing \w+ api key", text) is not None
            or ("api_key" in text and "must be set" in text))


def _retry_after_s(exc: BaseException) -> float | None:
    """Seconds from ``Retry-After`` (seconds or HTTP date) or ``retry-after-ms``."""
    headers = None
    for source in (getattr(exc, "litellm_response_headers", None),
                   getattr(getattr(exc, "response", None), "headers", None),
                   getattr(exc, "headers", None)):
        if source:
            headers = source
            break
    if not headers:
        return None
    try:
        lowered = {str(k).lower(): str(v) for k, v in dict(headers).items()}
    except Exception:  # noqa: BLE001
        return None
    if "retry-after-ms" in lowered:
        try:
            return max(0.0, float(lowered["retry-after-ms"]) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _said(exc: BaseException) -> str:
    """What the provider said, whole (see :func:`_cut`): the message without litellm's prefixes
    and debug noise, the server's own text when the client kept only "Error code: 404" (a body
    ``{"error": "some text"}``, as Ollama and many proxies send), and for a reply with no usable
    answer, what was wrong with it (never litellm's traceback)."""
    fault = _malformed(exc)
    if fault is not None:
        return fault
    text = str(getattr(exc, "message", None) or exc) or type(exc).__name__
    text = re.sub(r"^(litellm\.\w+:\s*)+", "", text)
    text = re.sub(r"^\w+Error:\s*", "", text)
    text = text.replace("OpenAIException - ", "")
    text = " ".join(text.split())
    if re.fullmatch(r"Error code: \d+", text):
        body = _server_text(exc)
        if body:
            text += " - " + " ".join(body.split())
    return text


def _server_text(exc: BaseException) -> str | None:
    """The error text in the body of the server's answer: ``{"error": "text"}``,
    ``{"error": {"message": "text"}}``, ``{"detail": ...}``, or a body that is plain text."""
    for cause in _causes(exc):
        found = _body_text(getattr(cause, "body", None))
        if found:
            return found
    for cause in _causes(exc):
        try:
            raw = cause.response.text  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - no response, or one not read (a stream)
            continue
        if not isinstance(raw, str) or not raw.strip():
            continue
        try:
            found = _body_text(json.loads(raw))
        except ValueError:
            found = raw.strip()
        if found:
            return found
    return None


def _body_text(body: Any, depth: int = 0) -> str | None:
    if isinstance(body, str):
        return body.strip() or None
    if isinstance(body, dict) and depth < 3:
        for key in ("error", "message", "detail", "msg", "error_message"):
            found = _body_text(body.get(key), depth + 1)
            if found:
                return found
    if body is None or body == {} or body == []:
        return None
    try:
        return json.dumps(body, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return None


def _cut(text: str, limit: int = 300) -> str:
    """``text`` cut to ``limit`` characters. Cut only a redacted text (a cut would leave a piece of a
    credential too short to be found); the cut never splits a ``[redacted]``."""
    if len(text) <= limit:
        return text
    end = limit - 1
    start = text.rfind(MARK, max(0, end - len(MARK) + 1), end + len(MARK) - 1)
    if start != -1 and start < end < start + len(MARK):
        end = start  # the cut would fall inside the mark: cut before it
    return text[:end] + "…"


def _money(value: Any) -> float:
    """A cost: a finite amount of 0 or more, else 0."""
    try:
        cost = float(value or 0.0)
    except (TypeError, ValueError):
        return 0.0
    return cost if math.isfinite(cost) and cost > 0 else 0.0
