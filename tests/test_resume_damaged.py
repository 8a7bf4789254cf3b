"""A journal damaged or edited by hand is refused by ``--resume-from`` before anything runs.

Each refusal names the journal, the line and the event at fault, what is wrong
with it in words, and what to do (re-execute the events before it, or run
without ``--resume-from``); nothing is re-executed on data the recorded run
never held. Before, a run.start's memory ``"abc"`` became three memories, a
reply that was a string failed the run with an AttributeError, an event
without ``run_id`` was reported as a divergence with a KeyError, and a torn
line inside the prefix was skipped in silence: the tool effect it recorded was
not made again and the run said it matched.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from flowtui.runtime.errors import ResumeError
from flowtui.runtime.journal import read_journal
from flowtui.runtime.resume import Resume

ROOT = Path(__file__).resolve().parent.parent
FLOW = ROOT / "flows" / "revisao.py"


def flowtui(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> list[str]:
    """The offline review loop's journal, as lines."""
    where = tmp_path_factory.mktemp("recorded")
    res = flowtui("run", str(FLOW), "--journal", "run.jsonl", cwd=where)
    assert res.returncode == 0, res.stderr
    return (where / "run.jsonl").read_text(encoding="utf-8").splitlines()


def first(events: list[dict], kind: str) -> dict:
    return next(e for e in events if e["type"] == "node.end" and e["kind"] == kind)


def first_effect(events: list[dict]) -> dict:
    """The first thing a tool did to the run (a ctx field it set): re-made, not re-run, when served."""
    return next(e for e in events if e["origin"].startswith("tool:") and e["type"] == "ctx.set")


# name -> (damage done to the events, the line at fault (1-based) found by seq, what the message says)
DAMAGE = {
    "memory a string": (lambda evs: evs[0].update(memory="abc") or 1, "memory: Input should be a valid list"),
    "memory of numbers": (lambda evs: evs[0].update(memory=[1]) or 1, "memory.0: Input should be a valid string"),
    "data a list": (lambda evs: evs[0].update(data=[1]) or 1, "data: Input should be a valid dictionary"),
    "no workflow": (lambda evs: evs[0].pop("workflow") and 1, "workflow: Field required"),
    "no run_id midway": (lambda evs: evs[5].pop("run_id") and 6, "run_id: Field required"),
    "a node id a number": (lambda evs: evs[10].update(node_id=5) or 11, "node_id: Input should be a valid string"),
    "a reply a string": (lambda evs: first(evs, "chat")["data"].update(reply="nope") or first(evs, "chat")["seq"],
                         "data.reply is not a reply"),
    "a call's args a string": (
        lambda evs: first(evs, "chat")["data"]["reply"].update(tool_calls=[{"name": "x", "args": "y"}])
        or first(evs, "chat")["seq"], "data.reply.args: Input should be a valid dictionary"),
    "a tool's results not results": (
        lambda evs: first(evs, "tool")["data"].update(results=["x"]) or first(evs, "tool")["seq"],
        "data.results holds something other than the tool's results"),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_event_in_the_prefix_is_refused_naming_its_line_and_what_to_do(case, recorded, tmp_path):
    events = [json.loads(line) for line in recorded]
    damage, said = DAMAGE[case]
    seq = damage(events)
    journal = tmp_path / "run.jsonl"
    journal.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    with pytest.raises(ResumeError) as caught:
        Resume.load(str(journal))
    message = str(caught.value)
    assert f"--resume-from {journal}: line {seq} (event #{seq}) is damaged: {said}" in message
    if seq == 1:
        assert message.endswith("run the flow without --resume-from")
    else:
        assert f"re-execute the events before it (--resume-from {journal}@{seq - 1})" in message
        Resume.load(f"{journal}@{seq - 1}")  # and that advice works: the events before it are whole


def test_a_type_that_is_no_text_or_a_lone_surrogate_is_read_as_such_never_a_crash(recorded, tmp_path):
    """"type": [] crashed the app and said only "unhashable type: 'list'" headless; a lone surrogate in
    run.start's input (valid JSON) was "not JSON" to --resume-from, and crashed replay and diff."""
    from flowtui.runtime.journal import load_runs

    events = [json.loads(line) for line in recorded]
    events[7]["type"] = []
    journal = tmp_path / "run.jsonl"
    journal.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    with pytest.raises(ResumeError, match=r"line 8, inside the events re-executed .* cannot be read \(not a flowtui "
                                          r"event: its type is list, not text\)"):
        Resume.load(str(journal))
    events = [json.loads(line) for line in recorded]
    events[0]["input"] = "\ud800hi"
    journal.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    (run,) = load_runs(journal)
    assert run[0].input == "\ud800hi" and run[-1].type == "run.end"
    assert Resume.load(str(journal)).at == events[-1]["seq"]


def test_damage_after_k_does_not_matter(recorded, tmp_path):
    events = [json.loads(line) for line in recorded]
    events[-1]["memory"] = "nothing to do with run.end"
    events[-1]["run_id"] = 7
    journal = tmp_path / "run.jsonl"
    journal.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    assert Resume.load(f"{journal}@{events[-2]['seq']}").at == events[-2]["seq"]


@pytest.mark.parametrize("value, why", [
    ("[" * 100_000 + "]" * 100_000, "JSON nested deeper than Python reads"),
    ("9" * 100_000, f"JSON with a number of over {sys.get_int_max_str_digits():,} digits, more than Python reads"),
], ids=["deep", "long-number"])
def test_a_line_of_json_python_cannot_hold_is_said_as_such_not_as_no_json(recorded, tmp_path, value, why):
    """A journal from elsewhere, nested 100,000 deep or holding a 100,000-digit number where an event was: its
    line was said to be "not JSON", which it is."""
    events = [json.loads(line) for line in recorded]
    n = first_effect(events)["seq"]
    lines = list(recorded)
    lines[n - 1] = '{"seq": %s}' % value
    journal = tmp_path / "odd.jsonl"
    journal.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ResumeError, match=re.escape(f"line {n}, inside the events re-executed (1..{events[-1]['seq']}),"
                                                    f" cannot be read ({why})")):
        Resume.load(str(journal))
    notices: list = []
    list(read_journal(journal, notices=notices))  # (what the replay and flowtui diff say of it)
    assert [(notice.line, notice.reason) for notice in notices] == [(n, why)]


def test_a_torn_line_inside_the_prefix_is_refused_and_the_run_up_to_it_reexecutes(recorded, tmp_path):
    events = [json.loads(line) for line in recorded]
    effect = first_effect(events)
    torn = list(recorded)
    n = effect["seq"]  # line n holds event n
    torn[n - 1] = torn[n - 1][:40]
    journal = tmp_path / "torn.jsonl"
    journal.write_text("\n".join(torn) + "\n", encoding="utf-8")
    res = flowtui("run", str(FLOW), "--resume-from", str(journal), "--no-journal", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert (f"flowtui: --resume-from {journal}: line {n}, inside the events re-executed (1..{events[-1]['seq']}), "
            f"cannot be read (not JSON)") in res.stderr
    assert f"re-execute the events before it (--resume-from {journal}@{n - 1})" in res.stderr
    assert "▸" not in res.stderr + res.stdout and "Traceback" not in res.stderr  # nothing ran
    res = flowtui("run", str(FLOW), "--resume-from", f"{journal}@{n - 1}", "--no-journal", cwd=tmp_path)
    assert res.returncode == 0, res.stderr


def test_a_line_that_is_no_event_added_between_two_that_follow_on_is_no_obstacle(recorded, tmp_path):
    """It was refused as 'an event of the run is missing there', though every event was there."""
    events = [json.loads(line) for line in recorded]
    n = first_effect(events)["seq"]
    journal = tmp_path / "added.jsonl"
    journal.write_text("\n".join([*recorded[:n], "this is not json \x1b[31m", "[1,2,3]", *recorded[n:]]) + "\n",
                       encoding="utf-8")
    res = flowtui("run", str(FLOW), "--resume-from", str(journal), "--no-journal", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "diverged" not in res.stderr and "missing" not in res.stderr


def test_lines_taken_out_of_the_prefix_are_refused_naming_the_missing_events(recorded, tmp_path):
    """They read as changed code: a divergence (exit 3) at the next event, the gap never said."""
    events = [json.loads(line) for line in recorded]
    effect = first_effect(events)
    n = effect["seq"]  # line n holds event n
    journal = tmp_path / "gap.jsonl"
    journal.write_text("\n".join(recorded[:n - 1] + recorded[n + 2:]) + "\n", encoding="utf-8")
    res = flowtui("run", str(FLOW), "--resume-from", str(journal), "--no-journal", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert (f"flowtui: --resume-from {journal}: events #{n} to #{n + 2} are missing before line {n} (event "
            f"#{n + 3}), inside the events re-executed (1..{events[-1]['seq']}): lines were taken out there") \
        in res.stderr
    assert f"(--resume-from {journal}@{n - 1})" in res.stderr and "▸" not in res.stderr
    res = flowtui("run", str(FLOW), "--resume-from", f"{journal}@{n - 1}", "--no-journal", cwd=tmp_path)
    assert res.returncode == 0, res.stderr


async def test_a_streamed_reply_leaves_numbers_out_of_its_journal_and_still_reexecutes(tmp_path):
    """Its fragments are not journaled (a credential split over them could not be redacted): the gaps
    inside a model call are no lines taken out."""
    from fakes import streaming_workflow
    from flowtui import bootstrap

    W = streaming_workflow()
    journal = tmp_path / "streamed.jsonl"
    assert await bootstrap(W).run("hi", journal=journal) == "Hello!"
    seqs = [json.loads(line)["seq"] for line in journal.read_text().splitlines()]
    assert seqs != list(range(1, len(seqs) + 1))  # the fragments' numbers are not in it
    events: list = []
    assert await bootstrap(W).run(resume_from=str(journal), on_event=events.append) == "Hello!"
    assert events[-1].type == "run.end" and events[-1].status == "finished"
    assert events[0].resumed_from is not None and not [e for e in events if e.type == "run.diverged"]


@pytest.mark.parametrize("edit", ["reversed", "repeated", "appended again"])
def test_a_journal_whose_lines_were_moved_or_repeated_is_refused_naming_the_first_one(recorded, tmp_path, edit):
    """Reversed, it was read as a run of one event (its run.start) and re-executed live from there: every
    tool ran again. Repeated, the message named the last repeat."""
    lines = {"reversed": recorded[::-1], "repeated": [line for line in recorded for _ in (0, 1)],
             "appended again": recorded + recorded}[edit]
    journal = tmp_path / "edited.jsonl"
    journal.write_text("\n".join(lines) + "\n", encoding="utf-8")
    res = flowtui("run", str(FLOW), "--resume-from", str(journal), "--no-journal", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    n, seq, top = {"reversed": (2, len(recorded) - 1, len(recorded)), "repeated": (2, 1, 1),
                   "appended again": (len(recorded) + 1, 1, len(recorded))}[edit]
    assert (f"flowtui: --resume-from {journal}: its line {n} (event #{seq}) comes after event #{top} of the same "
            "run: the journal's lines were moved or repeated by hand") in res.stderr
    assert "▸" not in res.stderr + res.stdout  # nothing ran


def test_a_last_line_cut_short_by_a_killed_writer_is_no_obstacle_and_is_said(recorded, tmp_path):
    """It was re-executed up to the last event written whole, then went on live, without a word: the
    run's end that line held was done again."""
    journal = tmp_path / "cut.jsonl"
    journal.write_text("\n".join(recorded[:-1]) + "\n" + recorded[-1][:30], encoding="utf-8")
    res = flowtui("run", str(FLOW), "--resume-from", str(journal), "--journal", "again.jsonl", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    n = len(recorded)
    assert (f"! line {n} of {journal}, its last, is cut short (its writer was killed?): re-executed up to event "
            f"#{n - 1}, the last written whole, then live") in res.stderr, res.stderr
    start = json.loads((tmp_path / "again.jsonl").read_text().splitlines()[0])
    assert (start["resumed_from"]["at"], start["resumed_from"]["torn"]) == (n - 1, n)


def test_a_journal_that_stops_before_its_runs_end_is_said_and_recorded(recorded, tmp_path):
    """Its lines whole, its writer killed: it was re-executed to its last event and went on live, unsaid."""
    journal = tmp_path / "stops.jsonl"
    k = len(recorded) // 2
    journal.write_text("\n".join(recorded[:k]) + "\n", encoding="utf-8")
    res = flowtui("run", str(FLOW), "--resume-from", str(journal), "--journal", "again.jsonl", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (f"! {journal} stops at event #{k}, before its run's end (its writer was killed?): re-executed up to "
            "there, then live") in res.stderr, res.stderr
    start = json.loads((tmp_path / "again.jsonl").read_text().splitlines()[0])
    assert start["resumed_from"]["unended"] is True and start["resumed_from"]["at"] == k
    res = flowtui("run", str(FLOW), "--resume-from", f"{journal}@{k - 1}", "--no-journal", cwd=tmp_path)
    assert res.returncode == 0 and "stops at event" not in res.stderr, res.stderr  # (@K: the rest is not asked for)


def test_a_lost_run_start_and_a_broken_sequence_are_told_apart(recorded, tmp_path):
    events = [json.loads(line) for line in recorded]
    lost = copy.deepcopy(events)
    lost[0]["seq"] = 1.5
    journal = tmp_path / "lost.jsonl"
    journal.write_text("\n".join(json.dumps(e) for e in lost) + "\n", encoding="utf-8")
    with pytest.raises(ResumeError, match="its run.start is missing: line 1 cannot be read .not a flowtui "
                                          "event: its seq is not a positive whole number"):
        Resume.load(str(journal))
    broken = copy.deepcopy(events)
    broken[20]["seq"] = 10 ** 6
    journal = tmp_path / "broken.jsonl"
    journal.write_text("\n".join(json.dumps(e) for e in broken) + "\n", encoding="utf-8")
    with pytest.raises(ResumeError, match=r"its line 22 \(event #22\) comes after event #1000000 of the same run"):
        Resume.load(str(journal))


def test_the_app_refuses_a_damaged_journal_before_it_takes_the_screen(recorded, tmp_path):
    events = [json.loads(line) for line in recorded]
    first(events, "chat")["data"]["reply"] = "nope"
    journal = tmp_path / "run.jsonl"
    journal.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    res = flowtui(str(FLOW), "--resume-from", str(journal), cwd=tmp_path)
    assert res.returncode == 2
    assert "is damaged: data.reply is not a reply" in res.stderr


def test_a_model_request_damaged_inside_is_told_as_damage_when_it_is_compared(recorded, tmp_path):
    # a model call's node.start carries the whole request, most of a long journal's bytes: it is read
    # whole only when compared, so damage inside it is found there, and the run stops before it
    n = next(i for i, line in enumerate(recorded, 1) if '"type":"node.start","kind":"chat"' in line)
    line = recorded[n - 1]
    at = line.index('"request"') + 20
    damaged = list(recorded)
    damaged[n - 1] = line[:at] + line[at + 5:]
    journal = tmp_path / "run.jsonl"
    journal.write_text("\n".join(damaged) + "\n", encoding="utf-8")
    res = flowtui("run", str(FLOW), "--resume-from", str(journal), "--no-journal", cwd=tmp_path)
    assert res.returncode == 3, res.stderr
    assert f"  the journal's line {n} (event #{n}) is damaged: not JSON (" in res.stderr
    assert "  recorded: node.start chat PlannerAgent\n" in res.stderr
    assert f"--resume-from {journal}@{n - 1}" in res.stderr
    assert "null → null" not in res.stderr and "Traceback" not in res.stderr


def test_a_k_beyond_the_readable_events_names_the_first_line_that_could_not_be_read(recorded, tmp_path):
    """Every event from line 4 on retyped (a journal from a newer flowtui, or edited): K=40 was said to be
    "beyond its end: events 1..3", with no word of the 79 lines it could not read."""
    events = [json.loads(line) for line in recorded]
    for ev in events[3:]:
        ev["type"] = "future." + ev["type"]
    journal = tmp_path / "run.jsonl"
    journal.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    with pytest.raises(ResumeError) as refused:
        Resume.load(f"{journal}@40")
    said = str(refused.value)
    assert "K=40 is beyond its end: the recorded run" in said and "has events 1..3" in said
    assert f"({len(events) - 3} line(s) after its start could not be read: line 4: an event type this flowtui " \
           "does not know" in said


def test_a_byte_order_mark_on_every_line_is_refused_as_the_replay_reads_it(recorded, tmp_path):
    """A journal re-encoded with a BOM on each line was re-executed in full (each line read past its BOM),
    while the replay and the diff skipped every line but the first: the two readers disagreed."""
    from flowtui.runtime.journal import Skipped, read_journal

    journal = tmp_path / "bom.jsonl"
    journal.write_bytes(b"".join(b"\xef\xbb\xbf" + line.encode() + b"\n" for line in recorded))
    res = flowtui("run", str(FLOW), "--resume-from", str(journal), "--no-journal", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert (f"flowtui: --resume-from {journal}: {len(recorded) - 1} line(s) after event #1, the last it could "
            "read, cannot be read (line 2: a byte-order mark at its start") in res.stderr, res.stderr
    notices: list = []
    assert [ev.type for ev in read_journal(journal, notices=notices)] == ["run.start"]
    assert all(isinstance(n, Skipped) and "byte-order mark" in n.reason for n in notices) and len(notices) == \
        len(recorded) - 1
    journal.write_bytes(b"\xef\xbb\xbf" + "".join(line + "\n" for line in recorded).encode())  # an editor's: taken
    assert flowtui("run", str(FLOW), "--resume-from", str(journal), "--no-journal", cwd=tmp_path).returncode == 0


def test_unreadable_lines_after_the_last_event_read_are_refused_unless_the_run_ended_before_them(recorded, tmp_path):
    events = [json.loads(line) for line in recorded]
    n = first_effect(events)["seq"]
    journal = tmp_path / "tail.jsonl"
    journal.write_text("\n".join([*recorded[:n], "\x00garbage", *recorded[n + 1:-1]]) + "\n", encoding="utf-8")
    res = flowtui("run", str(FLOW), "--resume-from", str(journal), "--no-journal", cwd=tmp_path)
    assert res.returncode == 2 and "inside the events re-executed" in res.stderr, res.stderr  # (inside: as before)
    journal.write_text("\n".join([*recorded[:n], "\x00garbage"]) + "\n", encoding="utf-8")  # the rest lost
    res = flowtui("run", str(FLOW), "--resume-from", str(journal), "--no-journal", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert f"1 line(s) after event #{n}, the last it could read, cannot be read (line {n + 1}:" in res.stderr
    assert f"(--resume-from {journal}@{n})" in res.stderr
    assert flowtui("run", str(FLOW), "--resume-from", f"{journal}@{n}", "--no-journal", cwd=tmp_path).returncode == 0
    journal.write_text("\n".join([*recorded, "\x00garbage"]) + "\n", encoding="utf-8")  # after its end: no obstacle
    assert flowtui("run", str(FLOW), "--resume-from", str(journal), "--no-journal", cwd=tmp_path).returncode == 0


def test_the_first_line_at_fault_is_the_one_said(recorded, tmp_path):
    """A line that cannot be read (line 6) before an event that is damaged (line 14): the damaged one was
    said first, and its advice (@13) only led to the other refusal (@5)."""
    events = [json.loads(line) for line in recorded]
    events[5]["type"] = "foo.bar"
    node = next(e for e in events[10:] if e["type"] == "node.start")
    node["kind"] = "weird"
    journal = tmp_path / "run.jsonl"
    journal.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    with pytest.raises(ResumeError) as caught:
        Resume.load(str(journal))
    assert f"--resume-from {journal}: line 6, inside the events re-executed" in str(caught.value)
    assert f"(--resume-from {journal}@5)" in str(caught.value)


def test_a_name_of_many_lines_or_a_key_of_a_million_characters_keeps_the_report_to_a_few_short_lines(recorded,
                                                                                                    tmp_path):
    """A journal's agent named by 50,000 lines printed a report of as many; a state key of a million
    characters, a line of a million."""
    events = [json.loads(line) for line in recorded]
    agent = next(e for e in events if e["type"] == "node.start" and e["kind"] == "agent")
    agent["name"] = "A\n" * 50_000 + "B"
    journal = tmp_path / "names.jsonl"
    journal.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    res = flowtui("run", str(FLOW), "--resume-from", str(journal), "--no-journal", cwd=tmp_path)
    assert res.returncode == 3, res.stderr
    report = res.stderr[res.stderr.index("flowtui: the run diverged"):].splitlines()
    assert len(report) < 12 and max(map(len, report)) <= 420, report
    assert "(RevisaoWorkflow › A⏎A⏎A⏎" in report[0]
    events = [json.loads(line) for line in recorded]
    events[0]["state"]["x" * 1_000_000] = 1
    journal.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    res = flowtui("run", str(FLOW), "--resume-from", str(journal), "--no-journal", cwd=tmp_path)
    assert res.returncode == 3 and len(res.stderr) < 5_000 and "state.xxxx" in res.stderr, res.stderr[:500]


def test_an_event_numbered_by_hand_past_the_runs_end_does_not_move_its_end(recorded, tmp_path):
    """A copy of an event appended after run.end, numbered 10**30: @5000 was taken for a run of 83 events,
    and the whole run was told to re-execute up to event #999...9 (10**30 - 1)."""
    events = [json.loads(line) for line in recorded]
    forged = {**events[50], "seq": 10 ** 30}
    journal = tmp_path / "run.jsonl"
    journal.write_text("\n".join(json.dumps(e) for e in [*events, forged]) + "\n", encoding="utf-8")
    last = events[-1]["seq"]
    assert events[-1]["type"] == "run.end"
    with pytest.raises(ResumeError, match=rf"K=5000 is beyond its end: the recorded run .* has events 1..{last};"):
        Resume.load(f"{journal}@5000")
    assert Resume.load(str(journal)) is not None  # the run as recorded, to its end
    assert Resume.load(f"{journal}@{last}") is not None


def test_a_node_end_without_its_start_is_refused_not_taken_for_a_call_that_never_returned(recorded, tmp_path):
    """A model call's node.start with its id changed by hand read as a call the recorded run never returned from:
    the prefix stopped there and every later model call was made live again (paid, from a forged file)."""
    events = [json.loads(line) for line in recorded]
    start = next(e for e in events if e["type"] == "node.start" and e["kind"] == "chat")
    end = next(e for e in events if e["type"] == "node.end" and e["node_id"] == start["node_id"])
    start["node_id"] = "n999"
    journal = tmp_path / "orphan.jsonl"
    journal.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    res = flowtui("run", str(FLOW), "--resume-from", str(journal), "--no-journal", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert (f"flowtui: --resume-from {journal}: line {end['seq']} (event #{end['seq']}) ends node "
            f"'{end['node_id']}', which no node.start before it begins: the journal was edited by hand there; "
            f"re-execute the events before it (--resume-from {journal}@{end['seq'] - 1})") in res.stderr, res.stderr
    assert "▸" not in res.stderr  # nothing ran
    # K before that end: the call still read as one that never returned
    res = flowtui("run", str(FLOW), "--resume-from", f"{journal}@{start['seq']}", "--no-journal", cwd=tmp_path)
    assert res.returncode == 2 and "which no node.start before it begins" in res.stderr, res.stderr


def test_a_bare_nan_flowtui_never_writes_is_refused_as_damage_naming_its_line(recorded, tmp_path):
    """A NaN in an int field of run.start's state was re-executed and reported as a divergence (exit 3) of
    "null → 0": flowtui writes a NaN as null, so a bare one is a journal edited by hand."""
    events = [json.loads(line) for line in recorded]
    events[0]["state"]["rodadas"] = float("nan")
    journal = tmp_path / "nan.jsonl"
    journal.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    res = flowtui("run", str(FLOW), "--resume-from", str(journal), "--no-journal", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert ("line 1 cannot be read (holds a bare NaN, which flowtui never writes (it writes null): edited by "
            "hand?)") in res.stderr, res.stderr
