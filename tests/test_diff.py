"""flowtui diff: two journals of really run flows, each pair with one known difference, compared
place by place; the report names that difference first, at the right path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from flowtui import FunctionProvider, Input, State, WorkflowRuntime, agent, bootstrap, loop, tool, workflow
from flowtui.runtime.diff import MISSING, diff_runs, load_run
from flowtui.runtime.diff_cli import main_diff, shorten
from flowtui.runtime.inert import is_inert

ROOT = Path(__file__).resolve().parent.parent
WIDTH = 100


class ReviewState(BaseModel):
    approved: bool = False
    rounds: int = 0
    problems: list[str] = []


class ProblemArgs(BaseModel):
    text: str


class Question(BaseModel):
    q: str


def review_flow(*, prompt="Review the draft.", arg="no example", step=1, approve_at=2, note=None,
                child_prompt="You research.", reply_extra="", ceiling=5):
    """A plan-free review loop (writer, reviewer with a tool, a child workflow behind another tool);
    each keyword changes one thing."""

    @tool(name="note_problem", description="Records a problem.", schema=ProblemArgs)
    class NoteProblem:
        def execute(self, args: ProblemArgs = Input(), s: ReviewState = State()):
            s.problems.append(args.text)
            return f"noted: {args.text}"

    @agent(provider=FunctionProvider(lambda m, t: "facts: the sky is blue"), prompt=child_prompt)
    class Researcher:
        pass

    @workflow(steps=[Researcher])
    class ResearchWorkflow:
        pass

    @tool(name="research", description="Asks a sub-agent.", schema=Question)
    class Research:
        def __init__(self, runtime: WorkflowRuntime):
            self.runtime = runtime

        async def execute(self, args: Question = Input()):
            return await self.runtime.run(ResearchWorkflow, input=args.q)

    writes = iter(range(1, 100))

    def writer(messages, tools):
        n = next(writes)
        if n == 1:
            return {"content": "", "tool_calls": [{"name": "research", "args": {"q": "sky?"}}]}
        return f"draft {n}" + reply_extra

    reviews = iter(range(1, 100))

    def reviewer(messages, tools):
        n = next(reviews)
        if n < approve_at:
            return {"content": "REJECTED", "tool_calls": [
                {"name": "note_problem", "args": {"text": arg if n == 1 else f"problem {n}"}},
                {"name": "note_problem", "args": {"text": "too short"}}]}
        return "APPROVED"

    @agent(provider=FunctionProvider(writer), prompt="Write the text.", tools=[Research])
    class Writer:
        def after_response(self, response, ctx):
            if note is not None and not ctx.get("noted", False):
                ctx.noted = True
                ctx.state.append("memory", note)

    @agent(provider=FunctionProvider(reviewer), prompt=prompt, tools=[NoteProblem])
    class Reviewer:
        def __init__(self, s: ReviewState = State()):
            self.s = s

        def after_response(self, response, ctx):
            self.s.rounds += step
            self.s.approved = response == "APPROVED"

    @workflow(state=ReviewState, steps=[Writer, loop(steps=[Writer, Reviewer], until=lambda ctx, s: s.approved,
                                                      max_iterations=ceiling)])
    class ReviewWorkflow:
        pass

    return ReviewWorkflow


async def journal(tmp_path, name, *, memory=None, **changes) -> Path:
    path = tmp_path / f"{name}.jsonl"
    await bootstrap(review_flow(**changes)).run("write about the sky", memory=memory, journal=path)
    return path


def diff(capsys, *args) -> tuple[int, str, str]:
    code = main_diff([*map(str, args), "--width", str(WIDTH)])
    out, err = capsys.readouterr()
    return code, out, err


def first(a: Path, b: Path):
    found = diff_runs(load_run(a).events, load_run(b).events)
    assert found and found[0].first and not any(d.first for d in found[1:])
    return found[0], found


async def test_the_same_flow_run_twice_is_the_same(tmp_path, capsys):
    a, b = await journal(tmp_path, "a"), await journal(tmp_path, "b")
    assert load_run(a).events[0].run_id != load_run(b).events[0].run_id  # ids and timestamps differ
    code, out, _ = diff(capsys, a, b)
    assert code == 0
    assert "The runs are the same" in out


async def test_a_loop_ceiling_the_run_never_reached_is_no_difference(tmp_path, capsys):
    # as the README says (a ceiling shows in what the loop did): it was said at the loop's start and in
    # each iteration's ctx.loop, exit 1
    a, b = await journal(tmp_path, "a"), await journal(tmp_path, "b", ceiling=9)
    code, out, _ = diff(capsys, a, b)
    assert (code, "max_iterations" in out) == (0, False), out
    assert "The runs are the same" in out
    # one that cut the loop short shows in what the loop did
    c = await journal(tmp_path, "c", ceiling=1)
    code, out, _ = diff(capsys, a, c)
    assert code == 1 and "max_iterations" not in out and "stopped_by" in out, out


async def test_a_run_with_a_budget_is_the_same_as_one_without(tmp_path, capsys):
    """What was spent (ctx.budget) is not compared: the calls show as steps, and a budget that stopped the run
    shows in what follows. Said only where a budget is, it was a difference at every call."""
    from flowtui import Budget

    a, b = await journal(tmp_path, "a"), tmp_path / "b.jsonl"
    await bootstrap(review_flow()).run("write about the sky", journal=b, budget=Budget(max_chat_calls=40))
    assert any(e.type == "ctx.set" and e.name == "budget" for e in load_run(b).events)
    code, out, _ = diff(capsys, a, b)
    assert code == 0, out


async def test_a_memory_item(tmp_path, capsys):
    a = await journal(tmp_path, "a", memory={"plan": "pro"})
    b = await journal(tmp_path, "b", memory={"plan": "free"})
    d, found = first(a, b)
    assert (d.path, d.field, d.a, d.b) == ("ReviewWorkflow", "memory[0]", "plan: pro", "plan: free")
    # every model call saw it: the same change, linked to the first, not a new one
    seen = [x for x in found if x.field == "memory[0]" and x.path.endswith("turn 1")]
    assert len(seen) >= 5 and all(x.same_as == 0 for x in seen)
    assert all(x.same_as == 0 for x in found[1:])
    code, out, _ = diff(capsys, a, b)
    assert code == 1
    lines = out.splitlines()
    at = lines.index("▶ first divergence: ReviewWorkflow")
    assert lines[at + 1] == '  memory[0]: "plan: pro" → "plan: free"'
    assert "ReviewWorkflow › loop 1 › Reviewer › turn 1: as above, memory[0]" in lines


async def test_a_memory_item_appended_by_a_hook(tmp_path):
    a = await journal(tmp_path, "a", note="audience: kids")
    b = await journal(tmp_path, "b", note="audience: experts")
    d, _ = first(a, b)
    assert (d.path, d.field, d.a, d.b) == ("ReviewWorkflow › Writer", "memory appended[0]",
                                           "audience: kids", "audience: experts")


async def test_a_tool_argument(tmp_path, capsys):
    a = await journal(tmp_path, "a", arg="no example")
    b = await journal(tmp_path, "b", arg="no ending")
    d, found = first(a, b)
    # what the model answered comes first: it chose the argument
    assert (d.path, d.field, d.a, d.b) == ("ReviewWorkflow › loop 1 › Reviewer › turn 1",
                                           "reply.tool_calls[0].args.text", "no example", "no ending")
    tool = [x for x in found if x.path == "ReviewWorkflow › loop 1 › Reviewer › tool note_problem"]
    assert [(x.field, x.a, x.b) for x in tool if x.same_as is None] == [
        ("result.content", "noted: no example", "noted: no ending")]
    assert {x.field for x in tool} == {"args.text", "result.content", "state.problems[0]"}
    # the second call of the same tool in that turn has its own place, and its own argument is the same
    second = [x for x in found if x.path == "ReviewWorkflow › loop 1 › Reviewer › tool note_problem #2"]
    assert [x.field for x in second] == ["state.problems[0]"]
    code, out, _ = diff(capsys, a, b)
    assert code == 1
    assert "▶ first divergence: ReviewWorkflow › loop 1 › Reviewer › turn 1\n  reply.tool_calls[0].args.text: " \
           '"no example" → "no ending"' in out


async def test_a_reply_that_differs_only_in_its_line_ends_shows_the_difference(tmp_path, capsys):
    """"linha um\r\nlinha dois" against "linha um\nlinha dois" was said as "…\n…" → "…\n…": a
    difference shown as none."""
    a = await journal(tmp_path, "a", reply_extra="\nend")
    b = await journal(tmp_path, "b", reply_extra="\r\nend")
    code, out, _ = diff(capsys, a, b)
    assert code == 1 and '"draft 2\\nend" → "draft 2\\r\\nend"' in out, out
    from flowtui.runtime.diff_cli import _value  # a credential at a line's start after a CRLF: still found

    assert _value("hdr\r\nBearer abcdefghijklmnopqrstuv") == '"hdr\\r\\nBearer [redacted]"'


async def test_a_state_field(tmp_path):
    a = await journal(tmp_path, "a", step=1)
    b = await journal(tmp_path, "b", step=2)
    d, found = first(a, b)
    assert (d.path, d.field, d.a, d.b) == ("ReviewWorkflow › loop 1 › Reviewer", "state.rounds", 1, 2)
    assert [(x.path, x.field, x.a, x.b) for x in found[1:]] == [
        ("ReviewWorkflow › loop 2 › Reviewer", "state.rounds", 2, 4)]


async def test_an_extra_loop_iteration(tmp_path, capsys):
    a = await journal(tmp_path, "a", approve_at=2)
    b = await journal(tmp_path, "b", approve_at=3)
    d, found = first(a, b)
    assert (d.path, d.field, d.a, d.b) == ("ReviewWorkflow › loop 2 › Reviewer › turn 1", "reply.content",
                                           "APPROVED", "REJECTED")
    extra = [x for x in found if x.only is not None]
    assert [(x.path, x.only) for x in extra] == [  # B's reviewer called its tool once more, then approved
        ("ReviewWorkflow › loop 2 › Reviewer › tool note_problem", "b"),
        ("ReviewWorkflow › loop 2 › Reviewer › tool note_problem #2", "b"),
        ("ReviewWorkflow › loop 3", "b")]
    assert extra[-1].b == "Writer, Reviewer (2 model calls)"
    assert extra[0].b == "tool note_problem (1 tool call)"  # not "tool tool note_problem"
    # the state a step left alone is compared with what the other run's step set it to
    assert ("ReviewWorkflow › loop 2 › Reviewer", "state.approved", True, False) in [
        (x.path, x.field, x.a, x.b) for x in found]
    assert ("ReviewWorkflow › loop", "iterations", 2, 3) in [(x.path, x.field, x.a, x.b) for x in found]
    code, out, _ = diff(capsys, a, b)
    assert "ReviewWorkflow › loop 3\n  only in B: Writer, Reviewer (2 model calls)" in out
    # and the other way round: the iteration that no longer exists
    code, out, _ = diff(capsys, b, a)
    assert code == 1 and "ReviewWorkflow › loop 3\n  only in A: " in out


async def test_a_changed_prompt(tmp_path):
    a = await journal(tmp_path, "a", prompt="Review the draft.")
    b = await journal(tmp_path, "b", prompt="Review the draft. Be strict.")
    d, found = first(a, b)
    assert (d.path, d.field) == ("ReviewWorkflow › loop 1 › Reviewer › turn 1", "prompt")
    assert (d.a, d.b) == ("Review the draft.", "Review the draft. Be strict.")
    assert [(x.path, x.same_as) for x in found[1:]] == [("ReviewWorkflow › loop 2 › Reviewer › turn 1", 0)]


async def test_a_child_workflow_is_aligned_under_its_tool(tmp_path, capsys):
    a = await journal(tmp_path, "a", child_prompt="You research.")
    b = await journal(tmp_path, "b", child_prompt="You research carefully.")
    d, found = first(a, b)
    assert d.path == "ReviewWorkflow › Writer › tool research › ResearchWorkflow › Researcher › turn 1"
    assert (d.field, d.a, d.b) == ("prompt", "You research.", "You research carefully.")
    assert len(found) == 1
    code, out, _ = diff(capsys, a, b)
    assert code == 1 and all(len(line) <= WIDTH for line in out.splitlines())
    assert main_diff([str(a), str(b), "--width", "40"]) == 1  # narrow: the run's description wrapped, not cut
    out = capsys.readouterr().out
    assert all(len(line) <= 40 for line in out.splitlines())
    assert "   its only run: ReviewWorkflow,\n   finished, 72 events\n" in out  # (the path is the part cut)


async def test_a_difference_in_the_middle_of_a_long_value_is_shown(tmp_path, capsys):
    a = await journal(tmp_path, "a", reply_extra=" " + "x" * 150 + " red " + "y" * 150)
    b = await journal(tmp_path, "b", reply_extra=" " + "x" * 150 + " blue " + "y" * 150)
    code, out, _ = diff(capsys, a, b)
    assert code == 1
    lines = out.splitlines()
    assert all(len(line) <= WIDTH for line in lines)
    assert any("x red y" in line for line in lines) and any("x blue y" in line for line in lines)


def test_shorten_cuts_in_the_middle_and_keeps_short_text():
    assert shorten("short", 40) == "short"
    cut = shorten("a" * 50 + "b" * 50, 40)
    assert len(cut) <= 40 and cut.startswith("aaaa") and cut.endswith("bbbb")
    kept = cut.split("…")  # the number says what is left out (it said the whole text's length)
    assert int(kept[1].strip("( chars)")) == 100 - len(kept[0]) - len(kept[2]), cut
    path = ".flowtui/runs/RevisaoWorkflow-20261205-221938.jsonl"
    for width in range(20, len(path)):
        short = shorten(path, width)
        head, marker, tail = short.split("…")
        assert len(short) <= width and int(marker.strip("( chars)")) == len(path) - len(head) - len(tail), short


# --- the command line -----------------------------------------------------------------------------


async def test_json_lists_the_differences(tmp_path, capsys):
    a = await journal(tmp_path, "a", arg="no example")
    b = await journal(tmp_path, "b", arg="no ending")
    code = main_diff([str(a), str(b), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["same"] is False
    assert out["a"]["workflow"] == "ReviewWorkflow" and out["a"]["run"] == 1 and out["a"]["status"] == "finished"
    found = out["differences"]
    assert set(found[0]) >= {"path", "field", "a", "b", "first"}
    assert found[0] == {"path": "ReviewWorkflow › loop 1 › Reviewer › turn 1",
                        "field": "reply.tool_calls[0].args.text", "a": "no example", "b": "no ending",
                        "first": True, "only": None, "absent": None, "same_as": None}
    assert [d["first"] for d in found].count(True) == 1

    same = await journal(tmp_path, "same", arg="no example")
    assert main_diff([str(a), str(same), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) | {"a": None, "b": None} == {"same": True, "compared_all": True,
                                                                           "differences": [], "a": None, "b": None}


async def test_json_says_a_nan_or_an_infinity_from_a_journal_as_standard_json_does(tmp_path, capsys):
    """A journal from elsewhere holding NaN: --json printed it bare, which no standard JSON reader takes."""
    a = await journal(tmp_path, "a")
    events = [json.loads(line) for line in a.read_text().splitlines()]
    events[0]["state"]["rounds"], events[-1]["duration_ms"] = float("nan"), float("-inf")
    b = tmp_path / "b.jsonl"
    b.write_text("".join(json.dumps(e) + "\n" for e in events))
    main_diff([str(a), str(b), "--json"])
    out = json.loads(capsys.readouterr().out, parse_constant=lambda word: pytest.fail(f"bare {word} in the JSON"))
    assert {"field": "state.rounds", "a": 0, "b": "NaN"} in [{k: d[k] for k in ("field", "a", "b")}
                                                            for d in out["differences"]], out
    # flowtui writes a NaN as null: a bare one is said, the run.start read all the same, the run.end left out
    code, said, _ = diff(capsys, a, b)
    assert "   B: line 1: run.start: holds a bare NaN, which flowtui never writes (it writes null)" in said, said
    assert f"   B: line {len(events)} skipped (not a valid event: run.end: holds a bare -Infinity" in said, said


async def test_run_picks_a_run_of_a_journal_holding_several(tmp_path, capsys):
    path = tmp_path / "runs.jsonl"
    for plan in ("pro", "free", "free"):
        await bootstrap(review_flow()).run("write", memory={"plan": plan}, journal=path)
    assert diff(capsys, path, path)[0] == 0  # the last run of each: the same run
    code, out, _ = diff(capsys, path, path, "--run", "1", "--run-b", "2")
    assert code == 1 and 'memory[0]: "plan: pro" → "plan: free"' in out
    assert "A: " in out and "run 1 of 3" in out and "run 2 of 3" in out
    assert diff(capsys, path, path, "--run", "2", "--run-b", "3")[0] == 0
    assert diff(capsys, path, path, "--run", "2")[0] == 0
    code, out, err = diff(capsys, path, path, "--run", "4")
    assert code == 2 and out == ""
    assert err.strip() == f"flowtui diff: {path}: --run 4: the file holds 3 runs; pick 1 to 3"
    code, _, err = diff(capsys, path, path, "--run-b", "0")
    assert code == 2 and "--run-b 0: the file holds 3 runs" in err


async def test_a_bad_file_exits_2_naming_it(tmp_path, capsys):
    good = await journal(tmp_path, "good")
    garbage = tmp_path / "notes.txt"
    garbage.write_text("these are my notes\nnot a journal\n")
    binary = tmp_path / "blob.jsonl"
    binary.write_bytes(bytes(range(256)) * 4)
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    cases = {
        tmp_path / "missing.jsonl": "no such file",
        tmp_path: "is a folder, not a journal file",
        garbage: "not a flowtui journal (line 1: not JSON)",
        binary: "not a flowtui journal (line 1: not JSON)",
        empty: "empty, no events recorded",
    }
    for bad, why in cases.items():
        for args in ((good, bad), (bad, good)):
            code, out, err = diff(capsys, *args)
            assert code == 2 and out == ""
            assert err.startswith(f"flowtui diff: {bad}: {why}"), err
            assert "Traceback" not in err


async def test_a_file_name_holding_a_line_break_is_said_on_one_line(tmp_path, capsys):
    """A name's line break printed a second line of its own on stderr: a name could fake one."""
    good = await journal(tmp_path, "good")
    code, _, err = diff(capsys, good, tmp_path / "nope\nflowtui: all is well.jsonl")
    assert code == 2 and err == f"flowtui diff: {tmp_path}/nope⏎flowtui: all is well.jsonl: no such file\n", err
    res = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run",
                          str(Path(__file__).resolve().parents[1] / "flows" / "revisao.py"), "--resume-from",
                          str(tmp_path / "nope\nx.jsonl")], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "nope⏎x.jsonl: no such file" in res.stderr and res.stderr.count("\n") == 1, \
        res.stderr


async def test_a_reply_kept_in_the_history_other_than_the_model_gave_it_is_a_difference(tmp_path, capsys):
    """A journal edited by hand, an assistant message of its history changed: the diff said the runs are the
    same (the turn's reply is compared where the model gave it), while the replay showed the changed text."""
    a = await journal(tmp_path, "a")
    events = [json.loads(line) for line in a.read_text().splitlines()]
    kept = next(e for e in events if e["type"] == "state.append" and isinstance(e["item"], dict)
                and e["item"]["role"] == "assistant")
    kept["item"]["content"] = "CHANGED"
    edited = tmp_path / "edited.jsonl"
    edited.write_text("".join(json.dumps(e) + "\n" for e in events))
    code, out, _ = diff(capsys, a, edited)
    assert code == 1, out
    assert "history appended" in out and '"content": "CHANG' in out


def test_a_messages_tool_calls_are_compared_by_name_and_arguments_not_by_their_random_ids():
    """A message read from an event (a tuple of calls) kept each call's id in what is compared: two runs of a real
    model, whose ids are random, differed wherever a hook or a person added such a message."""
    from flowtui.runtime.messages import Message, ToolCall
    from flowtui.runtime.pathtree import message

    one, two = (Message(role="assistant", tool_calls=(ToolCall(name="t", args={"q": 1}, id=i),)) for i in ("a1", "b2"))
    assert message(one) == message(two) == {"role": "assistant", "content": "",
                                            "tool_calls": [{"name": "t", "args": {"q": 1}}]}


async def test_a_damaged_run_start_is_named_and_never_hidden_behind_the_same(tmp_path, capsys):
    """A run.start whose workflow is 123 made a run of its own ("run 1 of 2"), its notice said only there: the
    files' "run 2 of 2" were compared, and two runs of different inputs were "the same", exit 0."""
    a = await journal(tmp_path, "a")
    events = [json.loads(line) for line in a.read_text().splitlines()]
    events[0]["workflow"] = 123
    first = tmp_path / "first.jsonl"
    first.write_text("".join(json.dumps(e) + "\n" for e in events))
    events[0]["input"] = "another input"
    second = tmp_path / "second.jsonl"
    second.write_text("".join(json.dumps(e) + "\n" for e in events))
    code, out, _ = diff(capsys, first, second)
    assert code == 3, out
    assert "its only run" in out and "run 2 of 2" not in out
    assert "A: line 1 skipped (not a valid event: run.start: workflow" in out
    assert "finished" in out and "did not end" not in out  # its run.end says how it ended


async def test_a_run_appended_after_a_torn_one_is_not_charged_with_its_torn_line(tmp_path, capsys):
    """A crash tore run 1's last line; a run appended with --journal FILE after it was said to skip that line
    too, so it compared with itself "the same as far as compared", exit 3."""
    a = await journal(tmp_path, "a")
    lines = a.read_bytes().splitlines(keepends=True)
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(b"".join(lines[:40]) + lines[40][:30])
    await bootstrap(review_flow()).run("write about the sea", journal=torn)
    code, out, _ = diff(capsys, torn, torn, "--run", "2", "--run-b", "2")
    assert code == 0 and "skipped" not in out, out
    code, out, _ = diff(capsys, torn, torn, "--run", "1", "--run-b", "1")
    assert code == 3 and "A: line 41 skipped" in out, out


async def test_a_torn_journal_is_compared_up_to_where_it_ends(tmp_path, capsys):
    a = await journal(tmp_path, "a")
    lines = a.read_bytes().splitlines(keepends=True)
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(b"".join(lines[:len(lines) // 2]) + lines[len(lines) // 2][:30])
    code, out, _ = diff(capsys, a, torn)
    assert code == 1
    assert f"B: line {len(lines) // 2 + 1} skipped" in out and "did not end" in out
    assert "only in A" in out


async def test_a_name_or_a_file_name_holding_line_breaks_stays_on_the_reports_lines(tmp_path, capsys):
    """A step named by 1,000 lines took as many lines of the report (so a name could forge lines of it),
    and a file name holding a line break broke the header."""
    a = await journal(tmp_path, "a")
    forged = tmp_path / "two\nlines.jsonl"
    forged.write_text(a.read_text().replace('"name":"Reviewer"', '"name":"' + "Rev\\n" * 1000 + 'iewer"'))
    code, out, _ = diff(capsys, a, forged)
    assert code == 1
    assert all(len(line) <= WIDTH for line in out.splitlines()) and len(out.splitlines()) < 40, out
    assert "two⏎lines.jsonl" in out
    assert "Rev⏎Rev⏎" in out and not any(line == "Rev" for line in out.splitlines())


async def test_a_hostile_journal_is_printed_inert(tmp_path, capsys):
    """Escape sequences in replies, names and values reach the screen as visible characters."""
    a = await journal(tmp_path, "a")
    hostile = "\x1b]0;pwned\x07\x1b[2J\x9b31m\u202eevil\r"
    b = await journal(tmp_path, "b", reply_extra=hostile, prompt="Review.\x1b[8m")
    # names and state paths in a journal written elsewhere can hold them too
    text = b.read_text()
    names, paths = tmp_path / "names.jsonl", tmp_path / "paths.jsonl"
    names.write_text(text.replace('"name":"Reviewer"', '"name":"Rev\\u001b[2Jiewer"'))
    paths.write_text(text.replace('"path":"rounds"', '"path":"rounds\\u009b1m"'))
    shown = ""
    for other in (b, names, paths):
        code, out, _ = diff(capsys, a, other)
        assert code == 1
        assert is_inert(out.replace("\n", ""))
        assert all(len(line) <= WIDTH for line in out.splitlines())
        shown += out
    assert "␛]0;pwned␇␛[2J\\x9b31m\\u202eevil␍" in shown
    assert 'prompt: "Review the draft." → "Review.␛[8m"' in shown
    assert "Rev␛[2Jiewer" in shown and "state.rounds\\x9b1m" in shown
    code = main_diff([str(a), str(b), "--json"])
    raw = capsys.readouterr().out
    assert code == 1 and is_inert(raw.strip()) and json.loads(raw)["differences"]


def test_flowtui_diff_through_the_command_and_revisao(tmp_path):
    """The real command on journals of the example flow, run headless: the same flow twice is the
    same, a different replies file is a different tool argument (exit 1), a bad file exit 2."""
    replies = (ROOT / "flows" / "revisao.replies.toml").read_text()
    changed = tmp_path / "replies.toml"
    changed.write_text(replies.replace("Falta um exemplo de append em memory.", "Falta um exemplo de tasks."))

    def flowtui(*args):
        return subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", *map(str, args)],
                              capture_output=True, text=True, cwd=ROOT, timeout=120)

    for name, extra in (("a", ()), ("b", ()), ("c", ("--replies", changed))):
        res = flowtui("run", "flows/revisao.py", "--input", "Escreva", "--journal", tmp_path / f"{name}.jsonl", *extra)
        assert res.returncode == 0, res.stderr
    res = flowtui("diff", tmp_path / "a.jsonl", tmp_path / "b.jsonl")
    assert res.returncode == 0, res.stdout + res.stderr
    # runs of two workflows: said, as B's steps are placed under A's workflow's name
    res = flowtui("run", "flows/conta.py", "--input", "x", "--journal", tmp_path / "conta.jsonl")
    assert res.returncode == 0, res.stderr
    res = flowtui("diff", tmp_path / "a.jsonl", tmp_path / "conta.jsonl")
    assert res.returncode == 1 and "They are runs of two workflows, RevisaoWorkflow and ContaWorkflow" in \
        " ".join(res.stdout.split()), res.stdout
    res = flowtui("diff", tmp_path / "a.jsonl", tmp_path / "c.jsonl")
    assert res.returncode == 1, res.stderr
    assert ("▶ first divergence: RevisaoWorkflow › loop 1 › RevisorAgent › turn 1\n"
            "  reply.tool_calls[0].args.descricao\n"
            '    A: "Falta um exemplo de append em memory."\n'
            '    B: "Falta um exemplo de tasks."\n') in res.stdout
    gone = subprocess.Popen([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "diff",
                             tmp_path / "a.jsonl", tmp_path / "c.jsonl"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)
    gone.stdout.close()  # `flowtui diff A B | head`: the reader is gone before the report is written
    assert gone.wait(timeout=120) == 1 and gone.stderr.read() == ""  # no traceback
    gone.stderr.close()
    if Path("/dev/full").exists():  # a full disk: a traceback, and exit 1, "they differ", of two runs the same
        with open("/dev/full", "w") as full:
            res = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "diff",
                                  tmp_path / "a.jsonl", tmp_path / "b.jsonl"], stdout=full, stderr=subprocess.PIPE,
                                 text=True, cwd=ROOT, timeout=120)
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        assert res.stderr == "flowtui diff: the report could not be written to stdout: No space left on device\n"
    closed = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "diff",
                             tmp_path / "a.jsonl", tmp_path / "b.jsonl"], stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            timeout=120, preexec_fn=lambda: os.close(1))  # (>&-: "the same", exit 0, unseen)
    assert closed.returncode == 2, closed.stderr
    assert "the report could not be written to stdout: it was closed when flowtui started" in closed.stderr
    res = flowtui("diff", tmp_path / "a.jsonl", tmp_path / "nope.jsonl")
    assert res.returncode == 2 and "nope.jsonl: no such file" in res.stderr
    res = flowtui("diff", tmp_path / "a.jsonl")
    assert res.returncode == 2 and "usage: flowtui diff" in res.stderr
    res = flowtui("diff", tmp_path / "a.jsonl", tmp_path / "c.jsonl", "--width", "0")  # not "the terminal's"
    assert res.returncode == 2 and "argument --width: '0': give 40 columns or more" in res.stderr


def test_a_run_recorded_to_a_cassette_or_replayed_from_one_is_the_same_as_one_without(tmp_path):
    """The journal names the model a cassette wraps ("recording RevisaoScript to c.jsonl", "replaying c.jsonl"):
    each was a difference at every model call (exit 1, 7 differences), where a re-execution compares none."""
    def flowtui(*args):
        return subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", *map(str, args)],
                              capture_output=True, text=True, cwd=tmp_path, timeout=120)

    cassette = tmp_path / "c.cassette.jsonl"
    for name, extra in (("a", ()), ("rec", ("--record", cassette)), ("rep", ("--replay", cassette))):
        res = flowtui("run", ROOT / "flows/revisao.py", "--input", "Escreva", "--journal", tmp_path / f"{name}.jsonl",
                      *extra)
        assert res.returncode == 0, res.stderr
    rec = [json.loads(line) for line in (tmp_path / "rec.jsonl").read_text().splitlines()]
    assert any(e["type"] == "node.start" and e.get("kind") == "chat"
               and e["data"]["request"]["model"].startswith("recording ") for e in rec)  # what the journal says
    for other in ("rec", "rep"):
        res = flowtui("diff", tmp_path / "a.jsonl", tmp_path / f"{other}.jsonl")
        assert res.returncode == 0, res.stdout


def test_diff_loads_no_textual():
    code = ("import sys, flowtui.runtime.diff, flowtui.runtime.diff_cli; "
            "print(','.join(m for m in ('textual', 'rich', 'litellm') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert out.stdout.strip() == ""


@pytest.mark.parametrize("field", ["memory", "state"])
def test_lists_are_aligned_not_shifted(field):
    from flowtui.runtime.diff import MISSING, leaves

    assert leaves(field, ["x", "y"], ["new", "x", "y"]) == [(f"{field}[0]", MISSING, "new")]
    assert leaves(field, ["x", "y", "z"], ["x", "z"]) == [(f"{field}[1]", "y", MISSING)]
    assert leaves(field, [{"a": 1}], [{"a": 2}]) == [(f"{field}[0].a", 1, 2)]


async def test_an_agent_that_no_longer_exists_and_calls_named_by_their_place(tmp_path):
    """An agent taking its turn over with run() calls the model twice: ``turn 1`` and ``turn 2``;
    a flow without it has neither, reported once, where the agent was."""
    from flowtui import ChatRequest, Message

    def build(*, with_checker: bool, second: str):
        @agent(provider=FunctionProvider(lambda m, t: f"seen {len(m)}"), prompt="Check twice.")
        class Checker:
            async def run(self, input, ctx):
                for text in ("first look", second):
                    reply = await self.provider.complete(ChatRequest(messages=[
                        Message(role="system", content=self.prompt), Message(role="user", content=text)]))
                return reply.content

        @agent(provider=FunctionProvider(lambda m, t: "done"), prompt="Finish.")
        class Finisher:
            pass

        @workflow(steps=[Checker, Finisher] if with_checker else [Finisher])
        class Flow:
            pass

        return Flow

    paths = {}
    for name, kw in {"a": dict(with_checker=True, second="second look"),
                     "b": dict(with_checker=True, second="another look"),
                     "c": dict(with_checker=False, second="")}.items():
        paths[name] = tmp_path / f"{name}.jsonl"
        await bootstrap(build(**kw)).run("go", journal=paths[name])
    d, found = first(paths["a"], paths["b"])
    assert (d.path, d.field, d.a, d.b) == ("Flow › Checker › turn 2", "messages[1].content", "second look",
                                           "another look")
    assert len(found) == 1
    d, found = first(paths["a"], paths["c"])
    assert (d.path, d.field, d.only, d.a, d.b) == ("Flow › Checker", "step", "a", "agent Checker (2 model calls)",
                                                    MISSING)
    # what Finisher's model saw is the same: the checker's reply never joined the history
    assert [x.path for x in found] == ["Flow › Checker"]


async def test_a_line_that_is_no_valid_event_is_said_not_hidden_behind_the_same(tmp_path, capsys):
    """A forged or damaged event line (JSON, but no valid event) is not compared: the report names
    it, and the event counts are of the events compared. It exits 3, not 0: a check that wants the
    same run (exit 0) was told "the same" with lines never compared."""
    a = await journal(tmp_path, "a")
    forged = tmp_path / "forged.jsonl"
    n = len(a.read_text().splitlines())
    forged.write_text(a.read_text() + '{"seq": 999999, "type": "run.end"}\n{"seq": 1000000, "type": "from.the.future"}\n')
    code, out, _ = diff(capsys, a, forged)
    assert code == 3 and "The runs are the same as far as compared" in out
    assert f"B: line {n + 1} skipped (not a valid event: " in out
    assert f"B: line {n + 2} skipped (an event type this flowtui does not know: " in out
    assert "Not compared (above): 2 lines of B." in out
    assert out.count(f"finished, {n} events") == 2
    assert main_diff([str(a), str(forged), "--json"]) == 3
    said = json.loads(capsys.readouterr().out)
    assert said["b"]["skipped_lines"] == [n + 1, n + 2]
    assert said["same"] is False and said["compared_all"] is False and said["differences"] == []
    assert main_diff([str(a), str(a), "--json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["same"] is True and said["compared_all"] is True


async def test_a_run_start_read_without_its_malformed_memory_is_not_said_the_same(tmp_path, capsys):
    """A forged run.start memory ({"a": 1}) was read without it, and the runs said "the same", exit 0."""
    a = await journal(tmp_path, "a")
    lines = a.read_text().splitlines()
    start = json.loads(lines[0])
    start["memory"] = {"a": 1}
    forged = tmp_path / "forged.jsonl"
    forged.write_text("\n".join([json.dumps(start), *lines[1:]]) + "\n")
    code, out, _ = diff(capsys, a, forged)
    assert code == 3 and "The runs are the same as far as compared" in out, out
    assert "B: line 1: run.start's memory could not be read" in out and "Not compared (above): 1 line of B." in out
    assert main_diff([str(a), str(forged), "--json"]) == 3
    said = json.loads(capsys.readouterr().out)
    assert said["same"] is False and said["compared_all"] is False


async def test_an_invalid_line_amid_the_run_names_its_field_and_is_not_called_missing(tmp_path, capsys):
    """'kind: 7' was said as "not a valid event: n…(132 chars)…'chat' or 'tool')", the field cut away,
    and the next line claimed the event was missing (lines taken out by hand?), which it was not."""
    a = await journal(tmp_path, "a")
    lines = a.read_text().splitlines()
    i = next(i for i, line in enumerate(lines) if json.loads(line).get("kind") == "chat")
    event = json.loads(lines[i])
    event["kind"] = 7
    lines[i] = json.dumps(event)
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text("\n".join(lines) + "\n")
    _, out, _ = diff(capsys, a, damaged)
    assert f"B: line {i + 1} skipped (not a valid event: node.start: kind: Input should be" in out, out
    assert "missing before it" not in out, out


async def test_a_long_value_is_redacted_before_it_is_shortened(tmp_path, capsys):
    """Shortening keeps a value's end: the end of a credential it holds must not be what shows."""
    key = "sk-proj-" + "Ab3d" * 12
    a = await journal(tmp_path, "a")
    events = [json.loads(line) for line in a.read_text().splitlines()]
    events[0]["input"] = "x" * 100 + " " + key
    b = tmp_path / "b.jsonl"
    b.write_text("".join(json.dumps(ev) + "\n" for ev in events))
    code, out, err = diff(capsys, a, b)
    assert code == 1 and "[redacted]" in out
    assert "Ab3dAb3d" not in out + err


async def test_a_credential_in_a_long_name_is_redacted_before_the_report_wraps_or_cuts_it(tmp_path, capsys):
    """A workflow or agent name holding a key, in a journal from elsewhere: the header wrapped it over two
    lines and the step paths cut it to its end, and no rule knew either part for a credential."""
    key = "sk-proj-" + "Ab3d" * 10
    a = await journal(tmp_path, "a")
    long = "ReviewWorkflow " + "b" * 40 + " " + key
    b = tmp_path / "b.jsonl"
    b.write_text(a.read_text().replace('"ReviewWorkflow"', json.dumps(long))
                 .replace('"name":"Reviewer"', '"name":' + json.dumps("Reviewer " + "c" * 60 + " " + key)))
    code, out, err = diff(capsys, a, b)
    assert code == 1 and "[redacted]" in out
    assert "Ab3d" not in out + err and "sk-proj" not in out + err


async def test_lines_moved_repeated_or_taken_out_by_hand_are_said_not_read_as_other_runs(tmp_path, capsys):
    """A line repeated split B into two runs (its last a fragment "that did not end"); lines taken out
    went unsaid."""
    a = await journal(tmp_path, "a")
    lines = a.read_text().splitlines()
    b = tmp_path / "b.jsonl"
    b.write_text("\n".join([*lines[:10], lines[9], lines[11], lines[10], *lines[12:20], *lines[22:]]) + "\n")
    code, out, _ = diff(capsys, a, b)
    assert "run 2 of" not in out
    assert "   B: line 11 skipped (event #10 again: a line repeated by hand? left out)\n" in out
    assert "   B: line 12: line 12 out of order (moved by hand?): read by event number\n" in out
    assert "   B: line 22: events #21 to #22 are missing before it (lines taken out by hand?)\n" in out
    assert code == 1  # what the missing events did is missing from B
    assert main_diff([str(a), str(b), "--json"]) == 1
    about = json.loads(capsys.readouterr().out)["b"]
    assert (about["runs"], about["status"], about["events"]) == (1, "finished", len(lines) - 2)
    assert about["skipped_lines"] == [11] and [n["line"] for n in about["notes"]] == [12, 22]
    # a repeat that says otherwise than the first line of its number is no harmless repeat: said so
    other = json.loads(lines[9])
    other["value"] = "something else" if "value" in other else other.get("value")
    other["origin"] = "user"
    c = tmp_path / "c.jsonl"
    c.write_text("\n".join([*lines[:10], json.dumps(other), *lines[10:]]) + "\n")
    code, out, _ = diff(capsys, a, c)
    assert "   B: line 11 skipped (event #10 again, unlike line 10 (edited by hand?): left out)\n" in out, out
    assert "Not compared (above): 1 line of B." in out


async def test_a_node_linked_by_hand_to_a_parent_that_does_not_come_before_it_is_said(tmp_path, capsys):
    # node ids are not compared: a link forged into a circle was "The runs are the same", naming nothing,
    # while the replay's node tree showed it broken
    a = await journal(tmp_path, "a")
    lines = a.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if '"type":"node.start"' in line and '"parent_id":null' in line)
    b = tmp_path / "b.jsonl"
    b.write_text("\n".join([*lines[:at], lines[at].replace('"parent_id":null', '"parent_id":"n3"'),
                            *lines[at + 1:]]) + "\n")
    code, out, _ = diff(capsys, a, b)
    assert f"   B: line {at + 1}: node n1's parent n3 does not start before it (a link changed by hand?)" in out, out


async def test_a_node_that_ends_without_a_start_is_said(tmp_path, capsys):
    """Its start's id changed by hand: "The runs are the same", naming nothing (a re-execution took it for a call
    that never returned)."""
    a = await journal(tmp_path, "a")
    lines = a.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if '"type":"node.start"' in line and '"node_id":"n3"' in line)
    end = next(i for i, line in enumerate(lines) if '"type":"node.end"' in line and '"node_id":"n3"' in line)
    b = tmp_path / "b.jsonl"
    b.write_text("\n".join([*lines[:at], lines[at].replace('"node_id":"n3"', '"node_id":"n999"'),
                            *lines[at + 1:]]) + "\n")
    code, out, _ = diff(capsys, a, b)
    said = f"   B: line {end + 1}: node n3 ends, but no node.start before it begins it (taken out, or its id "
    assert said in out, out


async def test_a_run_end_put_in_the_middle_of_a_run_is_said_and_left_out(tmp_path, capsys):
    """A run.end copied into the middle (renumbered): flowtui diff said "The runs are the same", naming
    nothing, and one saying failed with output "HIJACKED" was compared as the run's end (its error only)."""
    a = await journal(tmp_path, "a")
    events = [json.loads(line) for line in a.read_text().splitlines()]
    forged = {**events[-1], "status": "failed", "error": "boom", "output": "HIJACKED"}
    events.insert(20, forged)
    for n, ev in enumerate(events, 1):
        ev["seq"] = n
    b = tmp_path / "b.jsonl"
    b.write_text("".join(json.dumps(ev) + "\n" for ev in events))
    code, out, _ = diff(capsys, a, b)
    assert (f"   B: line 21 skipped (a run.end (event #21) before the run's last event, #{len(events)} (put in by "
            "hand?): left out)") in out.replace("\n      ", " "), out
    assert "missing before it" not in out and "boom" not in out and "HIJACKED" not in out
    assert "Not compared (above): 1 line of B." in out and code == 3  # the rest is the same run


async def test_a_credential_one_journal_holds_raw_is_no_difference_shown_as_the_same(tmp_path, capsys):
    """A journal written elsewhere (its writer did not know the key) holds it raw; the reader hides it,
    and "[redacted]" → "[redacted]" was a difference nobody could see, here and re-executing it (exit 3)."""
    key = "sk-abcdefghijklmnopqrstuvwxyz0123456789ABCD"
    a = await journal(tmp_path, "a")
    raw, hidden = tmp_path / "raw.jsonl", tmp_path / "hidden.jsonl"
    raw.write_text(a.read_text().replace("about the sky", f"about {key}"))
    hidden.write_text(a.read_text().replace("about the sky", "about [redacted]"))
    code, out, _ = diff(capsys, hidden, raw)
    assert code == 0 and "The runs are the same" in out and key not in out
    code, out, _ = diff(capsys, a, raw)  # a real difference still is one
    assert code == 1 and '"write about the sky" → "write about [redacted]"' in out
    events: list = []
    await bootstrap(review_flow()).run(resume_from=str(raw), on_event=events.append)
    assert not [e for e in events if e.type == "run.diverged"] and events[-1].status == "finished"


async def test_a_journal_cut_before_its_run_end_compares_the_runs_end_not_its_workflow_nodes(tmp_path, capsys):
    """The header said B "did not end" while the body compared A's "finished" with the node's "ok"."""
    a = await journal(tmp_path, "a")
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(a.read_text().splitlines()[:-1]) + "\n")  # no run.end
    d, found = first(a, cut)
    assert (d.path, d.field, d.a, d.b) == ("ReviewWorkflow", "status", "finished", MISSING)
    assert "ok" not in [x.b for x in found]


@pytest.mark.parametrize("edit", ["as written", "reversed", "shuffled"])
async def test_two_runs_of_one_journal_stay_two_whatever_the_order_of_their_lines(tmp_path, capsys, edit):
    """Split where the numbers start again, a reversed file made the first run's last event part of the
    second, a shuffled one 32 runs, with false "missing" notes."""
    import random

    a = await journal(tmp_path, "a")
    b = await journal(tmp_path, "b", approve_at=3)
    lines = a.read_text().splitlines() + b.read_text().splitlines()
    if edit == "reversed":
        lines.reverse()
    elif edit == "shuffled":
        random.Random(7).shuffle(lines)
    both = tmp_path / "both.jsonl"
    both.write_text("\n".join(lines) + "\n")
    for n, single in ((1, a), (2, b)):
        assert main_diff([str(both), str(single), "--run", str(n), "--run-b", "1", "--json"]) == 0
        about = json.loads(capsys.readouterr().out)["a"]
        assert (about["runs"], about["status"]) == (2, "finished")
        assert not any("missing" in note["text"] for note in about["notes"])
        assert bool(about["notes"]) == (edit != "as written")


async def test_sampling_is_compared_as_sent_the_providers_under_the_agents(tmp_path, capsys):
    """A request records the agent's sampling and the provider's: the runs compare what was sent (both),
    so the same parameters given by the agent in one run and by the provider in the other are the same,
    and a provider's parameter changed is a difference."""
    a = await journal(tmp_path, "a")

    def rewritten(name: str, **request_fields) -> Path:
        path = tmp_path / f"{name}.jsonl"
        lines = []
        for line in a.read_text().splitlines():
            event = json.loads(line)
            request = (event.get("data") or {}).get("request") if event["type"] == "node.start" else None
            if isinstance(request, dict):
                request.update(request_fields)
            lines.append(json.dumps(event))
        path.write_text("\n".join(lines) + "\n")
        return path

    by_agent = rewritten("agent", sampling={"temperature": 0.2}, provider_sampling={})
    by_provider = rewritten("provider", sampling={}, provider_sampling={"temperature": 0.2})
    other = rewritten("other", sampling={}, provider_sampling={"temperature": 0.7})
    code, out, _ = diff(capsys, by_agent, by_provider)
    assert code == 0 and "The runs are the same" in out, out
    code, out, _ = diff(capsys, by_provider, other)
    assert code == 1 and "sampling.temperature" in out, out


def test_a_lone_surrogate_in_a_journal_is_shown_escaped_by_flowtui_diff(tmp_path):
    """A journal from elsewhere holding "\\ud800" (JSON allows the escape): flowtui diff ended in a
    UnicodeEncodeError traceback with exit 1, as if the runs differed; then it skipped every line but
    run.start's holding one (pydantic's JSON reader refuses it)."""
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    made = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run",
                           "flows/revisao.py", "--input", "Escreva", "--journal", str(a)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert made.returncode == 0, made.stderr
    b.write_text(a.read_text().replace('"Escreva"', '"Escreva\\ud800"'))
    res = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "diff", str(a), str(b)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert 'input: "Escreva" → "Escreva\\ud800"' in res.stdout, res.stdout
    # every line read: the user's message too (it was skipped, "not a valid event: … hex escape")
    assert "skipped" not in res.stdout and res.stdout.count("finished, 83 events") == 2, res.stdout


async def test_a_value_nested_hundreds_deep_in_a_forged_journal_is_a_difference_not_a_failure(tmp_path, capsys):
    """A journal with a state value nested 600 deep could not be compared at all ("a journal nests too deep
    or holds too much", exit 2, no line named): hiding credentials before saying a difference recursed."""
    a = await journal(tmp_path, "a")
    lines = a.read_text().splitlines()
    start = json.loads(lines[0])
    field = next(iter(start["state"]))
    deep: object = 1
    for _ in range(600):
        deep = {"a": deep}
    start["state"][field] = deep
    b = tmp_path / "b.jsonl"
    b.write_text("\n".join([json.dumps(start), *lines[1:]]) + "\n")
    code, out, err = diff(capsys, a, b)
    assert code == 1 and err == "", err
    assert f"state.{field}" in out and '{"a": {"a":' in out


async def test_an_edit_made_at_a_pause_is_said_where_the_run_was_paused_first_when_it_came_first(tmp_path, capsys):
    """An edit is made from outside the run, with no node: it was said at the run's root, after every
    step (the first divergence marked a later step, and the edit came last)."""
    import asyncio

    from flowtui import Controller

    async def edited_at_the_second_writer(path: Path) -> None:
        ctl = Controller(breakpoints=["Writer"])
        run = bootstrap(review_flow(approve_at=3)).prepare("write about the sky", controller=ctl, journal=path)
        task = asyncio.ensure_future(run.execute())
        pauses = 0
        while not task.done():
            if ctl.paused:
                pauses += 1
                if pauses == 3:  # before the loop's second iteration
                    run.edits.set_field("rounds", "7")
                    run.state.append("memory", "added by hand", origin="user")
                ctl.resume()
            await asyncio.sleep(0.002)
        await asyncio.wait_for(task, 60)

    a = tmp_path / "a.jsonl"
    await bootstrap(review_flow(approve_at=3)).run("write about the sky", journal=a)
    b = tmp_path / "b.jsonl"
    await edited_at_the_second_writer(b)
    code, out, _ = diff(capsys, a, b)
    assert code == 1
    assert "▶ first divergence: ReviewWorkflow › loop 2\n  state.rounds: 2 → 7\n  memory appended: (absent) → " \
           "[\"added by hand\"]\n" in out, out
    assert out.index("▶ first divergence") < out.index("ReviewWorkflow › loop 2 › Writer")
    # re-executed, the run makes the edits again where they were made, without pausing there: the same run
    c = tmp_path / "c.jsonl"
    await bootstrap(review_flow(approve_at=3)).run(resume_from=str(b), journal=c)
    assert not [line for line in c.read_text().splitlines() if '"run.pause"' in line]
    code, out, _ = diff(capsys, b, c)
    assert code == 0 and "The runs are the same" in out, out


async def test_a_loop_stopped_inside_an_iteration_is_said_at_that_iteration(tmp_path, capsys):
    """Stopped inside iteration 2, the loop's last ctx.loop (1 iteration done, stopped) was said at
    iteration 1, which both runs made alike."""
    from flowtui import Controller

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    await bootstrap(review_flow(approve_at=4)).run("write about the sky", journal=a)
    stop = Controller(watch=["state.problems ~ /problem 2/"], on_watch="stop")  # inside iteration 2
    await bootstrap(review_flow(approve_at=4)).prepare("write about the sky", controller=stop, journal=b).execute()
    code, out, _ = diff(capsys, a, b)
    assert code == 1
    assert 'ReviewWorkflow › loop 2\n  ctx.loop.iterations: 2 → 1\n  ctx.loop.stopped_by: null → "stopped"\n' in out, out
    assert "ReviewWorkflow › loop 1\n" not in out, out


def test_a_list_of_another_length_is_said_in_items_and_one_item_in_the_singular():
    """It said "1 items" (a re-execution's divergence, a diff)."""
    from flowtui.runtime.compare import diff

    assert diff(["a"], ["a", "b"], "state.notes") == [("state.notes[…]", "1 item", "2 items")]
