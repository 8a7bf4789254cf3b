"""A newcomer's mistakes in a flow file: each is said when the flow loads, naming the file, line,
class or parameter at fault and what to write instead; never a traceback, never skipped in silence
(a hook that would never be called, a state no run could make)."""

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_cli import flowtui, write  # noqa: E402

AGENT = "@agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt='p')\n"
WORKFLOW = "@workflow(steps=[A])\nclass W:\n    pass\n"


@pytest.mark.parametrize("body, expect", [
    # a decorator on what it does not decorate
    (AGENT + "def A(ctx):\n    pass\n" + WORKFLOW,
     r"flow.py:\d+: @agent decorates a class, and A is a function: write `class A:`"),
    (AGENT + "class A:\n    pass\n@workflow(steps=[A])\ndef W():\n    pass\n",
     r"flow.py:\d+: @workflow decorates a class, and W is a function: write `class W:`"),
    ("class Box:\n    @tool\n    def t(self, a: str) -> str:\n        return a\n",
     r"flow.py:\d+: @tool t is a method of Box \(its first parameter is self.*move t out of Box"),
    # one item where a list goes
    (AGENT + "class A:\n    pass\n@workflow(steps=A)\nclass W:\n    pass\n",
     r"@workflow W: steps= takes a list, not A alone; write steps=\[A\]"),
    (AGENT + "class A:\n    pass\n@workflow(steps=[loop(steps=A)])\nclass W:\n    pass\n",
     r"loop\(steps=...\): steps= takes a list, not A alone; write steps=\[A\]"),
    ("@tool\ndef t(a: str) -> str:\n    return a\n"
     "@agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt='p', tools=t)\nclass A:\n    pass\n" + WORKFLOW,
     r"@agent\(tools=...\) of A: tools= takes a list, not t alone; write tools=\[t\]"),
    # hooks that could never be called as written
    (AGENT + "class A:\n    after_response = 'UPPER'\n" + WORKFLOW,
     r"@agent A: after_response is str 'UPPER', not a method"),
    (AGENT + "class A:\n    @property\n    def after_response(self):\n        return 'x'\n" + WORKFLOW,
     r"@agent A: after_response is a property, not a method"),
    (AGENT + "class A:\n    def after_response(self, response, ctx, extra):\n        pass\n" + WORKFLOW,
     r"@agent A: after_response needs extra, which flowtui does not pass: it calls "
     r"after_response\(response, ctx\); give extra a default"),
    (AGENT + "class A:\n    async def __init__(self):\n        pass\n" + WORKFLOW,
     r"@agent A: __init__ is async"),
    # a generator where a value is returned: the model would be sent "<generator object ...>"
    (AGENT + "class A:\n    async def after_response(self, response, ctx):\n        yield response\n" + WORKFLOW,
     r"@agent A: after_response yields, so calling it makes a generator, not a result"),
    ("@tool\ndef t(a: str):\n    yield a\n",
     r"@tool t yields, so calling it makes a generator, not a result"),
    # a tool parameter the model cannot fill
    ("import socket\n@tool\ndef t(a: socket.socket) -> str:\n    return 'x'\n",
     r"@tool t: parameter 'a' is annotated socket, which has no JSON form; annotate it with a type the model can fill"),
    # until that is no function
    (AGENT + "class A:\n    pass\n@workflow(steps=[loop(steps=[A], until='s.ok')])\nclass W:\n    pass\n",
     r"loop\(until='s.ok'\): until is a function of \(ctx\) or \(ctx, s\)"),
    # state given wrong, or that no run could make
    ("from pydantic import BaseModel\nclass S(BaseModel):\n    n: int\n" + AGENT + "class A:\n    pass\n"
     "@workflow(state=S(n=1), steps=[A])\nclass W:\n    pass\n",
     r"@workflow W: state= takes the state's class, not an instance \(S\(...\)\); write state=S"),
    ("from pydantic import BaseModel\nclass S(BaseModel):\n    n: int\n" + AGENT + "class A:\n    pass\n"
     "@workflow(state=S, steps=[A])\nclass W:\n    pass\n",
     r"flow.py:\d+: W: @workflow\(state=S\): state class S must be constructible with no arguments, and is not "
     r"\(n: Field required\); give every field a default"),
    # providers that cannot be called as the engine calls them
    ("@agent(provider=FunctionProvider(lambda: 'ok'), prompt='p')\nclass A:\n    pass\n" + WORKFLOW,
     r"FunctionProvider: the handler <lambda>\(\) must take \(messages, tools\)"),
    ("from flowtui import Provider\nclass P(Provider):\n    def complete(self, request):\n        pass\n"
     "@agent(provider=P, prompt='p')\nclass A:\n    pass\n" + WORKFLOW,
     r"A: @agent\(provider=P\): P.complete must be async def complete\(self, request\)"),
])
def test_a_mistake_in_a_flow_is_a_load_error_that_says_what_to_write(tmp_path, body, expect):
    path = write(tmp_path, body)
    res = flowtui("run", str(path), "--input", "x")
    assert res.returncode == 2, res.stderr
    assert re.search(expect, res.stderr), res.stderr
    assert "Traceback" not in res.stderr and "while importing" not in res.stderr
    assert all(line.count(str(path)) <= 1 for line in res.stderr.splitlines())  # where it is, said once


def test_an_agent_whose_init_raises_names_it_and_the_line(tmp_path):
    path = write(tmp_path, AGENT + "class A:\n    def __init__(self):\n        raise RuntimeError('no key set')\n"
                 + WORKFLOW)
    res = flowtui("run", str(path), "--input", "x")
    assert res.returncode == 2, res.stderr
    assert re.search(r"A\(\) could not be made for the run: RuntimeError: no key set \(at .*flow.py:5 in __init__\)",
                     res.stderr), res.stderr
    assert "Traceback" not in res.stderr


def test_a_method_named_like_a_hook_is_said_and_the_run_goes_on(tmp_path):
    path = write(tmp_path, AGENT + "class A:\n    def after_respons(self, response, ctx):\n        return 'x'\n"
                 + WORKFLOW)
    res = flowtui("run", str(path), "--input", "x")
    assert res.returncode == 0, res.stderr
    assert "agent A: after_respons is no hook flowtui calls; did you mean after_response?" in res.stderr
    assert res.stdout == "ok\n"


def test_a_provider_of_the_flows_own_that_returns_no_reply_is_named(tmp_path):
    path = write(tmp_path, "from flowtui import Provider\nclass P(Provider):\n    async def complete(self, request):\n"
                 "        return 'plain text'\n@agent(provider=P, prompt='p')\nclass A:\n    pass\n" + WORKFLOW)
    res = flowtui("run", str(path), "--input", "x")
    assert res.returncode == 1, res.stderr
    assert "P.complete() returned str ('plain text'), not a ChatReply; return ChatReply(content=...)" in res.stderr


def test_what_is_right_still_loads(tmp_path):
    """The checks leave alone what works: hooks taking fewer arguments, a staticmethod hook, a tool
    function nested in a function, a FunctionProvider subclass's handler, state with defaults."""
    path = write(tmp_path, """
    from pydantic import BaseModel
    from flowtui import Provider

    class S(BaseModel):
        n: int = 0

    def make_tool():
        @tool
        def t(self: str) -> str:
            return self
        return t

    class Echo(FunctionProvider):
        def handler(self, messages, tools):
            return "ok"

    @agent(provider=Echo(), prompt="p", tools=[make_tool()])
    class A:
        def before_prompt(self, prompt):
            return prompt

        @staticmethod
        def after_response(response, ctx):
            return response + "!"

    @workflow(state=S, steps=(A,))
    class W:
        pass
    """)
    res = flowtui("run", str(path), "--input", "x")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "ok!\n"


def test_a_provider_class_that_cannot_be_made_names_the_agent(tmp_path):
    path = write(tmp_path, "from flowtui import ScriptedProvider\nclass R(ScriptedProvider):\n"
                 "    replies = 'nope.replies.toml'\n@agent(provider=R, prompt='p')\nclass A:\n    pass\n" + WORKFLOW)
    res = flowtui("run", str(path), "--input", "x")
    assert res.returncode == 2, res.stderr
    assert re.search(r"A: @agent\(provider=R\) \(defined at .*flow.py:\d+\) could not be made for the run: "
                     r"ScriptedProvider: replies file not found: .*nope.replies.toml", res.stderr), res.stderr


@pytest.mark.parametrize("kid, expect", [
    ("class K:\n    def x(:\n", "kid.py:2: syntax error: invalid syntax"),
    ("d = {}\nK = d['kk']\n", "kid.py:2: KeyError while importing: 'kk'"),
    ("def f():\n    return {}['z']\nK = f()\n", "kid.py:2: KeyError while importing (in f): 'z'"),
    ("from flowtui import loop\nK = loop(steps=[])\n", "kid.py:2: loop(steps=[...]) is empty"),
    ("from flowtui import FunctionProvider, agent\n" + AGENT.replace("'p'", "'./nope.md'") + "class K:\n    pass\n",
     "kid.py:2: K: prompt file not found"),
    ("from flowtui import FunctionProvider, agent\n" + AGENT + "class K:\n    after_response = 3\n",
     "kid.py:2: @agent K: after_response is int 3, not a method"),
])
def test_a_fault_in_a_module_the_flow_imports_names_that_module_and_its_line(tmp_path, kid, expect):
    """It was put on the flow file, at the line of the module's (a syntax error: at the module's line
    number, in the flow file)."""
    (tmp_path / "kid.py").write_text(kid)
    path = write(tmp_path, "import kid\n" + AGENT + "class A:\n    pass\n" + WORKFLOW)
    res = flowtui("run", str(path), "--input", "x", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert expect in res.stderr and f"(imported by {path}:2)" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
