"""The child workflow that ``subagente.py``'s tool runs in isolation (also runnable alone)."""

from flowtui import ScriptedProvider, agent, workflow


@agent(provider=ScriptedProvider([
    "Resumo da pesquisa: ctx.state tem history, memory e tasks; memory vira a mensagem system do topo.",
]), prompt="You research one question and answer with a short summary.")
class PesquisadorAgent:
    pass


@workflow(steps=[PesquisadorAgent])
class PesquisaWorkflow:
    """The child: one researcher, its own history."""
