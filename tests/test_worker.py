"""The debugger survives the flow, headless: a flow that loops, blocks, exits, crashes or floods
makes the *run* fail or stop, with the right exit code, a journal that ends with the run's end,
and ctrl-C that always works. Time bounds here are generous (they catch a hang, not a slow machine);
bench/ measures the real times."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from terminal import Terminal  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MISBEHAVE = str(ROOT / "tests/tui/flows/misbehave.py")
HANG = 30  # seconds: past this, something hangs


def flowtui(*args: str, cwd: Path, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "from flowtui.tui.cli import main; main()", *args], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def stderr_until(proc: subprocess.Popen, said: str) -> tuple[list[str], threading.Thread]:
    """The lines ``proc`` writes on stderr, read in a thread, once ``said`` is one of them (and the thread,
    which reads on)."""
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")), daemon=True)
    reader.start()
    deadline = time.monotonic() + HANG
    while said not in lines:
        assert time.monotonic() < deadline, lines
        time.sleep(0.05)
    return lines, reader


def journal_events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_for(path: Path, what: str, timeout: float = HANG) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and what in path.read_text()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what!r} never appeared in {path}")
        time.sleep(0.05)


# How long a forced stop waited, as the run's process measured it from the stop's arrival (about the
# 1 s grace; a loaded machine adds to it), and what it waited for.
def killed(what: str, *, inside: bool = False) -> str:
    """The end of a run whose ``what`` did not return within the grace, with where in misbehave.py;
    ``inside``: said inside the parentheses of what stopped it."""
    at = r"at .*misbehave\.py:\d+ in \w+"
    where = f", {at}" if inside else rf" \({at}\)"
    return rf"killed after \d+\.\d s: {what} did not return{where}"


@pytest.mark.parametrize("how", ["stopped", "killed"])
def test_a_run_stopped_or_killed_inside_a_tool_reexecutes_up_to_that_call_which_runs_live(tmp_path, how):
    """The recorded tool never returned, so there is no result to serve: re-executing the run served ""
    in its place (stopped), or compared the run.end flowtui wrote for the dead process (killed), and
    reported a divergence (exit 3) though the code had not changed."""
    flow = tmp_path / "slow.py"
    flow.write_text(
        "import os, signal, time\n"
        "from flowtui import ScriptedProvider, agent, tool, workflow\n\n"
        "@tool\ndef wait(x: str) -> str:\n    \"\"\"Waits.\"\"\"\n"
        "    if os.environ.get('KILL'):\n        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    time.sleep(0 if os.environ.get('FAST') else 600)\n    return 'waited ' + x\n\n"
        "@agent(provider=ScriptedProvider([{'content': '', 'tool_calls': [{'name': 'wait', 'args': {'x': '1'}}]},"
        " 'done']), prompt='p', tools=[wait])\nclass A:\n    pass\n\n"
        "@workflow(steps=[A, A])\nclass W:\n    pass\n")
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    proc = flowtui("run", str(flow), "--input", "x", "--journal", str(first), cwd=tmp_path,
                   env={**os.environ, **({"KILL": "1"} if how == "killed" else {})})
    if how == "stopped":
        wait_for(first, '"kind":"tool"')
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=HANG)
    recorded = journal_events(first)
    tool_end = [e for e in recorded if e["type"] == "node.end" and e["kind"] == "tool"]
    if how == "stopped":
        assert tool_end[0]["status"] == "stopped" and "executed" not in tool_end[0]["data"]  # it never returned
    else:
        assert tool_end == [] and recorded[-1]["origin"] == "flowtui"  # the run.end flowtui wrote for it
    again = flowtui("run", str(flow), "--resume-from", str(first), "--journal", str(second), cwd=tmp_path,
                    env={**os.environ, "FAST": "1"})
    out, err = again.communicate(timeout=HANG)
    assert again.returncode == 0, err
    assert out.strip() == "done"
    tool_start = [e for e in recorded if e["type"] == "node.start" and e["kind"] == "tool"][0]
    assert (f"! the recorded run never returned from tool wait (stopped or killed inside it): re-executed up to "
            f"event #{tool_start['seq'] - 1}, and that call runs live") in err
    start = journal_events(second)[0]
    assert start["resumed_from"]["before_tool"] == "wait" and start["resumed_from"]["at"] == tool_start["seq"] - 1
    results = [e["item"]["content"] for e in journal_events(second) if e["type"] == "state.append"
               and e["item"].get("role") == "tool"]
    assert results == ["waited 1"]  # run live, not served as ""


@pytest.mark.parametrize("threads, said", [
    (1, "the flow's thread poller still ran"),
    # (10,000 of them were each named, on one line)
    (8, "the flow's threads poller, poller-1, poller-2, poller-3, poller-4 and 3 more still ran")])
def test_ctrl_c_on_a_run_whose_flow_left_a_thread_running_ends_without_a_traceback(tmp_path, threads, said):
    """A thread the flow started (no daemon) held the run's process at exit; the client's stop landed in
    Python's wait for it and printed "Exception ignored in: <module 'threading'>" and a traceback saying
    "killed after 1.0 s: a tool or hook did not return", though the run had stopped cleanly."""
    flow = tmp_path / "threads.py"
    flow.write_text(
        "import threading, time\n"
        "from flowtui import FunctionProvider, agent, loop, workflow\n\n"
        "def forever():\n    while True:\n        time.sleep(0.05)\n\n"
        "@agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt='p')\nclass A:\n"
        "    def after_response(self, response, ctx):\n"
        "        if not ctx.get('started', False):\n"
        f"            for i in range({threads}):\n"
        "                threading.Thread(target=forever, name=f'poller-{i}' if i else 'poller').start()\n"
        "            ctx.started = True\n"
        "        time.sleep(0.05)\n\n"
        "@workflow(steps=[loop([A], max_iterations=100000)])\nclass W:\n    pass\n")
    journal = tmp_path / "j.jsonl"
    proc = flowtui("run", str(flow), "--input", "x", "--journal", str(journal), cwd=tmp_path)
    wait_for(journal, '"name":"started"')
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "Exception ignored" not in err and "did not return" not in err, err
    assert f"flowtui: {said} after the run ended; ended with the run's process" in err
    end = journal_events(journal)[-1]
    assert (end["type"], end["status"], end["reason"]) == ("run.end", "stopped", "stopped by user"), end


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_ctrl_c_in_a_cleanup_that_never_returns_keeps_the_runs_end_and_output(tmp_path, kind):
    """The workflow had finished when its ctx.on_dispose cleanup hung: the stop wrote a run.end for the
    process (stopped, no output, "a tool or hook did not return"), and the output was lost."""
    body = ("def close_pool():\n            while True:\n                time.sleep(0.01)\n" if kind == "sync" else
            "async def close_pool():\n            await asyncio.sleep(3600)\n")
    flow = tmp_path / "cleanup.py"
    flow.write_text(
        "import asyncio, time\n"
        "from flowtui import FunctionProvider, agent, workflow\n\n"
        "@agent(provider=FunctionProvider(lambda m, t: 'done'), prompt='p')\nclass A:\n"
        "    def after_response(self, response, ctx):\n        @ctx.on_dispose\n        " + body + "\n"
        "@workflow(steps=[A])\nclass W:\n    pass\n")
    journal = tmp_path / "j.jsonl"
    proc = flowtui("run", str(flow), "--input", "x", "--journal", str(journal), cwd=tmp_path)
    wait_for(journal, '"kind":"workflow","name":"W","status":"ok"')
    # inside the cleanup: said once it has run a while (it held flowtui run without a word)
    said = "flowtui: the run's steps are done, and its cleanups (ctx.on_dispose) are still running after 3 s " \
           "(ctrl-C stops them)\n"
    lines, reader = stderr_until(proc, said)
    proc.send_signal(signal.SIGINT)
    out = proc.stdout.read()
    proc.wait(timeout=HANG)
    reader.join(timeout=HANG)
    err = "".join(lines)
    assert proc.returncode == 0 and out == "done\n", err
    assert lines.count(said) == 1, err
    error, end = journal_events(journal)[-2:]
    assert (error["type"], error["cleanup"]) == ("dispose.error", "A.after_response.<locals>.close_pool")
    assert error["error"].endswith(": it never returned; the stop ended it"), error
    assert (end["type"], end["origin"], end["status"], end["output"]) == ("run.end", "runtime", "finished", "done")
    assert "did not return" not in err and "Traceback" not in err, err


def test_a_second_run_on_a_journal_another_run_is_writing_is_refused(tmp_path):
    """Two runs on one --journal interleaved their lines: neither could be re-executed after, and the
    readers blamed lines 'moved by hand'."""
    journal = tmp_path / "j.jsonl"
    first = flowtui("run", f"{MISBEHAVE}:SyncLoop", "--input", "x", "--journal", str(journal), cwd=tmp_path)
    started = [first]
    try:
        wait_for(journal, '"kind":"tool"')
        second = flowtui("run", f"{MISBEHAVE}:SyncLoop", "--input", "y", "--journal", str(journal), cwd=tmp_path)
        started.append(second)
        out, err = second.communicate(timeout=HANG)
        assert second.returncode == 2, err
        assert f"cannot write the journal {journal}: another run is writing it right now" in err, err
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=HANG)
        assert [e["input"] for e in journal_events(journal) if e["type"] == "run.start"] == ["x"]
        third = flowtui("run", f"{MISBEHAVE}:SyncLoop", "--input", "z", "--journal", str(journal), cwd=tmp_path)
        started.append(third)
        wait_for(journal, '"input":"z"')  # once the first has ended, the file takes the next run
        third.send_signal(signal.SIGINT)
        third.communicate(timeout=HANG)
    finally:  # a failure leaves no run spinning (SIGINT: each client stops its own run's process)
        for proc in started:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                proc.communicate(timeout=HANG)


def test_a_run_whose_client_was_killed_and_whose_code_will_not_unwind_still_ends_its_journal(tmp_path):
    """kill -9 of flowtui run while a hook swallows every exception: the run's process ended itself a few
    seconds later, as it should, but its journal stopped at a node's start, with no run.end."""
    flow = tmp_path / "stubborn.py"
    flow.write_text(
        "import time\n"
        "from flowtui import FunctionProvider, agent, workflow\n\n"
        "@agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt='p')\nclass A:\n"
        "    def after_response(self, response, ctx):\n        ctx.inside = True\n        while True:\n"
        "            try:\n                time.sleep(0.05)\n            except BaseException:\n"
        "                pass\n\n"
        "@workflow(steps=[A])\nclass W:\n    pass\n")
    journal = tmp_path / "j.jsonl"
    proc = flowtui("run", str(flow), "--input", "x", "--journal", str(journal), cwd=tmp_path,
                   start_new_session=True)
    wait_for(journal, '"name":"inside"')
    proc.kill()  # the client, not its run's process
    proc.communicate(timeout=HANG)
    wait_for(journal, '"type":"run.end"')
    end = journal_events(journal)[-1]
    assert (end["type"], end["status"], end["origin"]) == ("run.end", "stopped", "flowtui"), end
    assert end["reason"].startswith("its client went away, and the run's code did not return"), end


@pytest.mark.parametrize("holds,busy", [
    ("    while True:\n        try:\n            time.sleep(0.05)\n        except BaseException:\n            pass\n",
     "tool t"),
    ("    ctx.on_dispose(lambda: time.sleep(1000))\n    time.sleep(1000)\n", r"its cleanups \(ctx\.on_dispose\)"),
])
def test_a_run_killed_after_a_stop_says_what_did_not_return(tmp_path, holds, busy):
    """A tool that swallows the stop's signal, and a cleanup that does not return once the signal unwound
    the tool: the client kills the process and writes the run's end, which said "a tool or hook did not
    return" (of a tool that had returned, too), where the status had named what it waited for."""
    flow = tmp_path / "holds.py"
    flow.write_text(
        "import time\n"
        "from flowtui import Context, FunctionProvider, agent, tool, workflow\n\n"
        "def calls(messages, tools):\n"
        "    if any(m.role == 'tool' for m in messages):\n        return 'done'\n"
        "    return {'content': '', 'tool_calls': [{'name': 't', 'args': {}}]}\n\n"
        "@tool(name='t', description='T.')\ndef t(ctx=Context()) -> str:\n    ctx.inside = True\n" + holds +
        "\n@agent(provider=FunctionProvider(calls), prompt='p', tools=[t])\nclass A:\n    pass\n\n"
        "@workflow(steps=[A])\nclass W:\n    pass\n")
    journal = tmp_path / "j.jsonl"
    proc = flowtui("run", str(flow), "--input", "x", "--journal", str(journal), cwd=tmp_path)
    try:
        wait_for(journal, '"name":"inside"')
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=HANG)
    finally:
        proc.kill()
    end = journal_events(journal)[-1]
    assert (end["type"], end["status"], end["origin"]) == ("run.end", "stopped", "flowtui"), end
    assert re.fullmatch(rf"killed after \d+\.\d s: {busy} did not return", end["reason"]), end


@pytest.mark.parametrize("child_does", ["return 'child'", "raise ValueError('child')"])
def test_a_process_a_tool_forked_that_comes_back_into_the_run_ends_there(tmp_path, child_does):
    """The child of os.fork() in a tool returned from it and went on with the run in its own process:
    it ran the tools and hooks after it again (their side effects twice), and nothing said so."""
    marks = tmp_path / "marks.txt"
    flow = tmp_path / "forker.py"
    flow.write_text(
        "import os\n"
        "from flowtui import FunctionProvider, agent, tool, workflow\n\n"
        "def calls(messages, tools):\n"
        "    if any(m.role == 'tool' for m in messages):\n        return 'done'\n"
        "    return {'content': '', 'tool_calls': [{'name': 't', 'args': {}}]}\n\n"
        "@tool\ndef t() -> str:\n    \"\"\"t\"\"\"\n    child = os.fork()\n"
        f"    if child == 0:\n        {child_does}\n"
        "    os.waitpid(child, 0)\n    return 'parent'\n\n"
        "@agent(provider=FunctionProvider(calls), prompt='p', tools=[t])\nclass A:\n"
        "    def after_response(self, response, ctx):\n"
        f"        with open({str(marks)!r}, 'a') as f:\n            f.write(f'{{os.getpid()}}\\n')\n\n"
        "@workflow(steps=[A, A])\nclass W:\n    pass\n")
    proc = flowtui("run", str(flow), "--input", "x", "--no-journal", cwd=tmp_path)
    out, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 0 and out == "done\n", err
    pids = marks.read_text().split()
    assert len(pids) == 2 and len(set(pids)) == 1, pids  # two turns' hooks, in the run's process only


NEVER_RETURNS = {"SyncLoop": "tool t", "AsyncLoop": "tool t", "BlockingUntil": "the loop's until",
                 "RegexUntil": "the loop's until", "HookSpins": "hook Ag.after_response",
                 "ModelBlocks": "the model call of Writer"}


@pytest.mark.parametrize("flow", list(NEVER_RETURNS))
def test_ctrl_c_stops_a_run_that_never_returns(tmp_path, flow):
    """RegexUntil: C code holding the interpreter kept the stop from being read until it was forced,
    and the end said "killed after 0.0 s". The end names the code that did not return, and its line
    (it said "a tool or hook" whatever it was)."""
    journal = tmp_path / "j.jsonl"
    proc = flowtui("run", f"{MISBEHAVE}:{flow}", "--input", "x", "--journal", str(journal), cwd=tmp_path)
    looped = '"type":"ctx.set","name":"loop"'
    wait_for(journal, {"BlockingUntil": looped, "RegexUntil": looped, "HookSpins": '"type":"node.end","kind":"tool"',
                       "ModelBlocks": '"kind":"chat"'}.get(flow, '"kind":"tool"'))
    time.sleep(0.3)  # well inside the code that never returns
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=HANG)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 0, err  # stopped, not failed
    assert elapsed < 10, elapsed
    end = journal_events(journal)[-1]
    assert (end["type"], end["status"]) == ("run.end", "stopped"), end
    assert re.fullmatch(killed(NEVER_RETURNS[flow]), end["reason"]), end
    assert float(end["reason"].split()[2]) >= 0.5, end  # about the 1 s grace (a loaded machine notes the stop late)
    assert "stopping the run" in err


@pytest.mark.parametrize("flow", ["SyncLoop", "paused"])
def test_sigterm_to_flowtui_run_stops_the_run_as_ctrl_c_does_saying_so(tmp_path, flow):
    """A supervisor's SIGTERM to ``flowtui run`` (not to the run's own process): the run is stopped
    and its end written before flowtui exits, saying what stopped it."""
    journal = tmp_path / "j.jsonl"
    args = [f"{MISBEHAVE}:SyncLoop", "--input", "x", "--journal", str(journal)]
    if flow == "paused":  # a served run waits, paused, for its client
        args += ["--listen", "127.0.0.1:0"]
    proc = flowtui("run", *args, cwd=tmp_path)
    wait_for(journal, '"kind":"tool"' if flow == "SyncLoop" else '"type":"run.pause"')
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, err  # stopped, not failed
    end = journal_events(journal)[-1]
    # a tool that never returns: killed, and the run.end says why it was stopped and that it was killed
    want = (rf"flowtui run received SIGTERM \({killed('tool t', inside=True)}\)" if flow == "SyncLoop"
            else "flowtui run received SIGTERM")
    assert (end["type"], end["status"]) == ("run.end", "stopped") and re.fullmatch(want, end["reason"]), end
    assert "stopping the run (SIGTERM again kills it)" in err


def test_a_second_ctrl_c_kills_at_once(tmp_path):
    journal = tmp_path / "j.jsonl"
    proc = flowtui("run", f"{MISBEHAVE}:SyncLoop", "--input", "x", "--journal", str(journal), cwd=tmp_path)
    wait_for(journal, '"kind":"tool"')
    proc.send_signal(signal.SIGINT)
    time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=HANG)
    end = journal_events(journal)[-1]
    assert proc.returncode == 0 and end["type"] == "run.end"
    assert end["reason"].endswith("s after the stop: ctrl-C again")  # who killed it, not "a tool did not return"
    assert end["duration_ms"] > 0  # how long the run ran, though its process could not say


@pytest.mark.parametrize("flow,message", [
    ("HookSystemExit", "the run failed: SystemExit: 0"),
    ("HookKeyboardInterrupt", "the run failed: KeyboardInterrupt"),
    ("ExitsHard", "the run failed: the flow process exited with code 3"),
    ("Segfault", "the run failed: the flow process was killed by SIGSEGV (11)"),
    # SIGTERM from something else (a supervisor, kill) is no stop of ours: the run failed, saying so
    ("TerminatedRunning", "the flow process received SIGTERM (not from flowtui)"),
    ("TerminatedAwaiting", "the flow process received SIGTERM (not from flowtui)"),
])
def test_a_crash_is_a_failed_run_with_exit_1(tmp_path, flow, message):
    journal = tmp_path / "j.jsonl"
    proc = flowtui("run", f"{MISBEHAVE}:{flow}", "--input", "x", "--journal", str(journal), cwd=tmp_path)
    out, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 1, err
    assert message in err and "Traceback" not in err
    end = journal_events(journal)[-1]  # written by the run, or by flowtui when the process died
    assert (end["type"], end["status"]) == ("run.end", "failed")


def test_sys_exit_at_import_is_a_load_error(tmp_path):
    flow = tmp_path / "exits.py"
    flow.write_text("import sys\nsys.exit(0)\n")
    proc = flowtui("run", str(flow), cwd=tmp_path)
    out, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 2
    assert "the flow called sys.exit(0) while it was being imported" in err
    assert not (tmp_path / ".flowtui").exists()  # a flow that never loaded leaves no journal


def test_a_load_error_whose_process_is_slow_to_exit_is_said_once_and_only_as_that(tmp_path):
    """A worker that said its load error and then took its time in teardown (a module's __del__) was
    taken for a flow that closed its own event pipe, and that was said too."""
    flow = tmp_path / "slow_exit.py"
    flow.write_text("import sys, time\nclass Slow:\n    def __del__(self):\n        time.sleep(2)\n"
                    "sys.modules['_slow_to_go'] = Slow()\nraise ValueError('boom')\n")
    proc = flowtui("run", str(flow), cwd=tmp_path)
    out, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 2
    assert "ValueError while importing: boom" in err and "pipe" not in err, err


def test_an_import_that_never_ends_is_a_load_error_after_the_limit(tmp_path):
    flow = tmp_path / "loops.py"
    flow.write_text("while True:\n    pass\n")
    t0 = time.monotonic()
    proc = flowtui("run", str(flow), "--load-timeout", "1.5", cwd=tmp_path)
    out, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 2 and "did not finish loading within 1.5 s" in err
    assert time.monotonic() - t0 < 15


def workers_of(flow: Path) -> list[int]:
    """The run processes loading ``flow`` (their command line names it)."""
    found = subprocess.run(["pgrep", "-f", f"flowtui.runtime.worker {flow}"], capture_output=True, text=True)
    return [int(pid) for pid in found.stdout.split()]


STATE_THAT_LOOPS = """
from flowtui import FunctionProvider, agent, workflow
class S:
    x = 0
    def __getattribute__(self, name):
        while name == "x":  # made once the import is over, before the run can be driven
            pass
        return object.__getattribute__(self, name)
@agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
class A:
    pass
@workflow(state=S, steps=[A])
class W:
    pass
"""


@pytest.mark.parametrize("how, where", [("ctrl-C", "import"), ("killed", "import"), ("SIGTERM", "import"),
                                        ("SIGTERM", "state"), ("killed", "state")])
def test_a_run_process_stuck_importing_goes_with_its_client(tmp_path, how, where):
    """ctrl-C while the flow is imported ends its process too, saying so; a client killed outright
    takes it along as well (it left one spinning forever). SIGTERM (a supervisor's) said nothing,
    exit 143, and when the code that never returned came after the import (the state class), the
    run's process outlived its client, spinning."""
    flow = tmp_path / "loops.py"
    flow.write_text("while True:\n    pass\n" if where == "import" else STATE_THAT_LOOPS)
    proc = flowtui("run", str(flow), "--no-journal", cwd=tmp_path)
    deadline = time.monotonic() + HANG
    while not workers_of(flow):
        assert time.monotonic() < deadline, "the run's process never started"
        time.sleep(0.05)
    time.sleep(1.0)  # inside the import, or past it
    proc.send_signal({"ctrl-C": signal.SIGINT, "SIGTERM": signal.SIGTERM, "killed": signal.SIGKILL}[how])
    out, err = proc.communicate(timeout=HANG)
    if how != "killed":
        assert proc.returncode == 2 and "stopped while" in err and f"was loading ({how})" in err, err
    while workers_of(flow):
        assert time.monotonic() < deadline, "the run's process outlived its client"
        time.sleep(0.05)


def test_a_fifty_megabyte_tool_output_runs_through(tmp_path):
    journal = tmp_path / "j.jsonl"
    proc = flowtui("run", f"{MISBEHAVE}:BigOutput", "--input", "x", "--journal", str(journal), cwd=tmp_path)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out == "done\n"
    tool_message = next(e for e in journal_events(journal) if e["type"] == "state.append"
                        and e["item"]["role"] == "tool")
    assert len(tool_message["item"]["content"]) == 50_000_000  # the journal keeps it whole


def test_what_a_flow_prints_never_breaks_the_protocol(tmp_path):
    flow = tmp_path / "noisy.py"
    flow.write_text(
        "import sys\nfrom flowtui import FunctionProvider, agent, workflow\n"
        "print('{\"type\": \"hello\"} at import')\n"
        "class A:\n"
        "    def after_response(self, r, ctx):\n"
        "        print('printed by a hook'); print('on stderr', file=sys.stderr)\n"
        "A = agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt='p')(A)\n"
        "@workflow(steps=[A])\nclass W:\n    pass\n")
    proc = flowtui("run", str(flow), "--input", "x", "--no-journal", cwd=tmp_path)
    out, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 0 and out == "ok\n"
    assert "at import" in err and "printed by a hook" in err and "on stderr" in err



def test_a_printed_line_longer_than_any_buffer_never_blocks_the_run(tmp_path):
    flow = tmp_path / "longline.py"
    flow.write_text(
        "from flowtui import FunctionProvider, agent, workflow\n"
        "class A:\n"
        "    def after_response(self, r, ctx):\n"
        "        print('X' * 100_000)\n"
        "        print('€' * 50_000)\n"
        "        for i in range(20_000):\n"
        "            print('after', i)\n"
        "A = agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt='p')(A)\n"
        "@workflow(steps=[A, A])\nclass W:\n    pass\n")
    proc = flowtui("run", str(flow), "--input", "x", "--no-journal", cwd=tmp_path, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=HANG)  # it used to block for ever on the full pipe
    finally:
        if proc.poll() is None:  # blocked: take its worker with it
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 0 and out == "ok\n", err
    lines = err.splitlines()
    long = next(i for i, line in enumerate(lines) if "X" * 4000 in line)
    assert lines[long].endswith("(100,000 bytes, cut)")  # said, cut
    # cut where no character is whole: what is left of it is left out (it was said as �)
    assert lines[long + 1].startswith("€" * 1000) and lines[long + 1].endswith("€… (150,000 bytes, cut)")
    assert lines[long + 2:long + 4] == ["after 0", "after 1"] and "after 19999" in lines


def test_a_line_nested_too_deep_is_refused_and_the_run_goes_on(tmp_path):
    worker = subprocess.Popen([sys.executable, "-m", "flowtui.runtime.worker", str(ROOT / "flows/revisao.py")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    deep = b'{"id":2,"type":"step","x":' + b"[" * 50_000 + b"]" * 50_000 + b"}\n"
    worker.stdin.write(b'{"id":1,"type":"start","input":"x"}\n' + deep + b'{"id":3,"type":"step"}\n'
                       b'{"id":4,"type":"auth","token":"t"}\n'
                       b'{"id":true,"type":"pause"}\n{"id":' + b"9" * 26 + b',"type":"pause"}\n'
                       b'{"id":5,"type":"pause","type":"stop"}\n{"id":6,"type":"step"}\n')
    worker.stdin.flush()
    replies = []
    try:
        for line in worker.stdout:  # a reply to each command, in order, and the run moves on
            message = json.loads(line)
            if message.get("type") == "reply":
                replies.append((message["id"], message["ok"], message.get("error") or ""))
            if len(replies) == 8:
                break
    finally:
        worker.kill()
        worker.communicate(timeout=HANG)
    assert [r[:2] for r in replies] == [(1, True), (-1, False), (3, True), (4, False), (-1, False), (-1, False),
                                        (5, False), (6, True)], replies
    # a key twice: which one a parser takes differs (this one stopped the run as the last "type")
    assert replies[6][2] == "not a command: the key 'type' is given twice in one object; give each key once"
    assert replies[4][2].startswith("not a command: pause.id: Input should be a valid integer")  # not taken as 1
    assert "auth is for a client on a socket" in replies[3][2]  # not an internal error

def replies_until(worker: subprocess.Popen, last: int) -> dict[int, dict]:
    """The worker's replies by id, up to the one to command ``last``; the worker is killed then."""
    replies = {}
    try:
        for line in worker.stdout:
            message = json.loads(line)
            if message.get("type") == "reply":
                replies[message["id"]] = message
            if last in replies:
                break
    finally:
        worker.kill()
        worker.communicate(timeout=HANG)
    return replies


def test_a_command_holding_a_lone_surrogate_is_refused_with_its_id(tmp_path):
    """A text with a lone surrogate ("\\ud800", a file name that is no UTF-8) was refused with id -1: the
    client could not tell which of its commands the refusal answered."""
    worker = subprocess.Popen([sys.executable, "-m", "flowtui.runtime.worker", str(ROOT / "flows/revisao.py")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    worker.stdin.write(b'{"id":1,"type":"start","input":"x"}\n'
                       b'{"id":7,"type":"add_item","bucket":"memory","text":"a\\ud800b"}\n{"id":8,"type":"step"}\n')
    worker.stdin.flush()
    replies = replies_until(worker, 8)
    assert not replies[7]["ok"] and replies[7]["error"].startswith("not a command:"), replies
    assert -1 not in replies and replies[8]["ok"]


def test_a_command_field_of_the_wrong_json_type_is_refused_not_taken_as_what_it_resembles(tmp_path):
    """index true was item 1, "0" and 0.0 item 0, with_call "no" False: an edit made where the client did
    not mean one (id and take_over were already strict)."""
    worker = subprocess.Popen([sys.executable, "-m", "flowtui.runtime.worker", str(ROOT / "flows/revisao.py")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    worker.stdin.write(b'{"id":1,"type":"start","input":"x","memory":["a","b"]}\n')
    worker.stdin.flush()
    for line in worker.stdout:  # (edits apply to a paused run)
        if json.loads(line).get("type") == "run.pause":
            break
    worker.stdin.write(b'{"id":2,"type":"delete_item","bucket":"memory","index":true}\n'
                       b'{"id":3,"type":"delete_item","bucket":"memory","index":"0"}\n'
                       b'{"id":4,"type":"delete_item","bucket":"memory","index":0.0}\n'
                       b'{"id":5,"type":"delete_message","index":1,"with_call":"no"}\n'
                       b'{"id":6,"type":"breakpoint","name":"PlannerAgent","on":1}\n'
                       b'{"id":7,"type":"count"}\n')
    worker.stdin.flush()
    replies = replies_until(worker, 7)
    for n, field in ((2, "index"), (3, "index"), (4, "index"), (5, "with_call"), (6, "on")):
        assert not replies[n]["ok"] and f".{field}: Input should be a valid" in replies[n]["error"], replies[n]
    assert replies[7]["ok"], replies[7]


def test_a_breakpoint_on_a_name_the_flow_no_longer_has_is_said_when_it_loads(tmp_path):
    """A breakpoint kept across a reload on an agent the new code renamed would never fire: the
    hello says so (the app shows it), and the others are not named."""
    worker = subprocess.Popen([sys.executable, "-m", "flowtui.runtime.worker", str(ROOT / "flows/revisao.py"),
                               "--breakpoint", "RevisorAgent", "--breakpoint", "Revisor"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    try:
        hello = json.loads(worker.stdout.readline())
    finally:
        worker.kill()
        worker.communicate(timeout=HANG)
    assert hello["type"] == "hello"
    assert hello["notes"] == ["breakpoint Revisor: no agent, tool or loop of RevisaoWorkflow is called that "
                              "(it stays set: a child workflow's may be)"]


# --- the protocol, from a plain socket ------------------------------------------------------------


class Client:
    """A bare protocol client: lines of JSON over a socket."""

    def __init__(self, port: int, token: str) -> None:
        import socket

        self.sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
        self.reader = self.sock.makefile("rb")
        self.ids = 0
        self.events: list[dict] = []
        self.send({"type": "auth", "token": token})

    def send(self, message: dict) -> None:
        self.sock.sendall(json.dumps(message).encode() + b"\n")

    def read(self) -> dict:
        line = self.reader.readline()
        assert line, "the run's process closed the connection"
        return json.loads(line)

    def command(self, **message) -> dict:
        self.ids += 1
        self.send({"id": self.ids, **message})
        while True:
            msg = self.read()
            if msg["type"] == "reply" and msg["id"] == self.ids:
                return msg
            if msg["type"] not in ("reply", "hello", "log"):
                self.events.append(msg)

    def history(self) -> list[dict]:
        """The run's history, folded from the events read so far."""
        history: list[dict] = []
        for ev in self.events:
            if ev["type"] == "state.append" and ev["bucket"] == "history":
                history.append(ev["item"])
            elif ev["type"] == "state.set" and ev["bucket"] == "history":
                history = list(ev["items"])
        return history

    def until(self, predicate) -> dict:
        for ev in self.events:
            if predicate(ev):
                self.events.remove(ev)
                return ev
        while True:
            msg = self.read()
            if msg["type"] not in ("reply", "hello", "log"):
                self.events.append(msg)
                if predicate(msg):
                    self.events.remove(msg)
                    return msg

    def paused(self) -> dict:
        return self.until(lambda ev: ev["type"] == "run.pause")


@pytest.fixture
def listening(tmp_path):
    journal = tmp_path / "j.jsonl"
    proc = flowtui("run", str(ROOT / "flows/revisao.py"), "--input", "x", "--listen", "127.0.0.1:0",
                   "--journal", str(journal), cwd=ROOT)
    lines = []
    while len(lines) < 2:
        lines.append(proc.stderr.readline())
    port = int(lines[0].rsplit(":", 1)[1])
    token = lines[1].split()[1]
    yield proc, port, token, journal
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_a_plain_socket_client_drives_a_run_through_every_command(listening):
    proc, port, token, journal = listening
    c = Client(port, token)
    assert c.read()["type"] == "hello"
    assert c.paused()["name"] == "PlannerAgent"  # from the backlog: the run started paused
    assert c.command(type="step")["ok"]
    assert c.paused()["point"] == "chat"
    assert c.command(type="next_turn")["ok"]
    assert c.paused()["name"] == "EscritorAgent"
    assert c.command(type="breakpoint", name="registrar_problema", on=True)["value"] == ["registrar_problema"]
    assert c.command(type="continue")["ok"]
    assert c.paused()["reason"] == "breakpoint"
    # every edit, each answered, each an event with origin user
    assert c.command(type="add_item", bucket="tasks", text="cite the docs")["ok"]
    assert c.command(type="set_item", bucket="tasks", index=0, text="cite the docs twice")["ok"]
    assert c.command(type="add_item", bucket="memory", text="a note")["ok"]
    assert c.command(type="delete_item", bucket="memory", index=1)["ok"]
    assert c.command(type="set_field", name="rodadas", text="7")["ok"]
    refused = c.command(type="set_field", name="rodadas", text="many")
    assert not refused["ok"] and "RevisaoState.rodadas is int" in refused["error"]
    assert c.command(type="edit_message", index=0, text="Escreva sobre ctx.state, com exemplos")["ok"]
    assert c.command(type="undo")["value"] is True
    assert c.command(type="promote", index=1, text="o rascunho, como contexto")["ok"]
    # the pending call: its arguments, checked against the tool's schema, then a decision
    wrong = c.command(type="edit_call", text='{"problema": "x"}')
    assert not wrong["ok"] and ("registrar_problema refuses these arguments (ProblemaArgs: descricao): problema: not "
                                "an argument of registrar_problema; descricao: Field required") in wrong["error"]
    assert c.command(type="edit_call", text='{"descricao": "falta um exemplo"}')["value"] == {
        "descricao": "falta um exemplo"}
    assert c.command(type="decide", decision="deny", reason="not this one")["ok"]  # and the run goes on
    denied = c.until(lambda ev: ev["type"] == "state.append" and ev["bucket"] == "history"
                     and ev["item"]["role"] == "tool")
    assert denied["item"]["content"] == "denied by the user: not this one" and denied["origin"] == "user"
    c.paused()  # at the second call (the breakpoint): the denied result is the history's last message
    last = len(c.history())  # (until() took the denied result's event out of c.events)
    refused = c.command(type="delete_message", index=last - 1)  # the message that makes the pending call
    assert not refused["ok"] and "the call the run is paused before" in refused["error"]
    assert c.command(type="delete_message", index=last)["value"] == [last]  # the result, and its call
    decisions = [ev["decision"] for ev in c.events if ev["type"] == "tool.decision"]
    assert decisions == ["edited", "denied"]
    user_edits = [ev for ev in c.events if ev.get("origin") == "user"]
    assert len(user_edits) >= 10
    assert c.command(type="fetch", seq=1, path="input")["ok"] is False  # nothing was cut
    assert c.command(type="loop_once")["ok"]
    assert c.paused()["point"] in ("loop_iteration", "tool")
    assert c.command(type="pause")["ok"]
    bad = c.command(type="nope")
    assert not bad["ok"]
    assert c.command(type="fetch", seq=1, path="")["error"] == "no value was cut at event 1 (a path is needed)"
    assert c.command(type="stop")["ok"]
    # stopping or ended, not to be paused first: it said "edits apply to a paused run; pause it first (p)"
    late = c.command(type="add_item", bucket="memory", text="late")["error"]
    assert late in ("the run is stopping: edits apply to a paused run",
                    "the run has ended: edits apply to a paused run", "the run's process has ended"), late
    end = c.until(lambda ev: ev["type"] == "run.end")
    assert end["status"] == "stopped"
    assert proc.wait(timeout=HANG) == 0
    assert journal_events(journal)[-1]["type"] == "run.end"


def test_a_wrong_token_is_refused_and_the_run_keeps_waiting(listening, tmp_path):
    proc, port, token, journal = listening
    with Terminal.flowtui("attach", f"127.0.0.1:{port}", "--token", "not-it", cwd=tmp_path) as term:
        assert term.wait_exit(timeout=HANG) == 2  # the app needs a terminal: it gets one
        assert "token rejected" in term.output.decode("utf-8", "replace")
    c = Client(port, token)  # the run is still there, waiting
    assert c.read()["type"] == "hello"
    assert c.command(type="continue")["ok"]
    assert c.until(lambda ev: ev["type"] == "run.end")["status"] == "finished"


def test_a_served_run_whose_stderr_is_gone_is_served_all_the_same(tmp_path):
    """``flowtui run --listen ... 2>&1 | head -2`` read the address and the token, then closed: the next
    line said on stderr ("attach with: ...") failed, the serving process exited 1, and the run ended
    "its client went away". Here stderr is closed before anything is said (the port and token given)."""
    import os
    import socket

    free = socket.create_server(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    token = "a-token-long-enough-for-no-warning-0123"
    read_end, write_end = os.pipe()
    os.close(read_end)  # whatever read stderr has gone
    journal = tmp_path / "j.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run",
                             str(ROOT / "flows/revisao.py"), "--input", "x", "--listen", f"127.0.0.1:{port}",
                             "--journal", str(journal)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=write_end,
                            env={**os.environ, "FLOWTUI_TOKEN": token})
    os.close(write_end)
    try:
        deadline = time.monotonic() + HANG
        while True:
            assert proc.poll() is None, f"the serving process exited {proc.returncode}"
            try:
                c = Client(port, token)
                break
            except ConnectionRefusedError:
                assert time.monotonic() < deadline, "never listened"
                time.sleep(0.05)
        assert c.read()["type"] == "hello"
        assert c.command(type="continue")["ok"]
        end = c.until(lambda ev: ev["type"] == "run.end")
        assert end["status"] == "finished", end
        assert proc.wait(timeout=HANG) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert journal_events(journal)[-1]["status"] == "finished"


def test_detaching_leaves_the_run_paused_for_the_next_client(listening):
    proc, port, token, journal = listening
    first = Client(port, token)
    first.read()
    first.paused()
    assert first.command(type="next_turn")["ok"]
    first.paused()
    assert first.command(type="detach")["ok"]
    second = Client(port, token)
    assert second.read()["type"] == "hello"
    pauses = []
    while len(pauses) < 2:  # the backlog: the start's pause, then where the first client left it
        pauses.append(second.paused())
    assert pauses[-1]["name"] == "EscritorAgent"
    assert second.command(type="continue")["ok"]
    assert second.until(lambda ev: ev["type"] == "run.end")["status"] == "finished"


def test_commands_sent_just_before_detach_are_answered_before_it_and_never_to_the_next_client(listening):
    """step, pause and detach sent at once: only the detach was answered (the step ran, its reply went
    nowhere), and a reply late enough went to the next client, under an id of the first one's."""
    proc, port, token, journal = listening
    first = Client(port, token)
    first.read()
    first.paused()
    first.send({"id": 10, "type": "step"})
    first.send({"id": 20, "type": "breakpoint", "name": "RevisorAgent", "on": True})
    first.send({"id": 30, "type": "detach"})
    said = []
    for line in first.reader:  # to the connection's end
        msg = json.loads(line)
        if msg["type"] == "reply":
            said.append((msg["id"], msg["ok"]))
    assert said == [(10, True), (20, True), (30, True)], said
    second = Client(port, token)
    hello = second.read()
    assert hello["type"] == "hello" and hello["breakpoints"] == ["RevisorAgent"], hello
    assert second.command(type="continue")["ok"]
    second.until(lambda ev: ev["type"] == "run.pause" and ev.get("name") == "RevisorAgent")
    assert second.command(type="stop")["ok"]
    assert second.until(lambda ev: ev["type"] == "run.end")["status"] == "stopped"
    assert not any(ev.get("type") == "reply" and ev["id"] in (10, 20) for ev in second.events)


def test_listening_beyond_loopback_needs_listen_public(tmp_path):
    proc = flowtui("run", str(ROOT / "flows/revisao.py"), "--listen", "0.0.0.0:0", cwd=ROOT)
    out, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 2 and "--listen-public" in err


@pytest.mark.parametrize("away", [False, True], ids=["in-the-group", "setsid"])
def test_a_process_the_flow_forked_neither_holds_the_run_up_nor_writes_to_its_journal(tmp_path, away):
    import os

    journal, pids = tmp_path / "j.jsonl", tmp_path / "pids"
    env = dict(os.environ, FLOWTUI_TEST_PIDS=str(pids), **({"FLOWTUI_TEST_SETSID": "1"} if away else {}))
    proc = flowtui("run", f"{MISBEHAVE}:Forks", "--input", "x", "--journal", str(journal), cwd=tmp_path, env=env)
    try:
        out, err = proc.communicate(timeout=HANG)  # the fork sleeps 120 s holding the worker's pipes
        assert proc.returncode == 0, err
        assert out == "done\n"
        children = [int(pid) for pid in pids.read_text().split()]
        for pid in children:  # the copy of the worker ends as a process does, writing nothing of the run
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:  # in the worker's group: killed with it already
                pass
        time.sleep(0.5)
        ends = [ev for ev in journal_events(journal) if ev["type"] == "run.end"]
        assert [end["status"] for end in ends] == ["finished"]
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in [int(p) for p in pids.read_text().split()] if pids.exists() else []:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_input_in_a_tool_reads_nothing_never_the_debuggers_commands(tmp_path):
    journal = tmp_path / "j.jsonl"
    proc = flowtui("run", f"{MISBEHAVE}:ReadsInput", "--input", "x", "--journal", str(journal), cwd=tmp_path)
    out, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, err
    tool_end = next(ev for ev in journal_events(journal) if ev["type"] == "node.end" and ev["kind"] == "tool")
    assert tool_end["status"] == "error" and "EOF when reading a line" in tool_end["error"]  # EOFError


def test_sys_exit_in_a_cleanup_is_that_cleanup_failing_not_a_run_left_unended(tmp_path):
    journal = tmp_path / "j.jsonl"
    proc = flowtui("run", f"{MISBEHAVE}:DisposeExits", "--input", "x", "--journal", str(journal), cwd=tmp_path)
    out, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, err
    events = journal_events(journal)
    failed = [ev for ev in events if ev["type"] == "dispose.error"]
    assert len(failed) == 1 and "SystemExit" in failed[0]["error"]
    assert (events[-1]["type"], events[-1]["status"]) == ("run.end", "finished")


def test_an_input_that_is_not_utf8_runs_with_replacement_characters(tmp_path):
    """Bytes a shell passes as they are (not UTF-8) reach the model as U+FFFD, not a traceback."""
    journal = tmp_path / "j.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run",
                             str(ROOT / "flows/revisao.py"), b"--input", b"ol\xe1", "--journal", str(journal)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 0 and "Traceback" not in err, err
    assert journal_events(journal)[0]["input"] == "ol\ufffd"


ONE_AGENT = """
from flowtui import ScriptedProvider, agent, workflow


@agent(provider=ScriptedProvider(["ok"]), prompt="p")
class A:
    pass


@workflow(steps=[A])
class W:
    pass
"""


def test_a_stop_reads_on_when_the_consumer_is_behind_so_the_run_ends_itself():
    """An app behind on a flood held the pipe's reading back: the worker, blocked writing, could not
    write its run's end when stopped, and was killed; its end then said how long the app took to see
    it ("killed after 3.0 s"). Its run's end read, its process is let go, not killed once the grace is over."""
    import asyncio

    from flowtui.runtime import protocol as p
    from flowtui.runtime.channel import Channel
    from flowtui.runtime.spawn import Options

    got: list[bytes] = []

    async def run() -> tuple[bool, str, bool]:
        channel = Channel(got.extend)
        hello = await channel.spawn(Options(target=f"{MISBEHAVE}:Floods"))
        assert isinstance(hello, p.Hello), hello
        assert (await channel.command(p.Start(input="x", paused=False))).ok
        while len(got) < 20_000:
            await asyncio.sleep(0.05)
        channel.paused.clear()  # the consumer is behind: the worker blocks writing
        await asyncio.sleep(0.5)
        # (a grace of 6 s leaves the unwinding, and the reading of what the worker queued, 3 s before the
        # kill: the 0.5 s of the default did not always do on a loaded machine, nor once 1.5 s on a clean
        # clone; the client's kill then made the end up, as it should then)
        await channel.stop(grace=6.0)
        await channel.wait()
        return channel.ended, channel.ending()[1] if not channel.ended else "", channel.killed

    ended, why, killed = asyncio.run(asyncio.wait_for(run(), HANG))
    end = json.loads(next(line for line in reversed(got) if b'"type":"run.end"' in line)) if ended else None
    assert end is not None, why  # its own end, not one the client made up after killing it
    assert end["status"] == "stopped", end
    said = re.fullmatch(r"killed after (\d+\.\d) s: tool t did not return \(at .*misbehave\.py:\d+ in floods\)",
                        end["reason"])
    assert said is not None and float(said[1]) >= 6.0, end  # (the grace, and what a loaded machine adds)
    assert not killed  # (its process went once its end was read: no kill that could cut it short)


def test_a_run_whose_code_has_all_run_is_not_waited_on_through_the_interpreters_teardown(tmp_path):
    """The run ended and every atexit handler of the flow has run: the client lets go of the process
    then, not after its grace period (with litellm loaded, Python's own teardown takes over a second).
    Here the teardown would take a minute and the grace is 20 s; the flow's atexit handler still runs."""
    import asyncio

    from flowtui.runtime import protocol as p
    from flowtui.runtime.channel import Channel
    from flowtui.runtime.spawn import Options

    done = tmp_path / "atexit-ran"
    flow = tmp_path / "slow_teardown.py"
    flow.write_text(f"""
import atexit, time


class SlowToGo:
    def __del__(self):  # at the interpreter's teardown, after every atexit handler
        time.sleep(60)


keep = SlowToGo()


def cleanup():
    time.sleep(0.3)
    open({str(done)!r}, "w").write("yes")


atexit.register(cleanup)

""" + ONE_AGENT)

    async def run() -> float:
        channel = Channel(lambda lines: None)
        hello = await channel.spawn(Options(target=str(flow), grace=20.0))
        assert isinstance(hello, p.Hello), hello
        reply = await channel.command(p.Start(input="x", paused=False))
        assert reply.ok, reply
        await channel.ended_or_gone()
        t0 = time.monotonic()
        await channel.finish()
        return time.monotonic() - t0

    took = asyncio.run(asyncio.wait_for(run(), HANG))
    assert took < 10  # not the 20 s grace, let alone the minute of teardown
    assert done.read_text() == "yes"  # the flow's own atexit handler ran first


def test_a_stopped_run_lets_its_process_go_at_once_not_after_the_grace_period(tmp_path):
    """Stopped (x, q, ctrl-C), a run that ends at once had its process wait for its input to close, to
    serve fetch: the client waited out the whole grace period, then terminated it (q took 0.4 s more
    than it needed, x killed the process its run had left). Here the grace is 20 s."""
    import asyncio

    from flowtui.runtime import protocol as p
    from flowtui.runtime.channel import Channel
    from flowtui.runtime.spawn import Options

    flow = tmp_path / "one.py"
    flow.write_text(ONE_AGENT)

    async def run() -> tuple[float, bool, bool]:
        channel = Channel(lambda lines: None)
        hello = await channel.spawn(Options(target=str(flow), grace=20.0))
        assert isinstance(hello, p.Hello), hello
        assert (await channel.command(p.Start(input="x", paused=True))).ok
        t0 = time.monotonic()
        await channel.stop()
        await channel.wait()
        return time.monotonic() - t0, channel.ended, channel.killed

    took, ended, killed = asyncio.run(asyncio.wait_for(run(), HANG))
    assert took < 10, took  # not the 20 s grace
    assert ended and not killed  # its run said its own end, and it was let go, not killed for not stopping


def test_a_flow_that_imports_litellm_itself_gets_the_price_map_shipped_with_it(tmp_path):
    """litellm's import fetches a price map from the network unless told not to (offline: seconds of
    retries and warnings on the terminal); the runtime's own import tells it, and a flow's import too."""
    seen = tmp_path / "seen"
    flow = tmp_path / "own_litellm.py"
    flow.write_text(f"""
import os
open({str(seen)!r}, "w").write(os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP", "unset"))

""" + ONE_AGENT)
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    proc = flowtui("run", str(flow), "--input", "x", "--no-journal", cwd=tmp_path, env=env)
    out, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, err
    assert seen.read_text() == "True"


def test_the_next_client_is_told_the_breakpoints_and_watchpoints_an_earlier_one_left(listening):
    """A breakpoint another client set paused the run with 'breakpoints: none' on the screen: the
    next client could neither see nor clear it. hello now lists what is set."""
    proc, port, token, journal = listening
    first = Client(port, token)
    assert first.read()["type"] == "hello"
    assert first.command(type="breakpoint", name="registrar_problema")["ok"]
    assert first.command(type="watch", expr="len(state.problemas) >= 2")["ok"]
    assert first.command(type="detach")["ok"]
    second = Client(port, token)
    hello = second.read()
    assert hello["breakpoints"] == ["registrar_problema"] and hello["watches"] == ["len(state.problemas) >= 2"]


PROGRESS = """
import sys, time
from pydantic import BaseModel
from flowtui import ChatReply, FunctionProvider, Input, ToolCall, agent, tool, workflow
class Args(BaseModel):
    pass
@tool(name="baixar", description="d", schema=Args)
class Baixar:
    def execute(self, args: Args = Input()):
        for i in range(1, 4):
            sys.stderr.write(f"\\rprogress {i}%")
            sys.stderr.flush()
        time.sleep(3)  # the bar stays as it is a while: a line without its newline yet
        sys.stderr.write("\\rprogress 100%\\n")
        sys.stderr.write("ends\\r\\r\\n")  # as a terminal shows it: ends
        print("done")
        return "ok"
def model(messages, tools):
    if any(m.role == "tool" for m in messages):
        return "fim"
    return ChatReply(content="", tool_calls=[ToolCall(name="baixar", args={})])
@agent(provider=FunctionProvider(model), prompt="p", tools=[Baixar])
class A:
    pass
@workflow(steps=[A])
class W:
    pass
"""


def test_a_progress_bar_the_flow_prints_is_shown_while_it_runs_as_a_terminal_shows_it(tmp_path):
    """A line written over with \\r and left without its newline (a progress bar, print(end="")) was
    never shown while the run went on, and then as one line of every state it had been in."""
    flow = tmp_path / "bar.py"
    flow.write_text(PROGRESS)
    proc = flowtui("run", str(flow), "--input", "x", "--no-journal", cwd=tmp_path)
    out, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, err
    lines = err.splitlines()
    assert "␍progress 3%" in lines, err  # said as it stood, while the tool slept
    assert lines.index("␍progress 3%") < lines.index("␍progress 100%") < lines.index("ends") < lines.index("done")
    assert not any("progress 1%" in line or "progress 2%" in line for line in lines), err  # written over


def test_a_line_printed_in_pieces_with_pauses_is_said_as_going_on_or_written_over(tmp_path):
    """print(state, end="\\r") between pauses showed each state as a line of its own, unmarked (as if
    printed one under the other), and a line finished after a pause showed as two unrelated lines."""
    flow = tmp_path / "pieces.py"
    flow.write_text(PROGRESS.replace('''        for i in range(1, 4):
            sys.stderr.write(f"\\rprogress {i}%")
            sys.stderr.flush()
        time.sleep(3)  # the bar stays as it is a while: a line without its newline yet
''', '''        for state in ("waiting", "working"):
            print(state, end="\\r", file=sys.stderr, flush=True)
            time.sleep(2.5)
        print("half", end="", file=sys.stderr, flush=True)
        time.sleep(2.5)
        print(" and the rest", file=sys.stderr, flush=True)
'''))
    proc = flowtui("run", str(flow), "--input", "x", "--no-journal", cwd=tmp_path)
    out, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, err
    # the flow's stderr and its events come over two pipes: a trace line may fall between them
    lines = [line for line in err.splitlines() if not line.lstrip().startswith(("▸", "◂"))]
    start = lines.index("waiting")
    assert lines[start:start + 4] == ["waiting", "␍working", "␍half", "… and the rest"], err


def test_the_flow_never_sees_the_token_clients_attach_with(tmp_path):
    """FLOWTUI_TOKEN (the token of a served run, which ps does not show) was in the worker's environment:
    the flow's code, or a shell tool the model drives, could read it and attach to the run."""
    flow = tmp_path / "env.py"
    flow.write_text(PROGRESS.replace('''        for i in range(1, 4):
            sys.stderr.write(f"\\rprogress {i}%")
            sys.stderr.flush()
        time.sleep(3)  # the bar stays as it is a while: a line without its newline yet
''', '''        import os
        print("token seen:", "FLOWTUI_TOKEN" in os.environ, "other seen:", "OTHER_SETTING" in os.environ)
'''))
    proc = flowtui("run", str(flow), "--input", "x", "--no-journal", cwd=tmp_path,
                   env={**os.environ, "FLOWTUI_TOKEN": "t0k3n-for-clients-only", "OTHER_SETTING": "1"})
    out, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, err
    assert "token seen: False other seen: True" in err, err


def test_a_key_printed_slowly_in_pieces_is_never_said_in_them(tmp_path):
    """A line left without its newline is said as it stands after a second, and each piece was redacted
    on its own: a key printed a few characters a second (a tool streaming model tokens) went out whole,
    a piece at a time, each too short to be found: on stderr, in the app's notice and its pager."""
    key, token = "sk-testabcdefghijklmnopqrstuvwxyz0123456789ABCD", "Zq9xWv7Lm2Rt5Yp8Kd3Hs6Jf"
    flow = tmp_path / "slow.py"
    flow.write_text(PROGRESS.replace('''        for i in range(1, 4):
            sys.stderr.write(f"\\rprogress {i}%")
            sys.stderr.flush()
        time.sleep(3)  # the bar stays as it is a while: a line without its newline yet
''', '''        import os
        key, token = os.environ["OPENAI_API_KEY"], os.environ["SERVICE_TOKEN"]
        print("key", key[:20], end="", flush=True)
        time.sleep(3)  # (each piece said as it stands after 1 s: 2 s of margin for a loaded machine)
        print(key[20:], "token", token[:10], end="", flush=True)
        time.sleep(3)
        print(token[10:], "waiting", end="", flush=True)
        time.sleep(3)
        print(" ok", flush=True)
'''))
    proc = flowtui("run", str(flow), "--input", "x", "--no-journal", cwd=tmp_path,
                   env={**os.environ, "OPENAI_API_KEY": key, "SERVICE_TOKEN": token})
    out, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, err
    for secret in (key, token):
        assert not any(secret[i:i + 4] in err for i in range(3, len(secret) - 3)), err
    assert "waiting" in err and "…[redacted]" in err, err  # (a word that begins no key is said as it came)


def test_a_character_cut_between_two_pieces_of_a_line_is_said_whole(tmp_path):
    """A line said as it stood after a pause, cut inside a character (a model's reply streamed a byte
    at a time), showed that character as two undecodable ones: one at the end of each piece."""
    flow = tmp_path / "cut.py"
    flow.write_text(PROGRESS.replace('''        for i in range(1, 4):
            sys.stderr.write(f"\\rprogress {i}%")
            sys.stderr.flush()
        time.sleep(3)  # the bar stays as it is a while: a line without its newline yet
''', '''        word = "ação pronta".encode()
        sys.stderr.buffer.write(word[:2]); sys.stderr.flush()  # "a" and the first byte of "ç"
        time.sleep(3)  # (said as it stands after 1 s)
        sys.stderr.buffer.write(word[2:] + b"\\n"); sys.stderr.flush()
'''))
    proc = flowtui("run", str(flow), "--input", "x", "--no-journal", cwd=tmp_path)
    out, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, err
    assert "\ufffd" not in err, err
    lines = err.splitlines()
    assert "a" in lines and "…ção pronta" in lines, err  # (said as it stood, then going on with it)


def _catches_sigint(pid: int) -> bool:
    """Whether process ``pid`` has a handler for SIGINT (Linux's /proc; elsewhere, taken as so)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            caught = next(line for line in status if line.startswith("SigCgt:"))
    except (OSError, StopIteration):
        return True
    return bool(int(caught.split()[1], 16) & (1 << (signal.SIGINT - 1)))


def _cpu_seconds(pid: int) -> float:
    """The CPU time process ``pid`` has used (Linux's /proc; elsewhere, taken as plenty)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()  # (fields 14 and 15 are utime and stime)
    except OSError:
        return float("inf")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_to_reach_main() -> float:
    """The CPU time a process takes to start Python and import flowtui's entry point: what runs before
    ``main()`` can catch a ctrl-C (a ctrl-C there is Python's own traceback, as in any Python program)."""
    import resource

    def used() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    before = used()
    subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main"], check=True, timeout=HANG)
    return used() - before


def test_flowtuis_entry_point_imports_nothing_before_main_can_catch_a_ctrl_c():
    """The console script imports ``flowtui.tui.cli`` before calling ``main()``: a ctrl-C during that import
    is a KeyboardInterrupt traceback. It imported argparse and typing, and one landed there on a loaded
    machine; now it is three small modules."""
    code = ("import sys; before = set(sys.modules); from flowtui.tui.cli import main; "
            "print(' '.join(sorted(set(sys.modules) - before)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG, check=True)
    assert done.stdout.split() == ["flowtui", "flowtui.tui", "flowtui.tui.cli"]


@pytest.mark.parametrize("after", [0.15, 0.25])
def test_ctrl_c_while_flowtui_itself_starts_stops_with_no_traceback(tmp_path, after):
    """ctrl-C while flowtui imports its own modules, or before asyncio's handler is in place: a
    KeyboardInterrupt traceback, or exit 1 with nothing said (as if the run had failed). Wherever it
    lands before the run starts: exit 2, said."""
    reach_main = _cpu_to_reach_main() + 1 / os.sysconf("SC_CLK_TCK")  # (/proc counts whole ticks)
    proc = flowtui("run", str(ROOT / "flows/revisao.py"), "--input", "x", "--no-journal", cwd=tmp_path)
    deadline = time.monotonic() + HANG
    # (on a loaded machine, a wall-clock wait could still be in Python's own start-up)
    while not _catches_sigint(proc.pid) or _cpu_seconds(proc.pid) < reach_main:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.002)
    time.sleep(after - 0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 2 and "Traceback" not in err, err
    assert re.search(r"flowtui: stopped (\(ctrl-C\) before the run started|while .* was loading \(ctrl-C\); "
                     r"nothing of it ran)", err), err


WAITS_FOR_ANOTHER_BRANCH = """
import asyncio
from flowtui import FunctionProvider, agent, parallel, tool, workflow
box = {}
@tool
async def espera_b() -> str:
    '''Waits for what B does.'''
    box.setdefault("ev", asyncio.Event())
    await box["ev"].wait()
    return "B fez"
@agent(provider=FunctionProvider(lambda m, t: {"content": "", "tool_calls": [{"name": "espera_b", "args": {}}]}),
       prompt="a", tools=[espera_b])
class A:
    pass
@agent(provider=FunctionProvider(lambda m, t: "B ok"), prompt="b")
class B:
    def after_response(self, response, ctx):
        box.setdefault("ev", asyncio.Event()).set()
@workflow(steps=[parallel([A, B])])
class W:
    pass
"""


def test_a_branch_waiting_for_another_branchs_tool_calls_says_so_and_x_still_stops_it(tmp_path):
    """Parallel branches wait for each other's tool calls to be answered (they share one history): a tool
    that waits for another branch then waits for ever, which was a silent hang."""

    flow = tmp_path / "waits.py"
    flow.write_text(WAITS_FOR_ANOTHER_BRANCH)
    journal = tmp_path / "run.jsonl"
    proc = flowtui("run", str(flow), "--input", "x", "--journal", str(journal), cwd=tmp_path)
    said: list = []
    reader = threading.Thread(target=lambda: said.extend(proc.stderr), daemon=True)
    reader.start()
    deadline = time.monotonic() + HANG
    while not any("waits for the tool calls of A (espera_b)" in line for line in said):
        assert time.monotonic() < deadline and proc.poll() is None, said
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=HANG)
    reader.join(timeout=HANG)
    line = next(line for line in said if "waits for the tool calls" in line)
    assert line.startswith("flowtui: B waits for the tool calls of A (espera_b) to be answered: branches of a "
                           "parallel step share one history"), line
    assert journal_events(journal)[-1]["type"] == "run.end"


@pytest.mark.parametrize("code, reason", [
    ("async def never(ctx):\n    await asyncio.sleep(3600)\n\n"
     "@workflow(steps=[loop([A], until=never, max_iterations=3)])\nclass W:\n    pass\n",
     "stopped by user after 0.5 s (the loop's until was cancelled, at awaits.py:9 in never)"),
    ("@tool\nasync def slow() -> str:\n    '''Slow.'''\n    try:\n        await asyncio.sleep(3600)\n"
     "    except asyncio.CancelledError:\n        await asyncio.sleep(3600)\n\n"
     "@agent(provider=FunctionProvider(lambda m, t: {'content': '', 'tool_calls': [{'name': 'slow'}]}), prompt='p',"
     " tools=[slow])\nclass B:\n    pass\n\n@workflow(steps=[B])\nclass W:\n    pass\n",
     "killed after 1.0 s: tool slow did not return (at awaits.py:13 in slow)"),
    # in a branch of a parallel step (the run awaits its branches gathered: it said "what it awaited")
    ("@tool\nasync def slow() -> str:\n    '''Slow.'''\n    await asyncio.sleep(3600)\n\n"
     "@agent(provider=FunctionProvider(lambda m, t: {'content': '', 'tool_calls': [{'name': 'slow'}]}), prompt='p',"
     " tools=[slow])\nclass B:\n    pass\n\n@workflow(steps=[parallel([B, A])])\nclass W:\n    pass\n",
     "stopped by user after 0.5 s (tool slow was cancelled, at awaits.py:10 in slow)"),
], ids=["until", "tool that swallows the cancel", "tool in a parallel branch"])
def test_ctrl_c_on_a_run_awaiting_code_of_the_flows_names_it_and_its_line(tmp_path, code, reason):
    """An async until (or tool) that never returns: the run ended "(what it awaited was cancelled)", or "the model
    call or async tool it awaited did not return", naming neither the code nor its line."""
    flow = tmp_path / "awaits.py"
    flow.write_text("import asyncio\nfrom flowtui import FunctionProvider, agent, loop, parallel, tool, workflow\n\n"
                    "@agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt='p')\nclass A:\n    pass\n"
                    + ("\n" if "never" in code else "") + code)
    journal = tmp_path / "j.jsonl"
    proc = flowtui("run", str(flow), "--input", "x", "--journal", str(journal), cwd=tmp_path)
    wait_for(journal, '"kind":"agent","name":"A","status":"ok"' if "never" in code else '"kind":"tool"')
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=HANG)
    assert "Traceback" not in err, err
    end = journal_events(journal)[-1]
    assert (end["type"], end["status"]) == ("run.end", "stopped"), end
    assert end["reason"].endswith(reason), end


def test_a_command_with_a_byte_that_is_no_utf8_is_refused_with_its_id(tmp_path):
    """It was answered with id -1 (its line could not be read for its id): a client waiting for id 11 waited
    for ever."""
    from flowtui.runtime import protocol as p

    line = b'{"type":"add_item","id":11,"bucket":"memory","text":"a\\xffb"}'.replace(b"\\xff", b"\xff")
    with pytest.raises(ValueError) as exc:
        p.parse_command(line)
    refused = p.refusal(line, exc.value)
    assert (refused.id, refused.ok) == (11, False) and refused.error.startswith("not a command: "), refused


def _bare_worker(sent: list[bytes], *, wire_limit: int):
    """A run's process's protocol side, in this process, on a one-agent flow: what it sends lands in ``sent``."""
    from flowtui import FunctionProvider, agent, bootstrap, workflow
    from flowtui.runtime.worker import Worker

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class A:
        pass

    @workflow(steps=[A])
    class W:
        pass

    return Worker(bootstrap(W), journal=None, breakpoints=[], grace=1.0,
                  send=lambda line, at_once: sent.append(line), wire_limit=wire_limit)


def test_the_values_cut_on_the_wire_kept_for_fetch_are_the_latest_and_bounded(monkeypatch):
    """A 2 MiB message edited 300 times: the run's process kept every version cut on the wire, for fetch, and
    grew by 600 MB while the run's state held one. Now the latest ELIDED_KEPT characters are kept, and a fetch of
    one let go says so."""
    from flowtui.runtime import protocol as p
    from flowtui.runtime import worker as worker_module
    from flowtui.runtime.events import CtxSet

    monkeypatch.setattr(worker_module, "ELIDED_KEPT", 250)
    sent: list[bytes] = []
    worker = _bare_worker(sent, wire_limit=10)
    for seq in range(1, 6):
        worker.on_event(CtxSet(seq=seq, ts=0.0, run_id="r", node_id=None, parent_id=None, origin="user",
                               name="note", value=str(seq) * 100))
    assert worker.elided_chars <= 250

    def fetch(seq: int) -> dict:
        worker.handle(p.parse_command(json.dumps({"type": "fetch", "id": seq, "seq": seq, "path": "value"})))
        return json.loads(sent[-1])

    assert fetch(5)["value"] == "5" * 100 and fetch(4)["value"] == "4" * 100  # the latest, whole
    gone = fetch(1)
    assert not gone["ok"] and gone["error"].startswith("the value cut at event 1, at value is no longer kept: the "
                                                       "run's process keeps the latest "), gone
    assert gone["error"].endswith("the run's journal, when it has one, holds it whole"), gone
    assert fetch(6)["error"] == "no value was cut at event 6, at value"


def test_a_run_whose_making_never_returns_says_so_headless(tmp_path):
    """A middleware's async setup(app) (or a provider factory) that never returns held flowtui run without a word
    until ctrl-C; the app's status line said it."""
    flow = tmp_path / "setup.py"
    flow.write_text("import asyncio\nfrom flowtui import FunctionProvider, Middleware, agent, workflow\n\n"
                    "async def setup(app):\n    await asyncio.sleep(3600)\n\n"
                    "@agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt='p')\nclass A:\n    pass\n\n"
                    "@workflow(steps=[A], middlewares=[Middleware(name='m', setup=setup)])\nclass W:\n    pass\n")
    proc = flowtui("run", str(flow), "--input", "x", "--no-journal", cwd=tmp_path)
    said = ("flowtui: the run has not started after 3 s: making its agents, tools and providers, or a middleware's "
            "setup(app), has not returned (ctrl-C stops it)\n")
    lines, reader = stderr_until(proc, said)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=HANG)
    reader.join(timeout=HANG)
    assert lines.count(said) == 1 and "Traceback" not in "".join(lines), lines


def test_a_value_cut_in_several_events_is_kept_once_and_each_fetches_it(monkeypatch):
    """A 70 MB tool result travels in four events (its message, ctx.turn, ctx.output, run.end): counted four times
    against what the worker keeps, it let go of its own first copy, and o could not open it."""
    from flowtui.runtime import protocol as p
    from flowtui.runtime import worker as worker_module
    from flowtui.runtime.events import CtxSet

    monkeypatch.setattr(worker_module, "ELIDED_KEPT", 250)
    sent: list[bytes] = []
    worker = _bare_worker(sent, wire_limit=10)
    value = "r" * 200  # more than the worker keeps twice over
    for seq in range(1, 5):
        worker.on_event(CtxSet(seq=seq, ts=0.0, run_id="r", node_id=None, parent_id=None, origin="runtime",
                               name="output", value="".join(value)))  # (an equal text, not the same object)
    assert worker.elided_chars == 200
    for seq in range(1, 5):
        worker.handle(p.parse_command(json.dumps({"type": "fetch", "id": seq, "seq": seq, "path": "value"})))
        assert json.loads(sent[-1])["value"] == value, (seq, sent[-1][:200])


def test_a_line_longer_than_a_client_reads_is_cut_harder_and_its_values_fetched_whole(monkeypatch):
    """A client leaves out a line over LINE_MAX (64 MiB): an event made of many values each under the wire's
    limit reached it as nothing, and a run.end so lost was waited for for ever. The worker now cuts such a
    line's values harder; one whose client reads any line (flowtui run's) is never cut."""
    from flowtui.runtime import protocol as p
    from flowtui.runtime import worker as worker_module
    from flowtui.runtime.events import CtxSet

    monkeypatch.setattr(worker_module, "LINE_MAX", 2000)
    value = [f"{i:03d}" * 100 for i in range(20)]  # 20 strings of 300 characters, each under the wire's limit
    event = CtxSet(seq=1, ts=0.0, run_id="r", node_id=None, parent_id=None, origin="user", name="notes", value=value)
    for wire_limit, cut in ((1000, True), (0, False)):
        sent: list[bytes] = []
        worker = _bare_worker(sent, wire_limit=wire_limit)
        worker.on_event(event)
        line = json.loads(sent[-1])
        assert (len(sent[-1]) <= 2000, "elided" in line) == (cut, cut), (wire_limit, len(sent[-1]))
    worker = _bare_worker(sent, wire_limit=1000)
    worker.on_event(event)
    path = next(iter(json.loads(sent[-1])["elided"]))
    worker.handle(p.parse_command(json.dumps({"type": "fetch", "id": 7, "seq": 1, "path": path})))
    assert json.loads(sent[-1])["value"] == value[int(path.split(".")[-1])]


def test_flowtui_run_prints_an_output_longer_than_a_protocol_line_whole(tmp_path):
    """A tool's 68 MB result made the run's events longer than a line the client reads (64 MiB): they were left
    out, the run's end never arrived, and flowtui run waited for ever (its journal grew by 700 MB)."""
    (tmp_path / "big.py").write_text(
        "from flowtui import FunctionProvider, agent, workflow\n\n"
        "@agent(provider=FunctionProvider(lambda m, t: 'x' * 68_000_000), prompt='p')\n"
        "class A:\n    pass\n\n"
        "@workflow(steps=[A])\nclass W:\n    pass\n")
    proc = flowtui("run", "big.py", "--input", "go", "--no-journal", cwd=tmp_path)
    try:
        out, err = proc.communicate(timeout=4 * HANG)
    finally:  # (hung: its run's process goes once it sees its client gone)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert len(out) == 68_000_001 and set(out.strip()) == {"x"}, (len(out), err)
    assert "left out" not in err, err


def test_a_served_run_prints_its_long_output_whole(tmp_path):
    """Served, a run's long values reach flowtui run cut, as a client gets them: it printed the output cut to its
    first 65,536 characters. It now fetches it whole from the run's process before letting it go."""
    (tmp_path / "long.py").write_text(
        "from flowtui import FunctionProvider, agent, workflow\n\n"
        "@agent(provider=FunctionProvider(lambda m, t: 'x' * 200_000), prompt='p')\n"
        "class A:\n    pass\n\n"
        "@workflow(steps=[A])\nclass W:\n    pass\n")
    proc = flowtui("run", "long.py", "--input", "go", "--no-journal", "--listen", "127.0.0.1:0", cwd=tmp_path)
    try:
        port = int(proc.stderr.readline().rsplit(":", 1)[1])
        token = proc.stderr.readline().split()[1]
        client = Client(port, token)
        assert client.command(type="continue")["ok"]
        client.until(lambda ev: ev["type"] == "run.end")
        client.sock.close()
        out, err = proc.communicate(timeout=HANG)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert out == "x" * 200_000 + "\n", (len(out), err)
