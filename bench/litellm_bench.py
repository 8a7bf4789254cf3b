"""What flowtui adds to a litellm turn: a turn through LiteLLMProvider against a bare litellm call.

    python bench/litellm_bench.py [--turns 60] [--rounds 21] [--probe-gap]

Both sides use litellm's mock path (``mock_response``), so no network and no
key: the flowtui side runs a one-agent loop whose LiteLLMProvider passes
``mock_response`` through; the reference calls ``litellm.acompletion`` directly
with the same growing conversation, in the same process, in alternating
rounds. Prints the median ms per turn for both and their ratio (target <= 1.05).
Then the litellm layer alone: LiteLLMProvider.complete against a bare call,
alternating call by call over the same conversation. With ``--probe-gap``,
bare calls with a fixed amount of CPU work between them: what any work
between two calls costs per turn on this machine.
"""

import argparse
import asyncio
import gc
import statistics
import time

from flowtui import LiteLLMProvider, agent, bootstrap, loop, workflow


def build(turns: int):
    provider = LiteLLMProvider("openai/bench-model", mock_response="texto", retry=False)

    @agent(provider=provider, prompt="Você escreve.")
    class Escritor:
        pass

    @workflow(steps=[loop(steps=[Escritor], until=lambda ctx: False, max_iterations=turns)])
    class Bench:
        pass

    return bootstrap(Bench)


async def flowtui_turns(turns: int) -> list[float]:
    """Seconds per turn, end of one agent turn to the end of the next (all of the engine's work between)."""
    app = build(turns)
    stamps: list[float] = []

    def on_event(event):
        if event.type == "node.end" and event.kind == "agent":
            stamps.append(time.perf_counter())

    app.subscribe(on_event)
    await app.run("Escreva sobre ctx.state")
    return [b - a for a, b in zip(stamps, stamps[1:])]


async def bare_turns(turns: int) -> list[float]:
    """Seconds per bare litellm call over the same growing conversation."""
    import litellm

    messages = [{"role": "system", "content": "Você escreve."}, {"role": "user", "content": "Escreva sobre ctx.state"}]
    times = []
    for _ in range(turns):
        t0 = time.perf_counter()
        resp = await litellm.acompletion(model="openai/bench-model", messages=list(messages), mock_response="texto")
        messages.append({"role": "assistant", "content": resp.choices[0].message.content})
        times.append(time.perf_counter() - t0)
    return times


async def provider_vs_bare(calls: int) -> tuple[list[float], list[float]]:
    """Seconds per call of LiteLLMProvider.complete and of a bare acompletion, alternating call by call.

    The same conversation both ways: this is what the litellm layer (request
    building, retries, parsing the reply, cost) adds to one model call.
    """
    import litellm

    from flowtui import Message
    from flowtui.runtime.providers.base import ChatRequest

    provider = LiteLLMProvider("openai/bench-model", mock_response="texto", retry=False)
    history = [Message(role="system", content="Você escreve."), Message(role="user", content="Escreva sobre ctx.state")]
    dicts = [{"role": m.role, "content": m.content} for m in history]
    ours, bare = [], []
    for _ in range(calls):
        request = ChatRequest(agent="Escritor", turn=len(history), messages=list(history))
        t0 = time.perf_counter()
        reply = await provider.complete(request)
        t1 = time.perf_counter()
        await litellm.acompletion(model="openai/bench-model", messages=list(dicts), mock_response="texto")
        t2 = time.perf_counter()
        ours.append(t1 - t0)
        bare.append(t2 - t1)
        history.append(Message(role="assistant", content=reply.content))
        dicts.append({"role": "assistant", "content": reply.content})
    return ours, bare


async def bare_with_gap(turns: int, gap_us: int) -> list[float]:
    """Like :func:`bare_turns`, with ``gap_us`` of CPU work (a busy loop) after each call."""
    import litellm

    messages = [{"role": "user", "content": "Escreva sobre ctx.state"}]
    times = []
    for _ in range(turns):
        t0 = time.perf_counter()
        resp = await litellm.acompletion(model="openai/bench-model", messages=list(messages), mock_response="texto")
        end = time.thread_time() + gap_us / 1e6
        while time.thread_time() < end:
            pass
        messages.append({"role": "assistant", "content": resp.choices[0].message.content})
        times.append(time.perf_counter() - t0)
    return times


def probe_gap(rounds: int) -> None:
    """What CPU work between two bare calls costs per turn: the floor under any engine's ratio here."""
    gaps = (0, 50, 100, 150, 300)
    per: dict[int, list[float]] = {g: [] for g in gaps}
    for _ in range(rounds):
        for g in gaps:
            per[g] += asyncio.run(bare_with_gap(40, g))
    base = statistics.median(per[0])
    for g in gaps:
        m = statistics.median(per[g])
        print(f"bare calls with {g:3d} us of CPU between them: {m * 1000:6.3f} ms/turn "
              f"(+{(m - base) * 1e6:4.0f} us, ratio {m / base:.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=60, help="turns per round")
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--probe-gap", action="store_true",
                        help="also time bare calls with a fixed CPU gap between them")
    args = parser.parse_args()
    if args.turns < 1 or args.rounds < 1:
        parser.error("--turns and --rounds must be at least 1")
    from flowtui.runtime.providers._litellm import load_litellm

    load_litellm()  # import and silence litellm once, outside the timings
    asyncio.run(flowtui_turns(20))
    asyncio.run(bare_turns(20))
    ours, bare = [], []
    # litellm's own time per call drifts by +-20% from one batch to the next here,
    # so the two sides alternate in many short rounds and the medians are compared.
    for _ in range(args.rounds):
        gc.collect()
        bare += asyncio.run(bare_turns(args.turns))
        gc.collect()
        ours += asyncio.run(flowtui_turns(args.turns))
    ours_ms = statistics.median(ours) * 1000
    bare_ms = statistics.median(bare) * 1000
    print(f"{args.rounds} alternating rounds of {args.turns} turns; median time per turn")
    print(f"bare litellm.acompletion (mock): {bare_ms:7.3f} ms/turn")
    print(f"flowtui turn via LiteLLMProvider: {ours_ms:7.3f} ms/turn")
    print(f"ratio flowtui/bare: {ours_ms / bare_ms:.3f}   (target <= 1.05)")
    ours, bare = [], []
    for _ in range(args.rounds):
        a, b = asyncio.run(provider_vs_bare(args.turns))
        ours += a
        bare += b
    ours_ms = statistics.median(ours) * 1000
    bare_ms = statistics.median(bare) * 1000
    print("the litellm layer alone, call by call: LiteLLMProvider.complete "
          f"{ours_ms:7.3f} ms/call, bare {bare_ms:7.3f} ms/call, ratio {ours_ms / bare_ms:.3f}")
    if args.probe_gap:
        probe_gap(max(args.rounds // 2, 5))


if __name__ == "__main__":
    main()
