"""LiteLLMProvider against a hostile OpenAI-compatible server on loopback: replies that are HTTP 200
but hold no answer, a reply that trickles forever, error texts in other shapes than OpenAI's, usage
counts that would lower the run's totals, and an error text that quotes the key right where it is cut.

Each case once read as an empty answer, a hang, a bare "Error code: 404", a negative total or a
piece of the key on screen."""

from __future__ import annotations

import asyncio

import pytest

from loopback_openai import LoopbackOpenAI, chunk, events, http_error, raw, reply, trickle
from flowtui.runtime.errors import ProviderError
from flowtui.runtime.messages import ToolCall
from flowtui.runtime.providers.base import AttemptInfo, ChatRequest
from flowtui.runtime.providers.litellm import LiteLLMProvider, Retry
from test_litellm_provider import FAST, KEY, _fresh, request, server  # noqa: F401 (the module's server, fixtures)

pytestmark = [pytest.mark.filterwarnings("ignore:.*`ReadOnly` qualifier:UserWarning"),
              pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")]

TWO = Retry(attempts=2, base_delay_s=0.001, max_delay_s=0.01)
HANG = 20  # seconds: far beyond any answer here; only a hang reaches it


def provider(server: LoopbackOpenAI, **kw) -> LiteLLMProvider:
    kw.setdefault("retry", FAST)
    kw.setdefault("api_key", KEY)
    return LiteLLMProvider("openai/gpt-test", api_base=server.base_url, **kw)


async def complete(p: LiteLLMProvider, req: ChatRequest):
    return await asyncio.wait_for(p.complete(req), HANG)


def completion(**choice_fields) -> dict:
    """A chat.completion body whose one choice is ``choice_fields``."""
    return {"id": "chatcmpl-x", "object": "chat.completion", "created": 1, "model": "gpt-test",
            "choices": [dict(index=0, **choice_fields)]}


# --------------------------------------------------------------------------- 200s with no answer


@pytest.mark.asyncio
async def test_a_reply_with_no_choices_is_a_provider_error_retried_like_other_malformed_replies(server):
    # {"choices": []} was an empty answer: the run "finished" with empty output and no warning
    no_choices = {"id": "chatcmpl-x", "object": "chat.completion", "created": 1, "model": "gpt-test",
                  "choices": []}
    server.script(raw(no_choices), reply("fine"))
    attempts: list[AttemptInfo] = []
    out = await complete(provider(server), request(on_attempt=attempts.append))
    assert out.content == "fine" and out.attempts == 2
    assert attempts[0].error == "the server's reply held no choices" and attempts[0].status is None

    server.script(raw(no_choices), raw(no_choices), raw(no_choices))
    with pytest.raises(ProviderError) as caught:
        await complete(provider(server), request())
    text = str(caught.value)
    assert "the server's reply held no usable answer after 3 attempts" in text
    assert text.endswith("Provider said: the server's reply held no choices")
    assert caught.value.attempts == 3 and caught.value.status is None  # the server said 200, no 500


STREAM_WITHOUT_AN_ANSWER = {
    "plain JSON": raw(completion(message={"role": "assistant", "content": "hi"}, finish_reason="stop")),
    "plain JSON, no choices": raw({"id": "x", "object": "chat.completion", "model": "m", "choices": []}),
    "plain JSON, a choice with nothing": raw({"choices": [{"index": 0}]}),
    "not JSON at all": raw("<html>busy</html>", content_type="text/html"),
    "chunks with no message": events({"choices": [{"index": 0}]}, chunk(finish_reason="stop")),
}


@pytest.mark.asyncio
@pytest.mark.parametrize("case", list(STREAM_WITHOUT_AN_ANSWER))
async def test_a_streaming_request_answered_without_a_stream_of_an_answer_is_a_provider_error(server, case):
    server.script(STREAM_WITHOUT_AN_ANSWER[case], reply("streamed answer"))
    attempts: list[AttemptInfo] = []
    out = await complete(provider(server, stream=True), request(on_attempt=attempts.append))
    assert out.content == "streamed answer" and out.attempts == 2  # retried, then answered
    assert "held no message" in attempts[0].error

    server.script(STREAM_WITHOUT_AN_ANSWER[case])
    with pytest.raises(ProviderError) as caught:
        await complete(provider(server, stream=True, retry=False), request())
    text = str(caught.value)
    assert "the server's reply held no usable answer" in text
    assert "Provider said: the server's reply to a streaming request held no message" in text
    assert caught.value.status is None


BAD_CHUNKS = {
    "choices not a list": {"id": "x", "object": "chat.completion.chunk", "model": "gpt-test", "choices": "notalist"},
    "a choice that is null": {"id": "x", "object": "chat.completion.chunk", "model": "gpt-test", "choices": [None]},
    "a delta that is text": {"id": "x", "object": "chat.completion.chunk", "model": "gpt-test",
                             "choices": [{"index": 0, "delta": "oops"}]},
}


@pytest.mark.asyncio
@pytest.mark.parametrize("case", list(BAD_CHUNKS))
async def test_a_stream_chunk_that_is_no_chunk_is_no_usable_answer_not_a_server_error(server, case):
    """It was said as "HTTP 500: 'str' object has no attribute 'delta'": no server sent a 500."""
    server.script(events(chunk({"role": "assistant", "content": "hi"}), BAD_CHUNKS[case], chunk(finish_reason="stop")))
    with pytest.raises(ProviderError) as caught:
        await complete(provider(server, stream=True, retry=False), request())
    text = str(caught.value)
    assert "the server's reply held no usable answer" in text and "HTTP 500" not in text, text
    assert "a stream chunk is not a chat completion chunk" in text, text
    assert caught.value.status is None


@pytest.mark.asyncio
async def test_a_non_streamed_choice_without_a_message_says_so_without_a_traceback(server):
    server.script(raw(completion()), reply("fine"))
    out = await complete(provider(server), request())
    assert out.content == "fine" and out.attempts == 2
    server.script(raw(completion()))
    with pytest.raises(ProviderError) as caught:
        await complete(provider(server, retry=False), request())
    text = str(caught.value)
    assert "the server's reply is not a valid chat completion" in text
    assert "Traceback" not in text and "HTTP 500" not in text and caught.value.status is None


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_a_tool_call_with_an_empty_id_gets_an_id_as_one_sent_without_any(server, stream):
    # streamed, the call was dropped by the stream rebuild though finish_reason was tool_calls
    server.script(reply(None, tool_calls=[{"name": "search", "args": {"q": "x"}, "id": ""}]),
                  reply(None, tool_calls=[{"name": "search", "args": {"q": "x"}, "id": None}]))
    p = provider(server, stream=stream)
    empty = await complete(p, request(tools=True, turn=3))
    assert empty.tool_calls == [ToolCall(name="search", args={"q": "x"}, id="call_3_0")]
    assert empty.tool_call_source == "native" and empty.finish_reason == "tool_calls"
    missing = await complete(p, request(tools=True, turn=3))
    assert [(c.name, c.args) for c in missing.tool_calls] == [("search", {"q": "x"})]
    assert missing.tool_calls[0].id  # litellm names a whole reply's call itself (a uuid)
    if stream:
        assert missing.tool_calls == empty.tool_calls


@pytest.mark.asyncio
async def test_a_streamed_call_with_no_id_keeps_the_others_in_order(server):
    server.script(reply(None, tool_calls=[{"name": "search", "args": {"q": "a"}, "id": "c1"},
                                          {"name": "search", "args": {"q": "b"}, "id": ""}]))
    out = await complete(provider(server, stream=True), request(tools=True, turn=2))
    assert out.tool_calls == [ToolCall(name="search", args={"q": "a"}, id="c1"),
                              ToolCall(name="search", args={"q": "b"}, id="call_2_1")]


@pytest.mark.asyncio
async def test_streamed_calls_numbered_alike_by_the_server_stay_two_calls(server):
    """Some compatible servers send every call under index 0: litellm joined them into one call with the
    second's name and both arguments ({"q": "a"}{}), and the first call was gone."""
    def call(call_id=None, name=None, args=""):
        fn = {"arguments": args} if name is None else {"name": name, "arguments": args}
        return {"index": 0, **({"id": call_id, "type": "function"} if call_id else {}), "function": fn}

    server.script(events(chunk({"role": "assistant", "content": None}),
                         chunk({"tool_calls": [call("c1", "search")]}),
                         chunk({"tool_calls": [call(args='{"q": "a"}')]}),
                         chunk({"tool_calls": [call("c2", "nothing")]}),
                         chunk({"tool_calls": [call(args="{}")]}),
                         chunk(finish_reason="tool_calls")))
    out = await complete(provider(server, stream=True), request(tools=True, turn=2))
    assert out.tool_calls == [ToolCall(name="search", args={"q": "a"}, id="c1"),
                              ToolCall(name="nothing", args={}, id="c2")]


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_a_tool_call_with_an_empty_name_is_a_provider_error(server, stream):
    # streamed, it was lost in silence: an empty answer with finish_reason tool_calls
    nameless = reply(None, tool_calls=[{"name": "", "args": {"q": "x"}}])
    server.script(nameless, reply(None, tool_calls=[{"name": "search", "args": {"q": "x"}}]))
    attempts: list[AttemptInfo] = []
    out = await complete(provider(server, stream=stream), request(tools=True, on_attempt=attempts.append))
    assert [c.name for c in out.tool_calls] == ["search"] and out.attempts == 2
    assert "tool call with no name" in attempts[0].error

    server.script(nameless)
    with pytest.raises(ProviderError) as caught:
        await complete(provider(server, stream=stream, retry=False), request(tools=True))
    assert "the server's reply held no usable answer" in str(caught.value)
    assert "tool call with no name" in str(caught.value)


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_finish_reason_is_kept_and_length_is_an_answer_all_the_same(server, stream):
    server.script(reply("cut short because", finish_reason="length"), reply("whole answer"),
                  reply(None, tool_calls=[{"name": "search", "args": {"q": "x"}}]))
    p = provider(server, stream=stream)
    cut = await complete(p, request())
    assert cut.content == "cut short because" and cut.finish_reason == "length" and cut.attempts == 1
    assert (await complete(p, request())).finish_reason == "stop"
    assert (await complete(p, request(tools=True))).finish_reason == "tool_calls"


# --------------------------------------------------------------------------- timeout


@pytest.mark.asyncio
@pytest.mark.parametrize("piece", [": keepalive\n", " \n"], ids=["keep-alive comments", "whitespace"])
async def test_timeout_bounds_a_whole_reply_that_trickles_bytes_forever(server, piece):
    # a 200 sending a keep-alive line (or whitespace) every 0.1 s, as OpenRouter does while the model
    # works, never let the client's read timeout fire: the call hung forever
    server.script(trickle(60, piece), trickle(60, piece))
    attempts: list[AttemptInfo] = []
    with pytest.raises(ProviderError) as caught:
        await complete(provider(server, timeout=0.5, retry=TWO), request(on_attempt=attempts.append))
    text = str(caught.value)
    assert "the model did not answer within timeout=0.5s after 2 attempts" in text
    assert caught.value.status is None and len(attempts) == 2 and attempts[0].retry_in_s is not None


@pytest.mark.asyncio
async def test_timeout_still_lets_a_long_stream_of_pieces_finish(server):
    # for a stream, timeout bounds each piece: a reply longer than timeout, arriving steadily, is fine
    server.script(reply("a long answer " * 20, chunks=20))
    out = await complete(provider(server, stream=True, timeout=5), request())
    assert out.content == "a long answer " * 20


# --------------------------------------------------------------------------- the server's error text

OTHER_ERROR_SHAPES = {
    "Ollama-style {'error': text}": (404, {"error": "model 'llama9' not found, try pulling it first"},
                                     "model 'llama9' not found, try pulling it first"),
    "FastAPI-style {'detail': text}": (400, {"detail": "prompt too long for this deployment"},
                                       "prompt too long for this deployment"),
    "plain text": (400, "upstream proxy refused the request", "upstream proxy refused the request"),
}


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("shape", list(OTHER_ERROR_SHAPES))
async def test_the_servers_own_error_text_is_shown_whatever_its_shape(server, shape, stream):
    # the user saw only "Provider said: Error code: 404"
    status, body, said = OTHER_ERROR_SHAPES[shape]
    server.script(raw(body, status=status,
                      content_type="text/plain" if isinstance(body, str) else "application/json"))
    attempts: list[AttemptInfo] = []
    with pytest.raises(ProviderError) as caught:
        await complete(provider(server, stream=stream), request(on_attempt=attempts.append))
    assert caught.value.status == status and caught.value.attempts == 1
    assert str(caught.value).endswith(f"Provider said: Error code: {status} - {said}")
    assert said in attempts[0].error


@pytest.mark.asyncio
async def test_the_servers_own_error_text_is_redacted_and_cut(server):
    server.script(raw({"error": f"key {KEY} is not allowed here; " + "details " * 200}, status=404))
    with pytest.raises(ProviderError) as caught:
        await complete(provider(server), request())
    said = str(caught.value).split("Provider said: ", 1)[1]
    assert said.startswith("Error code: 404 - key [redacted] is not allowed here")
    assert "SECRET123" not in str(caught.value)
    assert len(said) == 300 and said.endswith("…")


# --------------------------------------------------------------------------- usage


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_negative_usage_counts_count_zero_and_never_lower_the_cost(server, stream):
    # completion_tokens: -1000000 made the run's totals negative: a way around a max_tokens budget
    server.script(reply("x", usage=(12, -1_000_000)), reply("y", usage=(-5, 7)), reply("z", usage=(12.0, 0)))
    p = LiteLLMProvider("openai/gpt-4o-mini", api_base=server.base_url, api_key=KEY, retry=FAST, stream=stream)
    first = await complete(p, request())
    assert (first.usage.prompt_tokens, first.usage.completion_tokens) == (12, 0)
    assert first.cost_usd > 0  # what 12 prompt tokens cost: litellm priced -1,000,000 at a negative sum
    second = await complete(p, request())
    assert (second.usage.prompt_tokens, second.usage.completion_tokens) == (0, 7)
    assert second.cost_usd > 0
    third = await complete(p, request())
    assert (third.usage.prompt_tokens, third.usage.completion_tokens) == (12, 0)
    assert third.cost_usd == pytest.approx(first.cost_usd)


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_usage_with_no_count_to_take_is_estimated_as_no_usage_is(server, stream):
    """Both counts below 0 counted 0 and 0, the cost 0: a token or cost budget never tripped."""
    server.script(reply("an answer of some length", usage=(-5000, -3)))
    p = LiteLLMProvider("openai/gpt-4o-mini", api_base=server.base_url, api_key=KEY, retry=FAST, stream=stream)
    out = await complete(p, request())
    assert out.usage_estimated and out.usage.prompt_tokens > 0 and out.usage.completion_tokens > 0
    assert out.cost_usd > 0


@pytest.mark.asyncio
async def test_negative_usage_never_lowers_a_cost_per_1k(server):
    server.script(reply("x", usage=(1000, -1_000_000)))
    out = await complete(provider(server, cost_per_1k={"prompt": 0.5, "completion": 2.0}), request())
    assert out.usage.completion_tokens == 0 and out.cost_usd == pytest.approx(0.5)


@pytest.mark.asyncio
async def test_a_fractional_usage_count_is_a_malformed_reply_never_a_count(server):
    # litellm refuses such a reply before flowtui sees it: said as what it is, and retried
    server.script(reply("x", usage=(5, 2.5)), reply("fine", usage=(5, 2)))
    out = await complete(provider(server), request())
    assert out.content == "fine" and out.attempts == 2
    assert (out.usage.prompt_tokens, out.usage.completion_tokens) == (5, 2)


# --------------------------------------------------------------------------- a key where the text is cut

# Not shaped like any known key: only its value (given as api_key) tells it is one.
LONG_KEY = "lbkQ7zT9wX2mN4pR8sV1yB6cD3fG5hJ0"


@pytest.mark.asyncio
@pytest.mark.parametrize("pad", [276, 283, 288, 290, 294])
async def test_an_error_text_is_cut_after_redaction_so_no_piece_of_a_key_shows(server, pad):
    # cut at 300 characters before redaction, the key's first 11 characters were shown
    # ("Provider said: xxx… key=lbkQ7zT9wX2…"): a piece under 19 characters is not found
    server.script(http_error(400, "x" * pad + " key={authorization} was refused"))
    attempts: list[AttemptInfo] = []
    with pytest.raises(ProviderError) as caught:
        await complete(provider(server, api_key=LONG_KEY), request(on_attempt=attempts.append))
    shown = [str(caught.value), attempts[0].error, repr(caught.value.__dict__)]
    for text in shown:
        assert LONG_KEY[:4] not in text, text[-80:]
    said = str(caught.value).split("Provider said: ", 1)[1]
    assert said == attempts[0].error
    # redacted, then cut: the mark whole, or the cut before it, never a piece of either
    redacted = "x" * pad + " key=[redacted] was refused"
    fits = pad + len(" key=[redacted]") <= 299
    assert said == (redacted[:299] if fits else "x" * pad + " key=") + "…"


UNREADABLE_200 = {
    "an HTML page": (raw("<html>502 Bad Gateway</html>", content_type="text/html"), False,
                     "the server's reply is not a valid chat completion (it began: '<html>502 Bad Gateway</html>')"),
    "events to a plain request": (events(chunk({"role": "assistant", "content": "hi"}), chunk(finish_reason="stop")),
                                  False, "the server's reply is not a valid chat completion (it began: 'data: "),
    "one piece over and over": (events(*[chunk({"content": "AAAA"})] * 200, chunk(finish_reason="stop")), True,
                                "the server's stream repeated one piece over and over"),
}


@pytest.mark.asyncio
@pytest.mark.parametrize("case", list(UNREADABLE_200))
async def test_a_200_litellm_cannot_read_is_no_http_500(server, case):
    """litellm calls these a 500 of its own: the error said 'the call failed (HTTP 500)' of a server
    that answered 200."""
    action, stream, said = UNREADABLE_200[case]
    server.script(action)
    with pytest.raises(ProviderError) as caught:
        await complete(provider(server, stream=stream, retry=False), request())
    text = str(caught.value)
    assert "HTTP 500" not in text and caught.value.status is None
    assert f"the server's reply held no usable answer. Provider said: {said}" in text


@pytest.mark.asyncio
@pytest.mark.parametrize("base, why, tries", [
    ("http://127.0.0.1:1/v1", "nothing listens at that host and port (connection refused); check api_base", 3),
])
async def test_an_api_base_that_cannot_be_reached_is_named_with_why(base, why, tries):
    """A mistyped api_base said only "could not be reached, or it dropped the connection ... Connection error",
    and a scheme no attempt can reach was tried three times (now refused at load: see test_litellm_provider)."""
    p = LiteLLMProvider("openai/gpt-test", api_base=base, api_key=KEY, retry=FAST)
    with pytest.raises(ProviderError) as caught:
        await complete(p, request())
    assert f"the model's server could not be reached at {base}: {why}" in str(caught.value), str(caught.value)
    assert caught.value.attempts == tries


@pytest.mark.asyncio
@pytest.mark.parametrize("names", [["sea", "rch"], ["s", "sea", "search"], ["search", "search"]],
                         ids=["in pieces", "growing", "said again"])
async def test_a_streamed_tool_name_sent_in_pieces_is_joined(server, names):
    """A server that streams a call's name in pieces ("sea", "rch"), as its arguments: litellm kept the last
    piece, and the model was told there is no tool "rch"."""

    def piece(name=None, arguments="", **head):
        function = {"arguments": arguments, **({"name": name} if name is not None else {})}
        return chunk({"tool_calls": [{"index": 0, "function": function, **head}]})

    server.script(events(chunk({"role": "assistant", "content": ""}),
                         piece(names[0], id="call_a", type="function"), *(piece(n) for n in names[1:]),
                         piece(arguments='{"q": "tide pools"}'), chunk({}, finish_reason="tool_calls")))
    out = await complete(provider(server, stream=True), request(tools=True))
    assert [(c.name, c.args) for c in out.tool_calls] == [("search", {"q": "tide pools"})]
