"""The client's side of a run's process: what it takes from the journal when the pipe could not
bring it (runtime/channel.py), without a process."""

from __future__ import annotations

import asyncio
import json

from flowtui.runtime.channel import Channel, within


def _line(seq: int, run_id: str, type: str, **fields) -> str:
    return json.dumps({"seq": seq, "ts": 0.0, "run_id": run_id, "node_id": None, "parent_id": None,
                       "origin": "runtime", "type": type, **fields}, separators=(",", ":"))


def test_recovery_reads_this_run_of_the_journal_only_and_its_end_ends_it(tmp_path):
    """A journal that held a run before this one: a worker that died before its run.start reached
    the app is not lent the earlier run (nor its end); one whose end was journaled, never sent,
    is ended by it (no second run.end is written after it)."""
    journal = tmp_path / "j.jsonl"
    journal.write_text("\n".join([_line(1, "r1-old", "run.start", workflow="W"),
                                  _line(2, "r1-old", "run.end", status="finished")]) + "\n")
    died_early = Channel(lambda lines: None)
    died_early.keep_journal(str(journal))
    assert died_early.recover(0) == [] and not died_early.ended and died_early.run_id is None

    ended = Channel(lambda lines: None)
    ended.keep_journal(str(journal))
    with journal.open("a") as f:
        f.write("\n".join([_line(1, "r2-new", "run.start", workflow="W"),
                           _line(2, "r2-new", "ctx.set", name="x", value=1),
                           _line(3, "r2-new", "run.end", status="finished")]) + "\n" + '{"seq":4,"ts":0,"ru')
    recovered = ended.recover(0)  # it died before sending any of its run
    assert [json.loads(line)["seq"] for line in recovered] == [1, 2, 3]  # the torn last line is not an event
    assert ended.run_id == "r2-new" and ended.ended


def test_events_the_pipe_lost_are_taken_from_the_journal_in_order_and_a_stray_one_left_out(tmp_path):
    from flowtui.runtime.channel import parse_events

    journal = tmp_path / "j.jsonl"
    said: list[str] = []
    channel = Channel(lambda lines: None, on_warning=said.append)
    channel.keep_journal(str(journal))
    lines = [_line(i, "r1", "ctx.set", name="i", value=i) for i in range(1, 7)]
    journal.write_text("\n".join(lines) + "\n")
    came = parse_events([lines[0].encode(), lines[3].encode(), b'{"seq":999,"ts":0,"run_id":"r1","type":"ctx.set",'
                         b'"name":"forged","value":0}', lines[4].encode(), lines[1].encode()])
    kept = channel.in_order(came, 0)
    assert [ev.seq for _, ev in kept] == [1, 2, 3, 4, 5]  # 2 and 3 from the journal; 999 and the late 2 left out
    assert any("events 2-3 never arrived: taken from the journal" in s for s in said)
    assert any("event 999 (ctx.set) skips ahead of event 4" in s for s in said)
    assert any("event 2 (ctx.set) came after event 5" in s for s in said)


def test_an_event_nested_deeper_than_pydantics_parser_reads_is_kept():
    """A state value nested 230 levels deep (its run's process writes it whole): pydantic's parser stops at
    200, and the event was left out: missing from --json, from a snapshot, and a run.start so left out held
    its client for ever."""
    from flowtui.runtime.channel import parse_events

    value: object = {"leaf": 1}
    for _ in range(230):
        value = {"k": value}
    said: list[str] = []
    line = _line(2, "r1", "ctx.set", name="deep", value=value).encode()
    (got,) = parse_events([line], said.append)
    assert got[1].value == value and said == []


def test_a_run_whose_start_could_not_be_read_is_ended_by_its_end(tmp_path):
    """Its run.start unreadable, the client never learnt the run's id, and took no run.end for its own:
    flowtui run waited for ever on a run that had ended."""
    journal = tmp_path / "j.jsonl"
    channel = Channel(lambda lines: None)
    channel.keep_journal(str(journal))
    journal.write_text("\n".join([_line(1, "r1", "run.start", workflow=["not", "a", "name"]),
                                  _line(2, "r1", "run.end", status="finished")]) + "\n")
    channel.recover(0)
    assert channel.ended


def test_a_cancel_that_comes_as_a_timed_wait_ends_is_not_swallowed():
    """The app's quit cancels what waits on the run's process: a wait whose answer came in the same
    moment went on (Python 3.11's wait_for returned the answer and dropped the cancel)."""

    async def cancelled_as_answered() -> object:
        answer = asyncio.get_running_loop().create_future()
        waiting = asyncio.create_task(within(answer, 10))
        for _ in range(2):
            await asyncio.sleep(0)  # (waiting on the answer now)
        answer.set_result("the reply")
        waiting.cancel()
        try:
            return await waiting
        except asyncio.CancelledError:
            return "cancelled"

    assert asyncio.run(cancelled_as_answered()) == "cancelled"


def test_a_timed_wait_gives_the_answer_or_times_out():
    async def answered(delay: float, seconds: float) -> object:
        async def reply() -> str:
            await asyncio.sleep(delay)
            return "the reply"

        try:
            return await within(reply(), seconds)
        except TimeoutError:
            return "timed out"

    assert asyncio.run(answered(0, 30)) == "the reply"
    assert asyncio.run(answered(30, 0.01)) == "timed out"


async def test_a_reply_longer_than_a_line_from_a_peer_answers_its_command_as_refused(monkeypatch):
    """A fetch of a value longer than a line may be: the reply was left out and the fetch waited until it timed
    out, said as a busy run ("try again later", which never helps)."""
    from flowtui.runtime import channel as channel_module
    from flowtui.runtime import protocol as p

    monkeypatch.setattr(channel_module, "LINE_MAX", 10_000)

    async def peer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()  # the auth
        writer.write(json.dumps({"type": "hello", "protocol": p.PROTOCOL_VERSION, "workflow": "W"}).encode() + b"\n")
        command = json.loads(await reader.readline())
        writer.write(json.dumps({"type": "reply", "id": command["id"], "ok": True, "value": "v" * 50_000}).encode()
                     + b"\n")
        await writer.drain()
        await reader.read()

    server = await asyncio.start_server(peer, "127.0.0.1", 0)
    said: list[str] = []
    channel = Channel(lambda lines: None, on_warning=said.append)
    try:
        await channel.connect("127.0.0.1", server.sockets[0].getsockname()[1], "token")
        reply = await within(channel.command(p.Fetch(seq=1, path="value")), 10)
    finally:
        await channel.kill()
        server.close()
    assert not reply.ok and reply.error.startswith("its answer was 50,"), reply
    assert "more than a line from the run may be (10,000); the run's journal holds the value whole" in reply.error
    assert any("a line of 50," in s and "was left out" in s for s in said), said


def test_a_long_line_reads_as_a_short_one_does_and_keeps_its_place():
    """A line past a few KB (a chat's request on a long history) is read by a faster parser: whatever it
    holds, the event is the one the same line short gives, and a batch keeps its order."""
    from flowtui.runtime.channel import parse_events

    deep: object = {"leaf": 1}
    for _ in range(230):
        deep = {"k": deep}
    odd = ["123456789012345678901234567890", "1e400", "-0.0", "0.1", '"\\u0000 é 🙂 \\u202e"',
           '{"a": 1, "a": 2}', "[1, true, null, 2.5e-7]", json.dumps(deep)]
    for raw in odd:
        said: list[str] = []
        short, long = ('{"seq":%d,"ts":0.0,"run_id":"r1","node_id":null,"parent_id":null,"origin":"runtime",'
                       '"type":"ctx.set","name":"x","value":{"v":%s,"pad":"%s"}}' % (seq, raw, pad)
                       for seq, pad in ((1, "x"), (2, "x" * 20_000)))
        got = parse_events([short.encode(), long.encode(), short.replace('"seq":1', '"seq":3').encode()], said.append)
        assert [ev.seq for _, ev in got] == [1, 2, 3] and said == [], raw
        assert got[1][1].value["v"] == got[0][1].value["v"] == got[2][1].value["v"], raw
