"""What a newcomer's trial found taken in silence or said of the wrong thing: a misspelled key in a
scripted tool call, an ``until`` that returns a function, ``ctx.set(...)``, a TypedDict state, a prompt file
that is binary or a folder. Each is said naming what is at fault and what to write."""

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_cli import flowtui, write  # noqa: E402

TOOL = ("from flowtui import ScriptedProvider\n"
        "@tool\ndef lookup(q: str = '') -> str:\n    '''Looks it up.'''\n    return 'found:' + q\n")
LOOKER = ("@agent(provider=s, prompt='p', tools=[lookup])\nclass A:\n    pass\n"
          "@workflow(steps=[A])\nclass W:\n    pass\n")


def _call(keys: str) -> str:
    return f"s = ScriptedProvider([{{'content': '', 'tool_calls': [{{'name': 'lookup', {keys}}}]}}, 'done'])\n"


@pytest.mark.parametrize("key, hint", [
    ("arg", "did you mean 'args' for 'arg'? "),
    ("parameters", "did you mean 'args' for 'parameters'? "),
    ("qq", ""),
])
def test_a_misspelled_key_in_a_scripted_tool_call_is_refused_at_load(tmp_path, key, hint):
    """`arg = {...}` was dropped: the tool was called with {} (here it ran, and said 'found:')."""
    path = write(tmp_path, TOOL + _call(f"'{key}': {{'q': 'x'}}") + LOOKER)
    res = flowtui("run", str(path), "--input", "x")
    assert res.returncode == 2, res.stderr
    assert (f"ScriptedProvider: reply 1: unknown key(s) ['{key}'] in tool_calls[0] (tool 'lookup'); {hint}"
            "a tool call has 'name' and 'args'") in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and "while importing" not in res.stderr


def test_a_misspelled_key_in_a_tool_call_of_a_replies_file_names_the_file_and_reply(tmp_path):
    (tmp_path / "replies.toml").write_text(
        'A = [ { content = "", tool_calls = [{ name = "lookup", arg = { q = "x" } }] }, "done" ]\n')
    path = write(tmp_path, TOOL + "s = ScriptedProvider(['ok'])\n" + LOOKER)
    res = flowtui("run", str(path), "--input", "x", "--replies", str(tmp_path / "replies.toml"))
    assert res.returncode == 2, res.stderr
    assert re.search(r"--replies .*replies.toml: reply 1 for A: unknown key\(s\) \['arg'\] in tool_calls\[0\] "
                     r"\(tool 'lookup'\); did you mean 'args' for 'arg'\?", res.stderr), res.stderr


@pytest.mark.parametrize("keys", ["'args': {'q': 'x'}", "'arguments': '{\"q\": \"x\"}'",
                                  "'id': 'c1', 'args': {'q': 'x'}"])
def test_a_tool_call_written_right_still_calls_the_tool_with_its_arguments(tmp_path, keys):
    res = flowtui("run", str(write(tmp_path, TOOL + _call(keys) + LOOKER)), "--input", "x")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "found:x\n", res.stderr  # the turn's output: the tool's result


LOOPED = ("from flowtui import ScriptedProvider, until_answered\ns = ScriptedProvider(['a', 'b', 'c'])\n"
          "@agent(provider=s, prompt='p')\nclass A:\n    pass\n{defs}"
          "@workflow(steps=[loop([A], until={until}, max_iterations=3, name='review')])\nclass W:\n    pass\n")


def test_an_until_that_returns_a_function_fails_the_run_naming_the_loop(tmp_path):
    """It was taken as true: the loop stopped after one iteration, exit 0, no word."""
    path = write(tmp_path, LOOPED.format(defs="", until="lambda ctx: until_answered"))
    res = flowtui("run", str(path), "--input", "x")
    assert res.returncode == 1, res.stderr
    assert ("flowtui: the run failed: TypeError: until of loop 'review' returned <function until_answered> (a "
            "function, not called? write until_answered(ctx)) (defined at ") in res.stderr, res.stderr
    assert "; return True to stop, False to go on" in res.stderr


def test_an_until_that_returns_something_else_to_call_is_not_told_to_call_it_by_a_name_it_lacks(tmp_path):
    """A functools.partial was said as `<function partial>`, to be written `partial(ctx)`."""
    path = write(tmp_path, "import functools\n" + LOOPED.format(
        defs="", until="lambda ctx: functools.partial(until_answered, ctx)"))
    res = flowtui("run", str(path), "--input", "x")
    assert res.returncode == 1, res.stderr
    assert "until of loop 'review' returned partial functools.partial(<function until_answered" in res.stderr
    assert "(something to call, not a condition)" in res.stderr and "<function partial>" not in res.stderr


def test_an_until_that_returns_a_value_stops_as_python_reads_its_truth(tmp_path):
    """`ctx.output and 'b' in ctx.output` returns a text, not a bool: a loop is written so."""
    path = write(tmp_path, LOOPED.format(defs="", until="lambda ctx: ctx.output and 'b' in ctx.output and 'yes'"))
    res = flowtui("run", str(path), "--input", "x")
    assert res.returncode == 0 and res.stdout == "b\n", res.stderr


def test_an_async_until_and_one_that_returns_none_to_go_on_still_work(tmp_path):
    defs = ("async def at_b(ctx):\n    return ctx.output == 'b'\n"
            "def at_c(ctx):\n    if ctx.output == 'c':\n        return True\n")
    body = LOOPED.format(defs=defs, until="at_b").replace(
        "max_iterations=3, name='review')]", "max_iterations=3), loop([A], until=at_c, max_iterations=3)]")
    res = flowtui("run", str(write(tmp_path, body)), "--input", "x")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "c\n"  # two iterations of the first loop, one of the second


def _hook(line: str) -> str:
    return ("from flowtui import ScriptedProvider\n@agent(provider=ScriptedProvider(['a']), prompt='p')\n"
            f"class A:\n    def after_response(self, r, ctx):\n        {line}\n"
            "@workflow(steps=[A])\nclass W:\n    pass\n")


def test_ctx_set_says_ctx_has_no_set_and_how_to_keep_a_value(tmp_path):
    """It said `ctx has no field 'set'; set it first (ctx.set = ...)`: to assign a field named set."""
    res = flowtui("run", str(write(tmp_path, _hook("ctx.set('x', {1, 2})"))), "--input", "x")
    assert res.returncode == 1, res.stderr
    assert re.search(r"AttributeError: ctx has no set\(\): assign a field instead, ctx.x = value .*"
                     r"\(at .*flow.py:\d+ in after_response\)", res.stderr), res.stderr
    assert "ctx.set = ..." not in res.stderr


def test_an_unknown_field_of_ctx_is_still_told_to_be_set_first(tmp_path):
    res = flowtui("run", str(write(tmp_path, _hook("ctx.tries + 1"))), "--input", "x")
    assert res.returncode == 1, res.stderr
    assert "ctx has no field 'tries'; set it first (ctx.tries = ...) or read it with ctx.get('tries', default)" \
        in res.stderr, res.stderr


@pytest.mark.parametrize("module", ["typing", "typing_extensions"])
def test_a_typeddict_state_is_refused_at_load_with_a_model_to_write(tmp_path, module):
    """It said `TypeError while importing: vars() argument must have __dict__ attribute`. (typing_extensions'
    TypedDict is the one pydantic asks for on Python 3.11, and typing's is_typeddict misses it there.)"""
    body = (f"from {module} import NotRequired, TypedDict\nfrom flowtui import ScriptedProvider\n"
            "class S(TypedDict):\n    n: int\n    tags: NotRequired[list[str]]\n"
            "@agent(provider=ScriptedProvider(['a']), prompt='p')\nclass A:\n    pass\n"
            "@workflow(state=S, steps=[A])\nclass W:\n    pass\n")
    res = flowtui("run", str(write(tmp_path, body)), "--input", "x")
    assert res.returncode == 2, res.stderr
    assert re.search(r"flow.py:\d+: @workflow W: state=S is a TypedDict, whose instances are plain dicts .*; "
                     r"declare it as a pydantic model \(or a @dataclass\), every field with a default:\n"
                     r"  class S\(BaseModel\):\n    n: int = 0\n    tags: list\[str\] = \[\]", res.stderr), res.stderr
    assert "while importing" not in res.stderr and "Traceback" not in res.stderr


def _prompted(prompt: str) -> str:
    return ("from flowtui import ScriptedProvider\n"
            f"@agent(provider=ScriptedProvider(['a']), prompt={prompt!r})\nclass A:\n    pass\n"
            "@workflow(steps=[A])\nclass W:\n    pass\n")


def test_a_prompt_file_that_is_no_utf8_text_is_named(tmp_path):
    """It said `UnicodeDecodeError while importing: 'utf-8' codec can't decode byte 0xff`, of no file."""
    (tmp_path / "bin.md").write_bytes(b"You help.\n\xff\xfe")
    res = flowtui("run", str(write(tmp_path, _prompted("bin.md"))), "--input", "x")
    assert res.returncode == 2, res.stderr
    assert re.search(r"flow.py:3: A: prompt file .*bin.md: not UTF-8 text \(byte 0xff at line 2, column 1\); save it "
                     r"as UTF-8; or give prompt= another file", res.stderr), res.stderr
    assert "while importing" not in res.stderr
    (tmp_path / "bin.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff")  # an image given as the prompt
    res = flowtui("run", str(write(tmp_path, _prompted("bin.md"))), "--input", "x")
    assert res.returncode == 2 and re.search(r"prompt file .*bin.md: a binary file, not text; or give prompt= "
                                             r"another file", res.stderr), res.stderr


def test_a_prompt_that_is_a_folder_says_so_and_names_a_file_in_it(tmp_path):
    """It said `prompt file not found: .../adir`, of a folder that is there."""
    (tmp_path / "adir").mkdir()
    (tmp_path / "adir" / "helper.md").write_text("You help.")
    res = flowtui("run", str(write(tmp_path, _prompted("./adir"))), "--input", "x")
    assert res.returncode == 2, res.stderr
    assert re.search(r"flow.py:3: A: prompt file .*adir is a folder, not a file; name the file: "
                     r"prompt='adir/helper.md'", res.stderr), res.stderr
    assert "not found" not in res.stderr


def test_a_prompt_file_with_a_bom_and_windows_newlines_is_read_as_its_text(tmp_path):
    (tmp_path / "p.md").write_bytes(b"\xef\xbb\xbfYou help.\r\nBe brief.\r\n")
    body = ("from flowtui import ScriptedProvider\n@agent(provider=ScriptedProvider(['a']), prompt='p.md')\n"
            "class A:\n    def before_prompt(self, prompt, ctx):\n        print(repr(prompt))\n"
            "@workflow(steps=[A])\nclass W:\n    pass\n")
    res = flowtui("run", str(write(tmp_path, body)), "--input", "x")
    assert res.returncode == 0, res.stderr
    assert "'You help.\\nBe brief.'\n" in res.stderr, res.stderr  # (what the run prints: on stderr)
