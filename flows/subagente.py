"""An isolated sub-agent: a tool that runs a whole child workflow.

    flowtui flows/subagente.py --input "Resuma o que é ctx.state"

The researcher runs with its own ctx, state and history; the parent only
sees its output, as the tool's result. Its events join the parent's stream,
its workflow node under the tool's node.
"""

from pydantic import BaseModel, Field

from pesquisa import PesquisaWorkflow  # the child lives in its own file: one workflow per flow file

from flowtui import (
    AgentContext, Context, Input, ScriptedProvider, WorkflowRuntime, agent, loop, tool, until_answered, workflow,
)


class PesquisaArgs(BaseModel):
    pergunta: str = Field(description="the question to research, self-contained")


@tool(name="pesquisar", description="Delegates a research question to an isolated researcher.",
      schema=PesquisaArgs)
class PesquisarTool:
    def __init__(self, runtime: WorkflowRuntime):
        self.runtime = runtime

    async def execute(self, args: PesquisaArgs = Input(), ctx: AgentContext = Context()):
        # The child starts knowing nothing: pass it what it needs.
        ctx.pesquisas = ctx.get("pesquisas", 0) + 1
        return await self.runtime.run(PesquisaWorkflow, input=args.pergunta, memory={"pedido_original": "resumo"})


@agent(provider=ScriptedProvider([
    {"content": "", "tool_calls": [{"name": "pesquisar", "args": {"pergunta": "O que é ctx.state?"}}]},
    "ctx.state é a conversa que o modelo vê: history, memory (system no topo) e tasks.",
]), prompt="You answer using the pesquisar tool for facts.", tools=[PesquisarTool])
class CoordenadorAgent:
    pass


@workflow(steps=[loop(steps=[CoordenadorAgent], until=until_answered, max_iterations=4)])
class CoordenadorWorkflow:
    """Delegate, then answer."""
