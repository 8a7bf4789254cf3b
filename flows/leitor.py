"""A tool-driven loop: the agent reads files until it can answer (``until_answered``).

    flowtui flows/leitor.py --input "Quantas rodadas o revisor precisa em revisao.py?"

Each step is one turn; the tool result reaches the model on the next turn, so
multi-step tool use is a loop that stops when a turn calls no tool. Offline:
the replies are scripted below (a wrong path first, to show a tool failure
as an observation the model recovers from).
"""

from pathlib import Path

from pydantic import BaseModel, Field

from flowtui import Input, ScriptedProvider, agent, loop, tool, until_answered, workflow

HERE = Path(__file__).parent


class LerArgs(BaseModel):
    caminho: str = Field(description="path relative to the flows folder, e.g. revisao.py")


@tool(name="ler_arquivo", description="Reads a file of the flows folder. Use before answering about code.",
      schema=LerArgs)
class LerArquivoTool:
    async def execute(self, args: LerArgs = Input()):
        path = (HERE / args.caminho).resolve()
        if HERE.resolve() not in path.parents:
            raise ValueError(f"{args.caminho} is outside the flows folder")
        if not path.is_file():
            raise ValueError(f"no file {args.caminho!r} in the flows folder")
        return path.read_text(encoding="utf-8")


SCRIPT = ScriptedProvider([
    {"content": "", "tool_calls": [{"name": "ler_arquivo", "args": {"caminho": "revisão.py"}}]},
    {"content": "O nome tem acento errado; tento de novo.",
     "tool_calls": [{"name": "ler_arquivo", "args": {"caminho": "revisao.py"}}]},
    "O loop de revisão roda no máximo 5 rodadas (max_iterations=5) e para quando o revisor aprova.",
])


@agent(provider=SCRIPT, prompt="Answer questions about the flows folder. Read files with ler_arquivo first.",
       tools=[LerArquivoTool])
class LeitorAgent:
    pass


@workflow(steps=[loop(steps=[LeitorAgent], until=until_answered, max_iterations=6)])
class LeitorWorkflow:
    """Read until answered."""
