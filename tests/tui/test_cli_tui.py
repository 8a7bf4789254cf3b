"""The `flowtui` command line: the app shares `flowtui run`'s arguments, every run is journaled,
`flowtui run` never imports textual, `flowtui replay` refuses a bad file cleanly."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import REVIEW

from flowtui.runtime.journal import read_journal
from flowtui.tui import cli
from flowtui.tui.client import LaunchConfig, RunClient

FLOW = textwrap.dedent("""
    import sys
    from flowtui import FunctionProvider, agent, workflow

    def reply(messages, tools):
        return "echo: " + messages[-1].content

    @agent(provider=FunctionProvider(reply), prompt="p")
    class Echo:
        pass

    @workflow(steps=[Echo])
    class EchoWorkflow:
        pass
""")
JOURNAL_LINE = re.compile(r"^journal: \.flowtui/runs/EchoWorkflow-\d{8}-\d{6}\.jsonl$")


def flowtui(*args: str, cwd: Path, code: str = "from flowtui.tui.cli import main; main()") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


@pytest.fixture
def flow(tmp_path: Path) -> Path:
    path = tmp_path / "echo.py"
    path.write_text(FLOW)
    return path


# --- flowtui run ----------------------------------------------------------------------------------------


def test_run_never_imports_textual(flow, tmp_path):
    code = ("import atexit, sys\n"
            "atexit.register(lambda: print('loaded:', sorted(m for m in ('textual', 'rich') if m in sys.modules),"
            " file=sys.stderr))\n"
            "from flowtui.tui.cli import main; main()")
    res = flowtui("run", str(flow), "--input", "hi", cwd=tmp_path, code=code)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "echo: hi\n"
    assert res.stderr.splitlines()[-1] == "loaded: []"


def test_run_journals_by_default(flow, tmp_path):
    res = flowtui("run", str(flow), "--input", "hi", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    last = res.stderr.splitlines()[-1]
    assert JOURNAL_LINE.match(last), res.stderr
    journal = tmp_path / last.removeprefix("journal: ")
    events = list(read_journal(journal))
    assert [ev.type for ev in events[:3]] == ["run.start", "state.append", "node.start"]
    assert events[-1].type == "run.end" and events[-1].output == "echo: hi"
    # a second run in the same second gets a file of its own
    again = flowtui("run", str(flow), "--input", "again", cwd=tmp_path)
    assert len(list((tmp_path / ".flowtui" / "runs").iterdir())) == 2, again.stderr


def test_run_no_journal_writes_none(flow, tmp_path):
    res = flowtui("run", str(flow), "--input", "hi", "--no-journal", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert not (tmp_path / ".flowtui").exists()
    assert "journal:" not in res.stderr


def test_run_journal_file_is_where_asked(flow, tmp_path):
    res = flowtui("run", str(flow), "--input", "hi", "--journal", "out/run.jsonl", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stderr.splitlines()[-1] == "journal: out/run.jsonl"
    assert [ev.type for ev in read_journal(tmp_path / "out" / "run.jsonl")][-1] == "run.end"
    assert not (tmp_path / ".flowtui").exists()
    both = flowtui("run", str(flow), "--journal", "x.jsonl", "--no-journal", cwd=tmp_path)
    assert both.returncode == 2 and "not allowed with" in both.stderr


def test_a_flow_that_cannot_load_writes_no_journal(tmp_path):
    res = flowtui("run", str(tmp_path / "missing.py"), cwd=tmp_path)
    assert res.returncode == 2
    assert not (tmp_path / ".flowtui").exists()


# --- the app's command line ------------------------------------------------------------------------------


def options(*argv: str) -> dict:
    return cli.app_options(cli.build_parser().parse_args(list(argv)))


def test_the_app_shares_the_run_arguments():
    args = cli.build_parser().parse_args([REVIEW, "--input", "hi", "--memory", "plano=pro", "--memory", "id=1",
                                          "--model", "m", "--replies", "r.toml", "--record", "c.yaml", "--debug"])
    assert (args.flow, args.input, args.memory, args.model, args.replies, args.record, args.debug) == (
        REVIEW, "hi", ["plano=pro", "id=1"], "m", "r.toml", "c.yaml", True)
    assert cli.build_parser().parse_args([REVIEW, "--replay", "c.yaml"]).replay == "c.yaml"
    with pytest.raises(SystemExit):  # one cassette, recorded or replayed
        cli.build_parser().parse_args([REVIEW, "--record", "a.yaml", "--replay", "b.yaml"])


def test_app_options_choose_the_journal():
    opts = options(REVIEW, "--input", "hi", "--memory", "plano=pro")
    assert opts["memory"] == {"plano": "pro"} and opts["input"] == "hi"
    assert (opts["journal"], opts["journal_auto"]) == (None, True)  # a new file per run, reloads included
    assert (options(REVIEW, "--no-journal")["journal"], options(REVIEW, "--no-journal")["journal_auto"]) == (
        None, False)
    mine = options(REVIEW, "--journal", "mine.jsonl")
    assert (mine["journal"], mine["journal_auto"]) == ("mine.jsonl", False)


async def test_each_run_of_the_app_gets_its_own_journal(tmp_path, monkeypatch):
    target = str(Path(REVIEW).resolve())
    monkeypatch.chdir(tmp_path)
    client = RunClient(LaunchConfig(target=target, journal_auto=True))
    for input in ("hi", "again"):  # the second: what a reload does (a fresh worker process)
        await client.load()
        assert (await client.begin(input)).ok
        await client.close()
    journals = list(client.journals)
    assert len(journals) == 2 and journals[0] != journals[1]
    assert all(re.fullmatch(r"\.flowtui/runs/ReviewWorkflow-\d{8}-\d{6}(-\d+)?\.jsonl", j) for j in journals)
    for journal in journals:  # stopped by close(): each ends with the run's end
        assert '"type":"run.end","status":"stopped"' in Path(journal).read_text()
    assert client.journal_notes == [f"journal: {j}" for j in journals]


async def test_the_app_says_which_runs_it_appended_to_a_journal_file(tmp_path, monkeypatch):
    """--journal FILE holding runs already: the app said 'journal: FILE' as if the file were this run's."""
    from flowtui.runtime.loader import load_flow

    target = str(Path(REVIEW).resolve())
    monkeypatch.chdir(tmp_path)
    await load_flow(target).run("first", journal=tmp_path / "mine.jsonl")
    client = RunClient(LaunchConfig(target=target, journal="mine.jsonl"))
    for input in ("hi", "again"):  # a reload: a second run into the same file
        await client.load()
        assert (await client.begin(input)).ok
        await client.close()
        assert client.journal_notes == ["journal: appended run 2 to mine.jsonl" if input == "hi" else
                                        "journal: appended runs 2-3 to mine.jsonl"]


async def test_the_app_does_not_read_a_large_journal_through_to_say_which_runs_are_its_own(tmp_path, monkeypatch):
    """q waited for the whole journal to be read to count its runs: 2.5 s for a gigabyte (a run that
    journaled a huge value, or one file appended to run after run). Past 64 MiB, this session's runs are
    said to be the file's last ones."""
    from flowtui.runtime.loader import load_flow

    target = str(Path(REVIEW).resolve())
    monkeypatch.chdir(tmp_path)
    big = tmp_path / "mine.jsonl"
    await load_flow(target).run("first", journal=big)
    monkeypatch.setattr("flowtui.runtime.journal.COUNTED_UP_TO", big.stat().st_size - 1)  # (64 MiB)
    client = RunClient(LaunchConfig(target=target, journal="mine.jsonl"))
    await client.load()
    assert (await client.begin("hi")).ok
    await client.close()
    assert client.journal_notes == ["journal: mine.jsonl (its last run)"]
    assert '"type":"run.end"' in big.read_text()[-4000:]


def test_record_and_replay_reach_the_app(monkeypatch):
    made = {}

    class Fake:
        exit_code = 0  # (what the command exits with)
        signalled = None  # (no signal ended it)

        def run(self):
            pass

        client = RunClient(LaunchConfig(target=REVIEW))

    monkeypatch.setattr("flowtui.tui.app.make_app", lambda target, **kw: made.update(target=target, **kw) or Fake())
    monkeypatch.setattr(cli, "needs_a_terminal", lambda *said: None)  # no terminal under pytest
    started = object()
    monkeypatch.setattr("flowtui.runtime.spawn.Options.start_now", lambda self: started)
    with pytest.raises(SystemExit) as exit:
        cli.main([REVIEW, "--input", "hi", "--record", "c.yaml", "--no-journal"])
    assert exit.value.code == 0 and made["record"] == "c.yaml" and made["journal"] is None
    assert made["head_start"] is started  # the worker started before the app was made
    LaunchConfig(target=REVIEW, **{k: v for k, v in made.items() if k != "target"})  # the app takes them all


def test_the_app_refuses_a_bad_memory_item(capsys):
    with pytest.raises(SystemExit) as exit:
        cli.main([REVIEW, "--memory", "no-equals"])
    assert exit.value.code == 2
    assert "expected KEY=VALUE" in capsys.readouterr().err


def test_the_app_checks_resume_from_before_taking_the_screen(capsys, tmp_path):
    missing = tmp_path / "gone.jsonl"
    with pytest.raises(SystemExit) as exit:
        cli.main([REVIEW, "--resume-from", f"{missing}@3"])
    assert exit.value.code == 2
    assert f"flowtui: --resume-from {missing}: no such file" in capsys.readouterr().err
    assert options(REVIEW, "--resume-from", "run.jsonl@40")["resume_from"] == "run.jsonl@40"


# --- flowtui replay -------------------------------------------------------------------------------------


def test_replay_of_a_bad_file_exits_2_naming_file_and_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    res = flowtui("replay", str(bad), cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.startswith(f"flowtui replay: {bad}: not a flowtui journal (line 1: not JSON); give a journal a "
                                 "run wrote (.flowtui/runs/*.jsonl, or flowtui run --journal FILE)")  # (what to give)
    assert "Traceback" not in res.stderr


def test_the_app_never_imports_the_flow_or_litellm(tmp_path):
    """The flow is the worker's: the app process imports neither it nor litellm (seconds of import)."""
    flow = tmp_path / "real.py"
    flow.write_text(textwrap.dedent("""
        from flowtui import FunctionProvider, LiteLLMProvider, agent, workflow
        import litellm  # the flow's own import: the worker's business

        @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
        class Writer:
            pass

        @workflow(steps=[Writer])
        class W:
            pass
    """))
    script = textwrap.dedent(f"""
        import asyncio, sys
        from flowtui.tui.app import make_app

        async def main():
            app = make_app({str(flow)!r}, input="hi", cursor_blink=False, journal=None)
            async with app.run_test() as pilot:
                while app.client.view is None or app.client.view.status != "paused":
                    await pilot.pause(0.05)
                await pilot.press("c")
                while app.client.view.status != "finished":
                    await pilot.pause(0.05)
            print(sorted(m for m in sys.modules if m.startswith("flowtui_flow") or m == "litellm"))

        asyncio.run(main())
    """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


@pytest.mark.parametrize("argv, instead", [  # (what to do instead: a replay was told to run the flow)
    (["flows/revisao.py", "--input", "x"], "to run a flow without one: flowtui run FLOW"),
    (["replay", "JOURNAL"], "the journal is JSON lines to read as they are, and flowtui diff compares two runs"),
    (["attach", "127.0.0.1:1", "--token", "t"], "any client of the protocol can drive the run"),
])
def test_without_a_terminal_the_app_says_so_instead_of_waiting_for_keys(argv, instead, tmp_path):
    root = Path(__file__).resolve().parents[2]
    journal = tmp_path / "j.jsonl"
    if "JOURNAL" in argv:
        assert flowtui("run", "flows/revisao.py", "--input", "x", "--journal", str(journal), cwd=root).returncode == 0
    argv = [str(journal) if a == "JOURNAL" else a for a in argv]
    res = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", *argv], cwd=root,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "needs a terminal" in res.stderr and instead in res.stderr, res.stderr


@pytest.mark.parametrize("typed, meant", [("rnu", "run"), ("relpay", "replay"), ("atach", "attach"), ("dif", "diff")])
def test_a_mistyped_command_is_named_with_the_one_meant(typed, meant):
    """`flowtui rnu flows/revisao.py` said "unrecognized arguments: flows/revisao.py"."""
    root = Path(__file__).resolve().parents[2]
    res = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", typed, "flows/revisao.py"],
                         cwd=root, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    assert res.stderr == f"flowtui: {typed!r} is no command and no flow file; did you mean `flowtui {meant}`?\n"


def test_a_flow_file_named_like_a_command_is_a_flow(tmp_path):
    """A flow file named `rnu` (or `rnu:Workflow`) is the flow, not a mistyped command."""
    (tmp_path / "rnu").write_text(Path(REVIEW).read_text())
    for target in ("rnu", "rnu:ReviewWorkflow"):
        res = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", target, "--input", "x"],
                             cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        assert res.returncode == 2 and "needs a terminal" in res.stderr, res.stderr  # got as far as the app


def test_an_option_of_flowtui_run_given_to_the_app_is_said_to_be_one():
    """`flowtui FLOW --json` was asked "did you mean --journal?"."""
    root = Path(__file__).resolve().parents[2]
    res = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "flows/revisao.py",
                          "--json"], cwd=root, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    assert ("--json is an option of flowtui run (the headless run), not of the app: flowtui run FLOW --json ..."
            in res.stderr), res.stderr


def test_a_terminal_that_cannot_move_its_cursor_is_refused_and_the_app_does_not_spin(tmp_path):
    """Under TERM=dumb (an editor's shell) the live app drew itself over and over at full CPU, deaf to
    q, ctrl-C and SIGTERM: only a SIGKILL ended it. It is refused, saying what to do, exit 2."""
    from terminal import Terminal

    root = Path(__file__).resolve().parents[2]
    for term_name in ("dumb", "unknown"):
        with Terminal.flowtui("flows/revisao.py", "--input", "x", "--no-journal", cols=80, rows=24, cwd=root,
                              env={"TERM": term_name}) as term:
            assert term.wait_exit(timeout=60) == 2
            said = term.output.decode("utf-8", "replace")
            assert f"TERM={term_name} says this one cannot" in said and "flowtui run FLOW" in said, said


def test_quitting_the_app_mid_record_keeps_the_cassette_it_would_replace_and_says_so(tmp_path):
    """q on a run recording into a whole cassette cut it down to the exchanges of the run so far, and the app
    said nothing of the cassette."""
    from terminal import Terminal

    root = Path(__file__).resolve().parents[2]
    cassette = tmp_path / "c.jsonl"
    done = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run", "flows/revisao.py",
                           "--input", "x", "--no-journal", "--record", str(cassette)], cwd=root, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    whole = cassette.read_bytes()
    with Terminal.flowtui("flows/revisao.py", "--input", "x", "--no-journal", "--record", str(cassette),
                          cwd=root) as term:
        term.wait_for("paused before PlannerAgent")
        term.send("n")
        term.wait_for("paused before EscritorAgent")
        term.send("q")
        assert term.wait_exit(timeout=60) == 0
        said = term.output.decode("utf-8", "replace")
    partial = tmp_path / "c.partial.jsonl"
    assert cassette.read_bytes() == whole and partial.exists()
    assert f"cassette: {cassette} kept as it was (the run stopped before its end)" in said, said


def test_a_terminal_with_no_size_is_refused_and_the_app_does_not_spin():
    """A pseudo-terminal never given a size (0x0: `script` in a pipeline): the app drew nothing at full CPU,
    deaf to SIGTERM and SIGHUP. It is refused, saying what to do, exit 2."""
    from terminal import Terminal

    root = Path(__file__).resolve().parents[2]
    with Terminal.flowtui("flows/revisao.py", "--input", "x", "--no-journal", cols=0, rows=0, cwd=root) as term:
        assert term.wait_exit(timeout=60) == 2
        said = term.output.decode("utf-8", "replace")
        assert "needs a terminal with rows and columns, and this one says it is 0x0" in said, said


def test_a_journal_that_cannot_be_written_and_a_bad_load_timeout_are_said_plainly(flow, tmp_path):
    res = flowtui("run", str(flow), "--input", "x", "--journal", str(tmp_path), cwd=tmp_path)
    assert res.returncode == 2 and f"cannot write the journal {tmp_path}: it is a folder" in res.stderr
    assert "Errno" not in res.stderr and "Traceback" not in res.stderr
    res = flowtui("run", str(flow), "--input", "x", "--load-timeout", "-1", cwd=tmp_path)
    assert res.returncode == 2 and "--load-timeout: '-1': give a number of seconds greater than 0" in res.stderr
