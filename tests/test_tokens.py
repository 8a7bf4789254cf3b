"""Exact token counts for "what the model sees": a provider counts with its model's own tokenizer
where litellm has one locally (an OpenAI model's tiktoken encoding), never over the network; the
worker answers ``count`` with them; the ``prompt.tokens`` watchpoint measures with them."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from flowtui import Controller, FunctionProvider, LiteLLMProvider, agent, bootstrap, tool, workflow
from flowtui.runtime.context_window import estimate_tokens
from flowtui.runtime.conversation import model_messages
from flowtui.runtime.messages import Message, ToolCall
from flowtui.runtime.providers import _litellm
from flowtui.runtime.providers.cassette import RecordingProvider, ReplayProvider
from flowtui.runtime.providers.litellm import Retry
from loopback_openai import LoopbackOpenAI, reply

pytestmark = pytest.mark.filterwarnings("ignore:.*`ReadOnly` qualifier:UserWarning")

HANG = 60  # seconds: past this, something hangs (litellm's first import takes a few)
MESSAGES = [
    Message(role="system", content="Você revisa rascunhos com cuidado."),
    Message(role="system", content="Memory:\n1. o leitor é iniciante"),
    Message(role="user", content="Escreva um parágrafo sobre ctx.state, com um exemplo."),
    Message(role="assistant", content="", tool_calls=[ToolCall(name="somar", args={"a": 2, "b": 3}, id="call_1")]),
    Message(role="tool", content="5", tool_name="somar", tool_call_id="call_1"),
    Message(role="assistant", content="ctx.state guarda history, memory e tasks: 2 + 3 = 5."),
]
TOOLS = [{"type": "function", "function": {
    "name": "somar", "description": "Adds two integers.",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                   "required": ["a", "b"]}}}]


@pytest.fixture
def offline(monkeypatch):
    """No connection beyond loopback, and every attempt at one written down."""
    tried: list = []
    real_connect, real_getaddrinfo = socket.socket.connect, socket.getaddrinfo

    def loopback(host) -> bool:
        return isinstance(host, str) and (host in ("127.0.0.1", "::1", "localhost") or host.startswith("/"))

    def connect(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if not loopback(host):
            tried.append(address)
            raise OSError(f"network blocked in tests: {address!r}")
        return real_connect(self, address)

    def getaddrinfo(host, *args, **kwargs):
        if not loopback(host):
            tried.append(host)
            raise socket.gaierror(f"network blocked in tests: {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return tried


def test_an_openai_model_is_counted_by_litellm_with_its_own_encoding(offline):
    counted = LiteLLMProvider("openai/gpt-4o-mini").count_tokens(MESSAGES, TOOLS)
    litellm = _litellm.load_litellm()
    sent = _litellm.to_openai_messages(MESSAGES)
    assert counted is not None and (counted.model, counted.tokenizer) == ("openai/gpt-4o-mini", "o200k_base")
    assert counted.messages == [litellm.token_counter(model="gpt-4o-mini", messages=[m], count_response_tokens=True)
                                for m in sent]
    assert counted.total == litellm.token_counter(model="gpt-4o-mini", messages=sent, tools=TOOLS)
    assert counted.total > sum(counted.messages)  # the tool schemas are sent too
    import tiktoken  # the encoding itself: litellm adds each message's framing (its role, 3 tokens)

    text = MESSAGES[2].content
    assert counted.messages[2] == len(tiktoken.get_encoding("o200k_base").encode(text)) + 1 + 3
    assert counted.messages != [estimate_tokens(m) for m in MESSAGES]  # not the four-characters guess
    again = LiteLLMProvider("gpt-4").count_tokens(MESSAGES, [])  # an older model, another encoding
    assert again is not None and again.tokenizer == "cl100k_base"
    assert again.total == litellm.token_counter(model="gpt-4", messages=sent)
    assert offline == []


@pytest.mark.parametrize("model,hugging_face", [
    ("ollama/qwen2.5-coder:7b", False),  # litellm would count with an OpenAI encoding: not this model's own
    ("openai/qwen2.5", False),  # an OpenAI-compatible server, another model
    ("meta-llama/Llama-3-8b-instruct", True),  # litellm would download a Hugging Face tokenizer for these
    ("replicate/llama-2-70b-chat", True),
    ("deepseek/deepseek-chat", True),  # one litellm ships: refused all the same (only tiktoken's are used)
])
def test_a_model_without_a_local_tokenizer_is_not_counted_and_nothing_is_fetched(offline, model, hugging_face):
    assert LiteLLMProvider(model).count_tokens(MESSAGES, TOOLS) is None
    assert LiteLLMProvider(None).count_tokens(MESSAGES, TOOLS) is None
    assert offline == []
    kind = getattr(_litellm.load_litellm().utils, "huggingface_tokenizer_kind", None)
    if kind is not None:  # the path avoided: litellm would have picked a Hugging Face tokenizer
        assert (kind(model) is not None) == hugging_face


def test_fakes_do_not_count_and_wrappers_count_with_the_provider_they_stand_for(tmp_path, offline):
    assert FunctionProvider(lambda m, t: "ok").count_tokens(MESSAGES, TOOLS) is None
    real = LiteLLMProvider("openai/gpt-4o-mini")
    exact = real.count_tokens(MESSAGES, TOOLS)
    cassette = tmp_path / "c.jsonl"
    cassette.write_text('{"flowtui_cassette": 1}\n')
    assert ReplayProvider(cassette, counter=real).fork().count_tokens(MESSAGES, TOOLS) == exact
    assert ReplayProvider(cassette).count_tokens(MESSAGES, TOOLS) is None
    assert RecordingProvider(real, tmp_path / "r.jsonl").count_tokens(MESSAGES, TOOLS) == exact


# --- the worker answers `count` ------------------------------------------------------------------


FLOW = '''
from flowtui import FunctionProvider, LiteLLMProvider, agent, tool, workflow

@tool(name="somar", description="Adds two integers.")
def somar(a: int, b: int) -> str:
    return str(a + b)

@agent(provider=LiteLLMProvider("openai/gpt-4o-mini", api_key="sk-FAKE-not-used"), prompt="Use somar.", tools=[somar])
class Calc:
    pass

@agent(provider=FunctionProvider(lambda messages, tools: "ok"), prompt="Say ok.")
class Echo:
    pass

@workflow(steps=[Calc])
class CalcWorkflow:
    pass

@workflow(steps=[Echo])
class EchoWorkflow:
    pass
'''


class Pipe:
    """A worker on its pipes, driven line by line."""

    def __init__(self, target: str, cwd: Path) -> None:
        env = {"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "flowtui.runtime.worker", target], cwd=cwd,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env={**os.environ, **env})
        self.ids = 0
        self.events: list[dict] = []
        self.watchdog = threading.Timer(2 * HANG, self.proc.kill)  # a hang fails the test, never blocks it
        self.watchdog.start()

    def read(self) -> dict:
        line = self.proc.stdout.readline()
        assert line, f"the worker ended: {self.proc.stderr.read().decode()}"
        return json.loads(line)

    def command(self, **message) -> dict:
        self.ids += 1
        self.proc.stdin.write(json.dumps({"id": self.ids, **message}).encode() + b"\n")
        self.proc.stdin.flush()
        while True:
            msg = self.read()
            if msg["type"] == "reply" and msg["id"] == self.ids:
                return msg
            self.events.append(msg)

    def paused(self) -> dict:
        while not any(e["type"] == "run.pause" for e in self.events):
            self.events.append(self.read())
        return next(e for e in self.events if e["type"] == "run.pause")

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=HANG)
        self.watchdog.cancel()


@pytest.fixture
def flow_file(tmp_path):
    path = tmp_path / "calc.py"
    path.write_text(FLOW)
    return path


def test_the_worker_answers_count_with_each_block_of_what_the_model_sees(flow_file, tmp_path):
    w = Pipe(f"{flow_file}:CalcWorkflow", tmp_path)
    try:
        assert w.read()["type"] == "hello"
        assert w.command(type="count")["value"] is None  # no run yet
        assert w.command(type="start", input="quanto é 2+3?", memory=["responda em português"])["ok"]
        assert w.paused()["name"] == "Calc"
        counted = w.command(type="count")
        assert counted["ok"], counted
        value = counted["value"]
        seen = model_messages("Use somar.", ["responda em português"], [],
                              [Message(role="user", content="quanto é 2+3?")])  # the blocks view 2 shows
        exact = LiteLLMProvider("openai/gpt-4o-mini").count_tokens(seen, TOOLS)
        assert value == exact.model_dump()
        assert len(value["messages"]) == 3 and value["tokenizer"] == "o200k_base"
        # an edit changes what the next call sends: counted again, one block more
        assert w.command(type="add_item", bucket="tasks", text="mostre a conta")["ok"]
        again = w.command(type="count")["value"]
        assert len(again["messages"]) == 3 and again["messages"][1] > value["messages"][1]
        unknown = w.command(type="count", run_id="no-such-run")
        assert not unknown["ok"] and unknown["error"].startswith("no run 'no-such-run' in this run")
    finally:
        w.close()


def test_a_provider_without_a_tokenizer_answers_count_with_null(flow_file, tmp_path):
    w = Pipe(f"{flow_file}:EchoWorkflow", tmp_path)
    try:
        assert w.read()["type"] == "hello"
        assert w.command(type="start", input="hi")["ok"]
        w.paused()
        reply = w.command(type="count")
        assert reply["ok"] and reply["value"] is None
    finally:
        w.close()


# --- prompt.tokens ------------------------------------------------------------------------------


async def test_prompt_tokens_is_the_exact_count_when_the_model_has_a_local_tokenizer():
    with LoopbackOpenAI() as server:
        server.script(reply("5"))

        @tool(name="somar", description="Adds two integers.")
        def somar(a: int, b: int) -> str:
            return str(a + b)

        provider = LiteLLMProvider("openai/gpt-4o-mini", api_base=server.base_url, api_key="sk-FAKE",
                                   retry=Retry(attempts=1))

        @agent(provider=provider, prompt="Use somar.", tools=[somar])
        class Calc:
            pass

        @workflow(steps=[Calc])
        class CalcWorkflow:
            pass

        controller = Controller(watch=["prompt.tokens > 1"])
        events: list = []
        loop = asyncio.get_running_loop()

        def sink(ev):
            events.append(ev)
            if ev.type == "run.pause":
                loop.call_soon(controller.resume)

        run = bootstrap(CalcWorkflow).prepare("quanto é 2+3?", controller=controller, on_event=sink)
        await run.execute()
    pause = next(e for e in events if e.type == "run.pause" and e.reason == "watchpoint")
    messages = [Message(role="system", content="Use somar."), Message(role="user", content="quanto é 2+3?")]
    exact = provider.count_tokens(messages, run.plans.tool_specs[Calc].schemas)
    assert pause.point == "chat" and pause.watch[0].detail == f"prompt.tokens = {exact.total}"
    assert exact.total != sum(estimate_tokens(m) for m in messages)


@pytest.mark.parametrize("kind", ["scripted", "function"])
async def test_what_the_model_sees_is_the_size_the_run_counts_for_a_reply_without_usage(kind):
    """One estimate: the pane said "~14 tok" for a call whose reply the run counted as 6 prompt tokens (the
    figure totals, a token budget and ``tokens > N`` go by), its estimate another one; and a scripted
    reply's estimate was not marked as one."""
    from flowtui import ScriptedProvider
    from flowtui.runtime.fold import RunView
    from flowtui.tui.tokens import total_size

    @tool(name="somar", description="Adds two integers.")
    def somar(a: int, b: int) -> str:
        return str(a + b)

    replies = [{"content": "", "tool_calls": [{"name": "somar", "args": {"a": 2, "b": 3}}]}, "São 5."]
    provider = ScriptedProvider(replies) if kind == "scripted" else FunctionProvider(
        lambda messages, tools: replies[sum(m.role == "assistant" for m in messages)])

    @agent(provider=provider, prompt="Você soma com a ferramenta.", tools=[somar])
    class Calc:
        pass

    @workflow(steps=[Calc, Calc])
    class W:
        pass

    view, shown, counted = RunView(), [], []

    def watch(ev):
        view.apply(ev)
        if ev.type == "node.start" and ev.kind == "chat":
            shown.append(total_size(view.model_sees()))
        elif ev.type == "node.end" and ev.kind == "chat":
            counted.append((f"~{ev.data['prompt_tokens']:,} tokens, estimate", ev.data["usage_estimated"]))

    await bootstrap(W).run("Quanto é 2 + 3?", memory=["o leitor é iniciante"], on_event=watch)
    assert len(shown) == 2
    assert counted == [(size, True) for size in shown]
