"""flowtui run: live tree on stderr, output on stdout, exit codes, load errors without tracebacks."""

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEADER = "from flowtui import FunctionProvider, FatalToolError, State, agent, workflow, loop, tool, Input\n"


def flowtui(*args, cwd=ROOT):
    if args[:1] == ("run",) and not {"--journal", "--no-journal"} & set(args):
        args = (*args, "--no-journal")  # journaling by default is tested in tests/tui/test_cli_tui.py
    return subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=120)


def write(tmp_path, body, name="flow.py"):
    path = tmp_path / name
    path.write_text(HEADER + textwrap.dedent(body))
    return path


OK_FLOW = """
@agent(provider=FunctionProvider(lambda m, t: "resposta: " + m[-1].content), prompt="p")
class Eco:
    pass

@workflow(steps=[Eco])
class EcoWorkflow:
    pass
"""


def test_run_prints_tree_on_stderr_and_output_on_stdout(tmp_path):
    path = write(tmp_path, OK_FLOW)
    res = flowtui("run", str(path), "--input", "olá", "--memory", "plano=pro")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "resposta: olá\n"
    lines = res.stderr.splitlines()
    assert lines[0] == "▸ workflow EcoWorkflow"
    assert lines[1] == "  ▸ agent Eco"
    assert lines[-1].startswith("◂ workflow EcoWorkflow ") and lines[-1].endswith("✓")


def test_the_tree_says_which_parallel_branch_a_line_is_of(tmp_path):
    # indented by depth alone, the branches' lines mixed: agent A printed under loop lb, which it is not in
    path = write(tmp_path, """
    from flowtui import parallel

    @agent(provider=FunctionProvider(lambda m, t: "a"), prompt="a")
    class A:
        pass

    @agent(provider=FunctionProvider(lambda m, t: "b"), prompt="b")
    class B:
        pass

    @workflow(steps=[parallel([loop([A], max_iterations=1, name="la"), loop([B], max_iterations=1, name="lb")])])
    class W:
        pass
    """)
    res = flowtui("run", str(path), "--input", "x")
    assert res.returncode == 0, res.stderr
    lines = [re.sub(r" [0-9.]+ms", "", line) for line in res.stderr.splitlines()]
    for line in lines:
        if "agent A" in line or "chat A" in line:
            assert line.endswith(("(in loop la)", "(in loop la) ✓")), lines
        if "agent B" in line or "chat B" in line:
            assert line.endswith(("(in loop lb)", "(in loop lb) ✓")), lines
    assert "    ▸ loop la" in lines and "    ◂ loop la ✓  (stopped at max_iterations: 1 iteration)" in lines  # as they were
    assert sum("(in loop" in line for line in lines) == 8


def test_run_json_prints_events(tmp_path):
    path = write(tmp_path, OK_FLOW)
    res = flowtui("run", f"{path}:EcoWorkflow", "--input", "x", "--json")
    assert res.returncode == 0
    events = [json.loads(line) for line in res.stdout.splitlines()]
    assert events[0]["type"] == "run.start" and events[-1]["type"] == "run.end"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))


def test_a_failing_run_exits_1_with_the_reason(tmp_path):
    path = write(tmp_path, """
    class Boom:
        pass

    @tool(name="explode", description="x")
    class Explode:
        def execute(self, args):
            raise FatalToolError("disk is gone", cause=RuntimeError("private detail"))

    @agent(provider=FunctionProvider(lambda m, t: {"content": "", "tool_calls": [{"name": "explode", "args": {}}]}),
           prompt="p", tools=[Explode])
    class A:
        pass

    @workflow(steps=[A])
    class W:
        pass
    """)
    res = flowtui("run", str(path))
    assert res.returncode == 1
    assert "the run failed: FatalToolError: disk is gone" in res.stderr
    assert "private detail" not in res.stderr + res.stdout
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("body, expect", [
    ("x = (\n", r"flow.py:\d+: syntax error"),
    ("import no_such_module_here\n", r"flow.py:2: ModuleNotFoundError while importing: No module named"),
    # Python names the keyword it does not know, not the one meant
    ("from flowtui import ContextWindow\nwindow = ContextWindow(max_token=100)\n",
     r"flow.py:3: TypeError while importing: ContextWindow.__init__\(\) got an unexpected keyword argument "
     r"'max_token'; did you mean max_tokens=\? \(it takes max_tokens=, count_tokens=, name=\)"),
    ("class H:\n    def build(self, size=1):\n        pass\n    @classmethod\n    def make(cls, size=1):\n        pass\n"
     "H().build(size=2)\nH.make(sise=3)\n",  # (a method's self and a classmethod's cls are given, not taken)
     r"flow.py:9: TypeError while importing: H.make\(\) got an unexpected keyword argument 'sise'; did you mean "
     r"size=\? \(it takes size=\)$"),
    ("X = 1\n", r"flow.py: no @workflow class found"),
    (OK_FLOW + "\n@workflow(steps=[Eco])\nclass Other:\n    pass\n",
     r"flow.py: 2 workflows \(EcoWorkflow, Other\); name the one to run: .*flow.py:EcoWorkflow or .*flow.py:Other$"),
    ("@agent(provider=FunctionProvider(lambda m, t: ''), prompt='./nope.agent.md')\nclass A:\n    pass\n",
     r"flow.py:\d+: A: prompt file not found: .*nope.agent.md"),
    ("class S:\n    x = 0\n@agent(provider=FunctionProvider(lambda m, t: ''), prompt='p')\nclass A:\n"
     "    def __init__(self, s: S = State()):\n        pass\n@workflow(steps=[A])\nclass W:\n    pass\n",
     r"flow.py:\d+: A: State\(\) in __init__ parameter 's'"),
])
def test_load_errors_exit_2_with_file_line_and_class(tmp_path, body, expect):
    import re

    path = write(tmp_path, body)
    res = flowtui("run", str(path))
    assert res.returncode == 2, res.stderr
    assert re.search(expect, res.stderr), res.stderr
    assert "Traceback" not in res.stderr
    debug = flowtui("run", str(path), "--debug")
    assert debug.returncode == 2 and "Traceback" in debug.stderr


def test_unknown_workflow_name_and_missing_file(tmp_path):
    path = write(tmp_path, OK_FLOW)
    res = flowtui("run", f"{path}:Nope")
    assert res.returncode == 2 and "no @workflow class named 'Nope'; the file defines: EcoWorkflow" in res.stderr
    res = flowtui("run", f"{path}:")  # the class's name left out by a script: not taken for no name given
    assert res.returncode == 2, res.stdout
    assert "nothing follows ':' where the @workflow class's name goes; name one of EcoWorkflow" in res.stderr
    res = flowtui("run", str(tmp_path / "missing.py"))
    assert res.returncode == 2 and "no such flow file" in res.stderr


@pytest.mark.parametrize("command", [(), ("run",)])
def test_an_unknown_option_is_named_before_a_missing_flow(command):
    res = flowtui(*command, "--bogus")
    assert res.returncode == 2 and res.stderr.splitlines()[-1].endswith("error: unrecognized arguments: --bogus")
    res = flowtui(*command, "--input", "x")
    assert res.returncode == 2
    assert res.stderr.splitlines()[-1].endswith("error: the following arguments are required: FLOW[:Class]")
    # and the usage above it shows FLOW as required (it said [FLOW[:Class]], as if it could be left out)
    assert "[FLOW[:Class]]" not in res.stderr and res.stderr.splitlines()[-2].strip() == "FLOW[:Class]", res.stderr


@pytest.mark.parametrize("command", [(), ("run",)])
def test_a_misspelt_option_is_named_with_the_one_meant(command):
    """argparse said only "unrecognized arguments: --inptu x"."""
    res = flowtui(*command, "flows/revisao.py", "--inptu", "x")
    assert res.returncode == 2
    assert res.stderr.splitlines()[-1].endswith("error: unrecognized arguments: --inptu x; did you mean --input?")
    res = flowtui(*command, "flows/revisao.py", "--journl=j.jsonl")
    assert res.stderr.splitlines()[-1].endswith("did you mean --journal?"), res.stderr


def test_bad_memory_argument_exits_2(tmp_path):
    path = write(tmp_path, OK_FLOW)
    res = flowtui("run", str(path), "--memory", "no-equals-sign")
    assert res.returncode == 2 and "expected KEY=VALUE" in res.stderr


def test_an_empty_model_exits_2_instead_of_running_the_flows_own_models(tmp_path):
    """--model "" was ignored in silence: the run used the flow's models and failed on what came next."""
    path = write(tmp_path, OK_FLOW)
    res = flowtui("run", str(path), "--model", "", "--input", "x", "--no-journal")
    assert res.returncode == 2 and "argument --model: is empty: give a litellm model name" in res.stderr, res.stderr
    res = flowtui("run", str(path), "--model", "a\nb", "--input", "x", "--no-journal")  # printed as two lines
    assert res.returncode == 2 and "argument --model: 'a\\nb' holds a line break" in res.stderr, res.stderr


@pytest.mark.parametrize("value, said", [('{"a": 1, "b": [1, 2]}', '{"a":1,"b":[1,2]}'), ("5", "5"), ("True", "true")])
def test_an_output_that_is_no_text_is_said_as_json_and_the_run_ends(tmp_path, value, said):
    """ctx.output = {"a": 1} (in on_exhausted, where the README says it is yours to set): run.end carried
    the dict, which no reader took: the run hung until killed, its journal holding a line diff refused."""
    path = write(tmp_path, f"""
        @agent(provider=FunctionProvider(lambda m, t: "x"), prompt="p")
        class A:
            pass

        def exhausted(ctx, n):
            ctx.output = {value}

        @workflow(steps=[loop([A], max_iterations=1, on_exhausted=exhausted)])
        class W:
            pass
        """)
    journal = tmp_path / "j.jsonl"
    res = flowtui("run", str(path), "--input", "x", "--journal", str(journal))
    assert res.returncode == 0 and res.stdout == said + "\n", res.stderr
    assert json.loads(journal.read_text().splitlines()[-1])["output"] == said
    assert flowtui("diff", str(journal), str(journal)).returncode == 0  # (it refused that line)


def test_a_blank_flowtui_model_exits_2_as_a_blank_model_does(tmp_path, monkeypatch):
    """FLOWTUI_MODEL="   " was taken as a model's name: the flow loaded, litellm was imported, and the run
    failed at its first model call (exit 1), where --model " " was refused at once."""
    from flowtui import FunctionProvider, agent, bootstrap, workflow
    from flowtui.runtime.errors import ConfigError

    path = write(tmp_path, OK_FLOW)
    monkeypatch.setenv("FLOWTUI_MODEL", "   ")
    res = flowtui("run", str(path), "--input", "x")
    assert res.returncode == 2 and res.stderr.startswith("flowtui: FLOWTUI_MODEL is empty: give a litellm model name"), \
        res.stderr
    assert "unset it for the flow's own models" in res.stderr and "Traceback" not in res.stderr
    res = flowtui("run", str(path), "--input", "x", "--model", "openai/gpt-4o-mini")
    assert res.returncode == 0 and "FLOWTUI_MODEL" not in res.stderr, res.stderr  # --model given: it is not read
    monkeypatch.setenv("FLOWTUI_MODEL", "")  # set empty: not set, as a shell's FLOWTUI_MODEL= says
    assert flowtui("run", str(path), "--input", "x").returncode == 0

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class A:
        pass

    @workflow(steps=[A])
    class Vazio:
        pass

    monkeypatch.setenv("FLOWTUI_MODEL", " ")
    with pytest.raises(ConfigError, match="^FLOWTUI_MODEL is blank: give a litellm model name"):
        bootstrap(Vazio)


def test_record_then_replay_serves_the_same_conversation_and_refuses_a_new_one(tmp_path):
    path = write(tmp_path, OK_FLOW)
    cassette = tmp_path / "eco.cassette.jsonl"
    rec = flowtui("run", str(path), "--input", "olá", "--record", str(cassette))
    assert rec.returncode == 0 and cassette.exists()
    # The replayed flow's model now raises: only the cassette can answer.
    path.write_text(path.read_text().replace('lambda m, t: "resposta: " + m[-1].content', "lambda m, t: 1 / 0"))
    rep = flowtui("run", str(path), "--input", "olá", "--replay", str(cassette))
    assert rep.returncode == 0 and rep.stdout == "resposta: olá\n"
    miss = flowtui("run", str(path), "--input", "outra", "--replay", str(cassette))
    assert miss.returncode == 1
    # (the cassette named as given, as its other messages name it: its file name alone, in another folder,
    # named none the person could find)
    assert f"cassette {str(cassette)!r} has no recorded reply for agent 'Eco' turn 1" in miss.stderr
    assert "+    outra" in miss.stderr
    # a cassette that is not there, or no cassette: said as --replay's, not at the workflow's line
    (tmp_path / "notes.jsonl").write_text("not json\n")
    for name, said in (("nope.jsonl", "does not exist"), ("notes.jsonl", "line 1 is not a recorded exchange")):
        bad = flowtui("run", str(path), "--input", "olá", "--replay", str(tmp_path / name))
        assert bad.returncode == 2, bad.stderr
        # (it was said under "cannot load FLOW", as the flow's fault, though the flow was never read)
        assert bad.stderr.startswith(f"flowtui: --replay: cassette '{tmp_path / name}' {said}"), bad.stderr
        assert "cannot load" not in bad.stderr


def test_snapshot_out_then_from_snapshot_starts_where_it_left(tmp_path):
    path = write(tmp_path, """
    class S:
        rodadas = 0
        notas = []

    @agent(provider=FunctionProvider(lambda m, t: f"visto {len(m)}"), prompt="p")
    class A:
        def __init__(self, s: S = State()):
            self.s = s

        def after_response(self, r, ctx):
            self.s.rodadas += 1
            self.s.notas.append(r)

    @workflow(state=S, steps=[A])
    class W:
        pass
    """)
    snap = tmp_path / "snap.toml"
    first = flowtui("run", str(path), "--input", "olá", "--memory", "plano=pro", "--snapshot-out", str(snap))
    assert first.returncode == 0 and first.stdout == "visto 3\n"
    text = snap.read_text()
    assert 'memory = [\n    "plano: pro",\n]' in text and "rodadas = 1" in text and 'role = "assistant"' in text
    second = flowtui("run", str(path), "--input", "de novo", "--from-snapshot", str(snap),
                     "--snapshot-out", str(snap))
    # prompt + memory note + 2 restored turns + the new user turn = 5 messages
    assert second.returncode == 0 and second.stdout == "visto 5\n", second.stderr
    assert "rodadas = 2" in snap.read_text() and '"visto 3",\n    "visto 5"' in snap.read_text()
    snap.write_text('[state]\nrodadas = "muitas"\n')
    bad = flowtui("run", str(path), "--from-snapshot", str(snap))
    assert bad.returncode == 2 and "snap.toml: [state] rodadas = 'muitas'" in bad.stderr and "Traceback" not in bad.stderr
    # someone else's snapshot: said naming the file, never a Python setting, never a 5 MB value repeated
    for body, said in [("[state]\nrodadas = " + "[" * 2000 + "]" * 2000, "snap.toml: a value in it is nested too deep"),
                       ("[data]\nn = " + "9" * 5000, "snap.toml: a value in it cannot be read (Exceeds the limit"),
                       ('[state]\nrodadas = "' + "A" * 1_000_000 + '"', "… (1,000,002 characters): Input should be")]:
        snap.write_text(body + "\n")
        bad = flowtui("run", str(path), "--from-snapshot", str(snap))
        assert bad.returncode == 2 and said in bad.stderr and len(bad.stderr) < 2000, bad.stderr[:500]


def test_a_credential_never_reaches_the_terminal(tmp_path):
    import os

    path = write(tmp_path, """
    import os

    @tool(name="leak", description="x")
    class Leak:
        def execute(self, args):
            raise RuntimeError("token is " + os.environ["MY_SERVICE_TOKEN"])

    @agent(provider=FunctionProvider(lambda m, t: {"content": "", "tool_calls": [{"name": "leak", "args": {}}]}
                                     if len(m) < 3 else "key " + os.environ["MY_SERVICE_TOKEN"]),
           prompt="p", tools=[Leak])
    class A:
        pass

    @workflow(steps=[A, A])
    class W:
        pass
    """)
    secret = "tok-1234567890-secret"
    env = {**os.environ, "MY_SERVICE_TOKEN": secret}
    for args in (["--json"], []):
        res = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run", str(path), "--input",
                              "x", "--no-journal", *args], capture_output=True, text=True, cwd=ROOT, env=env,
                             timeout=120)
        assert res.returncode == 0, res.stderr
        assert secret not in res.stdout + res.stderr and "[redacted]" in res.stdout + res.stderr


def test_debug_shows_the_flows_own_traceback(tmp_path):
    path = write(tmp_path, "def helper():\n    return 1 / 0\nhelper()\n")
    res = flowtui("run", str(path), "--debug")
    assert res.returncode == 2
    assert f'File "{path}", line 3' in res.stderr and "ZeroDivisionError" in res.stderr
    assert "flow.py:3: ZeroDivisionError while importing (in helper): division by zero" in res.stderr


def test_a_reload_reads_changed_sibling_modules(tmp_path):
    """What `r` in the app does: a fresh worker process, so the flow's own modules are read anew."""
    import asyncio

    from flowtui.runtime.protocol import Continue
    from flowtui.tui.client import LaunchConfig, RunClient

    (tmp_path / "helper_mod.py").write_text("ANSWER = 'one'\n")
    path = write(tmp_path, """
    from helper_mod import ANSWER

    @agent(provider=FunctionProvider(lambda m, t: ANSWER), prompt="p")
    class A:
        pass

    @workflow(steps=[A])
    class W:
        pass
    """)

    async def load_and_run(client: RunClient) -> str:
        await client.load()
        await client.begin("x")
        client.send(Continue())
        await client.channel.ended_or_gone()
        client.drain(5.0)
        await client.close()
        return client.view.output

    async def both() -> tuple[str, str]:
        client = RunClient(LaunchConfig(target=str(path)))
        first = await load_and_run(client)
        (tmp_path / "helper_mod.py").write_text("ANSWER = 'two'\n")
        return first, await load_and_run(client)

    assert asyncio.run(both()) == ("one", "two")


def test_data_reaches_ctx_data_never_the_model_and_survives_a_snapshot(tmp_path):
    path = write(tmp_path, """
    from flowtui import AgentContext, Context

    @tool
    def saldo(ctx: AgentContext = Context()) -> str:
        \"\"\"The balance of the current account.\"\"\"
        return "saldo: " + {"acme": "10"}.get(ctx.data.get("conta_id"), "conta desconhecida")

    def model(messages, tools):
        text = " | ".join(m.content for m in messages)
        assert "acme" not in text  # the model never sees the run's data
        if messages[-1].role == "tool":
            return messages[-1].content
        return {"content": "", "tool_calls": [{"name": "saldo", "args": {}}]}

    @agent(provider=FunctionProvider(model), tools=[saldo])
    class A:
        pass

    @workflow(steps=[loop([A], until=lambda ctx: ctx.turn.called_tool is False, max_iterations=3)])
    class W:
        pass
    """)
    snap = tmp_path / "snap.toml"
    res = flowtui("run", str(path), "--input", "quanto?", "--data", "conta_id=acme", "--snapshot-out", str(snap))
    assert res.returncode == 0, res.stderr
    assert res.stdout == "saldo: 10\n"
    assert '[data]\nconta_id = "acme"' in snap.read_text()
    again = flowtui("run", str(path), "--input", "e agora?", "--from-snapshot", str(snap))
    assert again.returncode == 0 and again.stdout == "saldo: 10\n", again.stderr
    without = flowtui("run", str(path), "--input", "quanto?")
    assert without.returncode == 0 and without.stdout == "saldo: conta desconhecida\n", without.stderr
    bad = flowtui("run", str(path), "--data", "conta_id")
    assert bad.returncode == 2 and "--data 'conta_id': expected KEY=VALUE, e.g. --data conta_id=acme" in bad.stderr


def test_run_disposes_the_workflows_middlewares_and_shows_a_failing_one(tmp_path):
    marker = tmp_path / "closed.txt"
    path = write(tmp_path, f"""
    from pathlib import Path
    from flowtui import Middleware

    def broken():
        raise OSError("pool already closed")

    @agent(provider=FunctionProvider(lambda m, t: "ok"))
    class A:
        pass

    @workflow(steps=[A], middlewares=[Middleware(name="pool", dispose=lambda: Path({str(marker)!r}).write_text("yes")),
                                      Middleware(name="cache", dispose=broken)])
    class W:
        pass
    """)
    res = flowtui("run", str(path), "--input", "x")
    assert res.returncode == 0 and res.stdout == "ok\n"
    assert marker.read_text() == "yes"
    assert "! cache.dispose raised: OSError: pool already closed" in res.stderr


@pytest.mark.parametrize("body, said", [
    ("time.sleep(1000)", "flowtui: the run's process had not exited 1.0 s after its run ended (a thread the flow "
                         "started, an atexit hook, or a middleware's dispose() that did not return): it was ended"),
    ("os._exit(7)", "flowtui: the run's process exited with code 7 after its run ended (in a middleware's dispose()?)"),
])
def test_a_middleware_dispose_that_never_returns_or_exits_is_said(tmp_path, body, said):
    """A middleware's dispose() that hung was cut short after the grace, and one that called os._exit(7)
    ended the process: both in silence, as if all had been cleaned up."""
    path = write(tmp_path, f"""
    import os, time
    from flowtui import Middleware

    def close():
        {body}

    @agent(provider=FunctionProvider(lambda m, t: "ok"))
    class A:
        pass

    @workflow(steps=[A], middlewares=[Middleware(name="pool", dispose=close)])
    class W:
        pass
    """)
    res = flowtui("run", str(path), "--input", "x")
    assert res.returncode == 0 and res.stdout == "ok\n", res.stderr  # the run finished: its output stands
    assert said in res.stderr.splitlines(), res.stderr


RAISING = """
def stop_when(ctx):
    return ctx.missing > 1

def warn(ctx, info):
    raise KeyError("on_fail broke")

@tool(name="bad", description="always fails")
class Bad:
    def execute(self, args=Input()):
        raise ValueError("no")

@agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
class A:
    pass

@agent(provider=FunctionProvider(lambda m, t: {"content": "", "tool_calls": [{"name": "bad", "args": {}}]}),
       prompt="p", tools=[Bad])
class Caller:
    pass

@agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
class Hooked:
    def after_response(self, response, ctx):
        return {}["hook broke"]

@workflow(steps=[loop(steps=[A], until=stop_when, max_iterations=2)])
class Until:
    pass

@workflow(steps=[loop(steps=[Caller], on_fail=warn, max_iterations=2)])
class OnFail:
    pass

@workflow(steps=[Hooked])
class Hook:
    pass
"""


@pytest.mark.parametrize(("name", "error", "func"), [
    ("Until", "AttributeError: ctx has no field 'missing'", "stop_when"),
    ("OnFail", "KeyError: 'on_fail broke'", "warn"),
    ("Hook", "KeyError: 'hook broke'", "after_response"),
])
def test_an_error_in_until_on_fail_or_a_hook_names_file_and_line_without_debug(tmp_path, name, error, func):
    path = write(tmp_path, RAISING)
    lines = path.read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if f"def {func}(" in text) + 1  # its body raises
    res = flowtui("run", f"{path}:{name}", "--input", "x")
    assert res.returncode == 1, res.stderr
    assert f"flowtui: the run failed: {error}" in res.stderr
    assert f"(at {path}:{line} in {func})" in res.stderr.splitlines()[-1]
    assert "Traceback" not in res.stderr


def test_model_says_which_agents_it_does_not_apply_to_and_why(tmp_path):
    path = write(tmp_path, """
from flowtui import LiteLLMProvider, ScriptedProvider

class Script(ScriptedProvider):
    def __init__(self):
        super().__init__(["hi"])

@agent(provider=Script, prompt="p")
class Scripted:
    pass

@agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
class Function:
    pass

@agent(provider=LiteLLMProvider("openai/gpt-4o-mini"), prompt="p")
class Real:
    pass

@workflow(steps=[Scripted, Function])
class Mixed:
    pass

@workflow(steps=[Real])
class Live:
    pass
""")
    res = flowtui("run", f"{path}:Mixed", "--input", "x", "--model", "openai/x")
    assert res.returncode == 0, res.stderr
    assert res.stderr.splitlines()[:2] == [
        "flowtui: --model openai/x does not apply to Scripted: its provider is Script (a ScriptedProvider), which "
        "plays scripted replies",
        "flowtui: --model openai/x does not apply to Function: its provider is FunctionProvider, whose replies come "
        "from a function",
    ]
    quiet = flowtui("run", f"{path}:Mixed", "--input", "x")
    assert "--model" not in quiet.stderr


def test_the_default_loop_is_drawn_once(tmp_path):
    path = write(tmp_path, """
@agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
class A:
    pass

@workflow(steps=[loop(steps=[A], max_iterations=1), loop(steps=[A], max_iterations=1, name="retries")])
class W:
    pass
""")
    res = flowtui("run", str(path), "--input", "x")
    assert res.returncode == 0, res.stderr
    assert "  ▸ loop\n" in res.stderr and "  ▸ loop retries\n" in res.stderr and "loop loop" not in res.stderr


def test_a_run_with_stderr_closed_still_prints_its_output_and_nothing_else():
    import os

    out = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run", "flows/revisao.py",
                          "--input", "x", "--no-journal"], cwd=Path(__file__).resolve().parents[1],
                         stdout=subprocess.PIPE, preexec_fn=lambda: os.close(2), timeout=60)
    assert out.returncode == 0
    assert out.stdout.decode().startswith("APROVADO"), out.stdout[:300]
    assert b"could not show" not in out.stdout


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("json_out", [False, True], ids=["output", "json"])
def test_a_full_stdout_is_said_once_with_exit_5_and_the_journal_keeps_the_run(tmp_path, json_out):
    journal = tmp_path / "j.jsonl"
    with open("/dev/full", "w") as full:
        out = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run",
                              "flows/revisao.py", "--input", "x", "--journal", str(journal),
                              *(["--json"] if json_out else [])],
                             cwd=Path(__file__).resolve().parents[1], stdout=full, stderr=subprocess.PIPE,
                             text=True, timeout=60)
    assert out.returncode == 5, out.stderr
    assert "Traceback" not in out.stderr and "could not show an event" not in out.stderr
    assert out.stderr.count("could not be written to stdout: No space left on device") == 1
    assert json.loads(journal.read_text().splitlines()[-1])["status"] == "finished"


@pytest.mark.parametrize("json_out", [False, True], ids=["output", "json"])
def test_a_stdout_whose_reader_went_away_or_that_was_closed_is_said_with_exit_5(tmp_path, json_out):
    """`flowtui run ... | true` (the reader gone before the output): the run finished, and it exited 1,
    "failed", saying nothing; with --json it exited 0, and said events "never arrived" that had. Run
    with stdout closed (>&-) the output went to the null device, exit 0. Now: exit 5, said once."""
    journal = tmp_path / "j.jsonl"
    argv = [sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run", "flows/revisao.py", "--input",
            "x", "--journal", str(journal), *(["--json"] if json_out else [])]
    read, write = os.pipe()
    os.close(read)  # the reader, gone before the run writes a line
    try:
        out = subprocess.run(argv, cwd=ROOT, stdout=write, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write)
    assert out.returncode == 5, out.stderr
    assert out.stderr.count("could not be written to stdout: its reader went away (a broken pipe)") == 1, out.stderr
    assert "never arrived" not in out.stderr and "could not show" not in out.stderr and "Traceback" not in out.stderr
    assert json.loads(journal.read_text().splitlines()[-1])["status"] == "finished"

    out = subprocess.run(argv, cwd=ROOT, stderr=subprocess.PIPE, text=True, timeout=60,
                         preexec_fn=lambda: os.close(1))
    assert out.returncode == 5, out.stderr
    assert "could not be written to stdout: it was closed when flowtui started" in out.stderr, out.stderr


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc")
@pytest.mark.parametrize("option", ["--record", "--snapshot-out"])
def test_a_file_to_write_in_a_folder_that_takes_no_file_is_refused_before_the_run(tmp_path, option):
    """A folder whose permissions say yes and that takes no file (/proc; for root, any read-only disk):
    --record failed the run (exit 1, naming its hidden .recording file), --snapshot-out lost the
    snapshot after the run (exit 5). Both are refused before it, naming the option."""
    for target in ("/proc/flowtui-test.file", "/proc/flowtui-new/test.file"):  # (a folder the writer would make)
        res = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run",
                              "flows/revisao.py", "--input", "x", "--no-journal", option, target], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 2, res.stderr
        assert f"flowtui: {option} '{target}': no file can be made in its folder /proc (" in res.stderr, res.stderr
        assert "APROVADO" not in res.stdout and "▸ workflow" not in res.stderr  # nothing ran


@pytest.mark.parametrize("command", [["replay", "FIFO"], ["diff", "FIFO", "flows/revisao.py"],
                                     ["run", "flows/revisao.py", "--resume-from", "FIFO"],
                                     ["run", "flows/revisao.py", "--input", "x", "--journal", "FIFO"],
                                     ["flows/revisao.py", "--input", "x", "--journal", "FIFO"]],
                         ids=["replay", "diff", "resume-from", "journal", "app-journal"])
def test_a_pipe_given_as_a_journal_is_refused_at_once(tmp_path, command):
    import os

    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    command = [str(fifo) if arg == "FIFO" else arg for arg in command]
    out = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", *command],
                         cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 2, out.stderr
    assert "is a pipe or a device, not a journal file" in out.stderr and str(fifo) in out.stderr


@pytest.mark.parametrize("name, said", [("newdir/", "it is named as a folder (it ends in /), not a journal file"),
                                        ("-", "it is no file: the journal is written to one (flowtui run --json")])
def test_a_journal_named_as_a_folder_or_as_stdout_is_refused_and_no_file_made(tmp_path, name, said):
    """`--journal newdir/` wrote a file named newdir (the slash dropped), and `--journal -` a file named -."""
    res = flowtui("run", str(ROOT / "flows/revisao.py"), "--input", "x", "--journal", name, cwd=tmp_path)
    assert res.returncode == 2 and f"cannot write the journal {name}: {said}" in res.stderr, res.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_journal_named_on_a_file_that_is_no_journal_is_refused_and_the_file_left_as_it_was(tmp_path):
    """--journal victim.py (a slip of the keyboard, a link to another file): appending a run's
    events to it would ruin it. Refused before the run starts; a journal is still appended to."""
    victim = tmp_path / "victim.py"
    victim.write_text("print('my code')\n")
    res = flowtui("run", "flows/revisao.py", "--input", "x", "--journal", str(victim))
    assert res.returncode == 2
    assert f"cannot write the journal {victim}: it holds something other than a flowtui journal" in res.stderr
    assert victim.read_text() == "print('my code')\n"
    journal = tmp_path / "j.jsonl"
    for _ in range(2):
        assert flowtui("run", "flows/revisao.py", "--input", "x", "--journal", str(journal)).returncode == 0
    assert journal.read_text().count('{"seq":1,') == 2


@pytest.mark.parametrize("options, said", [
    (["--snapshot-out", "{flow}"], "--snapshot-out '{flow}': is the flow file; name another file for the snapshot"),
    (["--record", "{flow}"], "--record '{flow}': is the flow file; name another file for the cassette"),
    (["--journal", "{tmp}/j.jsonl", "--snapshot-out", "{tmp}/j.jsonl"], "is the run's journal"),
    (["--snapshot-out", "{tmp}/notes.txt"], "holds something other than a snapshot, which would be replaced"),
    (["--record", "{tmp}/notes.txt"], "holds something other than a cassette, which would be replaced"),
    (["--snapshot-out", "{tmp}"], "is a folder; name a file in it"),
    (["--snapshot-out", "/dev/null"], "a pipe or a device, not a snapshot file"),
    (["--replies", "/dev/zero"], "--replies /dev/zero: it is a pipe or a device, not a file"),
    (["--data", "a=1", "--data", "a=2"], "--data 'a' is given twice ('1', then '2')"),
])
def test_a_file_option_that_would_destroy_or_hang_is_refused_before_the_run(tmp_path, options, said):
    """--snapshot-out and --record replaced whatever they named (the flow's source, the journal,
    /dev/zero); --replies /dev/zero read until memory ran out. Now refused, exit 2, nothing touched."""
    path = write(tmp_path, OK_FLOW)
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    args = [a.format(flow=path, tmp=tmp_path) for a in options]
    res = flowtui("run", str(path), "--input", "x", *args)
    assert res.returncode == 2, res.stderr
    assert said.format(flow=path, tmp=tmp_path) in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    assert path.read_text().startswith(HEADER) and notes.read_text() == "my notes\n"


def test_a_snapshot_is_replaced_by_the_next_one(tmp_path):
    path = write(tmp_path, OK_FLOW)
    out = tmp_path / "state.toml"
    for _ in range(2):
        res = flowtui("run", str(path), "--input", "x", "--snapshot-out", str(out))
        assert res.returncode == 0, res.stderr
    assert "snapshot: replaced" in res.stderr and 'workflow = "EcoWorkflow"' in out.read_text()


def test_a_module_named_like_the_standard_librarys_where_flowtui_starts_shadows_nothing(tmp_path):
    """A json.py in the folder a run starts from broke every run with a traceback (the run's process
    put that folder first on its import path); a module of the project there is still importable."""
    (tmp_path / "json.py").write_text("raise SystemExit('the wrong json')\n")
    (tmp_path / "mylib.py").write_text("GREETING = 'from the project'\n")
    (tmp_path / "flows").mkdir()
    write(tmp_path / "flows", "from mylib import GREETING\n" + OK_FLOW.replace('"resposta: " + m[-1].content',
                                                                                 "GREETING"))
    script = Path(sys.executable).with_name("flowtui")  # as a user starts it (python -c would put the folder
    # first on this process's own import path)
    res = subprocess.run([str(script), "run", "flows/flow.py", "--input", "x", "--no-journal"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "from the project\n"


def test_a_journal_the_disk_cannot_take_stops_whole_and_is_said_with_exit_5(tmp_path):
    """A full disk (here, a file size limit) emptied the journal, and the run said 'journal: FILE' and
    exited 0. The journal now stops at the last event written whole, the run goes on to its end, and
    flowtui run says the journal is incomplete, exit 5."""
    import resource

    journal = tmp_path / "j.jsonl"

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))

    res = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run", "flows/revisao.py",
                          "--input", "x", "--journal", str(journal)], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, preexec_fn=small_files)
    assert res.returncode == 5, res.stderr
    assert re.search(r"flowtui: the journal .*j.jsonl could not be written from event \d+ on", res.stderr), res.stderr
    assert "APROVADO" in res.stdout  # the run itself went on to its end
    seqs = [json.loads(line)["seq"] for line in journal.read_text().splitlines()]
    assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) > 10  # whole lines, no hole, no torn end


@pytest.mark.parametrize("options, said", [
    (["--input", "a", "--input", "b"], "--input is given twice ('a', then 'b'): give it once"),
    # each of these took the last one given, the first dropped without a word
    (["--journal", "a.jsonl", "--journal", "b.jsonl"], "--journal is given twice ('a.jsonl', then 'b.jsonl')"),
    (["--model", "a/b", "--model", "c/d"], "--model is given twice ('a/b', then 'c/d')"),
    (["--resume-from", "j@5", "--resume-from", "j@6"], "--resume-from is given twice ('j@5', then 'j@6')"),
    (["--replies", "a.toml", "--replies", "b.toml"], "--replies is given twice"),
    (["--load-timeout", "5", "--load-timeout", "9"], "--load-timeout is given twice"),
    # an empty file name was the current folder ("cannot load .: is a folder") or the option left out
    (["--journal", ""], "argument --journal: is empty: name the file"),
    (["--replies", ""], "argument --replies: is empty: name the file"),
    (["--listen", "127.0.0.1:0", "--token", "abcdefghijklmnopq", "--token", "rstuvwxyz0123456"],
     "--token is given twice: give it once"),  # (a token is a secret: neither is said)
    (["--token", "abcdefghijklmnopq"], "--token is for a served run: give --listen HOST:PORT too"),
    (["--listen-public"], "--listen-public is for a served run"),
])
def test_an_option_that_would_be_dropped_or_ignored_is_refused(tmp_path, options, said):
    path = write(tmp_path, OK_FLOW)
    res = flowtui("run", str(path), *options)
    assert res.returncode == 2 and said in res.stderr, res.stderr
    assert "abcdefghijklmnopq" not in res.stderr


@pytest.mark.parametrize("command, said", [
    (["replay", "j.jsonl", "--at", "5", "--at", "6"], "--at is given twice (5, then 6): give it once"),
    (["replay", "j.jsonl", "--run", "1", "--run", "2"], "--run is given twice (1, then 2)"),
    (["diff", "j.jsonl", "j.jsonl", "--run", "1", "--run", "2"], "--run is given twice (1, then 2)"),
    (["diff", "j.jsonl", "j.jsonl", "--run-b", "1", "--run-b", "2"], "--run-b is given twice (1, then 2)"),
    (["diff", "j.jsonl", "j.jsonl", "--width", "50", "--width", "60"], "--width is given twice (50, then 60)"),
])
def test_replay_and_diff_refuse_an_option_given_twice_as_run_does(tmp_path, command, said):
    """flowtui replay --at 5 --at 6 opened at event 6, the first dropped without a word."""
    res = flowtui(*command, cwd=tmp_path)
    assert res.returncode == 2 and said in res.stderr, res.stderr


def test_a_replies_file_with_a_reply_of_the_wrong_shape_is_a_load_error_naming_it(tmp_path):
    """It failed at the model call that would have played it (exit 1, a journal made, the file not named)."""
    bad = tmp_path / "bad.replies.toml"
    bad.write_text('PlannerAgent = ["ok", {contnt = "x"}]\n')
    res = flowtui("run", "flows/revisao.py", "--input", "x", "--replies", str(bad))
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith(f"flowtui: --replies {bad}: reply 2 for PlannerAgent: unknown key(s) ['contnt']"), \
        res.stderr
    assert "RevisaoWorkflow" not in res.stderr and "revisao.py" not in res.stderr  # the option's fault, not the flow's


def test_replies_given_to_a_flow_with_no_scripted_provider_is_said_to_change_nothing(tmp_path):
    flow = tmp_path / "fn.py"
    flow.write_text("from flowtui import FunctionProvider, agent, workflow\n"
                    "@agent(provider=FunctionProvider(lambda m, t: 'mine'), prompt='p')\nclass A:\n    pass\n"
                    "@workflow(steps=[A])\nclass W:\n    pass\n")
    res = flowtui("run", str(flow), "--input", "x", "--no-journal", "--replies", "flows/revisao.replies.toml")
    assert res.returncode == 0, res.stderr
    assert "--replies changes nothing: it replaces a ScriptedProvider's replies, and no agent's provider is one" \
        in res.stderr
    assert res.stdout == "mine\n"
    scripted = flowtui("run", "flows/revisao.py", "--input", "x", "--no-journal", "--replies",
                       "flows/revisao.replies.toml")
    assert scripted.returncode == 0 and "--replies changes nothing" not in scripted.stderr


@pytest.mark.parametrize("body, said", [
    ("""
from flowtui import Budget

@workflow(steps=[Eco, Eco, Eco], budget=Budget(max_chat_calls=2, mode="stop"))
class W:
    pass
""", "■ finished (budget: max_chat_calls)"),
    ("""
class Halt:
    def after_response(self, resposta, ctx):
        ctx.stop()

@workflow(steps=[agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")(Halt), Eco])
class W:
    pass
""", "■ stopped (stopped by ctx.stop() in hook:Halt.after_response)"),
], ids=["budget", "ctx.stop"])
def test_a_run_that_ends_early_says_why_after_its_tree(tmp_path, body, said):
    """A budget or ctx.stop() ended the run: the tree's last ■ said that something stopped, not what."""
    path = write(tmp_path, OK_FLOW.replace("@workflow(steps=[Eco])\nclass EcoWorkflow:\n    pass\n", "") + body)
    res = flowtui("run", str(path), "--input", "x")
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    assert lines[-2].startswith("◂ workflow W ") and lines[-1] == said, res.stderr
    assert res.stdout.strip()  # the output so far


def test_why_a_run_ended_early_comes_after_what_the_flow_printed(tmp_path):
    # what the flow prints comes on a pipe of its own: a cleanup's print came after the ■ line (5 runs in 6)
    path = write(tmp_path, OK_FLOW.replace("@workflow(steps=[Eco])\nclass EcoWorkflow:\n    pass\n", "") + """
from flowtui import Budget

class Tidy:
    def after_response(self, resposta, ctx):
        ctx.on_dispose(lambda: print("CLEANED UP"))

@workflow(steps=[agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")(Tidy), Eco, Eco],
          budget=Budget(max_chat_calls=2))
class W:
    pass
""")
    for _ in range(3):
        res = flowtui("run", str(path), "--input", "x")
        assert res.returncode == 0, res.stderr
        lines = res.stderr.splitlines()
        assert lines[-1] == "■ finished (budget: max_chat_calls)" and "CLEANED UP" in lines, lines[-3:]


async def tree_of(workflow_cls) -> list[str]:
    """The lines ``flowtui run``'s tree draws for a run of ``workflow_cls``."""
    import io

    from fakes import run_collect
    from flowtui.runtime.cli import TreePrinter

    out = io.StringIO()
    _, events, _ = await run_collect(workflow_cls)
    printer = TreePrinter(out)
    for ev in events:
        printer(ev)
    return out.getvalue().splitlines()


async def test_the_tree_shows_each_failure_of_a_tool_even_with_the_same_message_as_the_last():
    """An error is shown once where it happened, not again on the nodes it passes through; a second call
    that failed the same way was drawn as a bare ✗."""
    from fakes import call, scripted
    from flowtui import agent, tool, workflow

    @tool
    def lookup(q: str) -> str:
        """Look up."""
        raise ValueError("the index is down")

    provider, _ = scripted(call("lookup", q="a"), call("lookup", q="b"), when_done="gave up")

    @agent(provider=provider, tools=[lookup])
    class A:
        pass

    @workflow(steps=[A, A, A])
    class W:
        pass

    failed = [line for line in await tree_of(W) if "◂ tool lookup" in line]
    # (what the tool raised and where, not the model's words: "Tool lookup failed: the index is down")
    assert len(failed) == 2 and all(re.search(r"✗  ValueError: the index is down \(at .*test_cli.py:\d+ in lookup\)$",
                                              line) for line in failed), failed


async def test_the_tree_says_a_reply_cut_short_and_a_loop_its_tools_failed():
    """A reply cut at max_tokens (or withheld by a content filter) and a loop stopped by max_fails were
    drawn ✓ like any other: headless, the run looked like a success with nothing said."""
    from fakes import call
    from flowtui import ChatReply, FunctionProvider, agent, loop, tool, workflow

    @tool
    def add(a: int) -> int:
        """Adds."""
        return a

    replies = iter([ChatReply(content="half a sent", finish_reason="length"),
                    ChatReply(content="", finish_reason="content_filter")])

    @agent(provider=FunctionProvider(lambda m, t: next(replies)), prompt="p")
    class Cut:
        pass

    calls = iter([call("add", a="x"), call("ad")])

    @agent(provider=FunctionProvider(lambda m, t: next(calls)), prompt="p", tools=[add])
    class Caller:
        pass

    @workflow(steps=[Cut, Cut, loop(steps=[Caller], max_iterations=5, max_fails=2)])
    class W:
        pass

    lines = await tree_of(W)
    chats = [line for line in lines if "◂ chat Cut" in line]
    assert chats[0].endswith("✓  (the reply was cut at the model's max_tokens)"), chats
    assert chats[1].endswith("✓  (the provider's content filter withheld the reply, or part of it)"), chats
    assert [line for line in lines if "◂ loop" in line][0].endswith(
        "✓  (stopped by max_fails: too many tool calls in a row failed)"), lines


async def test_the_tree_says_a_loop_that_ran_out_of_iterations():
    """A loop whose until never held, stopped at its max_iterations, was drawn ✓ like one until ended:
    headless, only --json's stopped_by said so."""
    from flowtui import FunctionProvider, agent, loop, workflow

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class A:
        pass

    @workflow(steps=[loop(steps=[A], until=lambda ctx: False, max_iterations=3, name="tries"),
                     loop(steps=[A], until=lambda ctx: True, max_iterations=3, name="once")])
    class W:
        pass

    lines = await tree_of(W)
    assert [line for line in lines if "◂ tries" in line or "◂ loop tries" in line][0].endswith(
        "✓  (stopped at max_iterations: 3 iterations, until never held)"), lines
    assert [line for line in lines if "◂ once" in line or "◂ loop once" in line][0].endswith("✓"), lines


def test_a_workflow_named_like_a_path_journals_inside_the_journal_folder(tmp_path):
    """@workflow(name="../../x") wrote its journal outside .flowtui/runs; a name holding "/" stopped every
    run (no such folder); one holding an escape sequence made a file name a terminal would act on."""
    from flowtui.runtime.cli import new_journal

    runs = tmp_path / "a" / "runs"
    for name, stem in [("../../../escape", "escape"), ("x[/]y", "x_y"), ("t\x1b]0;pwned\x07", "t_0_pwned"),
                       ("Revisão W", "Revisão_W"), ("...", "run")]:
        path = new_journal(name, directory=runs)
        assert path.parent == runs and path.name.startswith(f"{stem}-"), (name, path)
    assert sorted(p.parent for p in tmp_path.rglob("*.jsonl")) == [runs] * 5


def test_a_file_name_that_is_not_utf8_is_refused_naming_it():
    """A Latin-1 file name given to the run: ``flowtui run`` ended in a traceback, and the app sat idle
    waiting for a run that never started (its process could not say the name in its messages)."""
    bad = os.fsdecode(b"caf\xe9.jsonl")
    for args in (("run", "flows/revisao.py", "--input", "x", "--journal", bad),
                 ("flows/revisao.py", "--input", "x", "--resume-from", bad)):
        res = flowtui(*args)
        assert res.returncode == 2, res.stderr
        assert "the file name caf\\xe9.jsonl is not UTF-8" in res.stderr and "rename the file" in res.stderr
        assert "Traceback" not in res.stderr
    assert not (ROOT / bad).exists()


def test_a_run_in_a_folder_whose_name_is_not_utf8(tmp_path):
    """The flow's path names its folder: the worker's hello could not be written, and the flow never loaded.
    Said as U+FFFD where the run names it, as an event does."""
    folder = tmp_path / os.fsdecode(b"caf\xe9")
    folder.mkdir()
    write(folder, OK_FLOW)
    res = flowtui("run", "flow.py", "--input", "x", cwd=folder)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "resposta: x"


def test_a_flow_that_changes_folder_as_it_is_imported_leaves_its_cassette_and_journal_where_asked(tmp_path):
    """os.chdir at a flow's top level: --record run.jsonl and --journal j.jsonl were both written into the
    folder it moved to, and "cassette: wrote run.jsonl" was said of a file that was not there."""
    (tmp_path / "sub").mkdir()
    path = write(tmp_path, 'import os\nos.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "sub"))\n'
                 + OK_FLOW)
    res = flowtui("run", str(path), "--input", "x", "--record", "run.jsonl", "--journal", "j.jsonl", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["flow.py", "j.jsonl", "run.jsonl", "sub"]
    assert list((tmp_path / "sub").iterdir()) == []


@pytest.mark.parametrize("option, what", [("--record", "cassette"), ("--snapshot-out", "snapshot")])
def test_a_run_that_does_not_finish_keeps_the_cassette_or_snapshot_it_would_replace(tmp_path, option, what):
    # a failed run (or a stopped one: the app quit) replaced a whole cassette with one exchange, unsaid in the app
    ok = write(tmp_path, OK_FLOW, name="ok.py")
    failing = write(tmp_path, OK_FLOW.replace("@workflow(steps=[Eco])", "@agent(provider=FunctionProvider(lambda m, "
                                              "t: 1 / 0), prompt='p')\nclass Broken:\n    pass\n\n"
                                              "@workflow(steps=[Eco, Broken])"), name="failing.py")
    target = tmp_path / ("kept.jsonl" if what == "cassette" else "kept.toml")
    assert flowtui("run", str(ok), "--input", "x", option, str(target), cwd=tmp_path).returncode == 0
    whole = target.read_bytes()
    res = flowtui("run", str(failing), "--input", "x", option, str(target), cwd=tmp_path)
    assert res.returncode == 1
    partial = target.with_name(f"kept.partial{target.suffix}")
    assert target.read_bytes() == whole and partial.exists()
    assert (f"{what}: {target} kept as it was (the run failed before its end); this run's {what} is {partial}"
            in res.stderr), res.stderr
    new = tmp_path / f"new{target.suffix}"  # no file there: written, and said to be of a run that failed
    res = flowtui("run", str(failing), "--input", "x", option, str(new), cwd=tmp_path)
    assert f"{what}: wrote {new} (the run failed: what it did up to there)" in res.stderr, res.stderr
    # a file of another kind where the partial one would go (the run's own journal, a file of the person's) is
    # left as it is, and passed over: each was replaced, the journal said to be appended to
    precious = target.with_name(f"kept.partial{target.suffix}")
    precious.write_text("precious user data\n")
    journal = tmp_path / f"kept.partial-2{target.suffix}"
    res = flowtui("run", str(failing), "--input", "x", option, str(target), "--journal", str(journal), cwd=tmp_path)
    assert res.returncode == 1 and target.read_bytes() == whole
    assert precious.read_text() == "precious user data\n"
    assert journal.read_text().startswith('{"seq":1,') and journal.read_text().rstrip().endswith("}")
    third = target.with_name(f"kept.partial-3{target.suffix}")
    assert f"this run's {what} is {third}" in res.stderr and third.exists(), res.stderr


@pytest.mark.parametrize("command", [["--help"], ["run", "--help"], ["run", "-h"], ["replay", "--help"],
                                     ["diff", "--help"], ["attach", "--help"]])
def test_help_is_printed_on_stdout_and_exits_0(command):
    """`flowtui run --help` printed its help and exited 2, as for a mistake: a script probing it failed."""
    proc = flowtui(*command)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: flowtui") and proc.stderr == ""


def test_a_run_without_input_says_it_starts_with_no_user_message(tmp_path):
    """The app asks for the first message; headless, a forgotten --input ran the flow on no message, unsaid."""
    proc = flowtui("run", str(ROOT / "flows/revisao.py"), "--no-journal", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "flowtui: no --input: the run starts with no user message (give --input TEXT for one)" in proc.stderr
    proc = flowtui("run", str(ROOT / "flows/revisao.py"), "--no-journal", "--input", "x", cwd=tmp_path)
    assert proc.returncode == 0 and "--input" not in proc.stderr, proc.stderr
    # a start refused (a --watch naming no field of the state) is no run to tell of
    proc = flowtui("run", str(ROOT / "flows/revisao.py"), "--no-journal", "--watch", "state.nope > 1", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith("--watch: unknown state field 'nope'"), proc.stderr
    assert "--input" not in proc.stderr, proc.stderr


def test_a_syntax_error_shows_its_line_and_where_in_it_and_a_latin1_file_is_told_to_be_utf8(tmp_path):
    """`flow.py:3: syntax error: invalid syntax` said neither the line nor where in it, which Python shows;
    a file saved in Latin-1 got the codec's words only."""
    path = write(tmp_path, "class A:\n\tdef f(self):\n\t\treturn 1 +\n")
    res = flowtui("run", str(path))
    assert res.returncode == 2
    assert "flow.py:4: syntax error: invalid syntax (column 13)\n    return 1 +\n              ^\n" in res.stderr, \
        res.stderr
    path.write_text('x = "ééééé" + * 3\n', encoding="utf-8")  # (Python gives this one's column in bytes)
    res = flowtui("run", str(path))
    assert 'flow.py:1: syntax error: invalid syntax (column 15)\n    x = "ééééé" + * 3\n                  ^\n' \
        in res.stderr, res.stderr
    # one a flow raises (with no message), or a compile() of its own: it was said as the file's syntax
    # ("invalid syntax", no line), or at "<string>:1" as if a file of that name would not parse
    path.write_text("import os\nraise SyntaxError\n")
    res = flowtui("run", str(path))
    assert res.returncode == 2 and "flow.py:2: SyntaxError while importing (raised with no message)" in res.stderr, \
        res.stderr
    path.write_text("import os\ncompile('x(', '<string>', 'exec')\n")
    res = flowtui("run", str(path))
    assert "flow.py:2: SyntaxError while importing: '(' was never closed (<string>, line 1)" in res.stderr, res.stderr
    assert "<string>:1" not in res.stderr
    path.write_bytes(b"x = \"caf\xe9\"\n")
    res = flowtui("run", str(path))
    assert res.returncode == 2 and "codec can't decode" in res.stderr
    assert res.stderr.rstrip().endswith("; save the file as UTF-8"), res.stderr


def test_version_is_said():
    from importlib.metadata import version

    proc = flowtui("--version")
    assert proc.returncode == 0 and proc.stdout == f"flowtui {version('flowtui')}\n", proc


def test_the_readmes_whole_flow_runs_as_it_says(tmp_path):
    """The guide's first example is a whole flow a newcomer copies: it must load and end as the README says."""
    readme = (ROOT / "README.md").read_text()
    start = readme.index("    # hello.py")
    end = readme.index("class HelloWorkflow:\n        pass\n", start) + len("class HelloWorkflow:\n        pass\n")
    (tmp_path / "hello.py").write_text(textwrap.dedent(readme[start:end]))
    proc = flowtui("run", "hello.py", "--input", "tide pools", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "APPROVED\n" and "flowtui:" not in proc.stderr, proc.stderr
    assert '`flowtui run\nhello.py --input "tide pools"` runs it headless and prints `APPROVED`' in readme


def test_a_flow_that_changes_folder_at_import_still_resumes_and_starts_from_files_named_from_where_it_ran(tmp_path):
    """--resume-from and --from-snapshot (and so the app's fork and continue-from-here, which resume from its
    journal) were read from the folder the flow's import moved to: "no such file", or another file there."""
    (tmp_path / "elsewhere").mkdir()
    path = write(tmp_path, f"import os\n{OK_FLOW}\nos.chdir({str(tmp_path / 'elsewhere')!r})\n")
    first = flowtui("run", str(path), "--input", "olá", "--journal", "run.jsonl", "--snapshot-out", "snap.toml",
                    cwd=tmp_path)
    assert first.returncode == 0 and (tmp_path / "run.jsonl").is_file() and (tmp_path / "snap.toml").is_file()
    again = flowtui("run", str(path), "--resume-from", "run.jsonl@3", "--no-journal", cwd=tmp_path)
    assert again.returncode == 0 and again.stdout == first.stdout, again.stderr
    snapped = flowtui("run", str(path), "--from-snapshot", "snap.toml", "--input", "x", cwd=tmp_path)
    assert snapped.returncode == 0, snapped.stderr


def test_a_journal_too_large_to_count_its_runs_in_is_appended_to_without_reading_it_through(tmp_path):
    """flowtui run --journal FILE read all of FILE before the run, to count its runs (2.5 s for a gigabyte).
    Past 64 MiB it is not read: the note says the run is the file's last."""
    path = write(tmp_path, OK_FLOW)
    journal = tmp_path / "big.jsonl"
    first = flowtui("run", str(path), "--input", "a", "--journal", str(journal), cwd=tmp_path)
    assert first.returncode == 0 and first.stderr.rstrip().endswith(f"journal: {journal}"), first.stderr
    run = journal.read_bytes()
    with journal.open("ab") as f:  # the same run, appended again and again: past 64 MiB
        f.write(run * ((64 << 20) // len(run) + 1))
    again = flowtui("run", str(path), "--input", "b", "--journal", str(journal), cwd=tmp_path)
    assert again.returncode == 0 and again.stderr.rstrip().endswith(f"journal: {journal} (its last run)"), again.stderr
    assert b'"input":"b"' in journal.read_bytes()[-len(run) - 200:]


@pytest.mark.parametrize("command", [["run", "flows/revisao.py", "--no-journal", "\x1b[2Jextra"],
                                     ["diff", "a.jsonl", "b.jsonl", "--\x1b]0;title\x07"],
                                     ["flows/revisao.py", "--\x1b]0;title\x07"]])
def test_an_unknown_argument_holding_escape_sequences_is_said_with_them_shown_not_sent(command):
    """argparse's "unrecognized arguments" quoted them raw: the screen cleared, the window retitled."""
    proc = flowtui(*command)
    assert proc.returncode == 2
    assert "unrecognized arguments: " in proc.stderr and "\x1b" not in proc.stderr and "\x07" not in proc.stderr
    assert "␛" in proc.stderr, proc.stderr


LONG = "x" * 300  # longer than a file name may be


@pytest.mark.parametrize("options, said", [
    (["--snapshot-out", f"{LONG}.toml"], f"--snapshot-out '{LONG}.toml': cannot be written (File name too long); "
                                         "name another file"),
    (["--record", "loop1"], "--record 'loop1': cannot be written (a loop of links); name another file"),
    (["--journal", f"{LONG}.jsonl"], f"cannot write the journal {LONG}.jsonl: it has a name longer than the file "
                                     "system takes; name a file you can write"),
    (["--replay", f"{LONG}.jsonl"], f"--replay {LONG}.jsonl: it has a name longer than the file system takes"),
    (["--from-snapshot", "loop1"], "--from-snapshot loop1: it is a loop of links, not a file; name the file"),
])
def test_a_file_name_too_long_or_a_loop_of_links_names_its_option(tmp_path, options, said):
    """A traceback, exit 1 (--snapshot-out, --record), or Python's "[Errno 36] File name too long" naming no option
    (--journal), or blaming the flow (--replay: "OSError while importing")."""
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    path = write(tmp_path, OK_FLOW)
    res = flowtui("run", str(path), "--input", "x", *options, cwd=tmp_path)
    assert res.returncode == 2 and f"flowtui: {said}" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and "Errno" not in res.stderr


def test_a_resume_from_file_name_too_long_names_the_option(tmp_path):
    res = flowtui("run", "flows/revisao.py", "--resume-from", f"{LONG}.jsonl")
    assert res.returncode == 2, res.stderr
    assert f"flowtui: --resume-from {LONG}.jsonl: has a name longer than the file system takes" in res.stderr


def test_replies_given_as_dev_stdin_redirected_from_a_file_are_read_from_that_file(tmp_path):
    """The run's process has a stdin of its own (empty): --replies /dev/stdin < FILE said the file held no
    replies. A pipe there is refused as one."""
    replies = tmp_path / "r.toml"
    replies.write_text('RevisorAgent = ["APROVADO: de stdin"]\nEscritorAgent = ["rascunho"]\n'
                       'PlannerAgent = ["plano"]\n')
    with replies.open() as stdin:
        done = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run",
                               "flows/revisao.py", "--input", "x", "--no-journal", "--replies", "/dev/stdin"],
                              stdin=stdin, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0 and done.stdout == "APROVADO: de stdin\n", done.stderr
    piped = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run",
                            "flows/revisao.py", "--input", "x", "--no-journal", "--replies", "/dev/stdin"],
                           input="A = 1\n", capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert piped.returncode == 2 and "--replies /dev/stdin: it is a pipe or a device, not a file" in piped.stderr


def test_an_option_after_a_double_dash_is_said_to_be_taken_as_a_word():
    """It said "unrecognized arguments: --input x; did you mean --input?"."""
    res = flowtui("run", "flows/revisao.py", "--no-journal", "--", "--input", "x")
    assert res.returncode == 2, res.stderr
    assert "; after --, every word is taken as it is, options too: put --input before the --" in res.stderr, res.stderr
    assert "did you mean" not in res.stderr
