"""The real litellm path end to end: a flow, the engine, events and journal, against a loopback server."""

import json

import pytest
from pydantic import BaseModel

from loopback_openai import LoopbackOpenAI, raw, rate_limited, reply, unauthorized
from flowtui import (
    Budget, Input, LiteLLMProvider, ProviderError, agent, bootstrap, loop, tool, until_answered, workflow,
)
from flowtui.runtime.fold import RunView
from flowtui.runtime.providers.litellm import Retry

KEY = "sk-loopback-FAKE-0123456789"


@pytest.fixture
def server():
    with LoopbackOpenAI() as s:
        yield s


class SomaArgs(BaseModel):
    a: int
    b: int


@tool(name="somar", description="Adds two integers.", schema=SomaArgs)
class Somar:
    def execute(self, args: SomaArgs = Input()):
        return str(args.a + args.b)


def flow(server, **provider_kwargs):
    class Model(LiteLLMProvider):
        model = "openai/gpt-test"
        api_base = server.base_url
        retry = Retry(attempts=3, base_delay_s=0.001, max_delay_s=0.01)

    provider = Model(api_key=KEY, **provider_kwargs)

    @agent(provider=provider, prompt="Use somar for arithmetic.", tools=[Somar])
    class Calc:
        pass

    @workflow(steps=[loop(steps=[Calc], until=until_answered, max_iterations=4)])
    class CalcWorkflow:
        pass

    return CalcWorkflow


async def test_retries_tool_use_usage_and_no_key_anywhere(server, tmp_path, capfd):
    server.script(
        rate_limited(retry_after_s=0.01),
        reply("", tool_calls=[{"name": "somar", "args": {"a": 2, "b": 3}}], usage=(20, 5)),
        reply("2 + 3 = 5", usage=(30, 4)),
    )
    app = bootstrap(flow(server))
    events, view = [], RunView()
    app.subscribe(lambda e: (events.append(e), view.apply(e)))
    journal = tmp_path / "run.jsonl"
    out = await app.run("quanto é 2+3?", budget=Budget(max_tokens=1000), journal=journal)
    assert out == "2 + 3 = 5"
    attempts = [e for e in events if e.type == "chat.attempt"]
    assert len(attempts) == 1 and attempts[0].status == 429
    chats = [e for e in events if e.type == "node.end" and e.kind == "chat"]
    assert [c.data["attempts"] for c in chats] == [2, 1]
    assert chats[0].data["tool_call_source"] == "native"
    assert view.ctx["budget"]["tokens"] == 59 and view.ctx["budget"]["chat_calls"] == 2
    sent = server.requests[-1].body
    assert [m["role"] for m in sent["messages"]] == ["system", "user", "assistant", "tool"]
    assert sent["tools"][0]["function"]["parameters"]["required"] == ["a", "b"]
    assert "temperature" not in sent and "top_p" not in sent  # nothing sent that was not set
    written = journal.read_text() + "".join(e.model_dump_json() for e in events)
    out_err = capfd.readouterr()
    assert KEY not in written and KEY not in out_err.out + out_err.err
    assert out_err.out == "" and out_err.err == ""  # litellm printed nothing


async def test_a_lone_surrogate_in_a_tool_result_is_sent_as_the_journal_holds_it(server, tmp_path):
    """A file name that is no UTF-8 (os gives "\\udcff"): the call failed three times, said as HTTP 500, and the
    journal held a request with U+FFFD that was never sent."""
    @tool(name="ler", description="Lists a folder.")
    def ler() -> str:
        return "nome:\udcff.txt e \ud83d\ude00"

    class Model(LiteLLMProvider):
        model = "openai/gpt-test"
        api_base = server.base_url
        retry = Retry(attempts=3, base_delay_s=0.001, max_delay_s=0.01)

    @agent(provider=Model(api_key=KEY), prompt="p", tools=[ler])
    class A:
        pass

    @workflow(steps=[loop(steps=[A], until=until_answered, max_iterations=3)])
    class W:
        pass

    server.script(reply("", tool_calls=[{"name": "ler", "args": {}}]), reply("feito"))
    journal = tmp_path / "run.jsonl"
    assert await bootstrap(W).run("go", journal=journal) == "feito"
    sent = server.requests[-1].body["messages"][-1]
    assert sent["role"] == "tool" and sent["content"] == "nome:\ufffd.txt e 😀"
    chat = [json.loads(line) for line in journal.read_text().splitlines()
            if '"kind":"chat"' in line and '"node.start"' in line][-1]
    assert chat["data"]["request"]["messages"][-1]["content"] == sent["content"], chat


async def test_rejected_key_fails_the_run_cleanly_without_showing_it(server, tmp_path, capfd):
    server.script(unauthorized(echo_key=True))
    app = bootstrap(flow(server))
    events = []
    app.subscribe(events.append)
    journal = tmp_path / "run.jsonl"
    with pytest.raises(ProviderError) as info:
        await app.run("oi", journal=journal)
    assert len(server.requests) == 1  # a 401 is never retried
    end = events[-1]
    assert end.type == "run.end" and end.status == "failed" and "401" in end.error
    assert "Calc" in str(info.value)
    everything = str(info.value) + journal.read_text() + "".join(e.model_dump_json() for e in events)
    captured = capfd.readouterr()
    assert KEY not in everything + captured.out + captured.err


async def test_streaming_text_arrives_as_delta_events_before_the_message(server):
    server.script(reply("uma resposta em pedaços", chunks=4))
    app = bootstrap(flow(server, stream=True))
    events = []
    app.subscribe(events.append)
    assert await app.run("oi") == "uma resposta em pedaços"
    kinds = [e.type for e in events]
    deltas = [e.text for e in events if e.type == "chat.delta"]
    assert len(deltas) >= 2 and "".join(deltas) == "uma resposta em pedaços"
    assistant_at = next(i for i, e in enumerate(events) if e.type == "state.append" and e.item.role == "assistant")
    assert max(i for i, k in enumerate(kinds) if k == "chat.delta") < assistant_at
    assert server.requests[0].body["stream"] is True


async def test_model_override_reaches_the_wire(server):
    server.script(reply("ok"))
    app = bootstrap(flow(server), model="openai/other-model")
    assert await app.run("oi") == "ok"
    assert server.requests[0].body["model"] == "other-model"


async def test_flowtui_model_environment_variable_overrides_too(server, monkeypatch):
    monkeypatch.setenv("FLOWTUI_MODEL", "openai/from-env")
    server.script(reply("ok"))
    assert await bootstrap(flow(server)).run("oi") == "ok"
    assert server.requests[0].body["model"] == "from-env"


async def test_a_reply_with_no_choices_fails_the_run_saying_so_never_an_empty_answer(server, tmp_path):
    # {"choices": []} three times: the run "finished" with empty output, exit 0, no warning
    empty = {"id": "chatcmpl-x", "object": "chat.completion", "created": 1, "model": "gpt-test", "choices": []}
    server.script(raw(empty), raw(empty), raw(empty))
    app = bootstrap(flow(server))
    events = []
    app.subscribe(events.append)
    with pytest.raises(ProviderError) as info:
        await app.run("oi", journal=tmp_path / "run.jsonl")
    assert len(server.requests) == 3  # retried like any malformed reply
    attempts = [e for e in events if e.type == "chat.attempt"]
    assert [a.error for a in attempts] == ["the server's reply held no choices"] * 3
    end = events[-1]
    assert end.type == "run.end" and end.status == "failed"
    assert "the server's reply held no choices" in end.error and "Calc" in str(info.value)


async def test_negative_usage_from_the_server_never_lowers_the_run_totals(server):
    # completion_tokens: -1000000 made the totals negative: a way around Budget(max_tokens=...)
    server.script(
        reply("", tool_calls=[{"name": "somar", "args": {"a": 2, "b": 3}}], usage=(20, -1_000_000)),
        reply("2 + 3 = 5", usage=(30, 4)),
    )
    app = bootstrap(flow(server))
    view = RunView()
    app.subscribe(view.apply)
    assert await app.run("quanto é 2+3?", budget=Budget(max_tokens=1000)) == "2 + 3 = 5"
    assert view.ctx["budget"]["tokens"] == 20 + 30 + 4


async def test_a_reply_with_no_usage_is_estimated_so_a_token_budget_still_trips(server, tmp_path):
    """A server that sends no usage (some proxies and local servers) counted 0 tokens a call, not
    streamed: Budget(max_tokens=...) never tripped, and the cost stayed 0."""
    from flowtui.runtime.journal import load_runs
    from flowtui.tui.widgets.event_log import summarize

    def bare(message: dict) -> dict:
        return {"id": "x", "object": "chat.completion", "created": 1, "model": "gpt-test",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}

    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "somar", "arguments": '{"a": 2, "b": 3}'}}]}
    server.script(*[raw(bare(call))] * 4)
    journal = tmp_path / "run.jsonl"
    out = await bootstrap(flow(server)).run("quanto é 2+3? " * 40, budget=Budget(max_tokens=300),
                                            journal=journal)
    events = load_runs(journal)[-1]
    chats = [e for e in events if e.type == "node.end" and e.kind == "chat"]
    assert 1 <= len(chats) < 4  # the budget ended the loop before its four iterations
    assert events[-1].reason == "budget: max_tokens" and out == "5"  # the output so far
    assert all(e.data["prompt_tokens"] >= 120 and e.data["completion_tokens"] > 0 for e in chats)
    assert all(e.data["usage_estimated"] for e in chats)
    assert " · tokens estimated: the reply said no usage" in summarize(chats[0])
    server.reset()
    server.script(reply("2 + 3 = 5", usage=(30, 4)))  # a server that says its usage: taken as it is
    journal = tmp_path / "said.jsonl"
    await bootstrap(flow(server)).run("oi", journal=journal)
    (chat,) = [e for e in load_runs(journal)[-1] if e.type == "node.end" and e.kind == "chat"]
    assert (chat.data["prompt_tokens"], chat.data["completion_tokens"]) == (30, 4)
    assert "usage_estimated" not in chat.data


async def test_a_key_given_as_api_key_is_never_shown_or_journaled_when_the_server_echoes_it(server, tmp_path):
    """api_key=vault.key(): a key in no variable and not shaped like one. Echoed by the server in a reply
    and in a tool call's arguments, it was on screen, in the journal, --json and the snapshot."""
    import json

    from flowtui.runtime.encoding import encode_event
    from flowtui.runtime.secrets import Redactor

    import secrets

    vault_key = f"loopbackKEY{secrets.token_hex(12)}"  # its own: a credential handed over stays for the process
    wire = Redactor.from_environment()  # made before the provider, as the worker's is
    server.script(
        reply(f"your key is {vault_key} ok", tool_calls=[{"name": "somar", "args": {"a": 2, "b": 3},
                                                          "id": "c1"}]),
        reply(f"still {vault_key}"),
    )

    class Model(LiteLLMProvider):
        model = "openai/gpt-test"
        api_base = server.base_url

    @agent(provider=Model(api_key=vault_key), prompt="p", tools=[Somar])
    class Calc:
        pass

    @workflow(steps=[loop(steps=[Calc], until=until_answered, max_iterations=3)])
    class W:
        pass

    journal = tmp_path / "run.jsonl"
    events: list = []
    await bootstrap(W).run("oi", journal=journal, on_event=events.append)
    assert events[-1].status == "finished"
    assert any(vault_key in json.dumps(e.model_dump(mode="json")) for e in events)  # the run itself has it
    assert vault_key not in journal.read_text() and "your key is [redacted] ok" in journal.read_text()
    assert not any(vault_key in encode_event(e, wire).decode() for e in events)  # the wire to the app


async def test_a_reply_cut_at_max_tokens_says_so_in_its_model_calls_end(server, tmp_path):
    """finish_reason "length": an answer all the same, and now one the event log says was cut."""
    from flowtui.runtime.journal import load_runs
    from flowtui.tui.widgets.event_log import summarize

    server.script(reply("2 + 3 = ", finish_reason="length"))
    journal = tmp_path / "run.jsonl"
    assert await bootstrap(flow(server)).run("quanto é 2+3?", journal=journal) == "2 + 3 = "
    (end,) = [e for e in load_runs(journal)[-1] if e.type == "node.end" and e.kind == "chat"]
    assert end.data["reply"]["finish_reason"] == "length"
    assert summarize(end).endswith(" · the reply was cut at the model's max_tokens")


async def test_a_refusal_is_the_reply_and_a_filtered_reply_says_so(server, tmp_path):
    """A reply whose message held only OpenAI's refusal field ended the run with an empty answer, the
    refusal in no event; one a content filter withheld (finish_reason content_filter) too, unsaid."""
    from flowtui.runtime.journal import load_runs
    from flowtui.tui.widgets.event_log import summarize

    def completion(message: dict, finish_reason: str) -> dict:
        return {"id": "x", "object": "chat.completion", "created": 1, "model": "gpt-test",
                "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}]}

    server.script(raw(completion({"role": "assistant", "content": None, "refusal": "I can't help with that."},
                                 "stop")))
    assert await bootstrap(flow(server)).run("quanto é 2+3?") == "I can't help with that."
    server.script(raw(completion({"role": "assistant", "content": None}, "content_filter")))
    journal = tmp_path / "run.jsonl"
    await bootstrap(flow(server)).run("quanto é 2+3?", journal=journal)
    (end,) = [e for e in load_runs(journal)[-1] if e.type == "node.end" and e.kind == "chat"]
    assert summarize(end).endswith(" · the provider's content filter withheld the reply, or part of it")


async def test_flowtui_runs_tree_says_a_wait_before_a_retry_as_it_starts(server):
    """Headless, a server's Retry-After showed nothing until the call ended: the tree looked hung."""
    import io

    from flowtui.runtime.cli import TreePrinter

    server.script(rate_limited(retry_after_s=0.01), reply("5"))
    out = io.StringIO()
    printer = TreePrinter(out)
    await bootstrap(flow(server)).run("quanto é 2+3?", on_event=printer)
    lines = out.getvalue().splitlines()
    retry = next(i for i, line in enumerate(lines) if "↻" in line)
    assert lines[retry].lstrip().startswith("↻ attempt 1 failed (HTTP 429: ") and lines[retry].endswith(
        "); retrying in 0.0 s")
    assert "▸ chat" in lines[retry - 1] and "◂ chat" in lines[retry + 1]  # inside the model call it waits in
    indent = len(lines[retry - 1]) - len(lines[retry - 1].lstrip())
    assert lines[retry].startswith(" " * (indent + 2) + "↻")  # drawn as the call's child


async def test_the_journal_records_the_providers_sampling_with_the_agents_and_a_resume_checks_it(server, tmp_path):
    """LiteLLMProvider(sampling=...) was sent but the journal's request said only the agent's sampling
    ({} here): the record of the call was not what left. It keeps both now; a re-execution whose
    provider sends other sampling diverges, and a journal from before (no provider_sampling) does not."""
    import json

    from flowtui.runtime.journal import load_runs

    server.script(reply("5"))
    journal = tmp_path / "run.jsonl"
    await bootstrap(flow(server, sampling={"top_p": 0.9, "seed": 7})).run("quanto é 2+3?", journal=journal)
    sent = server.requests[-1].body
    assert (sent["top_p"], sent["seed"]) == (0.9, 7)
    (start,) = [e for e in load_runs(journal)[-1] if e.type == "node.start" and e.kind == "chat"]
    assert start.data["request"]["provider_sampling"] == {"top_p": 0.9, "seed": 7}
    assert start.data["request"]["sampling"] == {}

    async def resumed(path, **sampling) -> list:
        events: list = []
        server.script(reply("5"))
        await bootstrap(flow(server, sampling=sampling)).run(resume_from=str(path), on_event=events.append)
        return [e for e in events if e.type == "run.diverged"]

    assert not await resumed(journal, top_p=0.9, seed=7)
    (diverged,) = await resumed(journal, top_p=0.5, seed=7)
    assert any("provider_sampling" in d.field for d in diverged.differences), diverged.differences
    before = tmp_path / "before.jsonl"  # as a journal written before provider_sampling was recorded
    lines = []
    for line in journal.read_text().splitlines():
        event = json.loads(line)
        request = (event.get("data") or {}).get("request") if event["type"] == "node.start" else None
        if isinstance(request, dict):
            del request["provider_sampling"]
        lines.append(json.dumps(event))
    before.write_text("\n".join(lines) + "\n")
    assert not await resumed(before, top_p=0.5, seed=7)


@pytest.mark.parametrize("where", ["memory", "history"])
async def test_a_request_refused_for_one_message_says_which_message_of_the_run_it_is(server, where):
    """A memory item of 10.5 M characters failed the run with the API's words only, "Invalid
    'messages[1].content': string too long": messages[1] is nothing the person can find or edit."""
    server.script(reply("ok"))
    huge = "x" * 10_500_000
    memory, task = ([huge], "hi") if where == "memory" else (["a fact"], huge)
    with pytest.raises(ProviderError) as info:
        await bootstrap(flow(server)).run(task, memory=memory)
    said = str(info.value)
    assert "'messages[1].content': string too long" in said if where == "memory" else \
        "'messages[2].content': string too long" in said, said
    assert said.endswith("(messages[1] is the memory-and-tasks note)" if where == "memory"
                         else "(messages[2] is history[0], the user message)"), said
