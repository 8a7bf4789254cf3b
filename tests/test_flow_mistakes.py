"""A newcomer's mistakes in a flow file: each is said when the flow loads, naming the file, line,
class or parameter at fault and what to write instead; never a traceback, never skipped in silence
(a hook that would never be called, a state no run could make)."""

import json
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
    # hooks that could never be called as written: said at the hook's def (line 4), not at @agent (line 2)
    (AGENT + "class A:\n    after_response = 'UPPER'\n" + WORKFLOW,
     r"@agent A: after_response is str 'UPPER', not a method"),
    (AGENT + "class A:\n    @property\n    def after_response(self):\n        return 'x'\n" + WORKFLOW,
     r"@agent A: after_response is a property, not a method"),
    (AGENT + "class A:\n    def after_response(self, response, ctx, extra):\n        pass\n" + WORKFLOW,
     r"flow.py:4: @agent A: after_response needs extra, which flowtui does not pass: it calls "
     r"after_response\(response, ctx\); give extra a default"),
    (AGENT + "class A:\n    def after_response(response, ctx):\n        pass\n" + WORKFLOW,
     r"flow.py:4: @agent A: after_response\(response, ctx\) has no self, so the agent would be passed as response: "
     r"write "
     r"def after_response\(self, response, ctx\)"),
    (AGENT + "class A:\n    def after_response(self, *, response, ctx):\n        pass\n" + WORKFLOW,
     r"flow.py:4: @agent A: after_response takes response, ctx by keyword only \(after \*\), and flowtui passes "
     r"them in "
     r"order: it calls after_response\(response, ctx\); take out the \*"),
    (AGENT + "class A:\n    async def __init__(self):\n        pass\n" + WORKFLOW,
     r"@agent A: __init__ is async"),
    # a generator where a value is returned: the model would be sent "<generator object ...>"
    (AGENT + "class A:\n    async def after_response(self, response, ctx):\n        yield response\n" + WORKFLOW,
     r"@agent A: after_response yields, so calling it makes a generator, not a result"),
    ("@tool\ndef t(a: str):\n    yield a\n",
     r"@tool t yields, so calling it makes a generator, not a result"),
    # a tool class's argument with no schema=: said so at once (it was told to mark it, then, marked Input(),
    # that it had no schema), with the function it could be, by the tool's name (it said def somartool)
    ("from flowtui import AgentContext, Context\n@tool(name='somar', description='Adds.')\nclass SomarTool:\n"
     "    def execute(self, n: int, ctx: AgentContext = Context()):\n        return str(n)\n"
     "@agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt='p', tools=[SomarTool])\nclass A:\n    pass\n"
     + WORKFLOW,
     r"flow.py:5: SomarTool: execute\(\) parameter 'n' is annotated int, but the tool has no schema=: .* or write "
     r"the tool as a function whose parameters are its arguments \(@tool, def somar\(n: int\)\)"),
    # a tool parameter the model cannot fill
    ("import socket\n@tool\ndef t(a: socket.socket) -> str:\n    return 'x'\n",
     r"@tool t: parameter 'a' is annotated socket, which has no JSON form; annotate it with a type the model can fill"),
    # a function tool that wants the runtime (to run a child workflow): told to be a class, not to annotate it as JSON
    ("from flowtui import WorkflowRuntime\n@tool\nasync def t(q: str, runtime: WorkflowRuntime) -> str:\n"
     "    return 'x'\n", r"@tool t: parameter 'runtime' is annotated WorkflowRuntime, which a function tool is not "
     r"given: write the tool as a @tool class whose __init__ takes runtime: WorkflowRuntime[^;]*$"),
    # until that is no function
    (AGENT + "class A:\n    pass\n@workflow(steps=[loop(steps=[A], until='s.ok')])\nclass W:\n    pass\n",
     r"loop\(until='s.ok'\): until is a function of \(ctx\) or \(ctx, s\)"),
    # state given wrong, or that no run could make
    ("from pydantic import BaseModel\nclass S(BaseModel):\n    n: int\n" + AGENT + "class A:\n    pass\n"
     "@workflow(state=S(n=1), steps=[A])\nclass W:\n    pass\n",
     r"@workflow W: state= takes the state's class, not an instance \(S\(...\)\); write state=S"),
    # a tool class whose execute is misspelled, or missing
    ('@tool\nclass Busca:\n    """Busca."""\n    def exectue(self, q: str) -> str:\n        return q\n',
     r"flow.py:\d+: @tool class Busca has no execute\(\) method; did you mean exectue\? rename it execute"),
    ('@tool\nclass Busca:\n    """Busca."""\n',
     r"@tool class Busca has no execute\(\) method: flowtui calls execute\(self, ...\) with the model's arguments"),
    # a dict, or dict itself, has no fields to declare: state=dict loaded, and the first s.n failed the run
    (AGENT + "class A:\n    pass\n@workflow(state={'n': 0}, steps=[A])\nclass W:\n    pass\n",
     r"@workflow W: state= takes a class that declares the workflow's fields, not a dict \(\{'n': 0\}\); declare "
     r"one and give it:\n  class MyState\(BaseModel\):\n    n: int = 0\n  @workflow\(state=MyState, ...\)"),
    (AGENT + "class A:\n    pass\n@workflow(state={'last': None, 'notes': 'x' * 60}, steps=[A])\nclass W:\n    pass\n",
     r"class MyState\(BaseModel\):\n    last: str \| None = None\n    notes: str = ''\n"),
    (AGENT + "class A:\n    pass\n@workflow(state=dict, steps=[A])\nclass W:\n    pass\n",
     r"@workflow W: state= takes a class that declares the workflow's fields, not dict; declare one"),
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
    # decorators and combinators written wrong: Python's own TypeError said none of this
    ("@agent\nclass A:\n    pass\n" + WORKFLOW,
     r"flow.py:\d+: @agent takes its parameters in parentheses: write @agent\(provider=..., prompt=...\) above A"),
    (AGENT + "class A:\n    pass\n@workflow\nclass W:\n    pass\n",
     r"flow.py:\d+: @workflow takes its parameters in parentheses: write @workflow\(steps=\[...\]\) above W"),
    # values given in order: Python's "agent() takes from 0 to 1 positional arguments but 2 ..." said none of this
    ("@agent(FunctionProvider(lambda m, t: 'ok'), 'p')\nclass A:\n    pass\n" + WORKFLOW,
     r"flow.py:\d+: @agent\(...\) takes its parameters by name: write @agent\(provider=..., prompt=...\); it was given "
     r"2 values in order \(a FunctionProvider, str 'p'\)"),
    ("@tool('e')\ndef e(x: int) -> str:\n    return 'x'\n",
     r"flow.py:\d+: @tool\(...\) takes its parameters by name: write @tool\(name='e', description=...\)"),
    # what @tool cannot make a schema of: said with what to write (it said "not <classmethod(<function ...>)>")
    ("class K:\n    @tool\n    @classmethod\n    def cm(cls, x: int) -> str:\n        return 'x'\n",
     r"@tool decorates a class with execute\(\) or a function \(def\), not a classmethod: put @tool above a function "
     r"of the module \(def cm\(...\)\)"),
    ("import functools\ndef base(x: int, y: int) -> str:\n    return 'x'\n"
     "p = tool(name='p', description='d')(functools.partial(base, y=10))\n",
     r"not a functools.partial of base: its parameters are no schema of its own; write a function \(def\)"),
    ("@agent(prompt='p')\nclass A:\n    pass\n" + WORKFLOW, r"@agent\(...\) of A needs provider=, the model it calls"),
    (AGENT.replace("prompt=", "promt=") + "class A:\n    pass\n" + WORKFLOW,
     r"@agent\(...\) has no parameter promt=; did you mean prompt=\? it takes provider=, prompt=, tools="),
    (AGENT.replace("prompt=", "temperature=0.3, prompt=") + "class A:\n    pass\n" + WORKFLOW,
     r"@agent\(...\) has no parameter temperature=; a model parameter goes in sampling: "
     r"sampling=\{'temperature': 0.3\}; it takes provider="),
    ("from flowtui import until_answered\n" + AGENT + "class A:\n    pass\n@workflow(steps=[loop(steps=[A], untl=until_answered)])\nclass W:\n    pass\n",
     r"loop\(...\) has no parameter untl=; did you mean until=\?"),
    ("from flowtui import parallel\n" + AGENT + "class A:\n    pass\n@workflow(steps=[parallel(A, A)])\nclass W:\n    pass\n",
     r"parallel\(...\) takes its steps as one list: write parallel\(\[A, A\]\)"),
    ("from flowtui import until_answered\n" + AGENT + "class A:\n    pass\n"
     "@workflow(steps=[loop(steps=[A], until=until_answered())])\nclass W:\n    pass\n",
     r"until_answered\(\) was called with no ctx: give the function itself, until=until_answered \(no parentheses\)"),
    (AGENT + "class A:\n    pass\n@workflow(steps=[loop(steps=[A], on_fail='warn')])\nclass W:\n    pass\n",
     r"loop\(on_fail='warn'\): on_fail is a function of \(ctx, info\)"),
    (AGENT + "class A:\n    pass\n@workflow(steps=[loop(steps=[A], until=lambda ctx, *, x: True)])\n"
     "class W:\n    pass\n", r"loop\(until=...\) needs x, which flowtui does not pass: it calls until\(ctx\)"),
    # the state, taken by keyword only: it was said to be one flowtui does not pass, "it calls until(ctx, s)"
    ("from pydantic import BaseModel\nclass S(BaseModel):\n    n: int = 0\n" + AGENT + "class A:\n    pass\n"
     "@workflow(state=S, steps=[loop(steps=[A], until=lambda ctx, *, s: True)])\nclass W:\n    pass\n",
     r"loop\(until=...\) takes s by keyword only \(after \*\), and flowtui passes them in order: it calls "
     r"until\(ctx, s\); take out the \*"),
    # a generator is truthy: such an until stopped every loop after its first iteration
    (AGENT + "class A:\n    pass\ndef done(ctx):\n    yield True\n@workflow(steps=[loop(steps=[A], until=done)])\n"
     "class W:\n    pass\n", r"flow.py:\d+: .*loop\(until=...\) yields, so calling it makes a generator, not a result"),
    (AGENT + "class A:\n    pass\nasync def failed(ctx, info):\n    yield\n"
     "@workflow(steps=[loop(steps=[A], on_fail=failed)])\nclass W:\n    pass\n",
     r"loop\(on_fail=...\) yields, so calling it makes a generator"),
    # a class written without @agent: what to write (it said only what a step is)
    ("class A:\n    pass\n" + WORKFLOW,
     r"workflow W: step A is not an @agent class, loop\(...\) or parallel\(\[...\]\): decorate it with "
     r"@agent\(provider=..., prompt=...\)"),
    # a workflow among another's steps: that one is the flow's (no "2 workflows"), and the step is said
    (AGENT + "class A:\n    pass\n@workflow(steps=[A])\nclass Child:\n    pass\n"
     "@workflow(steps=[A, loop(steps=[Child])])\nclass Parent:\n    pass\n",
     r"workflow Parent: step Child is a @workflow.*await self.runtime.run\(Child, input=...\)"),
    (AGENT + "class A:\n    def __init__(self, api_key):\n        self.key = api_key\n" + WORKFLOW,
     r"A: __init__ parameter 'api_key' has no default, and flowtui makes A with no arguments: give it a default"),
    # `runtime` without its annotation: the fix it wanted (it was told to mark it as the workflow state)
    (AGENT + "class A:\n    def __init__(self, runtime):\n        self.runtime = runtime\n" + WORKFLOW,
     r"A: __init__ parameter 'runtime' has no default, .*: give it a default \(.*\), or, if it runs child "
     r"workflows, annotate it runtime: WorkflowRuntime \(from flowtui import WorkflowRuntime\); or, if it is the "
     r"workflow state, mark it runtime: YourState = State\(\)"),
    # two agents of one name: their nodes, breakpoints and turns could not be told apart
    (AGENT + "class A:\n    pass\n" + AGENT.replace("prompt='p'", "prompt='p', name='A'") + "class B:\n    pass\n"
     "@workflow(steps=[A, B])\nclass W:\n    pass\n",
     r"workflow W: two agents are named A \(flow.py:\d+ and flow.py:\d+\); give one another name"),
    # what an agent is given, of the wrong kind
    (AGENT.replace("prompt='p'", "prompt=42") + "class A:\n    pass\n" + WORKFLOW,
     r"@agent\(prompt=...\) of A takes the prompt's text, or the path of a file that holds it, not int 42"),
    (AGENT.replace("prompt='p'", "prompt='p', sampling='fast'") + "class A:\n    pass\n" + WORKFLOW,
     r"@agent\(...\) of A: sampling= takes a dict of the model's parameters"),
    (AGENT.replace("prompt='p'", "prompt='p', sampling={'temprature': 0.2}") + "class A:\n    pass\n" + WORKFLOW,
     r"sampling= has 'temprature', which no provider takes; did you mean 'temperature'\?"),
    (AGENT.replace("prompt='p'", "prompt='p', sampling={'max_tokens': -5}") + "class A:\n    pass\n" + WORKFLOW,
     r"sampling=\{'max_tokens': -5\}: max_tokens is a whole number of at least 1"),
    (AGENT.replace("prompt='p'", "prompt='p', sampling={'temperature': 'hot'}") + "class A:\n    pass\n" + WORKFLOW,
     r"sampling=\{'temperature': 'hot'\}: temperature is a number"),
    # a value no request can carry (the call failed at the first turn, said as an HTTP 500 and retried)
    (AGENT.replace("prompt='p'", "prompt='p', sampling={'stop': {'FIM'}}") + "class A:\n    pass\n" + WORKFLOW,
     r"@agent\(...\) of A: sampling\['stop'\] is a set, which a model request cannot carry"),
    (AGENT.replace("prompt='p'", "prompt='p', sampling={'metadata': {'x': [float('inf')]}}") + "class A:\n    pass\n"
     + WORKFLOW, r"sampling\['metadata'\]\['x'\]\[0\] is inf, a number JSON cannot hold"),
    ("from pydantic import BaseModel\nclass S(BaseModel):\n    n: int = 0\n" + AGENT
     + "class A:\n    def after_response(self, r, ctx, s: S = State()):\n        pass\n"
     "@workflow(state=S, steps=[A])\nclass W:\n    pass\n",
     r"@agent A: after_response parameter 's' is marked State\(\), but hooks are not injected"),
    # tools whose schema would mislead the model
    ("@tool(description=5)\ndef t(a: str) -> str:\n    return a\n",
     r"@tool t: description= is the text the model reads about the tool, not int 5"),
    ("@tool\ndef t(x: int = 'abc') -> str:\n    return 'x'\n",
     r"flow.py:\d+: @tool t: parameter 'x' defaults to 'abc', which its type refuses"),
    # a default with no JSON form: pydantic's warning, naming neither the tool nor the parameter
    ("@tool\ndef t(q: str, cb=print) -> str:\n    return q\n",
     r"flow.py:\d+: @tool t: parameter 'cb' defaults to <built-in function print>, which has no JSON form"),
    ("from flowtui.runtime.context import AgentContext\n@tool\ndef t(q: str, ctx: AgentContext) -> str:\n"
     "    return q\n", r"parameter 'ctx' is annotated AgentContext but not marked.*write ctx: AgentContext = Context\(\)"),
    ("@tool\ndef t(**kw) -> str:\n    return 'x'\n", r"@tool t: \*\*kw cannot be a tool argument"),
    # a name= that is no text: it loaded, and its events were refused on their way to the app and the
    # journal (a loop(name=7) run wrote a journal no replay, diff or re-execution could read whole)
    (AGENT + "class A:\n    pass\n@workflow(steps=[loop(steps=[A], name=7, max_iterations=1)])\nclass W:\n    pass\n",
     r'flow.py:\d+: loop\(\.\.\.\): name= is the text the panes and the journal call it by, such as name="revisao", '
     r"not int 7"),
    (AGENT + "class A:\n    pass\n@workflow(steps=[A], name=123)\nclass W:\n    pass\n",
     r"flow.py:\d+: @workflow\(\.\.\.\) of W: name= is .* not int 123"),
    (AGENT.replace("prompt='p'", "prompt='p', name=5") + "class A:\n    pass\n" + WORKFLOW,
     r"flow.py:\d+: @agent\(\.\.\.\) of A: name= is .* not int 5"),
    ("@tool(name=123, description='d')\ndef t(a: str) -> str:\n    return a\n",
     r"flow.py:\d+: @tool\(\.\.\.\): name= is .* not int 123"),
    (AGENT + "class A:\n    pass\n@workflow(steps=[__import__('flowtui').parallel([A], name='  ')])\n"
     "class W:\n    pass\n",
     r"flow.py:\d+: parallel\(\.\.\.\): name= is .* not empty"),
    # a name flowtui does not export (Python's message named where flowtui is installed)
    ("from flowtui import agnet\n", r"flow.py:\d+: flowtui has no 'agnet' to import; did you mean agent\?"),
    # an instance where the class goes (flowtui makes one for each run)
    (AGENT + "class A:\n    pass\n@workflow(steps=[A()])\nclass W:\n    pass\n",
     r"workflow W: a step is an instance of A; flowtui makes the @agent class's instance for each run: write A, "
     r"not A\(\)"),
    ("@tool(description='d')\nclass T:\n    def execute(self, args):\n        return 'x'\n"
     + AGENT.replace("prompt='p'", "prompt='p', tools=[T()]") + "class A:\n    pass\n" + WORKFLOW,
     r"A: tools=\[...\] holds an instance of T; flowtui makes the @tool class's instance for each run: write T, "
     r"not T\(\)"),
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


def test_a_state_field_read_from_ctx_is_told_where_it_is(tmp_path):
    # until=lambda s: s.total (one parameter: ctx) was told to set ctx.total first
    path = write(tmp_path, "from pydantic import BaseModel\nclass S(BaseModel):\n    total: int = 0\n" + AGENT
                 + "class A:\n    pass\n@workflow(state=S, steps=[loop([A], until=lambda s: s.total >= 7, "
                 "max_iterations=3)])\nclass W:\n    pass\n")
    res = flowtui("run", str(path), "--input", "x")
    assert res.returncode == 1, res.stderr
    assert ("AttributeError: ctx has no field 'total', the workflow state has: read it there, from the state given "
            "second to until (until=lambda ctx, s: s.total ...; a one-parameter until gets ctx)") in res.stderr


def test_a_method_named_like_a_hook_is_said_and_the_run_goes_on(tmp_path):
    path = write(tmp_path, AGENT + "class A:\n    def after_respons(self, response, ctx):\n        return 'x'\n"
                 + WORKFLOW)
    res = flowtui("run", str(path), "--input", "x")
    assert res.returncode == 0, res.stderr
    assert re.search(r"flow.py:\d+: agent A: after_respons is no hook flowtui calls; did you mean after_response\?",
                     res.stderr), res.stderr  # where it is written, as a load error says it
    assert res.stdout == "ok\n"


def test_a_docstring_describing_no_parameter_of_its_tool_is_said(tmp_path):
    """`Args: contta: ...` for a parameter conta loaded in silence: the model got no description for conta."""
    path = write(tmp_path, "@tool\ndef busca(conta: str, limite: int = 3) -> str:\n"
                 "    '''Busca a conta.\n\n    Args:\n        contta: o id da conta\n        limite: quantos\n    '''\n"
                 "    return conta\n" + AGENT.replace("prompt='p'", "prompt='p', tools=[busca]")
                 + "class A:\n    pass\n" + AGENT.replace("prompt='p'", "prompt='p', tools=[busca]")
                 + "class B:\n    pass\n@workflow(steps=[A, B])\nclass W:\n    pass\n")
    res = flowtui("run", str(path), "--input", "x")
    assert res.returncode == 0, res.stderr
    assert re.search(r"flow.py:\d+: agent A: tool busca's docstring describes contta, which is no parameter of it; "
                     r"did you mean conta\? \(its parameters: conta, limite\)", res.stderr), res.stderr
    assert "limite, which" not in res.stderr and res.stderr.count("contta") == 1  # (B shares it: said once)


def test_hooks_beside_run_are_said_never_to_be_called(tmp_path):
    path = write(tmp_path, AGENT + "class A:\n    async def run(self, input, ctx):\n        return 'mine'\n"
                 "    def after_response(self, response, ctx):\n        return 'x'\n" + WORKFLOW)
    res = flowtui("run", str(path), "--input", "x")
    assert res.returncode == 0, res.stderr
    assert "agent A: run() takes the turn over, so after_response is never called; do that work inside run()" \
        in res.stderr
    assert res.stdout == "mine\n"


def test_scripted_replies_under_no_agents_name_are_noted_at_load(tmp_path):
    """ScriptedProvider({"Agnet": [...]}) loaded; the run failed at its first model call."""
    path = write(tmp_path, "from flowtui import ScriptedProvider\n"
                 "@agent(provider=ScriptedProvider({'Agnet': ['x']}), prompt='p')\nclass Agent:\n    pass\n"
                 "@workflow(steps=[Agent])\nclass W:\n    pass\n")
    res = flowtui("run", str(path), "--input", "x")
    # the key is the mistake, not the agent's name ("did you mean Agnet?" pointed the other way)
    assert "agent Agent: its ScriptedProvider has no replies for Agent (it has: Agnet); rename its key 'Agnet' to " \
           "'Agent'. Its first model call will fail" in res.stderr, res.stderr


def test_a_scripted_reply_calling_a_tool_the_agent_lacks_is_noted_at_load(tmp_path):
    """Replies' agent names were checked at load, their tool calls not: a misspelled tool was told to the
    model as unknown, the run exit 0."""
    path = write(tmp_path, "from flowtui import ScriptedProvider\n@tool(description='Saldo.')\n"
                 "def saldo(conta: str) -> str:\n    return '10'\n"
                 "@agent(provider=ScriptedProvider({'A': [{'tool_calls': [{'name': 'sald', 'args': {}}]}, 'fim']}), "
                 "prompt='p', tools=[saldo])\nclass A:\n    pass\n" + WORKFLOW)
    res = flowtui("run", str(path), "--input", "x")
    assert "agent A: its scripted reply 1 calls tool sald, which A does not have (its tools: saldo); did you mean " \
           "saldo? The model would be told there is no such tool" in res.stderr, res.stderr


def test_a_scripted_call_of_a_tool_with_no_name_says_the_empty_name(tmp_path):
    """It read "calls tool , which A does not have"."""
    path = write(tmp_path, "from flowtui import ScriptedProvider\n"
                 "@agent(provider=ScriptedProvider({'A': [{'tool_calls': [{'name': '', 'args': {}}]}, 'fim']}), "
                 "prompt='p')\nclass A:\n    pass\n" + WORKFLOW)
    res = flowtui("run", str(path), "--input", "x")
    assert 'agent A: its scripted reply 1 calls tool "", which A does not have (its tools: none). ' in res.stderr, \
        res.stderr


def test_a_tool_with_no_description_is_noted(tmp_path):
    """A tool with no docstring was sent with description '': the model sees only its name, unsaid."""
    path = write(tmp_path, "@tool\ndef lookup(q: str) -> str:\n    return q\n"
                 "@agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt='p', tools=[lookup])\nclass A:\n"
                 "    pass\n" + WORKFLOW)
    res = flowtui("run", str(path), "--input", "x")
    assert res.returncode == 0, res.stderr
    assert "flow.py:2: agent A: tool lookup has no description, so the model sees only its name; give it a " \
           "docstring" in res.stderr, res.stderr  # (where it is written, as the other notes say)


@pytest.mark.parametrize("prompt", ["prompts/helper.prompt", "prompts/helper", "helper.prompt"])
def test_a_prompt_that_names_a_file_flowtui_does_not_read_is_noted(tmp_path, prompt):
    """prompt='prompts/helper.prompt' (no ./, no .md) was sent to the model as the prompt's text: the
    path, unsaid."""
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "helper.prompt").write_text("You help.")
    path = write(tmp_path, f"@agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt={prompt!r})\nclass A:\n"
                 "    pass\n" + WORKFLOW)
    res = flowtui("run", str(path), "--input", "x", "--no-journal")
    assert res.returncode == 0, res.stderr
    assert f"flow.py:2: agent A: prompt={prompt!r} is sent as the prompt's text; a file is read when the path " \
           f"begins with ./ or ../ or ends in .md or .txt (or is a Path): write prompt='./{prompt}' if it is " \
           "one" in res.stderr, res.stderr


@pytest.mark.parametrize("prompt", ["Summarize.", "You are terse.", "v1.2", "e.g.", "./prompts/helper.prompt",
                                    "你是审稿人。只回答：通过/不通过。", "Responda: sim/não."])
def test_a_prompt_of_words_or_a_file_read_is_not_noted(tmp_path, prompt):
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "helper.prompt").write_text("You help.")
    path = write(tmp_path, f"@agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt={prompt!r})\nclass A:\n"
                 "    pass\n" + WORKFLOW)
    res = flowtui("run", str(path), "--input", "x", "--no-journal")
    assert res.returncode == 0 and "prompt=" not in res.stderr, res.stderr


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
                     r"ScriptedProvider: no such replies file: .*nope.replies.toml", res.stderr), res.stderr


def test_a_scripted_reply_given_as_a_string_is_told_to_be_a_list(tmp_path):
    """ScriptedProvider("APROVADO") was said to be no such replies file, nothing more."""
    path = write(tmp_path, "from flowtui import ScriptedProvider\n"
                 "@agent(provider=ScriptedProvider('APROVADO'), prompt='p')\nclass A:\n    pass\n" + WORKFLOW)
    res = flowtui("run", str(path), "--input", "x")
    assert res.returncode == 2, res.stderr
    assert re.search(r"ScriptedProvider: no such replies file: .*APROVADO; a string is the path of a TOML file: "
                     r"for one reply, give a list: \['APROVADO'\]", res.stderr), res.stderr


def test_one_of_flowtuis_provider_classes_given_unmade_names_where_the_agent_is(tmp_path):
    """provider=FunctionProvider (the class, its handler not given) named the agent but not where it is."""
    path = write(tmp_path, "from flowtui import FunctionProvider\n@agent(provider=FunctionProvider, prompt='p')\n"
                 "class A:\n    pass\n" + WORKFLOW)
    res = flowtui("run", str(path), "--input", "x")
    assert res.returncode == 2, res.stderr
    assert re.search(r"A: @agent\(provider=FunctionProvider\) \(agent defined at flow.py:3\) could not be made for "
                     r"the run: TypeError: FunctionProvider needs a handler: FunctionProvider\(fn\)",
                     res.stderr), res.stderr


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


def test_what_a_person_means_is_taken_as_meant(tmp_path):
    """A prompt given as a Path (a file beside the flow), State without its parentheses, on_exhausted
    and on_fail taking fewer parameters than flowtui passes, an optional tool argument defaulting to
    None: each ran wrong or failed before."""
    (tmp_path / "writer.md").write_text("You write.\n")
    path = write(tmp_path, """
    from pathlib import Path
    from pydantic import BaseModel

    class S(BaseModel):
        n: int = 0

    @tool
    def count(q: str, limit: int = None, s: S = State) -> str:
        s.n += 1
        return f"{q}:{limit}:{s.n}"

    def model(messages, tools):
        return {"content": "", "tool_calls": [{"name": "count", "args": {"q": messages[0].content}}]}

    @agent(provider=FunctionProvider(model), prompt=Path(__file__).parent / "writer.md", tools=[count])
    class A:
        def __init__(self, s: S = State):
            self.s = s

    @workflow(state=S, steps=[loop(steps=[A], max_iterations=1, on_exhausted=lambda ctx: setattr(ctx, "output", ctx.output + "!"))])
    class W:
        pass
    """)
    res = flowtui("run", str(path), "--input", "x")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "You write.:None:1!\n"  # the prompt file read, the state injected, on_exhausted(ctx)


@pytest.mark.parametrize("hook, expect", [
    ("self.s.n = 'many'", r"TypeError: state field S.n is declared int, and 'many' is not one \(Input should be a "
                          r"valid integer.*\); assign a value of that type.*\(at .*flow.py:\d+ in after_response\)"),
    ("ctx.data['x'] = 1", r"TypeError: ctx.data is the run's read-only data .*keep a value of yours on ctx"),
])
def test_a_wrong_write_in_a_hook_fails_where_it_happens_naming_what(tmp_path, hook, expect):
    """A state field set to a value its type refuses was taken, journaled, and written to a snapshot that
    --from-snapshot then refused; ctx.data['x'] = 1 said only that a mappingproxy takes no assignment."""
    path = write(tmp_path, "from pydantic import BaseModel\nclass S(BaseModel):\n    n: int = 0\n" + AGENT
                 + f"class A:\n    def __init__(self, s: S = State()):\n        self.s = s\n"
                   f"    def after_response(self, r, ctx):\n        self.s.n = '3'\n        assert self.s.n == 3\n"
                   f"        {hook}\n@workflow(state=S, steps=[A])\nclass W:\n    pass\n")
    res = flowtui("run", str(path), "--input", "x")
    assert res.returncode == 1, res.stderr
    assert re.search(expect, res.stderr), res.stderr


@pytest.mark.parametrize("body, said", [
    ('[[A]]\ncontent = ""\ntool_calls = [{name = "t", args = 5}]\n',
     "replies.toml: reply 1 for A: tool_calls[0].args is int 5, not the call's arguments"),
    ("A = 5\n", "replies.toml: replies for 'A' must be a list of replies, not int"),
    # (played as the text "3", and a call of the tool "5", unsaid)
    ("[[A]]\ncontent = 3\n", "replies.toml: reply 1 for A: content is int 3, not text; write it as a string"),
    ('[[A]]\ncontent = ""\ntool_calls = [{name = 5}]\n',
     "replies.toml: reply 1 for A: tool_calls[0].name is int 5, not a tool's name"),
    ('[[A]]\ncontent = ""\ntool_calls = "t"\n',
     "replies.toml: reply 1 for A: tool_calls is str 't', not a list of calls"),
    ("A = " + "[" * 2000 + "]" * 2000 + "\n", "replies.toml: a value in it is nested too deep to read"),
    ("A = [" + "9" * 5000 + "]\n", "replies.toml: a value in it cannot be read (Exceeds the limit"),
    # (a date no model sends: the tool was given a date, the journal its repr)
    ('[[A]]\ncontent = ""\ntool_calls = [{name = "t", args = {when = 2025-03-01}}]\n',
     "replies.toml: reply 1 for A: tool_calls[0] ('t'): args['when'] is date; a model's tool-call arguments are "
     "JSON: give text, numbers"),
    # empty: it ran, and failed at the first model call ("no replies ... (it has: none)"), exit 1
    ("", "replies.toml: holds no replies; write each agent's, e.g. RevisorAgent = [\"APROVADO\"]"),
])
def test_a_replies_file_that_cannot_be_played_is_named(tmp_path, body, said):
    """--replies with a deep array or an integer of 5,000 digits said "RecursionError while importing" of
    the flow; args = 5 said "'int' object is not iterable"; a non-list left out the file's name."""
    (tmp_path / "replies.toml").write_text(body)
    path = write(tmp_path, "from flowtui import ScriptedProvider\n@agent(provider=ScriptedProvider(['ok']), "
                           "prompt='p')\nclass A:\n    pass\n" + WORKFLOW)
    res = flowtui("run", str(path), "--input", "x", "--replies", str(tmp_path / "replies.toml"))
    assert res.returncode == 2 and said in res.stderr, res.stderr
    assert "while importing" not in res.stderr and "Traceback" not in res.stderr


def test_a_replies_file_saved_with_a_byte_order_mark_is_read(tmp_path):
    """Saved by Windows' Notepad: "not valid TOML: Invalid statement (at line 1, column 1)"."""
    (tmp_path / "replies.toml").write_bytes(b"\xef\xbb\xbfA = [\"from the file\"]\n")
    path = write(tmp_path, "from flowtui import ScriptedProvider\n@agent(provider=ScriptedProvider(['ok']), "
                           "prompt='p')\nclass A:\n    pass\n" + WORKFLOW)
    res = flowtui("run", str(path), "--input", "x", "--replies", str(tmp_path / "replies.toml"), "--no-journal")
    assert res.returncode == 0 and res.stdout.strip() == "from the file", res.stderr


@pytest.mark.parametrize("imports,used,hint", [
    ("agent", "agnet", "did you mean agent?"),  # (difflib alone would say anext, a builtin)
    ("workflow", "agent", "import it: from flowtui import agent"),
    ("workflow", "agnet", "did you mean agent\\? \\(from flowtui import agent\\)"),
])
def test_a_name_not_defined_at_import_is_said_with_the_name_meant(tmp_path, imports, used, hint):
    """Python's own traceback says "Did you mean: 'agent'?"; the load error said only the NameError."""
    path = tmp_path / "flow.py"  # (not write(): its header imports every name)
    path.write_text(f"from flowtui import FunctionProvider, {imports}\n"
                    f"@{used}(provider=FunctionProvider(lambda m, t: 'ok'), prompt='p')\nclass A:\n    pass\n")
    res = flowtui("run", str(path), "--input", "x")
    assert res.returncode == 2, res.stderr
    assert re.search(rf"flow.py:2: NameError while importing: name '{used}' is not defined; {hint}", res.stderr), \
        res.stderr


def test_input_in_a_hook_fails_the_run_saying_the_flows_stdin_is_empty(tmp_path):
    """input() got EOF, said as "EOFError: EOF when reading a line": nothing told a flow author why."""
    path = write(tmp_path, "from flowtui import ScriptedProvider\n"
                 "@agent(provider=ScriptedProvider(['ok']), prompt='p')\nclass A:\n"
                 "    def after_response(self, response, ctx):\n        return input('name? ')\n"
                 "@workflow(steps=[A])\nclass W:\n    pass\n")
    res = flowtui("run", str(path), "--input", "x", "--no-journal")
    assert res.returncode == 1, res.stderr
    assert "EOFError: EOF when reading a line (a flow's stdin reads as empty: give it what it asks with --input, " \
           "--memory or --data) (at " in res.stderr and "flow.py:6 in after_response" in res.stderr, res.stderr


@pytest.mark.parametrize("kind", ["device", "pipe"])
def test_a_replies_or_prompt_file_that_is_a_device_or_a_pipe_is_refused_at_load(tmp_path, kind):
    """A replies file the flow names (replies = "..."), made a link to /dev/zero, was read until the worker held
    gigabytes; a pipe held the run for ever. A prompt file that is a pipe was "not found"."""
    import os

    def special(name):
        target = tmp_path / name
        if kind == "device":
            target.symlink_to("/dev/zero")
        else:
            os.mkfifo(target)

    special("r.replies.toml")
    path = write(tmp_path, "from flowtui import ScriptedProvider\nclass R(ScriptedProvider):\n"
                 "    replies = 'r.replies.toml'\n@agent(provider=R, prompt='p')\nclass A:\n    pass\n" + WORKFLOW)
    res = flowtui("run", str(path), "--input", "x")
    assert res.returncode == 2, res.stderr
    assert re.search(r"ScriptedProvider: .*r\.replies\.toml: is a pipe or a device, not a TOML replies file",
                     res.stderr), res.stderr
    special("p.agent.md")
    path = write(tmp_path, "@agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt='p.agent.md')\nclass A:\n"
                 "    pass\n" + WORKFLOW)
    res = flowtui("run", str(path), "--input", "x")
    assert res.returncode == 2, res.stderr
    assert re.search(r"prompt file \S*(p\.agent\.md|/dev/zero) is a pipe or a device, not a prompt file; name a file",
                     res.stderr), res.stderr


CYCLE = "def cycle():\n    d = {'a': 1}\n    d['d'] = d\n    return d\n"
BAD_REPR = "class Bad:\n    def __repr__(self):\n        raise RuntimeError('repr boom')\n"


@pytest.mark.parametrize("model, hook, said", [
    ("{'tool_calls': [{'name': 't', 'args': cycle()}]}", "pass",
     "ConfigError: FunctionProvider for A: tool_calls[0] ('t'): args['d'] is args again (a cycle); a model's "
     "tool-call arguments are JSON"),
    ("ChatReply(content='', tool_calls=[ToolCall(name='t', args={'x': [Bad()]})])", "pass",
     "TypeError: provider FunctionProvider for A returned a tool call 't' whose args['x'][0] is Bad; a model's "
     "tool-call arguments are JSON"),
    ("'ok'", "ctx.state.append('history', Message(role='assistant', tool_calls=[ToolCall(name='t', args=cycle(), "
             "id='c1')]))",
     "TypeError: ctx.state bucket 'history': has a tool call 't' whose args['d']['d'] is args['d'] again (a cycle)"),
    # made without validation: the journal stopped ("repr boom", said as a full disk), events never arrived
    ("'ok'", "ctx.state.append('history', Message.model_construct(role='user', content=Bad()))",
     "TypeError: ctx.state bucket 'history': is a Message whose content is Bad <Bad>: Input should be a valid "
     "string (model_construct and model_copy do not validate"),
    ("ChatReply.model_construct(content='x', tool_calls=[], reasoning=None, "
     "usage=Usage.model_construct(prompt_tokens=Bad(), completion_tokens=1))", "pass",
     "TypeError: provider FunctionProvider for A returned a ChatReply whose usage.prompt_tokens is Bad <Bad>: "
     "Input should be a valid integer"),
    # a hook's return that cannot say itself: "repr boom" at __repr__, naming no hook
    ("'ok'", "return Bad()", "TypeError: A.after_response returned Bad <Bad> (defined at "),
    ("{'tool_calls': [{'name': 't', 'args': {}}]} if len(m) < 3 else 'ok'", "pass",
     "TypeError: A.after_tool returned a ToolOutput whose content is Bad <Bad>: Input should be a valid string"),
])
def test_values_no_model_or_message_could_hold_fail_the_run_saying_where(tmp_path, model, hook, said):
    """A flow's stand-in for the model (or a hook writing history, or a value made with model_construct) gave
    tool-call arguments holding themselves, or an object whose repr raised: the run failed inside the runtime
    with a RecursionError or "repr boom", and the worker said events "never arrived" (lost on their way to the
    app and the journal)."""
    after_tool = "ToolOutput.model_construct(content=Bad(), is_error=False)" if "after_tool" in said else "None"
    path = write(tmp_path, "from flowtui import ChatReply, Message, ToolCall, ToolOutput, Usage\n" + CYCLE + BAD_REPR
                 + "@tool\ndef t(x: str = '') -> str:\n    \"\"\"T.\"\"\"\n    return 'r'\n"
                 + f"@agent(provider=FunctionProvider(lambda m, t: {model}), prompt='p', tools=[t])\nclass A:\n"
                 + f"    def after_response(self, r, ctx):\n        {hook}\n"
                 + f"    def after_tool(self, result, ctx):\n        return {after_tool}\n" + WORKFLOW)
    res = flowtui("run", str(path), "--input", "x", "--json")
    assert res.returncode == 1, res.stderr
    assert said in res.stderr, res.stderr
    assert "never arrived" not in res.stderr and "Recursion" not in res.stderr and "boom" not in res.stderr
    lines = [json.loads(line) for line in res.stdout.splitlines()]
    assert [e["seq"] for e in lines] == list(range(1, len(lines) + 1)) and lines[-1]["type"] == "run.end"
