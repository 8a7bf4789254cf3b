"""Injection errors fail before the run starts and name the class and the parameter."""

from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from flowtui import (
    Context, FunctionProvider, InjectionError, Input, State, agent, bootstrap, loop, tool, workflow,
)

P = FunctionProvider(lambda m, t: "ok")


class S(BaseModel):
    x: int = 0


def test_state_marker_without_workflow_state():
    @agent(provider=P, prompt="p")
    class Revisor:
        def __init__(self, s: S = State()):
            self.s = s

    @workflow(steps=[Revisor])
    class W:
        pass

    with pytest.raises(InjectionError, match=r"Revisor: State\(\) in __init__ parameter 's'.*W declares no state"):
        bootstrap(W)


def test_two_parameter_until_without_state():
    @agent(provider=P, prompt="p")
    class A:
        pass

    @workflow(steps=[loop(steps=[A], until=lambda ctx, s: True)])
    class W:
        pass

    with pytest.raises(InjectionError, match=r"until=.*takes \(ctx, s\).*W declares no state"):
        bootstrap(W)


def test_an_until_taking_three_without_state_is_told_it_takes_one_too_many():
    """It was told to take (ctx, s) for want of a state, when a state would not have made it callable."""
    @agent(provider=P, prompt="p")
    class A:
        pass

    @workflow(steps=[loop(steps=[A], until=lambda ctx, s, extra: True)])
    class W:
        pass

    with pytest.raises(InjectionError, match=r"loop\(until=...\) needs s, extra, which flowtui does not pass: it calls "
                                             r"until\(ctx\); give s a default or take it out"):
        bootstrap(W)

    @workflow(steps=[loop(steps=[A], until=lambda *args: True)])
    class V:
        pass

    with pytest.raises(InjectionError, match=r"until=.*takes \(ctx, s\).*V declares no state"):  # (as it was)
        bootstrap(V)


def test_context_marker_in_a_constructor():
    @agent(provider=P, prompt="p")
    class A:
        def __init__(self, ctx=Context()):
            self.ctx = ctx

    @workflow(steps=[A])
    class W:
        pass

    with pytest.raises(InjectionError, match=r"A: Context\(\) in __init__ parameter 'ctx'.*before its ctx exists"):
        bootstrap(W)


def test_state_in_tool_execute_without_state_and_annotated_markers():
    class Args(BaseModel):
        q: str

    @tool(name="t", schema=Args)
    class T:
        def execute(self, args: Annotated[Args, Input()], s: Annotated[S, State()]):
            return "x"

    @agent(provider=P, prompt="p", tools=[T])
    class A:
        pass

    @workflow(steps=[A])
    class W:
        pass

    with pytest.raises(InjectionError, match=r"T: State\(\) in execute\(\) parameter 's'"):
        bootstrap(W)

    @workflow(state=S, steps=[A])
    class W2:
        pass

    bootstrap(W2)  # Annotated markers are understood


class ReadArgs(BaseModel):
    path: str


def _bootstrap_with(tool_cls):
    @agent(provider=P, prompt="p", tools=[tool_cls])
    class A:
        pass

    @workflow(steps=[A])
    class W:
        pass

    return bootstrap(W)


def test_a_tool_class_whose_arguments_are_a_model_but_that_gives_no_schema_is_refused_saying_what_to_add():
    """It loaded: the model was told the tool takes no arguments, and execute got a dict (args.path
    failed in the run, told to the model as the tool's failure)."""
    @tool(name="read", description="Reads a file.")
    class Read:
        def execute(self, args: ReadArgs = Input()):
            return args.path

    with pytest.raises(InjectionError, match=r"Read: execute\(\) parameter 'args' is annotated ReadArgs, but the "
                                             r"tool has no schema=.*add schema=ReadArgs to @tool"):
        _bootstrap_with(Read)

    @tool(name="read", description="Reads a file.")
    class Unmarked:
        def execute(self, args: ReadArgs):
            return args.path

    with pytest.raises(InjectionError, match=r"add schema=ReadArgs"):
        _bootstrap_with(Unmarked)


def test_a_tool_class_taking_a_plain_argument_with_no_schema_is_refused_saying_how_to_declare_it():
    """execute(self, question: str) loaded: the model was sent no parameters, and question got the
    arguments' dict (a newcomer's trial: a child workflow's input became '{"question": ...}')."""
    @tool(name="echo", description="Echo.")
    class Echo:
        def execute(self, question: str):
            return question

    with pytest.raises(InjectionError, match=r"Echo: execute\(\) parameter 'question' is annotated str, but the "
                                             r"tool has no schema=.*Declare them: schema=AModel"):
        _bootstrap_with(Echo)

    for annotation in ("dict", "dict[str, Any]", "Any", None):  # the arguments' dict, as it is: still taken
        body = f"def execute(self, args{': ' + annotation if annotation else ''}):\n    return str(args)"
        space: dict = {"Any": Any}
        exec(body, space)
        taken = tool(name="raw", description="Raw.")(type("Raw", (), {"execute": space["execute"]}))
        _bootstrap_with(taken)


def test_a_tool_class_with_ctx_annotated_but_not_marked_is_refused_as_a_tool_function_is():
    """ctx: AgentContext = None got None in the run (a tool function with it is refused at load)."""
    from flowtui import AgentContext

    @tool(name="read", description="Reads a file.", schema=ReadArgs)
    class Read:
        def execute(self, args: ReadArgs = Input(), ctx: AgentContext = None):
            return ctx.state

    with pytest.raises(InjectionError, match=r"Read: execute\(\) parameter 'ctx' is annotated AgentContext but "
                                             r"not marked.*write ctx: AgentContext = Context\(\)"):
        _bootstrap_with(Read)


def test_a_tool_class_taking_each_argument_with_input_is_told_they_come_in_one_model():
    """x: int = Input(), y: str = Input() got the whole arguments dict in each."""
    @tool(name="add", description="Adds.")
    class Add:
        def execute(self, x: int = Input(), y: str = Input()):
            return f"{x}{y}"

    with pytest.raises(InjectionError, match=r"Add: execute\(\) marks 2 parameters Input\(\) \(x, y\); one gets"):
        _bootstrap_with(Add)


def test_error_carries_file_and_line_of_the_class():
    @agent(provider=P, prompt="p")
    class Lost:
        def __init__(self, s: S = State()):
            pass

    @workflow(steps=[Lost])
    class W:
        pass

    with pytest.raises(InjectionError) as info:
        bootstrap(W)
    assert info.value.file.endswith("test_injection.py") and info.value.line > 0
    assert str(info.value).startswith(f"{info.value.file}:{info.value.line}: Lost: ")


# --- State() annotated with a class that is not the workflow's state ------------------------------

class Other(BaseModel):
    b: int = 0


class SBase(BaseModel):
    pass


class SChild(SBase):
    x: int = 0


def test_state_annotated_with_another_class_is_a_load_error_naming_class_parameter_and_both_types():
    @agent(provider=P, prompt="p")
    class Wrong:
        def __init__(self, s: Other = State()):
            self.s = s

    @workflow(state=S, steps=[Wrong])
    class W:
        pass

    with pytest.raises(InjectionError) as info:
        bootstrap(W)
    message = str(info.value)
    assert "Wrong: State() in __init__ parameter 's' is annotated Other, but workflow W's state is S" in message
    assert "annotate it s: S = State()" in message
    assert info.value.file.endswith("test_injection.py") and info.value.line > 0 and info.value.cls == "Wrong"


def test_state_annotated_wrongly_in_a_tool_execute_a_tool_function_and_an_optional():
    @tool(name="t")
    class T:
        async def execute(self, q: dict = Input(), s: Annotated[Other, State()] = None):
            return q

    @agent(provider=P, prompt="p", tools=[T])
    class A:
        pass

    @workflow(state=S, steps=[A])
    class W:
        pass

    with pytest.raises(InjectionError, match=r"T: State\(\) in execute\(\) parameter 's' is annotated Other, "
                                             r"but workflow W's state is S"):
        bootstrap(W)

    @tool(name="f")
    def f(q: str, s: Other | None = State()):
        return q

    @agent(provider=P, prompt="p", tools=[f])
    class B:
        pass

    @workflow(state=S, steps=[B])
    class W2:
        pass

    with pytest.raises(InjectionError, match=r"State\(\) in f\(\) parameter 's' is annotated Other \| None"):
        bootstrap(W2)


def test_state_annotated_with_the_state_class_a_base_of_it_or_nothing_loads():
    @agent(provider=P, prompt="p")
    class Exact:
        def __init__(self, s: SChild = State()):
            self.s = s

    @agent(provider=P, prompt="p")
    class Base:
        def __init__(self, s: SBase = State()):
            self.s = s

    @agent(provider=P, prompt="p")
    class Loose:
        def __init__(self, s=State(), t: Annotated[BaseModel, State()] = None, u: SChild | None = State()):
            self.s = s

    @workflow(state=SChild, steps=[Exact, Base, Loose])
    class W:
        pass

    bootstrap(W)


def test_the_loader_refuses_a_flow_file_with_a_wrongly_typed_state_with_exit_code_2(tmp_path):
    import subprocess
    import sys

    flow = tmp_path / "wrong_state.py"
    flow.write_text(
        "from pydantic import BaseModel\n"
        "from flowtui import FunctionProvider, State, agent, workflow\n"
        "class S(BaseModel):\n    a: int = 0\n"
        "class Other(BaseModel):\n    b: int = 0\n"
        "@agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt='p')\n"
        "class A:\n"
        "    def __init__(self, s: Other = State()):\n"
        "        self.s = s\n"
        "@workflow(state=S, steps=[A])\n"
        "class W:\n    pass\n")
    from flowtui.runtime.loader import load_flow

    with pytest.raises(InjectionError) as info:
        load_flow(str(flow))
    assert (info.value.file, info.value.line, info.value.cls) == (str(flow), 9, "A")
    done = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run", str(flow),
                           "--input", "hi", "--no-journal"], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"{flow}:9: A: State() in __init__ parameter 's' is annotated Other, but workflow W's state is S" \
        in done.stderr
    assert "Traceback" not in done.stderr
