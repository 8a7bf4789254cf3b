"""Re-executing a run against its journal, against the original run.

    python bench/resume_bench.py [--events 2000] [--repeat 5]

A review loop (writer, reviewer; the reviewer calls a tool every round and a
hook counts rounds) with a model that answers at once, run until its journal
holds about ``--events`` events. Then, in the same process, the same flow is
re-executed against that journal to its end (``resume_from=``): every model
reply and tool result served from the journal, every event compared with the
recorded one. Both runs write a journal. The best of ``--repeat`` of each is
compared. Target: re-execution <= 2x the original run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel

from flowtui import FunctionProvider, State, agent, bootstrap, loop, tool, workflow


class Rounds(BaseModel):
    aprovado: bool = False
    rodadas: int = 0


def build(iterations: int):
    def model(messages, tools):
        if tools and messages[-1].role != "tool":  # the reviewer notes a problem, then answers
            return {"content": "", "tool_calls": [{"name": "anotar", "args": {"texto": "vírgula"}}]}
        return "texto revisado"

    @tool(name="anotar", description="Notes a problem.")
    def anotar(texto: str) -> str:
        return f"anotado: {texto}"

    @agent(provider=FunctionProvider(model), prompt="Você escreve.")
    class Escritor:
        pass

    @agent(provider=FunctionProvider(model), prompt="Você revisa.", tools=[anotar])
    class Revisor:
        def __init__(self, s: Rounds = State()):
            self.s = s

        def after_response(self, resposta, ctx):
            self.s.rodadas += 1
            self.s.aprovado = self.s.rodadas >= iterations

    @workflow(state=Rounds, steps=[loop(steps=[Escritor, Revisor], until=lambda ctx, s: s.aprovado,
                                        max_iterations=iterations)])
    class Revisao:
        pass

    return bootstrap(Revisao)


def events_in(journal: Path) -> int:
    return sum(1 for _ in journal.open(encoding="utf-8"))


def iterations_for(target: int, folder: Path) -> int:
    """How many rounds make a journal of about ``target`` events (from a short run's size)."""
    probe = folder / "probe.jsonl"
    asyncio.run(build(10).run("Escreva", journal=probe))
    per_round = (events_in(probe) - 10) / 10
    return max(1, round(target / per_round))


async def timed(coro) -> float:
    start = time.perf_counter()
    await coro
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if args.events < 1 or args.repeat < 1:
        parser.error("--events and --repeat must be at least 1")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        iterations = iterations_for(args.events, folder)
        original, again = [], []
        for n in range(args.repeat):
            first, second = folder / f"first{n}.jsonl", folder / f"second{n}.jsonl"
            original.append(asyncio.run(timed(build(iterations).run("Escreva", journal=first))))
            events: list = []
            again.append(asyncio.run(timed(build(iterations).run(journal=second, resume_from=str(first),
                                                                 on_event=events.append))))
            if any(e.type == "run.diverged" for e in events):
                raise SystemExit("the re-execution diverged from its own journal: a bug")
            if n == 0:
                start = json.loads(second.open(encoding="utf-8").readline())
                assert start["resumed_from"]["at"] == events_in(first), start
        size = events_in(first)
    best_original, best_again = min(original), min(again)
    print(f"journal: {size} events ({iterations} rounds)")
    print(f"  original run, instant model:   {best_original * 1000:8.1f} ms (best of {args.repeat})")
    print(f"  re-executed against its journal: {best_again * 1000:6.1f} ms (best of {args.repeat})")
    print(f"  ratio re-execution/original: {best_again / best_original:.2f}   (target <= 2.0)")


if __name__ == "__main__":
    main()
