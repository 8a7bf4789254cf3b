"""Benchmarks of the terminal app (a command, not a test).

    .venv/bin/python bench/tui_bench.py

1. Time from process start to first paint of `flowtui flows/revisao.py`, against a
   minimal Textual app measured the same way in the same run (median of runs, ratio).
2. The conversation pane with 10,000 messages: first paint, memory growth, append at 10k.
3. Events per second absorbed by the app while the longest event-loop stall stays under 20 ms.
"""

from __future__ import annotations

import asyncio
import gc
import os
import pty
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
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


def _time_to_paint(cmd: list[str], marker: bytes, size=(160, 48)) -> float:
    """Seconds from spawning ``cmd`` on a pseudo-terminal to ``marker`` arriving on that terminal.

    Both apps are measured the same way, from outside: the clock stops when the
    terminal receives the first frame that shows ``marker`` (the apps need no hook).
    """
    import fcntl
    import select
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
    env = dict(os.environ, TERM="xterm-256color")
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=ROOT)
    os.close(slave)
    seen = b""
    painted = None
    try:
        deadline = t0 + 60
        while painted is None and time.perf_counter() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                continue
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            seen = seen[-len(marker):] + chunk
            if marker in seen:
                painted = time.perf_counter()
    finally:
        proc.kill()
        proc.wait()
        os.close(master)
    if painted is None:
        raise RuntimeError(f"{cmd} never painted {marker!r}")
    return painted - t0


def bench_first_paint(rounds: int = 7) -> dict[str, float]:
    flowtui = shutil.which("flowtui", path=os.path.dirname(sys.executable)) or "flowtui"
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(MINIMAL_APP)
        minimal = fh.name
    app_cmd = [flowtui, "flows/revisao.py", "--input", "Escreva sobre ctx.state", "--no-journal"]
    min_cmd = [sys.executable, minimal]
    app_marker, min_marker = "Conversation".encode(), b"hello"  # the left pane's title; the Static's text
    _time_to_paint(min_cmd, min_marker), _time_to_paint(app_cmd, app_marker)  # warm the file cache
    ours, base = [], []
    for _ in range(rounds):
        base.append(_time_to_paint(min_cmd, min_marker))
        ours.append(_time_to_paint(app_cmd, app_marker))
    os.unlink(minimal)
    a, b = statistics.median(ours), statistics.median(base)
    return {"flowtui_ms": a * 1000, "minimal_ms": b * 1000, "ratio": a / b}


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


async def bench_events(rates=(25_000, 50_000, 100_000, 150_000, 200_000), seconds: float = 1.0,
                       producers=("loop", "thread")) -> list[dict]:
    """Feed synthetic events into a live app at fixed rates; measure absorption and loop stalls.

    Two producers, as in a real run: ``loop`` emits on the event loop (what the
    runtime does when a flow's hooks are async), a little every millisecond;
    ``thread`` emits from a worker thread (sync code run in a thread). Both call
    the session's sink, as the runtime's emitter does.
    """
    from flowtui import Message
    from flowtui.runtime.events import CtxSet, StateAppend
    from flowtui.tui.app import make_app

    app = make_app("flows/revisao.py", input="bench", preload_litellm=False)
    results = []
    async with app.run_test(size=(160, 48)) as pilot:
        while not (app.session.view and app.session.view.status == "paused"):
            await pilot.pause(0.02)
        app.flush(everything=True)
        run_id = app.session.view.run_id
        seq = 10_000
        for producer in producers:
            for rate in rates:
                total = int(rate * seconds)
                events = []
                for i in range(total):
                    seq += 1
                    if i % 10 == 0:
                        events.append(StateAppend.model_construct(
                            seq=seq, ts=0.0, run_id=run_id, node_id=None, parent_id=None, origin="bench",
                            type="state.append", bucket="history", item=Message(role="assistant", content=f"m{i}")))
                    else:
                        events.append(CtxSet.model_construct(seq=seq, ts=0.0, run_id=run_id, node_id=None,
                                                             parent_id=None, origin="bench", type="ctx.set",
                                                             name="counter", value=i))
                gc.collect()
                gc.freeze()  # the pre-built events are the bench's, not the app's: keep them out of GC passes
                await pilot.pause(0.2)  # the frames due before the feed (building the events held the loop)
                before = app.session.view.events
                app.wake()  # as a step/continue command does: the run is paused, so the fast tick sleeps
                stop = threading.Event()
                sink = app.session.sink

                def produce() -> None:
                    chunk = max(rate // 1000, 1)  # one chunk per millisecond
                    start = time.perf_counter()
                    for k in range(0, total, chunk):
                        due = start + k / rate
                        while time.perf_counter() < due:
                            time.sleep(0.0005)
                        for ev in events[k:k + chunk]:
                            sink(ev)
                    stop.set()

                async def produce_on_loop() -> None:
                    start = time.perf_counter()
                    sent = 0
                    while sent < total:
                        due = min(int((time.perf_counter() - start) * rate), total)
                        for ev in events[sent:due]:
                            sink(ev)
                        sent = due
                        await asyncio.sleep(0.001)
                    stop.set()

                worst = 0.0
                t0 = time.perf_counter()
                if producer == "thread":
                    thread = threading.Thread(target=produce)
                    thread.start()
                else:
                    task = asyncio.create_task(produce_on_loop())
                give_up = time.perf_counter() + seconds + 10
                while (not stop.is_set() or app.session.pending) and time.perf_counter() < give_up:
                    a = time.perf_counter()
                    await asyncio.sleep(0.005)
                    worst = max(worst, time.perf_counter() - a - 0.005)
                elapsed = time.perf_counter() - t0
                if producer == "thread":
                    thread.join()
                else:
                    await task
                app.session._buffer.clear()  # what was not absorbed in time
                absorbed = app.session.view.events - before
                results.append({"producer": producer, "offered_per_s": rate, "absorbed_per_s": absorbed / elapsed,
                                "worst_stall_ms": worst * 1000, "backlog_s": elapsed - seconds})
    return results


def main() -> None:
    print("flowtui TUI bench")
    fp = bench_first_paint()
    print(f"first paint: flowtui flows/revisao.py {fp['flowtui_ms']:.0f} ms, minimal Textual app "
          f"{fp['minimal_ms']:.0f} ms, ratio {fp['ratio']:.2f} (target <= 1.5)")
    conv = asyncio.run(bench_conversation())
    print(f"conversation pane, 10,000 messages: first paint {conv['first_paint_ms']:.1f} ms (target <= 100), "
          f"memory growth {conv['memory_growth_mb']:.1f} MB (target <= 30), append at 10k "
          f"{conv['append_ms']:.2f} ms with a full repaint of the 160x48 pane "
          f"({conv['append_widget_ms']:.2f} ms without; target <= 5), jump to middle {conv['jump_to_middle_ms']:.1f} ms, "
          f"page down {conv['page_down_ms']:.1f} ms")
    rows = asyncio.run(bench_events())
    best: dict[str, float] = {}
    for r in rows:
        ok = r["worst_stall_ms"] < 20
        best.setdefault(r["producer"], 0.0)
        if ok:
            best[r["producer"]] = max(best[r["producer"]], r["absorbed_per_s"])
        print(f"events ({r['producer']:>6}): offered {r['offered_per_s']:>7,}/s absorbed {r['absorbed_per_s']:>9,.0f}/s "
              f"worst stall {r['worst_stall_ms']:5.1f} ms backlog {r['backlog_s']:+.2f} s {'ok' if ok else 'STALL'}")
    print(f"events absorbed with every stall < 20 ms: {min(best.values()):,.0f}/s (target >= 100,000; "
          + ", ".join(f"{k} {v:,.0f}/s" for k, v in best.items()) + ")")


if __name__ == "__main__":
    main()
