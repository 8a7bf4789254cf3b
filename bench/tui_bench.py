"""Benchmarks of the terminal app (a command, not a test).

    .venv/bin/python bench/tui_bench.py

1. From process start to first paint of `flowtui flows/revisao.py`, and to interactive (the
   status says `paused before PlannerAgent`: the run's own process has loaded the flow), against a
   minimal Textual app measured the same way in the same run (median of runs, ratios).
2. Stepping through the protocol: from the key written to the terminal to the new status drawn
   on it (median and worst of 40 steps).
3. The conversation pane with 10,000 messages: first paint, memory growth, append at 10k.
4. An event flood from the run's process: events per second the app absorbs while its longest
   event-loop stall stays under 20 ms, at rising rates, the full passes Python's collector
   made meanwhile (watched through ``gc.callbacks``: the usual cause of the longest stall), and
   the memory the app grew by an event (its resident size; every event is kept).
"""

from __future__ import annotations

import asyncio
import os
import pty
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MINIMAL_APP = '''
from textual.app import App
from textual.widgets import Static

class Minimal(App):
    def compose(self):
        yield Static("hello")

Minimal().run()
'''


class Pty:
    """A command on a pseudo-terminal, the bytes it writes, and a clock."""

    def __init__(self, cmd: list[str], size=(160, 48)) -> None:
        import fcntl
        import termios

        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
        env = dict(os.environ, TERM="xterm-256color")
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=ROOT,
                                     start_new_session=True)
        os.close(slave)
        self.master = master
        self.seen = b""

    def wait_for(self, marker: bytes, timeout: float = 60.0) -> float:
        """Seconds since start when ``marker`` arrives (looking only at what came after the last wait)."""
        import select

        self.seen = self.seen[-len(marker):]
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            if marker in self.seen:
                return time.perf_counter() - self.t0
            ready, _, _ = select.select([self.master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(self.master, 1 << 16)
                except OSError:
                    break
                if not chunk:
                    break
                self.seen += chunk
        raise RuntimeError(f"never saw {marker!r}")

    def wait_until(self, done, timeout: float = 60.0) -> bytes:
        """Read until ``done(what came since the last send)``; returns it."""
        import select

        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            if done(self.seen):
                return self.seen
            ready, _, _ = select.select([self.master], [], [], 0.2)
            if ready:
                chunk = os.read(self.master, 1 << 16)
                if not chunk:
                    break
                self.seen += chunk
        raise RuntimeError("the screen never showed it")

    def drain(self) -> bytes:
        """What arrived since the last send, reading what is waiting without blocking."""
        import select

        while select.select([self.master], [], [], 0)[0]:
            chunk = os.read(self.master, 1 << 16)
            if not chunk:
                break
            self.seen += chunk
        return self.seen

    def send(self, keys: bytes) -> float:
        self.seen = b""
        os.write(self.master, keys)
        return time.perf_counter()

    def close(self) -> None:
        import signal

        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        os.close(self.master)


def _timed(cmd: list[str], *markers: bytes) -> list[float]:
    term = Pty(cmd)
    try:
        return [term.wait_for(m) for m in markers]
    finally:
        term.close()


def _compiled() -> None:
    """flowtui's modules compiled to bytecode, as an install (or any earlier run) leaves them, like
    Textual's: with PYTHONDONTWRITEBYTECODE set, an editable checkout would otherwise compile every
    module at every start, which no user's start does."""
    import compileall

    for folder in ("runtime", "tui"):
        compileall.compile_dir(ROOT / folder, quiet=1)
    compileall.compile_file(ROOT / "__init__.py", quiet=1)


def bench_first_paint(rounds: int = 7) -> dict[str, float]:
    _compiled()
    flowtui = shutil.which("flowtui", path=os.path.dirname(sys.executable)) or "flowtui"
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(MINIMAL_APP)
        minimal = fh.name
    app_cmd = [flowtui, "flows/revisao.py", "--input", "Escreva sobre ctx.state", "--no-journal"]
    min_cmd = [sys.executable, minimal]
    # the left pane's title; the status once the run waits; the Static's text
    paint, ready, hello = b"Conversation", "paused before PlannerAgent".encode(), b"hello"
    _timed(min_cmd, hello), _timed(app_cmd, paint, ready)  # warm the file cache
    first, interactive, base = [], [], []
    for _ in range(rounds):
        base.append(_timed(min_cmd, hello)[0])
        a, b = _timed(app_cmd, paint, ready)
        first.append(a)
        interactive.append(b)
    os.unlink(minimal)
    f, i, m = statistics.median(first), statistics.median(interactive), statistics.median(base)
    return {"paint_ms": f * 1000, "interactive_ms": i * 1000, "minimal_ms": m * 1000, "ratio": f / m,
            "interactive_ratio": i / m}


def _not_running(out: bytes) -> bool:
    """The status last drawn is not ``running`` (a status that did not change is not drawn again)."""
    running = out.rfind(b"running")
    return running < 0 or max(out.rfind(b"paused"), out.rfind(b"finished")) > running


def bench_stepping(steps: int = 40) -> dict[str, float]:
    """``s`` on the offline example, through the protocol: key written -> the new pause drawn on the
    terminal (the control pane's ``events N`` moved on, and the status last drawn is no longer
    ``running``)."""
    import re

    flowtui = shutil.which("flowtui", path=os.path.dirname(sys.executable)) or "flowtui"
    term = Pty([flowtui, "flows/revisao.py", "--input", "Escreva sobre ctx.state", "--no-journal"])
    count = re.compile(rb"events (\d+)")
    lat = []
    try:
        term.wait_for("paused before PlannerAgent".encode())
        time.sleep(0.3)
        last = max((int(n) for n in count.findall(term.drain())), default=0)
        for _ in range(steps):
            sent = term.send(b"s")
            seen = term.wait_until(lambda out: max((int(n) for n in count.findall(out)), default=0) > last
                                   and _not_running(out))
            lat.append(time.perf_counter() - sent)
            last = max(int(n) for n in count.findall(seen))
            time.sleep(0.05)
            if b"finished" in term.drain():
                break
    finally:
        term.close()
    return {"median_ms": statistics.median(lat) * 1000, "worst_ms": max(lat) * 1000, "steps": len(lat)}


def _messages(n: int):
    from flowtui import Message, ToolCall

    out = []
    for i in range(n):
        kind = i % 4
        if kind == 0:
            out.append(Message(role="user", content=f"question {i}: what does ctx.state hold?"))
        elif kind == 1:
            out.append(Message(role="assistant", content=f"**Answer {i}**: history, memory and tasks.\n\n- one\n- two",
                               tool_calls=(ToolCall(name="record", args={"i": i}, id=f"c{i}"),)))
        elif kind == 2:
            out.append(Message(role="tool", content=f"recorded {i}\nline two\nline three\nline four",
                               tool_name="record", tool_call_id=f"c{i}"))
        else:
            out.append(Message(role="assistant", content=f"Plain reply number {i}. " * 6))
    return out


async def bench_conversation(n: int = 10_000) -> dict[str, float]:
    from textual.app import App
    from textual.geometry import Region

    from flowtui.tui.widgets.message_list import MessageList

    class Pane(App):
        def compose(self):
            yield MessageList(id="c")

    import rich.markdown  # noqa: F401  (the app imports it in a thread after its first paint)

    msgs = _messages(n)
    app = Pane()
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(MessageList)
        await pilot.pause(0.05)
        region = Region(0, 0, pane.size.width, pane.size.height)
        t0 = time.perf_counter()
        pane.set_messages(msgs, reset=True)
        pane.render_lines(region)
        first = time.perf_counter() - t0
        pane.set_messages([], reset=True)
        tracemalloc.start()  # again, under tracemalloc, for the memory the pane holds
        snap0 = tracemalloc.take_snapshot()
        pane.set_messages(msgs, reset=True)
        pane.render_lines(region)
        grown = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(snap0, "filename"))
        tracemalloc.stop()
        await pilot.pause(0.05)
        extra = _messages(n + 1)[-1]
        t0 = time.perf_counter()
        msgs.append(extra)
        pane.set_messages(msgs)
        pane.render_lines(region)
        append = time.perf_counter() - t0
        t0 = time.perf_counter()
        pane.set_messages(msgs + [extra])  # the widget's own work: data, layout, the new block
        append_widget = time.perf_counter() - t0
        t0 = time.perf_counter()
        pane.select(n // 2)
        pane.render_lines(region)
        jump = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(20):
            pane.action_page(1)
            pane.render_lines(region)
        page = (time.perf_counter() - t0) / 20
    return {"first_paint_ms": first * 1000, "memory_growth_mb": grown / 1e6, "append_ms": append * 1000,
            "append_widget_ms": append_widget * 1000,
            "jump_to_middle_ms": jump * 1000, "page_down_ms": page * 1000}


FLOOD_FLOW = """
import time
from flowtui import FunctionProvider, agent, workflow

RATE, SECONDS = {rate}, {seconds}

class A:
    def after_response(self, response, ctx):
        total = int(RATE * SECONDS)
        start = time.perf_counter()
        for i in range(total):
            if i % 1000 == 0:  # paced: about RATE events a second, in millisecond bursts
                while time.perf_counter() < start + i / RATE:
                    time.sleep(0.0002)
            if i % 10 == 0:
                ctx.state.append("memory", f"m{{i}}")
            else:
                ctx.counter = i

A = agent(provider=FunctionProvider(lambda m, t: "go"), prompt="p")(A)

@workflow(steps=[A])
class Flood:
    pass
"""


def _rss() -> int:
    """This process's resident memory, in bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def bench_events(rates=(25_000, 50_000, 100_000, 150_000, 200_000), seconds: float = 1.0,
                       read_first: float = 0.5) -> list[dict]:
    """A flow that emits ``rate`` events a second for ``seconds`` (a sync hook setting ctx fields and
    appending memory) runs in its own process; the app absorbs them through the pipe. Measured in
    the app's process: events folded per second, and the longest stall of its event loop.

    ``c`` is sent ``read_first`` seconds after the first pause is drawn, as a person reads it
    before pressing a key; meanwhile the app makes the full collection start-up owes (see
    ``tui/app.py``, ``_settle``). With ``read_first=0`` (a client faster than any person) that
    collection falls inside the flood."""
    from flowtui.runtime.protocol import Continue
    from flowtui.tui.app import make_app

    import gc

    full: list[float] = []  # the collector's full passes during a flood, in ms (observed, not changed)
    began: list[float] = [0.0]

    def watch_gc(phase: str, info: dict) -> None:
        if info["generation"] == 2:
            if phase == "start":
                began[0] = time.perf_counter()
            else:
                full.append((time.perf_counter() - began[0]) * 1000)

    results = []
    for rate in rates:
        with tempfile.TemporaryDirectory() as tmp:
            flow = Path(tmp) / "flood.py"
            flow.write_text(FLOOD_FLOW.format(rate=rate, seconds=seconds))
            app = make_app(str(flow), input="go", journal=None, cursor_blink=False)
            async with app.run_test(size=(160, 48)) as pilot:
                while app.client.view is None or app.client.view.status != "paused":
                    await pilot.pause(0.02)
                app.flush(everything=True)
                await asyncio.sleep(read_first)
                before = app.client.view.events
                gc.collect()
                rss_before = _rss()
                gc.callbacks.append(watch_gc)
                full.clear()
                app.client.send(Continue())
                worst = 0.0
                t0 = time.perf_counter()
                while app.client.view.status != "finished" and time.perf_counter() - t0 < seconds + 30:
                    a = time.perf_counter()
                    await asyncio.sleep(0.005)
                    worst = max(worst, time.perf_counter() - a - 0.005)
                while app.client.pending:
                    await asyncio.sleep(0.005)
                elapsed = time.perf_counter() - t0
                absorbed = app.client.view.events - before
                gc.callbacks.remove(watch_gc)
                gc.collect()
                kept = (_rss() - rss_before) / max(absorbed, 1)
            results.append({"offered_per_s": rate, "absorbed_per_s": absorbed / elapsed, "kept_b_per_event": kept,
                            "worst_stall_ms": worst * 1000, "backlog_s": elapsed - seconds,
                            "full_gc": len(full), "full_gc_ms": max(full, default=0.0)})
    return results


def main() -> None:
    print("flowtui TUI bench")
    fp = bench_first_paint()
    print(f"first paint: flowtui flows/revisao.py {fp['paint_ms']:.0f} ms, minimal Textual app {fp['minimal_ms']:.0f} ms, "
          f"ratio {fp['ratio']:.2f}; interactive (paused before PlannerAgent, the flow loaded in its own process) "
          f"{fp['interactive_ms']:.0f} ms, ratio {fp['interactive_ratio']:.2f}")
    st = bench_stepping()
    print(f"stepping through the protocol (key -> new status on the terminal): median {st['median_ms']:.1f} ms, "
          f"worst {st['worst_ms']:.1f} ms over {st['steps']} steps (target: median <= 30)")
    conv = asyncio.run(bench_conversation())
    print(f"conversation pane, 10,000 messages: first paint {conv['first_paint_ms']:.1f} ms (target <= 100), "
          f"memory growth {conv['memory_growth_mb']:.1f} MB (target <= 30), append at 10k "
          f"{conv['append_ms']:.2f} ms with a full repaint of the 160x48 pane "
          f"({conv['append_widget_ms']:.2f} ms without; target <= 5), jump to middle {conv['jump_to_middle_ms']:.1f} ms, "
          f"page down {conv['page_down_ms']:.1f} ms")
    rows = asyncio.run(bench_events())
    best = 0.0
    for r in rows:
        ok = r["worst_stall_ms"] < 20
        if ok:
            best = max(best, r["absorbed_per_s"])
        print(f"events: offered {r['offered_per_s']:>7,}/s absorbed {r['absorbed_per_s']:>9,.0f}/s "
              f"worst stall {r['worst_stall_ms']:5.1f} ms backlog {r['backlog_s']:+.2f} s {'ok' if ok else 'STALL'} "
              f"(full collections: {r['full_gc']}, longest {r['full_gc_ms']:.1f} ms; memory kept "
              f"{r['kept_b_per_event']:.0f} B an event)")
    print(f"events absorbed with every stall < 20 ms: {best:,.0f}/s (target >= 100,000)")
    (r,) = asyncio.run(bench_events(rates=(100_000,), read_first=0.0))
    print(f"c pressed the moment the first pause is drawn (no person is that fast): offered 100,000/s, "
          f"worst stall {r['worst_stall_ms']:.1f} ms (full collections: {r['full_gc']}, longest "
          f"{r['full_gc_ms']:.1f} ms: the one start-up owes)")


if __name__ == "__main__":
    main()
