"""The journal: whatever a run writes, the reader reads back; a crash loses nothing already
written; a torn or foreign line never costs the rest of the file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from flowtui import FunctionProvider, Input, agent, bootstrap, tool, workflow
from flowtui.runtime.bus import build_event
from flowtui.runtime.events import CtxSet, StateAppend
from flowtui.runtime.encoding import encode_event
from flowtui.runtime.journal import Invalid, JournalWriter, Unknown, read_journal
from flowtui.runtime.secrets import Redactor
from flowtui.runtime.messages import Message
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]
NONE = Redactor([])


def ev(cls, **fields):
    base = dict(seq=1, ts=0.0, run_id="r1", node_id=None, parent_id=None, origin="runtime")
    return build_event(cls, {**base, **fields})


def roundtrip(tmp_path, *events) -> list:
    path = tmp_path / "j.jsonl"
    writer = JournalWriter(path)
    for e in events:
        writer(e)
    writer.close()
    return list(read_journal(path))


def test_values_json_cannot_hold_are_written_so_they_read_back(tmp_path):
    surrogate = "a\udc80b"
    huge = 10 ** 5000
    events = roundtrip(tmp_path, ev(CtxSet, name="s", value=surrogate), ev(CtxSet, seq=2, name="n", value=huge),
                       ev(CtxSet, seq=3, name="f", value=float("nan")),
                       ev(StateAppend, seq=4, bucket="history", item=Message(role="tool", content=surrogate)),
                       ev(CtxSet, seq=5, name="big", value=2 ** 70), ev(CtxSet, seq=6, name="neg", value=-2 ** 64 - 1))
    assert [e.seq for e in events] == [1, 2, 3, 4, 5, 6]  # none dropped
    assert (events[4].value, events[5].value) == (2 ** 70, -2 ** 64 - 1)  # past 64 bits, still exact
    assert events[0].value == "a\ufffdb"
    assert events[1].value.startswith("<int of about 500")
    assert events[2].value is None
    assert events[3].item.content == "a\ufffdb"


def test_the_journal_keeps_the_whole_of_a_value_the_wire_cuts_whichever_encodes_first():
    big = ev(CtxSet, name="out", value="x" * 100_000)
    for order in (("wire", "journal"), ("journal", "wire")):
        lines = {}
        for who in order:
            lines[who] = encode_event(big, NONE, limit=1000 if who == "wire" else None)
        assert json.loads(lines["journal"])["value"] == "x" * 100_000
        wire = json.loads(lines["wire"])
        assert wire["value"] == "x" * 1000 and wire["elided"] == {"value": 100_000}
    small = ev(CtxSet, seq=2, name="n", value=3)
    assert encode_event(small, NONE, limit=1000) == encode_event(small, NONE)  # not cut: the same line


async def test_a_tool_output_with_a_lone_surrogate_loses_no_event(tmp_path):
    class Args(BaseModel):
        pass

    @tool(name="odd", schema=Args)
    class Odd:
        def execute(self, args: Args = Input()):
            return "broken \udcff text"

    def model(messages, tools):
        return "done" if any(m.role == "tool" for m in messages) else {"content": "", "tool_calls": [{"name": "odd"}]}

    @agent(provider=FunctionProvider(model), prompt="p", tools=[Odd])
    class A:
        pass

    @workflow(steps=[A, A])
    class W:
        pass

    seen = []
    app = bootstrap(W)
    app.subscribe(seen.append)
    path = tmp_path / "j.jsonl"
    await app.run("go", journal=path)
    written = list(read_journal(path))
    assert [e.seq for e in written] == [e.seq for e in seen if e.type != "chat.delta"]
    assert any(getattr(e, "item", None) and "broken \ufffd text" in str(e.item) for e in written)


@settings(max_examples=60, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=12))
def test_whatever_a_ctx_value_holds_the_reader_reads_the_line(tmp_path_factory, value):
    path = tmp_path_factory.mktemp("j") / "j.jsonl"
    writer = JournalWriter(path)
    writer(ev(CtxSet, name="x", value=value))
    writer.close()
    (back,) = read_journal(path)
    assert back.type == "ctx.set" and back.name == "x"
    raw = path.read_bytes()
    raw.decode("utf-8")  # valid UTF-8
    assert b"\x1b" not in raw and b"\xc2\x9b" not in raw  # cat-ing it drives no terminal


def test_torn_lines_a_bom_and_foreign_lines(tmp_path):
    lines = [encode_event(ev(CtxSet, seq=i, name="i", value=i), NONE).decode() for i in range(1, 6)]
    path = tmp_path / "j.jsonl"
    unknown = json.dumps({"seq": 4, "ts": 0, "run_id": "r1", "type": "tool.progress", "origin": "tool:x"})
    invalid = json.dumps({"seq": 5, "ts": 0, "run_id": "r1", "type": "state.append", "bucket": "history",
                          "item": "a plain string"})
    path.write_bytes(b"\xef\xbb\xbf" + "\n".join([lines[0], lines[1][:17] + "\udcff".encode("utf-8", "surrogatepass").decode("latin-1"),
                                                  lines[2], unknown, invalid]).encode("utf-8", "surrogatepass")
                     + b"\n" + lines[4][:25].encode())
    notices: list = []
    events = list(read_journal(path, notices=notices))
    assert [n.line for n in notices] == [2, 6]
    assert "cut short" in notices[1].reason
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["CtxSet", "CtxSet", "Unknown", "Invalid"]
    assert events[2].type == "tool.progress" and isinstance(events[2], Unknown)
    assert "history item 0 is str" in events[3].reason and isinstance(events[3], Invalid)


def test_a_sparse_gigabyte_is_read_through_without_being_held_and_the_events_after_it_kept(tmp_path):
    """A hole of zeros (a sparse file, a disk that lost a block) is one 'line' of a gigabyte: it is
    skipped as not JSON, read in pieces (the reader's memory stays small), and the event after it
    is read; a long event line is kept whole."""
    import resource

    path = tmp_path / "j.jsonl"
    long = encode_event(ev(CtxSet, seq=1, name="long", value="x" * 3_000_000), NONE)
    with path.open("wb") as f:
        f.write(long + b"\n")
        f.seek(len(long) + 1 + (1 << 30))  # a gigabyte of zeros, not written (sparse)
        f.write(b"\n" + encode_event(ev(CtxSet, seq=2, name="after", value=1), NONE) + b"\n")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    notices: list = []
    events = list(read_journal(path, notices=notices))
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert [(e.name, len(str(e.value))) for e in events] == [("long", 3_000_000), ("after", 1)]
    assert [n.line for n in notices] == [2] and "does not start like JSON" in notices[0].reason
    assert grown_kib < 200 * 1024  # holding the gigabyte would add a million KiB


def test_appending_after_a_torn_line_keeps_the_new_run_whole(tmp_path):
    path = tmp_path / "j.jsonl"
    path.write_text(encode_event(ev(CtxSet, name="a", value=1), NONE).decode() + "\n" + '{"seq":2,"ts":0,"run_')
    writer = JournalWriter(path)
    assert writer.appended_to == 1
    writer(ev(CtxSet, name="b", value=2))
    writer.close()
    notices: list = []
    events = list(read_journal(path, notices=notices))
    assert [e.name for e in events] == ["a", "b"] and [n.line for n in notices] == [2]


def test_fold_skips_invalid_events_and_survives_a_node_cycle():
    from flowtui.runtime.events import NodeStart
    from flowtui.runtime.fold import RunView

    view = RunView()
    view.apply_many([
        Invalid(3, "bad", {"seq": 3}),
        ev(NodeStart, seq=4, node_id="a", parent_id="b", kind="agent", name="A"),
        ev(NodeStart, seq=5, node_id="b", parent_id="a", kind="loop", name="L"),
        ev(NodeStart, seq=6, node_id="c", parent_id="c", kind="tool", name="T"),
    ])
    assert view.events == 4
    assert view.nodes["c"].children == []  # its own parent: not its own child
    assert "broken link" in " ".join(view.path())  # where the run is: a bounded walk, not a hang


# --- crashes -------------------------------------------------------------------------------------------

SLOW_FLOW = textwrap.dedent('''
    import time
    from flowtui import FunctionProvider, agent, loop, workflow

    def model(messages, tools):
        time.sleep(0.002)
        return "x" * 200

    @agent(provider=FunctionProvider(model), prompt="p")
    class A:
        def after_response(self, r, ctx):
            ctx.n = ctx.get("n", 0) + 1
            ctx.state.append("memory", f"item {ctx.n} " + "y" * 100)

    @workflow(steps=[loop(steps=[A], until=lambda ctx: False, max_iterations=100000)])
    class Slow:
        pass
''')


def test_kill_9_loses_no_event_already_written(tmp_path):
    """Killed at random moments, the journal keeps a prefix of the run: every line before the
    last one whole and in order, at most that last one torn."""
    flow = tmp_path / "slow.py"
    flow.write_text(SLOW_FLOW)
    for i in range(4):
        path = tmp_path / f"j{i}.jsonl"
        proc = subprocess.Popen([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run", str(flow),
                                 "--input", "go", "--journal", str(path)], cwd=tmp_path,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while (not path.exists() or path.stat().st_size < 20000 * (i + 1)) and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        # the run's process outlives its killed client a moment (it stops the run and journals that):
        # read once it is done, not while a line is half written (a reader racing a writer)
        size, still = -1, time.monotonic()
        while time.monotonic() - still < 0.5 and time.monotonic() < deadline + 30:
            if path.stat().st_size != size:
                size, still = path.stat().st_size, time.monotonic()
            time.sleep(0.05)
        notices: list = []
        events = list(read_journal(path, notices=notices))
        assert [e.seq for e in events] == list(range(1, len(events) + 1))  # no gap, nothing lost
        assert len(events) > 50
        lines = path.read_bytes().split(b"\n")
        assert [n.line for n in notices] in ([], [len(lines)])  # only the very last may be torn
        if events[-1].type == "run.end":  # the run's process ended it: not as a person's stop
            assert events[-1].reason.startswith("its client went away"), events[-1].reason


def test_a_line_whose_type_is_no_name_is_unknown_and_its_names_are_redacted(tmp_path):
    """A type that is a list or an object is an unknown event, not a crash; a long type or origin is
    quoted cut, never with the part of a credential the cut left."""
    key = "sk-proj-" + "Ab3d" * 12
    path = tmp_path / "j.jsonl"
    path.write_text(json.dumps({"type": ["x"]}) + "\n" + json.dumps({"type": {"a": 1}}) + "\n"
                    + json.dumps({"type": "y" * 58 + key, "origin": "o" * 58 + key}) + "\n")
    read = list(read_journal(path))
    assert [type(r) for r in read] == [Unknown, Unknown, Unknown]
    assert "Ab3d" not in read[2].reason and "Ab3d" not in read[2].origin and "[redacted]" in read[2].reason


async def test_a_run_start_with_a_malformed_extra_is_read_without_it_and_said(tmp_path):
    """memory given as a string in run.start (a journal edited by hand): the run.start was left out, so
    the replay showed an empty run (no messages, no memory) beside an event log of every event."""
    from flowtui.runtime.fold import RunView
    from flowtui.runtime.journal import Mended, load_runs

    @agent(provider=FunctionProvider(lambda m, t: "resposta"), prompt="p")
    class Eco:
        pass

    @workflow(steps=[Eco])
    class W:
        pass

    path = tmp_path / "j.jsonl"
    await bootstrap(W).run("olá", memory=["plano: pro"], journal=path)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    lines[0]["memory"], lines[0]["data"] = "plano: pro", [1]
    path.write_text("".join(json.dumps(ev) + "\n" for ev in lines))
    notices: list = []
    (events,) = load_runs(path, notices=notices)
    view = RunView()
    for ev in events:
        view.apply(ev)
    assert [m.content for m in view.history] == ["olá", "resposta"] and view.status == "finished"
    assert view.memory == []  # what could not be read is not made up
    (said,) = notices
    assert isinstance(said, Mended) and said.line == 1
    assert said.reason.startswith("run.start's data, memory could not be read (") and said.reason.endswith(
        "): the run is read without them")
    lines[0]["workflow"] = ["not", "a", "name"]  # a fault no run can be read past: still an invalid event
    path.write_text("".join(json.dumps(ev) + "\n" for ev in lines))
    assert isinstance(next(read_journal(path)), Invalid)


def test_a_journal_another_tool_rewrote_is_appended_to(tmp_path):
    """A journal whose lines went through another tool (``json.dumps``' spaces, keys reordered): every
    reader took it, but ``--journal`` refused it as "something other than a flowtui journal (no run
    starts in it)", counting runs only by flowtui's own first bytes."""
    path = tmp_path / "j.jsonl"
    root = Path(__file__).resolve().parent.parent

    def run() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run",
                               "flows/revisao.py", "--input", "x", "--journal", str(path)],
                              capture_output=True, text=True, cwd=root, timeout=120)

    assert run().returncode == 0
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(dict(reversed(e.items()))) + "\n" for e in lines))
    again = run()
    assert again.returncode == 0, again.stderr
    assert f"journal: appended run 2 to {path}" in again.stderr
    assert [e.type for e in read_journal(path) if e.type in ("run.start", "run.end")] == ["run.start", "run.end"] * 2


@pytest.mark.parametrize("seq,why", [(-5, "greater than or equal to 1"), (0, "greater than or equal to 1"),
                                     (10**30, "less than or equal to 9007199254740992"), (True, "valid integer"),
                                     (2.0, "valid integer")])
def test_a_seq_no_run_could_have_is_an_invalid_line_named_as_such(tmp_path, seq, why):
    """A journal from elsewhere with ``"seq": -5``, ``10**30`` or ``true``: diff and replay took the line
    (``-5``: "events #-4 to #0 are missing before it"; ``true``: read as event #1; ``10**30`` replayed
    after the run's end), where ``--resume-from`` refused it."""
    lines = [encode_event(ev(CtxSet, seq=i, name="i", value=i), NONE).decode() for i in range(1, 4)]
    odd = json.loads(lines[1])
    odd["seq"] = seq
    path = tmp_path / "j.jsonl"
    path.write_text("\n".join([lines[0], json.dumps(odd), lines[2]]) + "\n")
    events = list(read_journal(path))
    assert [type(e).__name__ for e in events] == ["CtxSet", "Invalid", "CtxSet"]
    assert events[1].reason.startswith("ctx.set: seq: ") and why in events[1].reason, events[1].reason


@pytest.mark.parametrize("kind", [str, dict])  # (one pass of the fast encoder, and one value by value)
def test_invisible_characters_are_escaped_in_a_line_as_the_bidi_overrides_are(tmp_path, kind):
    """flowtui run --json and the journal escaped U+202E and U+2028 but wrote U+200B, U+2060, a BOM, the
    tag characters (ASCII spelled invisibly) raw: text that reads the same on a terminal and is not."""
    from flowtui.runtime.inert import visible

    hidden = "\u200b\u200f\u2060\ufeff\u202e\u061c\xad\U000e0049\U000e0047"
    text = "a" + "b".join(hidden)
    assert all(visible(c) != c for c in hidden)  # (each one the app shows as an escape)
    value = text if kind is str else {"k": [text]}
    path = tmp_path / "j.jsonl"
    writer = JournalWriter(path)
    writer(ev(CtxSet, name="x", value=value))
    writer.close()
    raw = path.read_bytes()
    assert not any(c in raw.decode() for c in hidden), raw
    assert "\\u200b" in raw.decode() and "\\udb40\\udc49" in raw.decode()
    (back,) = read_journal(path)
    assert back.value == value  # read back as it was


def test_every_character_the_app_shows_as_an_escape_is_escaped_in_a_line():
    """A line is looked at as bytes for the characters to escape: every one the app shows escaped, none
    other (a line with none is written in one pass)."""
    from flowtui.runtime.encoding import _needs_fix
    from flowtui.runtime.inert import visible

    shown = [chr(c) for c in range(0x80, 0x110000) if not 0xD800 <= c < 0xE000 and visible(chr(c)) != chr(c)]
    line = encode_event(ev(CtxSet, name="x", value="".join(shown)), NONE).decode()
    assert not any(c in line for c in shown)
    assert not _needs_fix("é “ç” — ✓ 日本 🙂 \u200d".encode())  # (a joiner is no escape: emoji are joined by it)
