"""LiteLLMProvider against a real OpenAI-compatible HTTP server on loopback.

litellm talks to ``tests/loopback_openai.py`` over real HTTP via ``api_base``;
the server is scripted per request with replies and faults. Nothing here
touches the internet. Retry waits are tiny (or recorded without waiting).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loopback_openai import (
    LoopbackOpenAI,
    chunk,
    events,
    drop_mid_stream,
    http_error,
    keep_alive,
    malformed_json,
    rate_limited,
    reply,
    server_error,
    slow,
    stall,
    unauthorized,
)
from flowtui.runtime.errors import ConfigError, ProviderError
from flowtui.runtime.messages import Message, ToolCall
from flowtui.runtime.providers import _litellm
from flowtui.runtime.providers.base import AttemptInfo, ChatRequest
from flowtui.runtime.providers.failures import retry_after_s as _retry_after_s
from flowtui.runtime.providers.litellm import LiteLLMProvider, Retry
from flowtui.runtime.providers.scripted import ScriptedProvider

# pytest resets warning filters per test, undoing the ones load_litellm installs
# (the subprocess test below checks those); keep this file's report clean.
pytestmark = pytest.mark.filterwarnings("ignore:.*`ReadOnly` qualifier:UserWarning")

ROOT = Path(__file__).resolve().parents[1]
KEY = "sk-test-SECRET123"
FAST = Retry(attempts=3, base_delay_s=0.001, max_delay_s=0.01)
TOOLS = [{"type": "function", "function": {
    "name": "search", "description": "Search the web",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}},
                   "required": ["q"]}}}]


@pytest.fixture(scope="module")
def server():
    with LoopbackOpenAI() as s:
        yield s


@pytest.fixture(autouse=True)
def _fresh(server):
    server.reset()
    yield


def provider(server: LoopbackOpenAI, **kw) -> LiteLLMProvider:
    kw.setdefault("retry", FAST)
    return LiteLLMProvider("openai/gpt-test", api_base=server.base_url, api_key=KEY, **kw)


def request(*, tools: bool = False, **kw) -> ChatRequest:
    base = dict(agent="Revisor", turn=1,
                messages=[Message(role="system", content="You review."),
                          Message(role="user", content="Check this.")])
    if tools:
        base.update(tools=TOOLS, tool_names=frozenset({"search"}))
    base.update(kw)
    return ChatRequest(**base)


# --------------------------------------------------------------------------- happy path


@pytest.mark.asyncio
async def test_plain_reply_usage_and_request_shape(server):
    server.script(reply("All good.", usage=(12, 5)))
    out = await provider(server).complete(request())
    assert out.content == "All good."
    assert out.tool_calls == [] and out.tool_call_source is None
    assert (out.usage.prompt_tokens, out.usage.completion_tokens) == (12, 5)
    assert out.attempts == 1
    body = server.requests[0].body
    assert body["model"] == "gpt-test"
    assert body["messages"] == [{"role": "system", "content": "You review."},
                                {"role": "user", "content": "Check this."}]
    # Nothing the user did not set is sent.
    for key in ("temperature", "top_p", "seed", "max_tokens", "stop", "tools", "stream"):
        assert key not in body, key
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"


@pytest.mark.asyncio
async def test_sampling_provider_then_agent_key_by_key(server):
    server.script(reply("ok"))
    p = provider(server, sampling={"temperature": 0.2, "top_p": 0.9}, seed=7)
    req = request(sampling={"temperature": 0.0, "top_p": None, "stop": ["END"]})
    await p.complete(req)
    body = server.requests[0].body
    assert body["temperature"] == 0.0  # agent wins
    assert "top_p" not in body  # agent unset it
    assert body["seed"] == 7 and body["stop"] == ["END"]
    assert "max_tokens" not in body


@pytest.mark.asyncio
async def test_subclass_configuration_and_override_model(server):
    class Reviewer(LiteLLMProvider):
        model = "openai/gpt-test"
        sampling = {"max_tokens": 50}
        retry = FAST

    p = Reviewer(api_base=server.base_url, api_key=KEY)
    other = p.override_model("openai/gpt-other")
    assert p.model == "openai/gpt-test" and other.model == "openai/gpt-other"
    server.script(reply("a"), reply("b"))
    await p.complete(request())
    await other.complete(request())
    assert [r.body["model"] for r in server.requests] == ["gpt-test", "gpt-other"]
    assert server.requests[1].body["max_tokens"] == 50


@pytest.mark.asyncio
async def test_native_tool_calls(server):
    server.script(reply(None, tool_calls=[{"name": "search", "args": {"q": "litellm"}, "id": "c9"}]))
    out = await provider(server).complete(request(tools=True))
    assert out.tool_calls == [ToolCall(name="search", args={"q": "litellm"}, id="c9")]
    assert out.tool_call_source == "native"
    assert server.requests[0].body["tools"] == TOOLS


@pytest.mark.asyncio
async def test_tool_history_is_sent_paired(server):
    server.script(reply("done"))
    msgs = [Message(role="user", content="find it"),
            Message(role="assistant", tool_calls=(ToolCall(name="search", args={"q": "x"}),)),
            Message(role="tool", content="found", tool_name="search")]
    await provider(server).complete(request(messages=msgs, tools=True))
    sent = server.requests[0].body["messages"]
    call_id = sent[1]["tool_calls"][0]["id"]
    assert json.loads(sent[1]["tool_calls"][0]["function"]["arguments"]) == {"q": "x"}
    assert sent[2] == {"role": "tool", "tool_call_id": call_id, "content": "found"}


@pytest.mark.asyncio
async def test_text_tool_call_is_rescued_and_think_stripped(server):
    text = ('<think>I should search.</think>Let me look.\n'
            '<tool_call>{"name": "search", "arguments": {"q": "flowtui"}}</tool_call>')
    server.script(reply(text), reply(text))
    out = await provider(server).complete(request(tools=True))
    assert out.tool_calls[0].name == "search" and out.tool_calls[0].args == {"q": "flowtui"}
    assert out.tool_call_source == "rescued"
    assert out.content == "Let me look."
    assert out.reasoning == "I should search."
    off = await provider(server, rescue_tool_calls=False).complete(request(tools=True))
    assert off.tool_calls == [] and "<tool_call>" in off.content


@pytest.mark.asyncio
async def test_cost_from_cost_per_1k_and_from_price_table(server):
    server.script(reply("x", usage=(1000, 500)), reply("y", usage=(1000, 500)))
    out = await provider(server, cost_per_1k={"prompt": 0.5, "completion": 2.0}).complete(request())
    assert out.cost_usd == pytest.approx(0.5 + 1.0)
    # A model in litellm's (local) price table gets a cost without configuration.
    priced = LiteLLMProvider("openai/gpt-4o-mini", api_base=server.base_url, api_key=KEY, retry=FAST)
    out = await priced.complete(request())
    assert out.cost_usd > 0
    # Unknown model, no table entry: cost 0, no error.
    server.script(reply("z"))
    assert (await provider(server).complete(request())).cost_usd == 0.0


# --------------------------------------------------------------------------- streaming


@pytest.mark.asyncio
async def test_stream_deltas_and_tool_calls_assembled(server):
    server.script(reply("Searching now, hold on.", chunks=4,
                        tool_calls=[{"name": "search", "args": {"q": "a b c"}}], usage=(20, 9)))
    deltas: list[str] = []
    out = await provider(server, stream=True).complete(request(tools=True, on_delta=deltas.append))
    assert len(deltas) >= 4 and "".join(deltas) == "Searching now, hold on."
    assert out.content == "Searching now, hold on."
    assert out.tool_calls == [ToolCall(name="search", args={"q": "a b c"}, id="call_0")]
    assert out.tool_call_source == "native"
    assert (out.usage.prompt_tokens, out.usage.completion_tokens) == (20, 9)
    assert server.requests[0].body["stream"] is True


@pytest.mark.asyncio
async def test_a_streamed_reply_with_no_usage_is_estimated_tools_included_as_a_whole_one_is(server):
    """litellm makes a stream's usage up when the server sends none, counting the messages alone: it was
    taken as the server's own count (not said estimated), the tool schemas left out, a token or cost
    budget undercounted by half for an agent with tools."""
    bare = (chunk({"role": "assistant", "content": ""}), chunk({"content": "hello there"}),
            chunk({}, finish_reason="stop"))
    server.script(events(*bare), events(*bare))
    with_tools = await provider(server, stream=True).complete(request(tools=True))
    without = await provider(server, stream=True).complete(request())
    assert with_tools.usage_estimated and without.usage_estimated
    assert with_tools.usage.prompt_tokens > without.usage.prompt_tokens  # the tool schemas are counted
    assert with_tools.usage.completion_tokens > 0
    server.script(events(*bare[:2], chunk({}, finish_reason="stop", usage={
        "prompt_tokens": 50, "completion_tokens": 3, "total_tokens": 53})))
    said = await provider(server, stream=True).complete(request(tools=True))  # said: taken as it is
    assert not said.usage_estimated and (said.usage.prompt_tokens, said.usage.completion_tokens) == (50, 3)


@pytest.mark.asyncio
async def test_a_request_with_no_message_is_not_sent_and_says_why(server):
    """An agent with an empty prompt and a run with no input: the request went out with no message, and the
    API's 400 ("messages must be a non-empty array") failed the run three times over."""
    server.script(reply("never sent"))
    with pytest.raises(ProviderError, match=r"^agent 'Revisor': the model call was not sent: it holds no message "
                                            r"\(the agent's prompt is empty"):
        await provider(server).complete(request(messages=[]))
    assert server.requests == []


@pytest.mark.asyncio
async def test_an_api_base_with_a_password_and_an_api_key_is_said_so_and_not_retried(server):
    """The HTTP client refuses two Authorizations before sending: litellm called it an HTTP 500 of the
    server's, retried three times, and the words said nothing of the api_base."""
    base = server.base_url.replace("http://", "http://admin:hunter2pw@")
    p = LiteLLMProvider("openai/gpt-test", api_base=base, api_key=KEY, retry=FAST)
    with pytest.raises(ProviderError) as info:
        await p.complete(request())
    said = str(info.value)
    assert "the api_base holds a user and password (user:password@host) and an API key is given too" in said
    assert info.value.status is None and info.value.attempts == 1 and "HTTP 500" not in said
    assert server.requests == [] and "hunter2pw" not in said


@pytest.mark.asyncio
async def test_stream_dropped_mid_way_is_retried(server):
    server.script(drop_mid_stream("never finished"), reply("complete answer"))
    deltas: list[str] = []
    attempts: list[AttemptInfo] = []
    out = await provider(server, stream=True).complete(
        request(on_delta=deltas.append, on_attempt=attempts.append))
    assert out.content == "complete answer" and out.attempts == 2
    assert len(attempts) == 1 and attempts[0].retry_in_s is not None
    # The engine gets the partial text, then on_attempt, then the retry's text.
    assert "".join(deltas).startswith("never finished") and "".join(deltas).endswith("complete answer")


@pytest.mark.asyncio
async def test_a_failing_on_delta_is_not_blamed_on_the_model(server):
    server.script(reply("some text"), reply("unused"))

    def broken(_text: str) -> None:
        raise KeyError("engine bug")

    with pytest.raises(KeyError, match="engine bug"):
        await provider(server, stream=True).complete(request(on_delta=broken))
    assert len(server.requests) == 1


# --------------------------------------------------------------------------- retries and faults


@pytest.mark.asyncio
async def test_429_retry_after_wins_over_backoff(server):
    server.script(rate_limited(retry_after_s=0.05), reply("ok"))
    waits: list[float] = []
    attempts: list[AttemptInfo] = []
    p = provider(server, retry=Retry(attempts=3, base_delay_s=10, max_delay_s=10))

    async def record(s: float) -> None:
        waits.append(s)

    p.sleep = record
    out = await p.complete(request(on_attempt=attempts.append))
    assert out.attempts == 2 and waits == [0.05]
    assert attempts == [AttemptInfo(attempt=1, error=attempts[0].error, status=429, retry_in_s=0.05)]
    assert "Rate limit" in attempts[0].error


@pytest.mark.asyncio
@pytest.mark.parametrize("asked", [3600, "inf"])
async def test_a_retry_after_beyond_max_retry_after_s_fails_at_once_saying_so(server, asked):
    # Retry-After: 3600 held the run an hour; "inf" forever, journaled as a final attempt
    server.script(http_error(429, "Rate limit reached (scripted)", headers={"Retry-After": str(asked)}), reply("ok"))
    waits: list[float] = []
    attempts: list[AttemptInfo] = []
    p = provider(server, retry=Retry(attempts=3, max_retry_after_s=60))

    async def record(s: float) -> None:
        waits.append(s)

    p.sleep = record
    with pytest.raises(ProviderError) as caught:
        await p.complete(request(on_attempt=attempts.append))
    assert waits == [] and len(server.requests) == 1
    shown = "3,600" if asked == 3600 else "inf"
    said = f"(the server asked to wait {shown} s before a retry, more than Retry(max_retry_after_s=60) allows)"
    assert said in str(caught.value) and said in attempts[0].error
    assert attempts[0].retry_in_s is None  # no retry follows: it is the last attempt


@pytest.mark.asyncio
async def test_5xx_backoff_full_jitter_within_caps(server):
    server.script(server_error(500), server_error(503), reply("ok"))
    waits: list[float] = []

    async def record(s: float) -> None:
        waits.append(s)

    p = provider(server, retry=Retry(attempts=3, base_delay_s=1.0, max_delay_s=1.5))
    p.sleep = record
    out = await p.complete(request())
    assert out.attempts == 3 and len(server.requests) == 3
    assert 0 <= waits[0] <= 1.0 and 0 <= waits[1] <= 1.5


@pytest.mark.parametrize("status", [408, 425, 429, 500, 502, 503, 504])
@pytest.mark.asyncio
async def test_retryable_statuses(server, status):
    server.script(http_error(status), reply("ok"))
    out = await provider(server).complete(request())
    assert out.attempts == 2 and out.content == "ok"


@pytest.mark.asyncio
async def test_gives_up_after_attempts_with_clear_error(server):
    server.script(server_error(500), server_error(502), server_error(503))
    attempts: list[AttemptInfo] = []
    with pytest.raises(ProviderError) as info:
        await provider(server).complete(request(turn=4, on_attempt=attempts.append))
    err = info.value
    assert err.agent == "Revisor" and err.attempts == 3 and err.status == 503
    assert "'Revisor'" in str(err) and "turn 4" in str(err) and "3 attempts" in str(err)
    assert [a.attempt for a in attempts] == [1, 2, 3]
    assert attempts[-1].retry_in_s is None  # the last failure is reported too, with no retry


@pytest.mark.parametrize("made,words", [
    (dict(request=dict(sampling={"stop": {"FIM"}})), "sampling['stop'] is a set; fix the agent's or the provider's"),
    (dict(provider=dict(temperature=float("nan"))), "sampling['temperature'] is nan, a number JSON cannot hold"),
    (dict(request=dict(schemas=[{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"default": object()}}}}}])),
     "tools[0]['function']['parameters']['properties']['a']['default'] is an object; fix that tool's schema"),
])
@pytest.mark.asyncio
async def test_a_request_with_no_json_form_fails_at_once_saying_where(server, made, words):
    # a middleware's set in the sampling, a NaN given as a keyword: the JSON encoder raised before anything was
    # sent, which litellm calls a 500 of its own (it was retried three times as a server's failure)
    server.script(reply("unused"))
    attempts: list[AttemptInfo] = []
    fields = dict(made.get("request", {}))
    if "schemas" in fields:
        fields.update(tools=fields.pop("schemas"), tool_names=frozenset({"f"}))
    with pytest.raises(ProviderError) as info:
        await provider(server, **made.get("provider", {})).complete(ChatRequest(**{
            **request(on_attempt=attempts.append).__dict__, **fields}))
    said = str(info.value)
    assert "the request could not be written as JSON, so nothing was sent: " + words in said
    assert "(not retried)" in said and "HTTP" not in said
    assert info.value.attempts == 1 and info.value.status is None and attempts[0].status is None
    assert server.requests == []


@pytest.mark.asyncio
async def test_retry_false_makes_one_attempt(server):
    server.script(server_error(500), reply("unused"))
    with pytest.raises(ProviderError) as info:
        await provider(server, retry=False).complete(request())
    assert info.value.attempts == 1 and len(server.requests) == 1


@pytest.mark.parametrize("status,words", [(400, "refused"), (403, "no access"),
                                          (404, "not found"), (422, "refused")])
@pytest.mark.asyncio
async def test_other_4xx_fail_at_once(server, status, words):
    server.script(http_error(status, "nope"), reply("unused"))
    attempts: list[AttemptInfo] = []
    with pytest.raises(ProviderError) as info:
        await provider(server).complete(request(on_attempt=attempts.append))
    assert info.value.status == status and info.value.attempts == 1
    assert words in str(info.value) and "not retried" in str(info.value)
    assert len(server.requests) == 1 and len(attempts) == 1


@pytest.mark.asyncio
async def test_401_names_the_problem_and_never_the_key(server, capfd):
    server.script(unauthorized(echo_key=True))
    attempts: list[AttemptInfo] = []
    with pytest.raises(ProviderError) as info:
        await provider(server).complete(request(on_attempt=attempts.append))
    text = str(info.value)
    assert info.value.status == 401 and info.value.attempts == 1
    assert "API key was rejected" in text and "OPENAI_API_KEY" in text
    assert KEY not in text and "SECRET123" not in text
    assert all(KEY not in a.error and "SECRET123" not in a.error for a in attempts)
    assert KEY not in repr(info.value.__dict__)
    p = provider(server)
    assert KEY not in repr(p) and KEY not in p.describe()
    out, err = capfd.readouterr()
    assert out == "" and err == ""  # litellm's banners are silenced


@pytest.mark.asyncio
async def test_missing_key_fails_at_once(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    p = LiteLLMProvider("openai/gpt-test", api_base=server.base_url, retry=FAST)
    with pytest.raises(ProviderError) as info:
        await p.complete(request())
    assert "no API key" in str(info.value) and "OPENAI_API_KEY" in str(info.value)
    assert info.value.attempts == 1 and server.requests == []


@pytest.mark.asyncio
async def test_a_stream_of_keep_alives_alone_times_out(server):
    # a server (or proxy) that sends ': keepalive' and never a reply held a run with timeout=3 forever
    server.script(keep_alive(30))
    t0 = time.monotonic()
    with pytest.raises(ProviderError) as info:
        await provider(server, stream=True, timeout=0.5, retry=False).complete(request())
    assert "the model did not answer within timeout=0.5s" in str(info.value)
    assert time.monotonic() - t0 < 20  # well before the server would have stopped on its own


@pytest.mark.asyncio
async def test_a_dropped_connection_says_so_and_names_no_status_no_server_sent(server):
    # litellm calls a reset connection 'HTTP 500': a user went looking for a 500 that never was
    server.script(drop_mid_stream(chunks=1))
    with pytest.raises(ProviderError) as info:
        await provider(server, retry=False).complete(request())
    assert "the model's server could not be reached, or it dropped the connection" in str(info.value)
    assert "HTTP" not in str(info.value).split("Provider said:")[0] and info.value.status is None


@pytest.mark.asyncio
async def test_timeout_is_retried_then_fails_cleanly(server):
    # timeout bounds the whole reply, litellm's own work on it included: not too tight for a loaded machine
    server.script(slow(10.0), reply("in time"))
    t0 = time.monotonic()
    out = await provider(server, timeout=0.5).complete(request())
    assert out.content == "in time" and out.attempts == 2
    server.script(slow(10.0))
    with pytest.raises(ProviderError) as info:
        await provider(server, timeout=0.5, retry=False).complete(request())
    assert "timeout=0.5" in str(info.value)
    assert info.value.status is None  # no answer came: litellm's own 408 is no server's status
    assert time.monotonic() - t0 < 9  # before the slow server would have answered


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_an_attempt_that_timed_out_is_said_in_flowtuis_words_not_the_clients(server, stream):
    """A streamed call's attempt that timed out was said as litellm's "APITimeoutError - Request timed out.
    Error_str: Request timed out." (the client's read timeout, at the same bound, fired before flowtui's)."""
    server.script(stall(10.0) if stream else slow(10.0), reply("in time"))
    attempts: list = []
    out = await provider(server, timeout=0.5, stream=stream).complete(request(on_attempt=attempts.append))
    assert out.content == "in time"
    (failed,) = attempts
    assert failed.error == ("no piece of the streamed reply arrived within 0.5 s" if stream
                            else "no whole reply arrived within 0.5 s"), failed


@pytest.mark.asyncio
async def test_malformed_json_is_retried(server):
    server.script(malformed_json(), reply("fine"))
    out = await provider(server).complete(request())
    assert out.content == "fine" and out.attempts == 2
    server.script(malformed_json(), malformed_json(), malformed_json())
    with pytest.raises(ProviderError) as info:
        await provider(server).complete(request())
    assert info.value.attempts == 3


@pytest.mark.asyncio
async def test_malformed_stream_and_dropped_body_are_retried(server):
    server.script(malformed_json(), reply("streamed"))
    out = await provider(server, stream=True).complete(request())
    assert out.content == "streamed" and out.attempts == 2
    server.script(drop_mid_stream(), reply("whole"))
    out = await provider(server).complete(request())
    assert out.content == "whole" and out.attempts == 2


@pytest.mark.asyncio
async def test_connection_refused_is_retried_then_fails(server):
    with LoopbackOpenAI() as gone:
        dead_base = gone.base_url  # a port nobody listens on once it stops
    p = LiteLLMProvider("openai/gpt-test", api_base=dead_base, api_key=KEY, retry=FAST)
    attempts: list[AttemptInfo] = []
    with pytest.raises(ProviderError) as info:
        await p.complete(request(on_attempt=attempts.append))
    assert info.value.attempts == 3 and len(attempts) == 3
    assert KEY not in str(info.value)


# --------------------------------------------------------------------------- configuration


@pytest.mark.asyncio
async def test_no_model_is_a_clear_error():
    with pytest.raises(ProviderError, match="no model set"):
        await LiteLLMProvider().complete(request())


def test_config_errors():
    with pytest.raises(ConfigError):
        Retry(attempts=0)
    with pytest.raises(ConfigError, match="retry=Retry"):
        LiteLLMProvider("openai/x", num_retries=3)
    with pytest.raises(ConfigError, match="cost_per_1k"):
        LiteLLMProvider("openai/x", cost_per_1k={"input": 1.0})


@pytest.mark.parametrize("timeout", ["5", 0, -1, float("nan"), float("inf"), True])
def test_a_timeout_that_is_no_number_of_seconds_above_0_is_refused_at_load(timeout):
    """timeout="5" failed every call with "Unknown format code 'g' for object of type 'str'" and a
    RuntimeWarning on stderr; 0, -1 and NaN failed each attempt at once, retried."""
    with pytest.raises(ConfigError, match=r"LiteLLMProvider\(timeout=.*\): give the seconds a reply may take"):
        LiteLLMProvider("openai/x", timeout=timeout)

    class Configured(LiteLLMProvider):
        model = "openai/x"

    Configured.timeout = timeout  # a subclass's configuration too
    with pytest.raises(ConfigError, match=r"Configured\(timeout="):
        Configured()
    assert LiteLLMProvider("openai/x", timeout=2.5).timeout == 2.5
    assert LiteLLMProvider("openai/x", timeout=None).timeout is None


@pytest.mark.parametrize("api_base", ["127.0.0.1:8000/v1", "not a url", "htp://127.0.0.1:9/v1", "ftp://host/v1",
                                      "http://", 8000])
def test_an_api_base_that_is_no_http_url_is_refused_at_load(api_base):
    """127.0.0.1:8000/v1 failed every attempt as "HTTP 500: /127.0.0.1:8000/v1/chat/completions", retried,
    naming no api_base."""
    with pytest.raises(ConfigError, match=r"LiteLLMProvider\(api_base=.*\): give the server's URL with its scheme"):
        LiteLLMProvider("openai/x", api_base=api_base)
    assert LiteLLMProvider("openai/x", api_base="https://gw.example/v1").api_base == "https://gw.example/v1"


def test_an_api_base_refused_at_load_keeps_a_key_it_holds_out_of_the_message():
    key = "sk-" + "a1b2c3d4" * 4
    with pytest.raises(ConfigError) as info:
        LiteLLMProvider("openai/x", api_base=f"gw.example/v1?key={key}")
    assert key not in str(info.value) and "[redacted]" in str(info.value)


def test_retry_after_forms():
    class E(Exception):
        def __init__(self, headers):
            self.litellm_response_headers = headers

    assert _retry_after_s(E({"Retry-After": "2"})) == 2.0
    assert _retry_after_s(E({"retry-after-ms": "250"})) == 0.25
    date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    assert 25 <= _retry_after_s(E({"Retry-After": date})) <= 31
    assert _retry_after_s(E({"Retry-After": "soon"})) is None
    assert _retry_after_s(E({})) is None
    # no wait said (the backoff's then): they made an immediate retry ("retrying in 0.0 s")
    for nonsense in ("nan", "-5"):
        assert _retry_after_s(E({"Retry-After": nonsense})) is None, nonsense
        assert _retry_after_s(E({"retry-after-ms": nonsense})) is None, nonsense


# --------------------------------------------------------------------------- the litellm shim


def test_to_openai_messages_pairs_ids():
    msgs = [Message(role="system", content="s"),
            Message(role="assistant", content="",
                    tool_calls=(ToolCall(name="a", args={"x": 1}), ToolCall(name="b", id="given"))),
            Message(role="tool", content="B", tool_name="b"),
            Message(role="tool", content="A", tool_name="a")]
    out = _litellm.to_openai_messages(msgs)
    ids = [c["id"] for c in out[1]["tool_calls"]]
    assert ids[1] == "given" and ids[0]
    assert out[1]["content"] is None
    assert out[1]["tool_calls"][0]["function"]["arguments"] == '{"x": 1}'
    assert out[2]["tool_call_id"] == "given" and out[3]["tool_call_id"] == ids[0]


@pytest.mark.asyncio
async def test_scripted_replies_are_parsed_like_a_model_answer_without_litellm():
    provider = ScriptedProvider([{"content": "", "tool_calls": [{"name": "search", "args": {"q": "x"}}]},
                                 '<think>hm</think>```json\n{"tool": "search", "args": {"q": 1}}\n```',
                                 "just text"])
    req = request(tools=True)
    out = await provider.complete(req)
    assert out.tool_calls == [ToolCall(name="search", args={"q": "x"}, id="call_1_0")]
    assert out.tool_call_source == "native"
    out = await provider.complete(req)
    assert out.tool_call_source == "rescued" and out.tool_calls[0].args == {"q": 1}
    assert out.reasoning == "hm" and out.content == ""
    out = await provider.complete(req)
    assert out.content == "just text" and out.tool_calls == []
    assert out.usage.completion_tokens == 3 and out.usage.prompt_tokens >= 1


def test_arguments_are_sent_back_in_the_characters_the_model_wrote():
    """{"consulta": "çç"} went back as "{\\"consulta\\": \\"\\u00e7\\u00e7\\"}": the same JSON, other text (and more
    tokens) than the model wrote and what the model sees showed; a lone surrogate stays escaped."""
    out = _litellm.to_openai_messages([Message(role="assistant", tool_calls=(
        ToolCall(name="buscar", id="c1", args={"consulta": "çç 日本"}),
        ToolCall(name="buscar", id="c2", args={"consulta": "\ud800"})))])
    calls = out[0]["tool_calls"]
    assert calls[0]["function"]["arguments"] == '{"consulta": "çç 日本"}'
    assert calls[1]["function"]["arguments"] == '{"consulta": "\\ud800"}'
    calls[1]["function"]["arguments"].encode("utf-8")  # (what a request can carry)


def test_bad_native_arguments_are_kept_raw():
    class Fn:
        name = "search"
        arguments = "{not json"

    class Call:
        id = "c1"
        function = Fn()

    call = _litellm._native_call(Call())
    assert call.args == {_litellm.RAW_ARGUMENTS_KEY: "{not json"}
    # sent back as the model wrote it, not as {"__raw_arguments__": ...} (a call it never made)
    sent = _litellm.to_openai_messages([Message(role="assistant", tool_calls=(call,)),
                                        Message(role="tool", content="Invalid arguments", tool_call_id="c1")])
    assert sent[0]["tool_calls"][0]["function"]["arguments"] == "{not json"
    # a lone surrogate in it (the model wrote "\ud800" in what is no JSON) is U+FFFD: no request can carry it
    call = call.model_copy(update={"args": {_litellm.RAW_ARGUMENTS_KEY: "{q: \ud800"}})
    sent = _litellm.to_openai_messages([Message(role="assistant", tool_calls=(call,)),
                                        Message(role="tool", content="Invalid arguments", tool_call_id="c1")])
    assert sent[0]["tool_calls"][0]["function"]["arguments"] == "{q: \ufffd"


def test_importing_providers_does_not_import_litellm():
    code = ("import sys, flowtui.runtime.providers.litellm, flowtui.runtime.providers.rescue, "
            "flowtui.runtime.providers.cassette, flowtui.runtime.providers._litellm\n"
            "from flowtui.runtime.providers.litellm import LiteLLMProvider\n"
            "LiteLLMProvider('openai/x', temperature=0)\n"
            "print('litellm' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_import_runtime_does_not_import_litellm():
    code = "import sys, flowtui\nflowtui.LiteLLMProvider\nprint('litellm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


_QUIET_SCRIPT = r'''
import asyncio, os, sys
sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
os.environ.pop("OPENAI_API_KEY", None)
from loopback_openai import *
from flowtui.runtime.errors import ProviderError
from flowtui.runtime.messages import Message
from flowtui.runtime.providers.base import ChatRequest
from flowtui.runtime.providers.litellm import LiteLLMProvider, Retry

async def main():
    fast = Retry(attempts=2, base_delay_s=0.001)
    req = ChatRequest(agent="A", turn=1, messages=[Message(role="user", content="hi")],
                      tool_names=frozenset({"f"}), on_delta=lambda s: None)
    with LoopbackOpenAI() as s:
        p = LiteLLMProvider("openai/gpt-test", api_base=s.base_url, api_key="sk-test-SECRET123",
                            retry=fast, timeout=1.5)
        ps = LiteLLMProvider("openai/gpt-test", api_base=s.base_url, api_key="sk-test-SECRET123",
                             retry=fast, stream=True)
        s.script(reply("a"), rate_limited(retry_after_s=0.01), reply("b"),
                 drop_mid_stream(), reply("c", tool_calls=[{"name": "f", "args": {}}]),
                 malformed_json(), malformed_json(), unauthorized(echo_key=True), slow(5), slow(5))
        await p.complete(req)
        await p.complete(req)
        await ps.complete(req)
        for prov in (ps, p, p):
            try:
                await prov.complete(req)
            except ProviderError:
                pass
        try:
            await LiteLLMProvider("openai/gpt-test", api_base=s.base_url, retry=fast).complete(req)
        except ProviderError:
            pass
    print("done")

asyncio.run(main())
'''


def test_litellm_prints_nothing_on_replies_and_faults():
    """stdout/stderr belong to the app: no banner, log line or warning from litellm."""
    out = subprocess.run([sys.executable, "-c", _QUIET_SCRIPT], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "done\n"
    assert out.stderr == ""


async def test_a_model_litellm_cannot_place_says_so_not_that_a_request_was_refused(server):
    """--model nonsense: litellm raises its own 400 before sending anything; it read as 'the request
    was refused (HTTP 400)'."""
    p = LiteLLMProvider("nonsense", api_base=server.base_url, api_key=KEY, retry=FAST)
    with pytest.raises(ProviderError) as caught:
        await p.complete(request())
    assert "litellm cannot tell which provider serves 'nonsense', so nothing was sent" in str(caught.value)
    assert "refused" not in str(caught.value).split("Provider said")[0] and server.requests == []


def test_sampling_a_provider_would_refuse_is_refused_when_the_provider_is_made():
    """sampling={"temprature": 0.2} and {"max_tokens": -5} were sent as written: a 400 at the first call."""
    with pytest.raises(ConfigError, match=r"LiteLLMProvider\(...\): sampling= has 'temprature', which no provider "
                                          r"takes; did you mean 'temperature'\?"):
        LiteLLMProvider("openai/gpt-test", sampling={"temprature": 0.2})
    with pytest.raises(ConfigError, match=r"sampling=\{'max_tokens': -5\}: max_tokens is a whole number of at least 1"):
        LiteLLMProvider("openai/gpt-test", sampling={"max_tokens": -5})
    # a provider's own parameter, close to none flowtui knows, is passed on
    assert LiteLLMProvider("openai/gpt-test", sampling={"temperature": 0.2, "top_a": 0.1}).sampling == {
        "temperature": 0.2, "top_a": 0.1}
