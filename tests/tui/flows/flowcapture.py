"""Shared by the tests and their test flows, across the process boundary (the flows run in a worker
process): what the model was sent, knobs the tests turn, and a gate a streaming model waits at.

The tests' conftest points ``FLOWCAPTURE_DIR`` at a fresh folder for each test; the worker inherits it.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path


def _dir() -> Path | None:
    where = os.environ.get("FLOWCAPTURE_DIR")
    return Path(where) if where else None


def record(agent: str, messages: list) -> None:
    """In a flow: note the request ``agent``'s model received."""
    folder = _dir()
    if folder is not None:
        with (folder / "requests.jsonl").open("a", encoding="utf-8") as f:
            f.write(json.dumps([agent, [m.model_dump(mode="json") for m in messages]]) + "\n")


def requests() -> list[tuple[str, list]]:
    """Every request recorded so far, in order, as (agent, [Message])."""
    from flowtui import Message

    folder = _dir()
    path = folder / "requests.jsonl" if folder is not None else None
    if path is None or not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        agent, messages = json.loads(line)
        out.append((agent, [Message.model_validate(m) for m in messages]))
    return out


def count(agent: str) -> int:
    return sum(1 for who, _ in requests() if who == agent)


def knob(name: str, default: float = 0.0) -> float:
    """A number a test set with ``FLOWCAPTURE_<NAME>`` (0 when unset)."""
    return float(os.environ.get(f"FLOWCAPTURE_{name.upper()}", default))


async def gate(i: int) -> None:
    """In a streaming model: wait until the test opens gate ``i`` (when gates are on)."""
    folder = _dir()
    if folder is None or not knob("gates"):
        return
    while not (folder / f"gate{i}").exists():
        await asyncio.sleep(0.01)


def held_at_gate(name: str) -> None:
    """In a sync tool, when ``FLOWCAPTURE_TOOL_GATE`` is set: block the run's process until the test
    opens gate ``name``."""
    import time

    folder = _dir()
    if folder is None or not knob("tool_gate"):
        return
    while not (folder / f"gate{name}").exists():
        time.sleep(0.01)


def open_gate(i: int | str) -> None:
    """In a test: let the model past gate ``i``."""
    folder = _dir()
    assert folder is not None
    (folder / f"gate{i}").touch()


def fake_clock() -> None:
    """In a flow's process: node durations read from a clock that moves 1 ms at each reading, so
    what the node tree and the event log show is the same in every run (snapshots)."""
    import itertools
    import time
    import types

    from flowtui.runtime import bus, control, nodes

    ticks = itertools.count()
    clock = types.SimpleNamespace(perf_counter=lambda: next(ticks) / 1000, monotonic=time.monotonic, time=time.time)
    nodes.time = control.time = bus.time = clock
