"""The example flows run offline and deterministically."""

from pathlib import Path

import pytest

from flowtui.runtime.fold import RunView
from flowtui.runtime.loader import load_flow

FLOWS = Path(__file__).resolve().parent.parent / "flows"


async def run_flow(target, input):
    app = load_flow(str(FLOWS / target))
    view = RunView()
    events = []
    app.subscribe(lambda e: (view.apply(e), events.append(e)))
    out = await app.run(input, memory={"userId": "123"})
    return out, view, events


async def test_revisao_promotes_the_plan_and_approves_on_the_third_round():
    out, view, events = await run_flow("revisao.py", "Escreva sobre ctx.state")
    assert out.startswith("APROVADO")
    assert view.state["aprovado"] is True and view.state["rodadas"] == 3
    assert len(view.state["problemas"]) == 3
    assert view.memory[0] == "userId: 123" and view.memory[1].startswith("Plano a seguir:\n1.")
    assert [m.role for m in view.history][:2] == ["user", "assistant"]  # the plan left the transcript
    assert view.ctx["ultimo_problema"].startswith("Não diz")            # the tool wrote ctx
    loop_end = [e for e in events if e.type == "node.end" and e.kind == "loop"][0]
    assert loop_end.data["iterations"] == 3 and loop_end.data["stopped_by"] == "until"


async def test_leitor_recovers_from_a_tool_error_and_stops_when_answered():
    out, view, events = await run_flow("leitor.py", "Quantas rodadas?")
    assert "max_iterations=5" in out
    tools = [e for e in events if e.type == "node.end" and e.kind == "tool"]
    assert [t.status for t in tools] == ["error", "ok"]
    assert view.ctx["loop"]["stopped_by"] == "until"


async def test_subagente_runs_the_child_in_isolation():
    out, view, events = await run_flow("subagente.py", "Resuma ctx.state")
    assert out.startswith("ctx.state é a conversa")
    child_start = [e for e in events if e.type == "node.start" and e.name == "PesquisaWorkflow"][0]
    tool_start = [e for e in events if e.type == "node.start" and e.kind == "tool"][0]
    assert child_start.parent_id == tool_start.node_id and child_start.run_id != tool_start.run_id
    assert not any("O que é ctx.state?" == m.content for m in view.history if m.role == "user")
    assert view.ctx["pesquisas"] == 1


async def test_conta_reads_the_account_from_data_denies_the_cancel_and_closes_its_connection():
    app = load_flow(str(FLOWS / "conta.py"))
    events = []
    app.subscribe(events.append)
    run = app.prepare("Quero cancelar a fatura de 2025-03", data={"conta_id": "acme"})
    out = await run.execute()
    assert out == "A fatura de 2025-03 é R$ 1.200,00. Não permitido: só um atendente pode cancelar faturas."
    assert run.ctx.conexao.aberta is False  # closed by ctx.on_dispose when the run ended
    assert not any("acme" in m.model_dump_json() for m in run.state.history)  # the data never reached the model
    tools = [(e.name, e.status) for e in events if e.type == "node.end" and e.kind == "tool"]
    assert tools == [("faturas", "ok"), ("cancelar_fatura", "error")]
    allowed = await app.run("Quero cancelar a fatura de 2025-03", data={"conta_id": "acme", "papel": "atendente"})
    assert allowed.endswith("A fatura de 2025-03 foi cancelada.")


@pytest.mark.parametrize("flow", ["revisao.py", "leitor.py", "subagente.py", "pesquisa.py", "conta.py"])
def test_every_example_flow_loads(flow):
    assert load_flow(str(FLOWS / flow)).workflow.name


def test_a_scripted_run_never_imports_litellm():
    """The offline example runs end to end without litellm (seconds to import): scripted replies need none.
    (How long the run takes is bench/'s to measure.)"""
    import subprocess
    import sys

    code = """
import asyncio, sys
from flowtui.runtime.loader import load_flow
out = asyncio.run(load_flow(sys.argv[1]).run("Escreva sobre ctx.state"))
print("litellm" in sys.modules)
"""
    res = subprocess.run([sys.executable, "-c", code, str(FLOWS / "revisao.py")], capture_output=True,
                         text=True, timeout=300, check=True)
    assert res.stdout.split() == ["False"]


def test_the_first_litellm_call_imports_it_without_freezing_the_event_loop():
    """litellm takes seconds to import; the app's event loop must keep ticking meanwhile."""
    import subprocess
    import sys

    code = """
import asyncio, time
from flowtui import LiteLLMProvider, agent, bootstrap, workflow

@agent(provider=LiteLLMProvider("openai/offline", mock_response="oi", retry=False))
class Agente:
    pass

@workflow(steps=[Agente])
class Fluxo:
    pass

async def main():
    app = bootstrap(Fluxo)
    worst, done = 0.0, False
    async def ticker():
        nonlocal worst
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            worst, last = max(worst, now - last), now
    t = asyncio.create_task(ticker())
    await asyncio.sleep(0.02)  # the ticker is running before the run starts
    t0 = time.perf_counter()
    await app.run("oi")
    done = True
    await t
    print(worst, time.perf_counter() - t0)
asyncio.run(main())
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    worst, total = map(float, res.stdout.split())
    assert total > 1.0  # the import really happened inside the run
    assert worst < total / 2, (worst, total)  # (imported on the loop, the loop would wait it all)
