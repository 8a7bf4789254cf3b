"""Record a run's model exchanges to a cassette, replay them with no network."""

from __future__ import annotations

import json
import os

import pytest

from loopback_openai import LoopbackOpenAI, reply
from flowtui.runtime.errors import CassetteMissError, ConfigError
from flowtui.runtime.messages import Message, ToolCall
from flowtui.runtime.providers.base import ChatReply, ChatRequest, Provider, Usage
from flowtui.runtime.providers.cassette import Cassette, RecordingProvider, ReplayProvider
from flowtui.runtime.providers.litellm import LiteLLMProvider, Retry

KEY = "sk-test-SECRET123"


class Canned(Provider):
    """A provider answering from a dict keyed by (agent, turn)."""

    def __init__(self, replies: dict[tuple[str, int], ChatReply]) -> None:
        self.replies = replies
        self.calls = 0

    async def complete(self, request: ChatRequest) -> ChatReply:
        self.calls += 1
        return self.replies[(request.agent, request.turn)]


def req(agent: str, turn: int, *extra: Message, system: str = "You plan.") -> ChatRequest:
    return ChatRequest(agent=agent, turn=turn,
                       messages=[Message(role="system", content=system),
                                 Message(role="user", content="Write a plan."), *extra],
                       tools=[{"type": "function", "function": {"name": "search"}}],
                       tool_names=frozenset({"search"}), sampling={"temperature": 0})


CALL = ChatReply(content="", tool_calls=[ToolCall(name="search", args={"q": "x"}, id="c1")],
                 tool_call_source="native", usage=Usage(prompt_tokens=12, completion_tokens=5))
TEXT = ChatReply(content="1. Write\n2. Review", reasoning="hm", cost_usd=0.25, attempts=2,
                 usage=Usage(prompt_tokens=12, completion_tokens=5))
AFTER_CALL = (Message(role="assistant", tool_calls=(ToolCall(name="search", args={"q": "x"}, id="c1"),)),
              Message(role="tool", content="found it", tool_name="search", tool_call_id="c1"))


async def record(path) -> Canned:
    inner = Canned({("Planner", 1): CALL, ("Planner", 2): TEXT, ("Critic", 1): TEXT})
    cassette = Cassette.new(path)
    planner = RecordingProvider(inner, cassette)
    critic = RecordingProvider(inner, cassette)  # two agents, one file
    assert await planner.complete(req("Planner", 1)) == CALL
    assert await planner.complete(req("Planner", 2, *AFTER_CALL)) == TEXT
    assert await critic.complete(req("Critic", 1, system="You criticise.")) == TEXT
    assert not path.exists()  # nothing replaces the file before the run ends
    assert cassette.commit() == ("wrote", path)  # a new file
    return inner


@pytest.mark.asyncio
async def test_record_then_replay_same_conversation(tmp_path):
    path = tmp_path / "run.cassette.jsonl"
    await record(path)
    lines = path.read_text().splitlines()
    assert json.loads(lines[0]) == {"flowtui_cassette": 1} and len(lines) == 4
    first = json.loads(lines[1])
    assert first["agent"] == "Planner" and first["turn"] == 1
    assert first["request"]["sampling"] == {"temperature": 0}
    assert first["reply"]["tool_calls"][0]["name"] == "search"

    replay = ReplayProvider(path)
    assert await replay.complete(req("Planner", 1)) == CALL
    assert await replay.complete(req("Planner", 2, *AFTER_CALL)) == TEXT
    assert await replay.complete(req("Critic", 1, system="You criticise.")) == TEXT


@pytest.mark.asyncio
async def test_a_reply_holding_line_separators_replays_from_the_cassette_it_was_recorded_in(tmp_path):
    """A reply with U+2028, U+2029 or NEL was recorded raw, and the reader broke the line there: the
    cassette flowtui had just written could not be replayed ("line 2 is not a recorded exchange")."""
    odd = ChatReply(content="one\u2028two\u2029three\x85four", usage=Usage(prompt_tokens=3, completion_tokens=4))
    path = tmp_path / "run.cassette.jsonl"
    cassette = Cassette.new(path)
    assert await RecordingProvider(Canned({("Planner", 1): odd}), cassette).complete(req("Planner", 1)) == odd
    cassette.commit()
    assert await ReplayProvider(path).complete(req("Planner", 1)) == odd


@pytest.mark.asyncio
async def test_tools_sampling_and_call_ids_may_change(tmp_path):
    path = tmp_path / "c.jsonl"
    await record(path)
    replay = ReplayProvider(path)
    renumbered = (AFTER_CALL[0].model_copy(update={"tool_calls": (ToolCall(name="search", args={"q": "x"}, id="zz"),)}),
                  AFTER_CALL[1].model_copy(update={"tool_call_id": "zz"}))
    changed = req("Planner", 2, *renumbered).model_copy(update={"tools": [], "sampling": {}})
    assert await replay.complete(changed) == TEXT


@pytest.mark.asyncio
async def test_miss_names_agent_and_turn_and_shows_a_diff(tmp_path):
    path = tmp_path / "c.jsonl"
    await record(path)
    replay = ReplayProvider(path)
    edited = (AFTER_CALL[0], AFTER_CALL[1].model_copy(update={"content": "found nothing"}))
    with pytest.raises(CassetteMissError) as info:
        await replay.complete(req("Planner", 2, *edited))
    msg = str(info.value)
    assert info.value.agent == "Planner"
    assert "'Planner' turn 2" in msg and "c.jsonl" in msg
    assert "-    found it" in msg and "+    found nothing" in msg
    # A turn never recorded: compared against the nearest request of that agent.
    with pytest.raises(CassetteMissError) as info:
        await replay.complete(req("Planner", 3, *AFTER_CALL, Message(role="user", content="more")))
    assert "turn 3" in str(info.value) and "+    more" in str(info.value)
    with pytest.raises(CassetteMissError, match="agents recorded: Critic, Planner"):
        await replay.complete(req("Ghost", 1))


@pytest.mark.asyncio
async def test_replay_never_touches_the_network(tmp_path):
    """A miss is an error even with a live server and a real provider around."""
    path = tmp_path / "c.jsonl"
    with LoopbackOpenAI() as server:
        server.script(reply("from the wire"))
        real = LiteLLMProvider("openai/gpt-test", api_base=server.base_url, api_key=KEY,
                               retry=Retry(attempts=1))
        rec = RecordingProvider(real, Cassette.new(path))
        out = await rec.complete(req("Planner", 1))
        assert out.content == "from the wire"
        rec.cassette.commit()
        assert KEY not in path.read_text()
        replay = ReplayProvider(path)
        assert (await replay.complete(req("Planner", 1))).content == "from the wire"
        with pytest.raises(CassetteMissError):
            await replay.complete(req("Planner", 2))
        assert len(server.requests) == 1


@pytest.mark.asyncio
async def test_replay_streams_content_as_one_delta(tmp_path):
    path = tmp_path / "c.jsonl"
    await record(path)
    deltas: list[str] = []
    request = req("Critic", 1, system="You criticise.").model_copy(update={"on_delta": deltas.append})
    await ReplayProvider(path).complete(request)
    assert deltas == [TEXT.content]


@pytest.mark.asyncio
async def test_fork_and_override_model(tmp_path):
    path = tmp_path / "c.jsonl"
    await record(path)
    replay = ReplayProvider(path)
    assert replay.override_model("openai/other") is replay
    run2 = replay.fork()
    assert await run2.complete(req("Planner", 1)) == CALL
    lit = LiteLLMProvider("openai/a")
    rec = RecordingProvider(lit, Cassette(tmp_path / "x.jsonl")).override_model("openai/b")
    assert isinstance(rec, RecordingProvider) and rec.inner.model == "openai/b"


def test_bad_cassettes_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        ReplayProvider(tmp_path / "nope.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"flowtui_cassette": 1}\n{"agent": "A"}\n')
    with pytest.raises(ConfigError) as caught:
        Cassette.load(bad)  # (it said "KeyError: 'request'")
    assert str(caught.value) == f"cassette {str(bad)!r} line 2 is not a recorded exchange (it has no 'request'); " \
        "re-record it"
    bad.write_text('{"flowtui_cassette": 99}\n')  # (read as version 1, saying nothing)
    with pytest.raises(ConfigError) as caught:
        Cassette.load(bad)
    assert str(caught.value) == f"cassette {str(bad)!r} line 1 says version '99'; this flowtui reads version 1: " \
        "re-record it"
    bad.write_text('{"seq": 1, "ts": 0, "run_id": "r1", "type": "run.start", "workflow": "W"}\n')  # a journal
    with pytest.raises(ConfigError) as caught:
        Cassette.load(bad)
    assert str(caught.value) == f"cassette {str(bad)!r} line 1 is an event of a journal, not a recorded " \
        "exchange: give a cassette made with --record"
    bad.write_text(" \n")  # (it ran, and its first model call failed: "no exchange of that agent at all")
    with pytest.raises(ConfigError) as caught:
        Cassette.load(bad)
    assert str(caught.value) == f"cassette {str(bad)!r} is empty, not a cassette: record one with --record"


async def test_a_reply_no_run_could_take_is_refused_as_the_cassette_loads(tmp_path):
    """A NaN of tokens (an edited cassette) failed the run when it reached that reply, with pydantic's
    error naming neither the cassette nor its line."""
    path = tmp_path / "c.jsonl"
    await record(path)
    lines = path.read_text().splitlines()
    exchange = json.loads(lines[2])
    exchange["reply"]["usage"]["prompt_tokens"] = float("nan")
    lines[2] = json.dumps(exchange)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError) as caught:
        Cassette.load(path)
    assert str(caught.value) == (f"cassette {str(path)!r} line 3 is not a recorded exchange (its reply's "
                                 "usage.prompt_tokens: Input should be a finite number); re-record it")


@pytest.mark.asyncio
async def test_recording_appends_when_given_a_path(tmp_path):
    path = tmp_path / "sub" / "c.jsonl"
    inner = Canned({("A", 1): TEXT, ("A", 2): TEXT})
    await RecordingProvider(inner, path).complete(req("A", 1))
    await RecordingProvider(inner, path).complete(req("A", 2))
    assert len(Cassette.load(path).exchanges) == 2
    assert ReplayProvider(path).describe().startswith("replaying")


@pytest.mark.asyncio
async def test_a_recording_stays_where_it_was_asked_for_when_the_flow_changes_folder(tmp_path, monkeypatch):
    """`--record run.jsonl` with a tool that calls os.chdir: the first exchange stayed in a hidden
    recording beside run.jsonl, the rest went to a new file in the tool's folder (world-writable under
    umask 0), run.jsonl was never written, and "cassette: wrote run.jsonl" was said all the same."""
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path)
    cassette = Cassette.new("run.jsonl")
    planner = RecordingProvider(Canned({("Planner", 1): CALL, ("Planner", 2): TEXT}), cassette)
    await planner.complete(req("Planner", 1))
    monkeypatch.chdir(tmp_path / "elsewhere")  # what the flow's tool did between two model calls
    umask = os.umask(0)
    try:
        await planner.complete(req("Planner", 2, *AFTER_CALL))
        assert cassette.commit()[0] == "wrote"
    finally:
        os.umask(umask)
    assert list((tmp_path / "elsewhere").iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "run.jsonl"]
    assert len(Cassette.load(tmp_path / "run.jsonl").exchanges) == 2
    assert (tmp_path / "run.jsonl").stat().st_mode & 0o777 == 0o600
