"""What flowtui adds to a litellm turn: a turn through LiteLLMProvider against a bare litellm call.

    python bench/litellm_bench.py [--turns 300]

Both sides use litellm's mock path (``mock_response``), so no network and no
key: the flowtui side runs a one-agent loop whose LiteLLMProvider passes
``mock_response`` through; the reference calls ``litellm.acompletion`` directly
with the same growing conversation, in the same process. Prints ms per turn for
both and their ratio (target <= 1.05).
"""

import argparse
import asyncio
import gc
import time

from runtime import LiteLLMProvider, agent, bootstrap, loop, workflow


def build(turns: int):
    provider = LiteLLMProvider("openai/bench-model", mock_response="texto", retry=False)

    @agent(provider=provider, prompt="Você escreve.")
    class Escritor:
        pass

    @workflow(steps=[loop(steps=[Escritor], until=lambda ctx: False, max_iterations=turns)])
    class Bench:
        pass

    return bootstrap(Bench)


async def flowtui_turns(turns: int) -> float:
    app = build(turns)
    events = 0

    def count(event):
        nonlocal events
        events += 1

    app.subscribe(count)
    t0 = time.perf_counter()
    await app.run("Escreva sobre ctx.state")
    return time.perf_counter() - t0


async def bare_turns(turns: int) -> float:
    import litellm

    messages = [{"role": "system", "content": "Você escreve."}, {"role": "user", "content": "Escreva sobre ctx.state"}]
    t0 = time.perf_counter()
    for _ in range(turns):
        resp = await litellm.acompletion(model="openai/bench-model", messages=list(messages), mock_response="texto")
        messages.append({"role": "assistant", "content": resp.choices[0].message.content})
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from runtime.providers._litellm import load_litellm

    load_litellm()  # import and silence litellm once, outside the timings
    asyncio.run(flowtui_turns(20))
    asyncio.run(bare_turns(20))
    ours, bare = [], []
    for _ in range(args.rounds):  # interleave so drift hits both sides alike
        gc.collect()
        bare.append(asyncio.run(bare_turns(args.turns)))
        gc.collect()
        ours.append(asyncio.run(flowtui_turns(args.turns)))
    ours_ms = min(ours) / args.turns * 1000
    bare_ms = min(bare) / args.turns * 1000
    print(f"turns: {args.turns}, best of {args.rounds} rounds")
    print(f"bare litellm.acompletion (mock): {bare_ms:7.3f} ms/turn")
    print(f"flowtui turn via LiteLLMProvider: {ours_ms:7.3f} ms/turn")
    print(f"ratio flowtui/bare: {ours_ms / bare_ms:.3f}   (target <= 1.05)")


if __name__ == "__main__":
    main()
