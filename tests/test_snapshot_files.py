"""Snapshots: written atomically and redacted; refused when empty, partial, binary, a folder, from
another workflow, or holding a value of the wrong type."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import tomllib
from pathlib import Path

import pytest

from flowtui.runtime import files

FLOW = textwrap.dedent('''
    from pydantic import BaseModel
    from flowtui import FunctionProvider, agent, workflow

    class S(BaseModel):
        count: int = 0
        notes: list[str] = []

    @agent(provider=FunctionProvider(lambda m, t: "ok " * 20), prompt="p")
    class A:
        def __init__(self, s: S = State()):
            self.s = s
        def after_response(self, r, ctx):
            self.s.count += 1
            self.s.notes.append(r * 50)

    @workflow(steps=[A, A, A], state=S)
    class W:
        pass

    @workflow(steps=[A])
    class Other:
        pass
''').replace("from flowtui import FunctionProvider", "from flowtui import FunctionProvider, State")


def flowtui(*args, cwd, env=None):
    return subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=120, env=env)


def state_flow(path: Path, fields: str, after: str) -> Path:
    """A flow of one agent whose after_response (``after``, its body) works on a state S of ``fields``."""
    path.write_text(
        "import os\nfrom typing import Any\nfrom pydantic import BaseModel\n"
        "from flowtui import FunctionProvider, State, agent, workflow\n"
        f"class S(BaseModel):\n{textwrap.indent(fields, '    ')}\n"
        "@agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt='p')\nclass A:\n"
        "    def __init__(self, s: S = State()):\n        self.s = s\n"
        f"    def after_response(self, response, ctx):\n{textwrap.indent(after, '        ')}\n"
        "@workflow(state=S, steps=[A])\nclass W:\n    pass\n")
    return path


def made_then_read_back(flow: Path, tmp_path: Path) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """``flow`` run with MAKE set, its snapshot written to s.toml; then a run from that snapshot."""
    made = flowtui("run", str(flow), "--input", "x", "--no-journal", "--snapshot-out", "s.toml", cwd=tmp_path,
                   env={**os.environ, "MAKE": "1"})
    return made, flowtui("run", str(flow), "--no-journal", "--from-snapshot", "s.toml", cwd=tmp_path)


@pytest.fixture
def flow(tmp_path) -> Path:
    path = tmp_path / "flow.py"
    path.write_text(FLOW)
    return path


def test_a_failed_rewrite_leaves_the_old_snapshot_whole(tmp_path, monkeypatch):
    target = tmp_path / "snap.toml"
    files.write_atomic(target, 'workflow = "W"\nmemory = ["old"]\n')

    def crash(*args):
        raise OSError("disk full")

    monkeypatch.setattr(files.os, "replace", crash)
    with pytest.raises(OSError):
        files.write_atomic(target, 'workflow = "W"\nmemory = ["new"]\n')
    assert tomllib.loads(target.read_text())["memory"] == ["old"]
    assert [p.name for p in tmp_path.iterdir()] == ["snap.toml"]  # no temporary file left behind


def test_kills_during_a_rewrite_never_destroy_the_snapshot(flow, tmp_path):
    """The measure from the issue: 6 kill -9 while --snapshot-out rewrites an existing file."""
    snap = tmp_path / "snap.toml"
    assert flowtui("run", f"{flow}:W", "--no-journal", "--snapshot-out", str(snap), cwd=tmp_path).returncode == 0
    good = snap.read_bytes()
    for delay in (0.05, 0.1, 0.2, 0.3, 0.4, 0.6):
        proc = subprocess.Popen([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run", f"{flow}:W",
                                 "--no-journal", "--snapshot-out", str(snap)], cwd=tmp_path,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        data = tomllib.loads(snap.read_text())  # whole, whichever run wrote it
        assert data["state"]["count"] == 3 and snap.read_bytes() == good
    assert flowtui("run", f"{flow}:W", "--no-journal", "--from-snapshot", str(snap), cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("content,message", [
    (b"", "empty, not a snapshot"),
    (b"\x89PNG\r\n\x1a\n\x00\x00", "not a snapshot (a binary file"),
    (b'workflow = "W"\n[state]\ncount = tr', "not valid TOML"),
    (b'workflow = "Other"\n', "a snapshot of workflow Other, not W"),
    (b'workflow = "W"\n[state]\ncount = true\n', "[state] count = True: Input should be a valid integer"),
    (b'workflow = "W"\n[state]\ncont = 3\n',
     "[state] cont: S has no field 'cont'; did you mean 'count'? its fields are "),
    (b'workflow = "W"\n[state]\ncount = "3"\n', "[state] count = '3': Input should be a valid integer"),
    # the item at fault inside the field (it named the field alone: "sub = {...}: Input should be ...")
    (b'workflow = "W"\n[state]\nnotes = ["a", 2]\n',
     "[state] notes = ['a', 2]: notes[1]: Input should be a valid string"),
    # the key at fault, as the file writes it (it said ': Input should be a valid list' and '0.role: ...')
    (b'memory = "abc"\n', "memory: Input should be a valid list (memory is a list of strings)"),
    (b'memory = ["a", 3]\n', "memory[1]: Input should be a valid string"),
    (b'[[history]]\nrole = "boss"\ncontent = "x"\n', "history[0].role: Input should be"),
    # state_none: the fields set to None (TOML has no null)
    (b'workflow = "W"\nstate_none = "count"\n', "state_none must be a list of the names of the state fields"),
    (b'workflow = "W"\nstate_none = ["count"]\n[state]\ncount = 3\n',
     "state_none names 'count', which [state] gives a value too"),
    (b'workflow = "W"\nstate_none = ["count"]\n', "[state] count = None: Input should be a valid integer"),
    (b'workflow = "W"\nstate_none = ["cont"]\n', "[state] cont: S has no field 'cont'; did you mean 'count'?"),
    # a key no message has (a misspelt one: contnt) was dropped in silence, and the message started empty
    (b'[[history]]\nrole = "user"\ncontnt = "x"\n',
     "history[0]: a message has no key 'contnt' (it has role, content,"),
    # a history no model takes (it failed at the first model call, "remove the orphan in the app (d)")
    (b'[[history]]\nrole = "tool"\ncontent = "x"\ntool_call_id = "nope"\ntool_name = "t"\n',
     "its history is no conversation a model takes: history[0] answers nope, which no assistant message makes"),
])
def test_bad_snapshots_exit_2_naming_the_file(flow, tmp_path, content, message):
    snap = tmp_path / "snap.toml"
    snap.write_bytes(content)
    res = flowtui("run", f"{flow}:W", "--no-journal", "--from-snapshot", str(snap), cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert str(snap) in res.stderr and message in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / ".flowtui").exists()


@pytest.mark.parametrize("option", ["--from-snapshot", "--replies", "--replay"])
def test_a_folder_or_a_binary_file_given_as_input_exits_2_naming_it(flow, tmp_path, option):
    folder = tmp_path / "folder"
    folder.mkdir()
    binary = tmp_path / "bin.dat"
    binary.write_bytes(b"\x00\xff\xfe\x89")
    target = "flows/revisao.py" if option == "--replies" else f"{flow}:W"  # a flow with scripted replies
    for path in (folder, binary):
        res = flowtui("run", target, "--no-journal", option, str(path), cwd=Path(__file__).resolve().parents[1])
        assert res.returncode == 2, (option, res.stderr)
        assert path.name in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize("option", ["--from-snapshot", "--replies"])
def test_a_file_saved_as_latin_1_is_said_to_be_no_utf8_where_not_binary(flow, tmp_path, option):
    """A --replies file holding one Latin-1 byte (café) was "not a TOML replies file (binary)"."""
    latin = tmp_path / "latin.toml"
    latin.write_bytes('workflow = "W"\nPlannerAgent = ["café"]\n'.encode("latin-1"))
    target = "flows/revisao.py" if option == "--replies" else f"{flow}:W"
    res = flowtui("run", target, "--no-journal", option, str(latin), cwd=Path(__file__).resolve().parents[1])
    assert res.returncode == 2, res.stderr
    assert "latin.toml" in res.stderr and "not UTF-8 text (byte 0xe9 at line 2, column 21); save it as UTF-8" \
        in res.stderr, res.stderr
    assert "binary" not in res.stderr


def test_snapshot_out_says_what_it_did(flow, tmp_path):
    snap = tmp_path / "snap.toml"
    first = flowtui("run", f"{flow}:W", "--no-journal", "--snapshot-out", str(snap), cwd=tmp_path)
    assert f"snapshot: wrote {snap}" in first.stderr
    second = flowtui("run", f"{flow}:W", "--no-journal", "--snapshot-out", str(snap), cwd=tmp_path)
    assert f"snapshot: replaced {snap}" in second.stderr
    assert oct(snap.stat().st_mode & 0o777) == "0o600"


def test_a_state_value_nested_230_deep_goes_through_a_snapshot_and_back(tmp_path):
    """Past 200 levels the client's parser gave up on the run's event: the snapshot was written without
    the value, saying nothing, and a run started from one that held it never ended."""
    flow = state_flow(tmp_path / "deep.py", "v: Any = None",
                      "found, v = 0, self.s.v\n"
                      "while isinstance(v, dict) and 'k' in v:\n    found, v = found + 1, v['k']\n"
                      "if 'MAKE' in os.environ:\n    v = {'leaf': 1}\n"
                      "    for _ in range(230):\n        v = {'k': v}\n    self.s.v = v\n"
                      "return f'depth {found}'")
    made, back = made_then_read_back(flow, tmp_path)
    assert made.returncode == 0 and "never arrived" not in made.stderr, made.stderr
    assert back.returncode == 0 and back.stdout.strip() == "depth 230", (back.stdout, back.stderr)


def test_a_state_field_with_an_alias_goes_through_a_snapshot_and_back(tmp_path):
    """`n: int = Field(0, alias="N")`: the snapshot held n = 5, and a run from it started at 0, unsaid."""
    flow = state_flow(tmp_path / "alias.py", "n: int = Field(0, alias='N')",
                      "seen = self.s.n\nif 'MAKE' in os.environ:\n    self.s.n = 5\nreturn f'n was {seen}'")
    flow.write_text(flow.read_text().replace("from pydantic import BaseModel", "from pydantic import BaseModel, Field"))
    made, back = made_then_read_back(flow, tmp_path)
    assert made.returncode == 0 and "n = 5" in (tmp_path / "s.toml").read_text(), made.stderr
    assert back.returncode == 0 and back.stdout.strip() == "n was 5", (back.stdout, back.stderr)


def test_a_secret_is_never_replaced_by_its_mask_through_a_snapshot(tmp_path):
    """A SecretStr field was written as its mask, "**********", and a run from the snapshot held that as the secret,
    unsaid, exit 0."""
    flow = state_flow(tmp_path / "secret.py", "key: SecretStr = SecretStr('hunter2')",
                      "seen = self.s.key.get_secret_value()\nif 'MAKE' in os.environ:\n"
                      "    self.s.key = SecretStr('newpass')\nreturn f'key was {seen}'")
    flow.write_text(flow.read_text().replace("from pydantic import BaseModel",
                                             "from pydantic import BaseModel, SecretStr"))
    made, back = made_then_read_back(flow, tmp_path)
    assert made.returncode == 0 and "left out of [state]: key (a SecretStr's value is never shown" in made.stderr, \
        made.stderr
    assert "**********" not in (tmp_path / "s.toml").read_text().split("\n", 1)[1]  # (the comment says why)
    assert back.returncode == 0 and back.stdout.strip() == "key was hunter2", (back.stdout, back.stderr)
    (tmp_path / "hand.toml").write_text('workflow = "W"\n[state]\nkey = "**********"\n')  # as a hand copies one
    res = flowtui("run", str(flow), "--no-journal", "--from-snapshot", "hand.toml", cwd=tmp_path)
    assert res.returncode == 2 and "key = '**********': that is the mask pydantic shows for a secret" in res.stderr, \
        res.stderr


def test_a_value_with_no_json_form_is_left_out_of_a_snapshot_not_written_as_its_repr(tmp_path):
    """A lock in a state field was written as "<unlocked _thread.lock object>", and a run from the snapshot held
    that text in its place, unsaid, though the README says such a field is left out."""
    flow = state_flow(tmp_path / "lock.py", "obj: Any = None\nitems: list[Any] = []\nn: int = 0",
                      "seen = repr((type(self.s.obj).__name__, self.s.n))\nif 'MAKE' in os.environ:\n"
                      "    import threading\n"
                      "    self.s.obj, self.s.items, self.s.n = threading.Lock(), [1, threading.Lock()], 2\n"
                      "return seen")
    made, back = made_then_read_back(flow, tmp_path)
    assert made.returncode == 0, made.stderr
    assert "left out of [state]: obj (flowtui could only describe it), items (flowtui could only describe it)" \
        in made.stderr or "items (flowtui could only describe it), obj (flowtui could only describe it)" \
        in made.stderr, made.stderr
    assert back.returncode == 0 and back.stdout.strip() == "('NoneType', 2)", (back.stdout, back.stderr)


def test_a_nan_or_an_infinity_inside_a_list_goes_through_a_snapshot_and_back(tmp_path):
    """An event's JSON says an infinity as "Infinity", and the snapshot wrote it so: a list[float] holding
    one refused the run's own snapshot ("xs[1]: Input should be a valid number")."""
    flow = state_flow(tmp_path / "inf.py", "xs: list[float] = []\nwords: list[str] = []",
                      "seen = repr((self.s.xs, self.s.words))\n"
                      "if 'MAKE' in os.environ:\n"
                      "    self.s.xs, self.s.words = [1.0, float('inf'), float('-inf')], ['Infinity', 'NaN']\n"
                      "return seen")
    made, back = made_then_read_back(flow, tmp_path)
    assert made.returncode == 0, made.stderr
    assert back.returncode == 0, back.stderr
    assert back.stdout.strip() == "([1.0, inf, -inf], ['Infinity', 'NaN'])"  # (text stays text)


def test_a_state_field_set_to_none_goes_through_a_snapshot_and_back(tmp_path):
    """TOML has no null: a field set to None was left out, unnamed, and a run from the snapshot started it
    at its default ("rascunho"), silently."""
    flow = state_flow(tmp_path / "none.py", "nota: str | None = 'rascunho'\nn: int | None = None",
                      "seen = repr((self.s.nota, self.s.n))\nif 'MAKE' in os.environ:\n    self.s.nota = None\n"
                      "return seen")
    made, back = made_then_read_back(flow, tmp_path)
    assert made.returncode == 0, made.stderr
    assert tomllib.loads((tmp_path / "s.toml").read_text())["state_none"] == ["nota", "n"]
    assert back.returncode == 0 and back.stdout.strip() == "(None, None)", (back.stdout, back.stderr)


def test_a_run_failed_among_its_tool_calls_writes_a_snapshot_that_loads(tmp_path):
    """A raise budget reached before a reply's second call ended the run with that call unanswered: the
    snapshot held a history no model takes, and --from-snapshot refused the file flowtui had just written."""
    flow = tmp_path / "calls.py"
    flow.write_text(textwrap.dedent('''\
        from flowtui import Budget, FunctionProvider, agent, tool, workflow

        @tool
        def ping(x: int) -> str:
            """Ping.

            Args:
                x: a number
            """
            return f"pong {x}"

        def model(messages, tools):
            if messages[-1].role == "tool":
                return "done: " + " ".join(m.content for m in messages if m.role == "tool")
            return {"tool_calls": [{"name": "ping", "args": {"x": 1}}, {"name": "ping", "args": {"x": 2}}]}

        @agent(provider=FunctionProvider(model), prompt="p", tools=[ping])
        class A:
            pass

        @workflow(steps=[A, A], budget=Budget(max_tool_calls=1, mode="raise"))
        class W:
            pass
        '''))
    made = flowtui("run", str(flow), "--input", "x", "--no-journal", "--snapshot-out", "s.toml", cwd=tmp_path)
    assert made.returncode == 1 and "BudgetExceededError" in made.stderr, made.stderr
    back = flowtui("run", str(flow), "--no-journal", "--from-snapshot", "s.toml", cwd=tmp_path)
    assert back.returncode == 1 and "fix the file" not in back.stderr, back.stderr
    assert "the budget" not in back.stderr and "BudgetExceededError" in back.stderr  # a fresh budget, reached again
    assert "Tool call ping was not run: the run failed (BudgetExceededError: budget exceeded: max_tool_calls=1" \
        in (tmp_path / "s.toml").read_text()


def test_a_state_value_holding_none_is_left_out_of_the_snapshot_and_said(tmp_path):
    """TOML has no null: [1, None, 2] was written [1, 2] and {"a": None, "b": 1} as {"b": 1}, read back
    so (its items shifted), with nothing said."""
    flow = state_flow(tmp_path / "nones.py", "l: list[Any] = []\nm: dict[str, Any] = {}\nn: int = 0",
                      "self.s.l, self.s.m, self.s.n = [1, None, 2], {'a': None, 'b': 1}, 5")
    res = flowtui("run", str(flow), "--input", "x", "--no-journal", "--snapshot-out", "s.toml", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert ("snapshot: wrote s.toml (left out of [state]: l (it holds None, which TOML cannot write), m (it holds "
            "None, which TOML cannot write); a run from the snapshot starts at their defaults)") in res.stderr
    text = (tmp_path / "s.toml").read_text()
    assert text.startswith("# left out: l (") and "l =" not in text and "m =" not in text and "n = 5" in text


def test_a_state_value_flowtui_could_only_describe_is_left_out_of_the_snapshot_and_said(tmp_path):
    """bytes that are no text were written as their description, which loading then refused: the
    snapshot flowtui wrote could not be used at all."""
    flow = state_flow(tmp_path / "bytes_flow.py", "raw: bytes = b'ok'\nn: int = 0",
                      "self.s.raw, self.s.n = b'\\xff\\xfe', 5")
    res = flowtui("run", str(flow), "--input", "x", "--no-journal", "--snapshot-out", "s.toml", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "snapshot: wrote s.toml (left out of [state]: raw (flowtui could only describe it)" in res.stderr
    text = (tmp_path / "s.toml").read_text()
    assert text.startswith("# left out: raw") and "raw =" not in text and "n = 5" in text
    res = flowtui("run", str(flow), "--input", "y", "--no-journal", "--from-snapshot", "s.toml", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
