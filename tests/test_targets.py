"""What is given on the command line as the flow and as --resume-from JOURNAL@K: a mistake is said
for what it is (K that is not an event number, a folder instead of a flow file), exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from flowtui.runtime.errors import FlowLoadError, ResumeError
from flowtui.runtime.loader import load_flow
from flowtui.runtime.recorded import load_recorded, parse_resume_arg

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=120)


@pytest.mark.parametrize("suffix,what", [
    ("@abc", "K='abc' is not an event number"),
    ("@-1", "K='-1' is not an event number"),
    ("@", "nothing follows @"),
    ("@4x", "K='4x' is not an event number"),
    ("@٣", "K='٣' is not an event number"),  # an Arabic-Indic three was taken as K=3
])
def test_a_bad_k_after_an_existing_journal_names_k_not_a_missing_file(tmp_path, suffix, what):
    journal = tmp_path / "a.jsonl"
    journal.write_text('{"seq":1}\n')
    with pytest.raises(ResumeError) as info:
        parse_resume_arg(f"{journal}{suffix}")
    message = str(info.value)
    assert message.startswith(f"--resume-from {journal}{suffix}: {what}; in JOURNAL@K, K is a positive event number")
    assert f"e.g. --resume-from {journal}@40, or give {journal} alone" in message
    assert "no such file" not in message
    with pytest.raises(ResumeError, match="is not an event number|nothing follows @"):
        load_recorded(f"{journal}{suffix}")


def test_journal_at_k_still_parses_and_a_missing_journal_is_still_no_such_file(tmp_path):
    journal = tmp_path / "a.jsonl"
    journal.write_text("")
    assert parse_resume_arg(f"{journal}@40") == (journal, 40)
    assert parse_resume_arg(str(journal)) == (journal, None)
    odd = tmp_path / "b.jsonl@x"  # a file whose own name has an @ is taken whole
    odd.write_text("")
    assert parse_resume_arg(str(odd)) == (odd, None)
    with pytest.raises(ResumeError, match="no such file"):
        load_recorded(f"{tmp_path / 'missing.jsonl'}@abc")


def test_the_command_line_says_k_is_at_fault(tmp_path):
    journal = tmp_path / "a.jsonl"
    journal.write_text('{"seq":1}\n')
    res = cli("run", str(ROOT / "flows/revisao.py"), "--no-journal", "--resume-from", f"{journal}@abc", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert f"{journal}@abc: K='abc' is not an event number" in res.stderr and "no such file" not in res.stderr


def test_a_folder_as_the_flow_says_it_is_a_folder_and_names_the_py_files_in_it(tmp_path):
    (tmp_path / "b.py").write_text("")
    (tmp_path / "a.py").write_text("")
    with pytest.raises(FlowLoadError) as info:
        load_flow(str(tmp_path))
    assert str(info.value) == (f"{tmp_path}: is a folder, not a flow file (it holds a.py, b.py); name the .py "
                               f"file that defines the @workflow, e.g. {tmp_path / 'a.py'}")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FlowLoadError, match=r"is a folder, not a flow file \(it holds no \.py file\)"):
        load_flow(f"{empty}:W")
    res = cli("run", str(tmp_path), "--input", "x", "--no-journal", cwd=tmp_path)
    assert res.returncode == 2
    assert "is a folder, not a flow file (it holds a.py, b.py)" in res.stderr and "no such flow file" not in res.stderr
    assert "Traceback" not in res.stderr


def test_a_flow_file_with_a_colon_in_its_name_is_that_file_not_file_colon_class(tmp_path):
    flow = tmp_path / "v1:draft.py"
    flow.write_text("from flowtui import FunctionProvider, agent, workflow\n\n"
                    "@agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt='p')\nclass A:\n    pass\n\n"
                    "@workflow(steps=[A])\nclass Draft:\n    pass\n")
    assert load_flow(str(flow)).workflow.cls.__name__ == "Draft"
    assert load_flow(f"{flow}:Draft").workflow.cls.__name__ == "Draft"
    with pytest.raises(FlowLoadError, match="no such flow file"):
        load_flow(str(tmp_path / "v1:other.py"))  # no such file: read as v1 and class other.py, still named


def test_a_pipe_as_the_flow_says_it_is_a_pipe_and_is_never_read(tmp_path):
    import os

    fifo = tmp_path / "flow.py"
    os.mkfifo(fifo)  # opening it to read would wait for a writer for ever
    with pytest.raises(FlowLoadError) as info:
        load_flow(str(fifo))
    assert str(info.value) == f"{fifo}: is a pipe or a device, not a flow file; give the .py file of the flow"
