"""The one module that touches litellm, and only on first use.

``import litellm`` takes seconds and, left alone, fetches a model price map
from the network and prints help banners on errors (which would tear a
terminal UI). :func:`load_litellm` imports it once, offline and silenced.
Everything else here converts between flowtui's types and litellm's
OpenAI-shaped dicts and responses, and counts a request's tokens where
litellm has the model's tokenizer at hand (:func:`count_tokens`).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import math
import os
import warnings
from types import ModuleType
from typing import Any

from flowtui.runtime.messages import Message, ToolCall, well_formed
from flowtui.runtime.providers.base import RAW_ARGUMENTS_KEY, ChatReply, ChatRequest, TokenCount
from flowtui.runtime.providers.replies import model_reply

__all__ = [
    "MalformedReply",
    "RAW_ARGUMENTS_KEY",
    "build_streamed",
    "count_tokens",
    "load_litellm",
    "local_encoding",
    "parse_response",
    "to_openai_messages",
    "token_count",
    "usage_as_sent",
]

_LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm")


async def aload_litellm() -> ModuleType:
    """:func:`load_litellm` from async code: the first import (seconds) runs in a
    worker thread, so the event loop (and the app drawn on it) keeps answering."""
    if load_litellm.cache_info().currsize:
        return load_litellm()
    return await asyncio.to_thread(load_litellm)


def offline_price_map() -> None:
    """Make litellm, whoever imports it (the runtime, or a flow itself), use the price map shipped in
    the package: left alone, its import fetches one from the network (offline: seconds of retries
    and warnings). ``LITELLM_LOCAL_MODEL_COST_MAP=False`` in the environment still asks for it."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@functools.cache
def load_litellm() -> ModuleType:
    """Import litellm once: offline price map, no banners, no log output."""
    offline_price_map()
    import litellm

    # "Give Feedback / Get Help" and "Provider List" prints are gated by this.
    litellm.suppress_debug_info = True
    litellm.set_verbose = False
    if hasattr(litellm, "suppress_startup_output"):
        litellm.suppress_startup_output = True
    for name in _LITELLM_LOGGERS:
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        logger.addHandler(logging.NullHandler())
        logger.setLevel(logging.CRITICAL)
        logger.propagate = False
    # Warnings go to stderr, which a full-screen app does not own: drop
    # litellm's own and the pydantic ones its types trigger on first use.
    warnings.filterwarnings("ignore", module=r"litellm(\..*)?$")
    warnings.filterwarnings("ignore", category=UserWarning, message=r".*`ReadOnly` qualifier")
    warnings.filterwarnings("ignore", category=UserWarning, message=r"Pydantic serializer warnings")
    # A call given up on (timeout bounds a whole reply) while litellm still prepared it in a worker
    # thread leaves the coroutine it prepared there unawaited: no request was sent, nothing to say.
    warnings.filterwarnings("ignore", category=RuntimeWarning,
                            message=r"coroutine '\w*(?:Completion|Handler|LLM)\w*\.\w+' was never awaited")
    return litellm


# --------------------------------------------------------------------------- requests


def to_openai_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Messages as OpenAI chat dicts.

    Assistant tool calls get JSON-string ``arguments``; tool results get the
    ``tool_call_id`` of the call they answer. Calls without an id get a
    stable one, and tool results without one are paired with the earliest
    unanswered call (of the same tool name when possible), because every
    OpenAI-compatible API rejects a tool message that answers no call.
    """
    out: list[dict[str, Any]] = []
    pending: list[tuple[str, str]] = []  # (id, name) of calls not yet answered
    for i, msg in enumerate(messages):
        if msg.role == "assistant":
            d: dict[str, Any] = {"role": "assistant", "content": _utf8(msg.content)}
            if msg.tool_calls:
                pending = []
                calls = []
                for j, call in enumerate(msg.tool_calls):
                    call_id = call.id or f"call_{i}_{j}"
                    pending.append((call_id, call.name))
                    calls.append({"id": call_id, "type": "function",
                                  "function": {"name": call.name, "arguments": _arguments(call.args)}})
                d["tool_calls"] = calls
                # Some providers reject "" next to tool calls; null is the API's own form.
                if not msg.content:
                    d["content"] = None
            out.append(d)
        elif msg.role == "tool":
            call_id = msg.tool_call_id
            if call_id is None:
                call_id = _pair(pending, msg.tool_name) or f"call_{i}_orphan"
            else:
                pending = [p for p in pending if p[0] != call_id]
            out.append({"role": "tool", "tool_call_id": call_id, "content": _utf8(msg.content)})
        else:
            out.append({"role": msg.role, "content": _utf8(msg.content)})
    return out


def _utf8(text: Any) -> Any:
    """``text`` as a UTF-8 request can carry it: a lone surrogate (a tool's file name that is no UTF-8, as ``os``
    gives it) is U+FFFD, as the journal and the app have it. Sent as it was, it failed the call three times
    over, said as HTTP 500, and the journal held a request that was never sent."""
    return well_formed(text) if isinstance(text, str) else text


def _pair(pending: list[tuple[str, str]], name: str | None) -> str | None:
    for k, (call_id, call_name) in enumerate(pending):
        if name is None or call_name == name:
            del pending[k]
            return call_id
    if pending:
        return pending.pop(0)[0]
    return None


# --------------------------------------------------------------------------- responses


class MalformedReply(Exception):
    """A reply (HTTP 200) that holds no usable answer: no choices, a stream with no message, a
    tool call with no name. Its text says what was wrong, in words; retried like a dropped reply."""


def parse_response(resp: Any, request: ChatRequest, *, rescue: bool) -> ChatReply:
    """A litellm ``ModelResponse`` as a :class:`ChatReply` (see :func:`model_reply`). A reply with
    nothing to take an answer from is a :class:`MalformedReply`, never an empty answer."""
    choices = getattr(resp, "choices", None)
    if not choices:
        raise MalformedReply("the server's reply held no choices")
    choice = choices[0]
    message = getattr(choice, "message", None)
    if message is None:
        raise MalformedReply("the server's reply held a choice with no message")
    calls = [_native_call(c) for c in (getattr(message, "tool_calls", None) or [])]
    if any(not call.name for call in calls):
        raise MalformedReply("the server's reply held a tool call with no name")
    # Providers that return reasoning separately (deepseek, o-series via litellm).
    extra_reasoning = getattr(message, "reasoning_content", None)
    prompt_tokens, completion_tokens = usage_as_sent(resp)
    finish_reason = getattr(choice, "finish_reason", None)
    content = getattr(message, "content", None) or ""
    refusal = getattr(message, "refusal", None)
    if not content and isinstance(refusal, str) and refusal.strip():
        content = refusal  # the model declined, in its own words (OpenAI's refusal field): its answer
    return model_reply(
        request, content, calls,
        rescue=rescue, reasoning=extra_reasoning if isinstance(extra_reasoning, str) else None,
        prompt_tokens=token_count(prompt_tokens), completion_tokens=token_count(completion_tokens),
        model=getattr(resp, "model", None),
        finish_reason=finish_reason if isinstance(finish_reason, str) and finish_reason else None)


def usage_as_sent(resp: Any) -> tuple[Any, Any]:
    """(prompt_tokens, completion_tokens) as the reply's ``usage`` gave them, unchecked."""
    usage = getattr(resp, "usage", None)
    return getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None)


def token_count(value: Any) -> int:
    """A token count from a server: a whole number, 0 or more. Anything else (negative, a fraction,
    text, NaN) counts 0: a server must not lower the run's totals, or slip past a token budget."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return 0
    return int(value) if value > 0 else 0


# A tool call streamed with no id gets this one while litellm joins the stream (it drops a call
# without an id), and None again after, so it is numbered as a call that came without one.
_NO_ID = "flowtui-no-id-"


def build_streamed(litellm: Any, chunks: list[Any], messages: list[dict[str, Any]]) -> Any:
    """The full response of a stream's ``chunks``, as litellm joins them, after checking that the
    server really sent an answer: litellm makes up an empty one for a stream that held none (plain
    JSON or other data sent instead of server-sent events, chunks with no message) and drops a tool
    call that came with no id or no name."""
    said = False
    calls: dict[Any, list[Any]] = {}  # index -> the fragments of that tool call
    latest: dict[Any, tuple[Any, int]] = {}  # index as sent -> (id of its latest call, the index it is built at)
    for chunk in chunks:
        for choice in getattr(chunk, "choices", None) or ():
            if getattr(choice, "index", 0) not in (0, None):
                continue
            delta = getattr(choice, "delta", None)
            if delta is None:
                continue
            if getattr(delta, "role", None) or getattr(delta, "content", None) is not None \
                    or getattr(delta, "tool_calls", None) or getattr(delta, "reasoning_content", None) \
                    or getattr(delta, "function_call", None):
                said = True
            for call in getattr(delta, "tool_calls", None) or ():
                sent, call_id = getattr(call, "index", None) or 0, getattr(call, "id", None)
                known_id, index = latest.get(sent, (None, None))
                if index is None or (call_id and known_id and call_id != known_id):
                    # a call of its own; one that came under an index a call of another id has (servers that
                    # number every call 0) was merged into it by litellm: arguments of both, one name
                    index = sent if sent not in calls else max(calls) + 1
                    latest[sent] = (call_id, index)
                elif call_id and not known_id:
                    latest[sent] = (call_id, index)
                if index != sent:
                    call.index = index
                calls.setdefault(index, []).append(call)
    if not said:
        raise MalformedReply("the server's reply to a streaming request held no message (no chunk of a "
                             "chat completion arrived: plain JSON or other data instead of a stream?)")
    mended = []
    for index, fragments in calls.items():
        if all(getattr(f, "function", None) is None for f in fragments):
            continue  # not a function call (a custom tool's): litellm's to judge
        if not any(getattr(getattr(f, "function", None), "name", None) for f in fragments):
            raise MalformedReply("the server's streamed reply held a tool call with no name")
        if not any(getattr(f, "id", None) for f in fragments):
            mended.append((fragments[0], getattr(fragments[0], "id", None)))
            fragments[0].id = f"{_NO_ID}{index}"
        _join_name(fragments)
    resp = litellm.stream_chunk_builder(chunks, messages=messages)
    if mended:
        for choice in getattr(resp, "choices", None) or ():
            for call in getattr(getattr(choice, "message", None), "tool_calls", None) or ():
                if isinstance(getattr(call, "id", None), str) and call.id.startswith(_NO_ID):
                    call.id = None
        for fragment, as_sent in mended:  # the chunks as they came (litellm may keep them for its logs)
            fragment.id = as_sent
    return resp


def _join_name(fragments: list[Any]) -> None:
    """A tool call's name sent in pieces ("ec", "ho") joined into its first fragment, as its arguments are
    (litellm kept the last piece: the model was told there is no tool "ho"). A name said again whole in each
    fragment, or growing ("e", "ec", "echo"), is the last one."""
    named = [fn for f in fragments if getattr(fn := getattr(f, "function", None), "name", None)]
    names = [fn.name for fn in named]
    if len(set(names)) < 2 or not all(isinstance(n, str) for n in names):
        return
    growing = all(later.startswith(earlier) for earlier, later in zip(names, names[1:]))
    named[0].name = names[-1] if growing else "".join(names)
    for fn in named[1:]:
        fn.name = None


def _arguments(args: dict[str, Any]) -> str:
    """A call's arguments as the model is sent them back: JSON, or the very text it wrote when that was
    no JSON object (kept under RAW_ARGUMENTS_KEY, a key of flowtui's the model never wrote)."""
    raw = args.get(RAW_ARGUMENTS_KEY) if len(args) == 1 else None
    if isinstance(raw, str):
        return _utf8(raw)  # (as the model wrote it: a lone surrogate in it, from a "\ud800" it wrote, is U+FFFD)
    text = json.dumps(args, ensure_ascii=False)  # "çç" as the model wrote it and view 2 shows it, not "\u00e7\u00e7"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: escaped, as no UTF-8 request can carry one
        return json.dumps(args)
    return text


def _native_call(call: Any) -> ToolCall:
    fn = getattr(call, "function", None)
    name = getattr(fn, "name", None) or ""
    raw = getattr(fn, "arguments", None)
    if isinstance(raw, dict):
        args: dict[str, Any] = raw
    elif not raw or not str(raw).strip():
        args = {}
    else:
        try:
            parsed = json.loads(raw)
        except (ValueError, RecursionError):
            parsed = None
        args = parsed if isinstance(parsed, dict) else {RAW_ARGUMENTS_KEY: str(raw)}
    call_id = getattr(call, "id", None)
    return ToolCall(name=name if isinstance(name, str) else str(name), args=args,
                    id=call_id if isinstance(call_id, str) and call_id else None)


# --------------------------------------------------------------------------- token counts

# tiktoken keeps an encoding under the SHA-1 of the address it would download it from; litellm
# ships a few of those files and points tiktoken at them (TIKTOKEN_CACHE_DIR).
_ENCODING_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"
_KEPT_COUNTS = 50_000  # messages whose count is kept: a pause counts only what is new since the last
_counted: dict[tuple[str, str], int] = {}


@functools.cache
def local_encoding(model: str) -> str | None:
    """The tiktoken encoding litellm counts ``model``'s tokens with, when that is the model's own
    (an OpenAI model) and litellm ships it; None for every other model.

    Never a download: for some models litellm would fetch a Hugging Face tokenizer, and tiktoken
    fetches an encoding missing from its cache. Such a model gets None, and :func:`count_tokens`
    never lets litellm choose a tokenizer."""
    load_litellm()
    try:
        import litellm.litellm_core_utils.default_encoding  # noqa: F401  (points tiktoken at litellm's files)
        from litellm.litellm_core_utils.token_counter import is_openai_model, openai_tokenizer_encoding_name

        if not is_openai_model(model):
            return None
        name = openai_tokenizer_encoding_name(model)
    except Exception:  # noqa: BLE001 - a litellm without these: estimates, as for any other model
        return None
    folder = os.environ.get("TIKTOKEN_CACHE_DIR")
    kept = hashlib.sha1(_ENCODING_URL.format(name).encode()).hexdigest()
    return name if folder and os.path.isfile(os.path.join(folder, kept)) else None


def count_tokens(model: str, messages: list[Message], tools: list[dict[str, Any]]) -> TokenCount | None:
    """``messages`` as litellm counts them for ``model`` (each as sent, its role and framing
    included), and the whole request with ``tools``; None when :func:`local_encoding` has none."""
    encoding = local_encoding(model)
    if encoding is None:
        return None
    from litellm.litellm_core_utils.token_counter import openai_tokenizer_encoding

    litellm = load_litellm()
    given = {"type": "openai_tokenizer", "tokenizer": openai_tokenizer_encoding(model)}  # litellm picks none

    def count(sent: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
        return litellm.token_counter(model=model, messages=sent, tools=tools, custom_tokenizer=given,
                                     count_response_tokens=tools is None)

    sent = to_openai_messages(messages)
    sizes = []
    for message in sent:
        key = (model, json.dumps(message, sort_keys=True))
        size = _counted.get(key)
        if size is None:
            if len(_counted) >= _KEPT_COUNTS:
                _counted.clear()
            size = _counted[key] = count([message])
        sizes.append(size)
    # What the request adds to its messages (the tool schemas, the reply's primer) depends only on
    # the tools and on whether a system message is there: measured on one message.
    sample = next(([m] for m in sent if m["role"] == "system"), sent[:1])
    extra = count(sample, list(tools)) - (count(sample) if sample else 0)
    return TokenCount(model=model, tokenizer=encoding, messages=sizes, total=sum(sizes) + extra)
