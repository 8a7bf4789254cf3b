"""Runtime overhead per turn: flowtui's review loop against the same loop in LangGraph.

    python bench/runtime_bench.py [--runs 300] [--turns 2000]

Both run two agents (writer, reviewer) in a loop, with a fake model that
answers at once, in the same process:

- flowtui: FunctionProvider, the workflow state observed, an event per
  mutation, one subscriber attached (it counts events);
- LangGraph: a StateGraph with two nodes calling langchain's fake chat model,
  messages accumulated with the add_messages reducer.

Two workloads:

1. **Short runs** (the one users have, and the headline): the seed's examples
   write *sync* hooks (``def after_response``), and flows are short runs
   started often. ``--runs`` runs of 10 turns each (5 rounds of writer and
   reviewer), each with its per-run start-up (``app.run`` / ``graph.invoke``
   on an app bootstrapped / a graph compiled once), in five batches that
   alternate with LangGraph's; the median ratio. Target: ratio <= 0.10.
2. **A long run**: one run of ``--turns`` turns over a growing history (async
   hooks); the ratio, and flowtui's per-turn cost after 1,000 turns of
   history against the start (target <= 1.2): the median CPU time of turns
   1,000-1,300 against turns 10-310, the median of three runs (a window of a
   few milliseconds of wall time moved with whatever else the machine ran).
3. **The long run through ``flowtui run``**, as the command line and the app
   run it: the flow in its own process, every event encoded (credentials
   redacted) onto the pipe to the command and into a journal. The same growth
   ratio, from the events' times (wall time, the median of three runs), and
   the journal's size. It shows what workload 2 leaves out: a chat node's
   start carries the whole request, so the journal grows with the square of
   the turns, and each line holding the history is written to the journal and
   the pipe, and read by the command (a history is encoded once, part by part;
   the copies and the pipe are what still grow).

Needs the bench extra: pip install -e '.[bench]'.
"""


import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel

from flowtui import FunctionProvider, State, agent, bootstrap, loop, workflow


class RevisaoState(BaseModel):
    aprovado: bool = False
    rodadas: int = 0


def build_flowtui_short(rounds: int):
    """The review loop as the seed writes it: a sync model stand-in and a sync hook."""

    def model(messages, tools):
        return "texto"

    provider = FunctionProvider(model)

    @agent(provider=provider, prompt="Você escreve.")
    class Escritor:
        pass

    @agent(provider=provider, prompt="Você revisa.")
    class Revisor:
        def __init__(self, s: RevisaoState = State()):
            self.s = s

        def after_response(self, resposta, ctx):
            self.s.rodadas += 1
            self.s.aprovado = self.s.rodadas >= rounds

    @workflow(state=RevisaoState, steps=[loop(steps=[Escritor, Revisor], until=lambda ctx, s: s.aprovado,
                                              max_iterations=rounds)])
    class Revisao:
        pass

    return bootstrap(Revisao)


def short_flowtui(runs: int, rounds: int) -> tuple[float, int]:
    app = build_flowtui_short(rounds)
    count = 0

    def subscriber(event):
        nonlocal count
        count += 1

    app.subscribe(subscriber)

    async def all_runs() -> float:
        t0 = time.perf_counter()
        for _ in range(runs):
            await app.run("Escreva sobre ctx.state")
        return time.perf_counter() - t0

    return asyncio.run(all_runs()), count


def langgraph_graph(rounds: int):
    from typing import Annotated, TypedDict

    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.messages import SystemMessage
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages

    model = FakeListChatModel(responses=["texto"])

    class GraphState(TypedDict):
        messages: Annotated[list, add_messages]
        rodadas: int
        aprovado: bool

    def escritor(state: GraphState):
        reply = model.invoke([SystemMessage("Você escreve."), *state["messages"]])
        return {"messages": [reply]}

    def revisor(state: GraphState):
        reply = model.invoke([SystemMessage("Você revisa."), *state["messages"]])
        rodadas = state["rodadas"] + 1
        return {"messages": [reply], "rodadas": rodadas, "aprovado": rodadas >= rounds}

    graph = StateGraph(GraphState)
    graph.add_node("escritor", escritor)
    graph.add_node("revisor", revisor)
    graph.add_edge(START, "escritor")
    graph.add_edge("escritor", "revisor")
    graph.add_conditional_edges("revisor", lambda s: END if s["aprovado"] else "escritor")
    return graph.compile()


def short_langgraph(runs: int, rounds: int) -> float:
    from langchain_core.messages import HumanMessage

    graph = langgraph_graph(rounds)
    t0 = time.perf_counter()
    for _ in range(runs):
        graph.invoke({"messages": [HumanMessage("Escreva sobre ctx.state")], "rodadas": 0, "aprovado": False},
                     {"recursion_limit": 4 * rounds + 10})
    return time.perf_counter() - t0


def build_flowtui(turns: int):
    iterations = turns // 2

    async def model(messages, tools):
        return "texto"

    provider = FunctionProvider(model)

    @agent(provider=provider, prompt="Você escreve.")
    class Escritor:
        pass

    @agent(provider=provider, prompt="Você revisa.")
    class Revisor:
        def __init__(self, s: RevisaoState = State()):
            self.s = s

        async def after_response(self, resposta, ctx):
            self.s.rodadas += 1
            self.s.aprovado = self.s.rodadas >= iterations

    @workflow(state=RevisaoState, steps=[loop(steps=[Escritor, Revisor], until=lambda ctx, s: s.aprovado,
                                              max_iterations=iterations)])
    class Revisao:
        pass

    return bootstrap(Revisao)


def run_flowtui(turns: int) -> tuple[float, list[float], int]:
    app = build_flowtui(turns)
    stamps: list[float] = []
    count = 0

    def subscriber(event):
        nonlocal count
        count += 1
        if event.type == "node.end" and event.kind == "agent":
            stamps.append(time.process_time())

    app.subscribe(subscriber)
    t0, c0 = time.perf_counter(), time.process_time()
    asyncio.run(app.run("Escreva sobre ctx.state"))
    total = time.perf_counter() - t0
    # each turn's CPU time in this process: what the run's growth costs, whatever else the machine runs
    per_turn = [b - a for a, b in zip([c0] + stamps, stamps)]
    return total, per_turn, count


def run_langgraph(turns: int) -> float:
    from langchain_core.messages import HumanMessage

    app = langgraph_graph(turns // 2)
    t0 = time.perf_counter()
    app.invoke({"messages": [HumanMessage("Escreva sobre ctx.state")], "rodadas": 0, "aprovado": False},
               {"recursion_limit": turns + 10})
    return time.perf_counter() - t0


# Workload 3's flow: workload 2's review loop, written as a flow file for `flowtui run`.
CLI_FLOW = """
from pydantic import BaseModel
from flowtui import FunctionProvider, State, agent, loop, workflow

class RevisaoState(BaseModel):
    aprovado: bool = False
    rodadas: int = 0

provider = FunctionProvider(lambda messages, tools: "texto")

@agent(provider=provider, prompt="Você escreve.")
class Escritor:
    pass

@agent(provider=provider, prompt="Você revisa.")
class Revisor:
    def __init__(self, s: RevisaoState = State()):
        self.s = s

    def after_response(self, resposta, ctx):
        self.s.rodadas += 1
        self.s.aprovado = self.s.rodadas >= ITERATIONS

@workflow(state=RevisaoState, steps=[loop(steps=[Escritor, Revisor], until=lambda ctx, s: s.aprovado,
                                          max_iterations=ITERATIONS)])
class Revisao:
    pass
"""


def run_cli(turns: int) -> tuple[float, list[float], int]:
    """One run of ``turns`` turns through ``flowtui run --json`` with a journal: the command's wall time,
    each turn's wall time from the events' times (stamped in the run's process), the journal's bytes."""
    with tempfile.TemporaryDirectory() as folder:
        flow, journal = Path(folder) / "revisao_bench.py", Path(folder) / "run.jsonl"
        flow.write_text(CLI_FLOW.replace("ITERATIONS", str(turns // 2)))
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "flowtui.tui.cli", "run", str(flow), "--input",
                               "Escreva sobre ctx.state", "--journal", str(journal), "--json"],
                              capture_output=True, cwd=folder)
        if done.returncode != 0:
            sys.exit(f"flowtui run failed (exit {done.returncode}):\n{done.stderr.decode(errors='replace')}")
        out = done.stdout
        total = time.perf_counter() - t0
        size = journal.stat().st_size
    stamps = [e["ts"] for e in map(json.loads, out.splitlines()) if e["type"] == "node.end" and e["kind"] == "agent"]
    return total, [b - a for a, b in zip(stamps, stamps[1:])], size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--turns", type=int, default=2000)
    args = parser.parse_args()
    if args.runs < 5:
        parser.error("--runs must be at least 5 (five alternated batches)")
    if args.turns < 1300:
        parser.error("--turns must be at least 1300 (the growth compares turns 1,000-1,300 with the start)")
    rounds = 5  # 10 turns a run
    short_flowtui(20, rounds)  # warm up imports and caches for both
    short_langgraph(20, rounds)
    # Alternated batches, the median of their ratios: one batch of each measured once swung with
    # whatever else the machine ran, and with when the collector's passes fell (LangGraph's time
    # a turn moved 300-450 us between runs of this bench).
    batch, pairs, events = max(args.runs // 5, 1), [], 0
    for _ in range(5):
        ours, events = short_flowtui(batch, rounds)
        pairs.append((ours, short_langgraph(batch, rounds)))
    turns_short = batch * 2 * rounds
    ours_us = statistics.median(o for o, _ in pairs) / turns_short * 1e6
    theirs_us = statistics.median(t for _, t in pairs) / turns_short * 1e6
    ratios = sorted(o / t for o, t in pairs)
    print(f"short runs: 5 x {batch} runs of {2 * rounds} turns, alternated, sync hooks, start-up included "
          f"({events / batch:.0f} events a run)")
    print(f"  flowtui:   {ours_us:8.1f} us/turn ({ours_us * 2 * rounds / 1e3:.2f} ms a run), median of 5")
    print(f"  langgraph: {theirs_us:8.1f} us/turn ({theirs_us * 2 * rounds / 1e3:.2f} ms a run), median of 5")
    print(f"  ratio flowtui/langgraph: {statistics.median(ratios):.3f}, median of 5 "
          f"({', '.join(f'{r:.3f}' for r in ratios)})   (target <= 0.10)")
    turns = args.turns
    run_flowtui(200)  # warm up imports and caches for both
    run_langgraph(20)
    ours_total, per_turn, events = run_flowtui(turns)
    theirs_total = run_langgraph(turns)
    ours_us = ours_total / turns * 1e6
    theirs_us = theirs_total / turns * 1e6
    growth = []  # three long runs: the median of their ratios
    for _ in range(3):
        start = statistics.median(per_turn[10:310]) * 1e6
        late = statistics.median(per_turn[1000:1300]) * 1e6
        growth.append((late / start, start, late))
        per_turn = run_flowtui(turns)[1]
    ratio, start, late = sorted(growth)[1]
    print(f"long run: {turns} turns, async hooks ({events / turns:.1f} events a turn)")
    print(f"  flowtui:   {ours_us:8.1f} us/turn")
    print(f"  langgraph: {theirs_us:8.1f} us/turn")
    print(f"  ratio flowtui/langgraph: {ours_us / theirs_us:.3f}")
    print(f"  flowtui median turn (CPU time) at start: {start:.1f} us, after 1,000 turns: {late:.1f} us, "
          f"ratio {ratio:.2f}, median of 3 runs ({', '.join(f'{g[0]:.2f}' for g in growth)})   (target <= 1.2)")
    growth = []
    for _ in range(3):
        total, per_turn, size = run_cli(turns)
        start = statistics.median(per_turn[10:310]) * 1e6
        late = statistics.median(per_turn[1000:1300]) * 1e6
        growth.append((late / start, start, late, total))
    ratio, start, late, total = sorted(growth)[1]
    print(f"long run through flowtui run (own process, events on the pipe and in a journal): {turns} turns")
    print(f"  flowtui run: {total / turns * 1e6:8.1f} us/turn, start-up included; journal {size / 1e6:.1f} MB")
    print(f"  median turn (wall time) at start: {start:.1f} us, after 1,000 turns: {late:.1f} us, "
          f"ratio {ratio:.2f}, median of 3 runs ({', '.join(f'{g[0]:.2f}' for g in growth)})")


if __name__ == "__main__":
    main()
