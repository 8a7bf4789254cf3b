"""Crash safety, measured: kill -9 a headless run at random moments and count what was lost.

    python bench/crash_bench.py [--kills 20] [--rewrites 6]

1. Journal: a run that appends an event every few milliseconds is killed
   ``--kills`` times at a random moment; each journal is read back and checked:
   events lost = gaps in the sequence numbers before the last complete line
   (a reader that refuses the file loses all of them); torn lines = lines the
   reader skipped (at most the one being written).
2. Snapshot: a run whose state is a few MB rewrites an existing snapshot with
   ``--snapshot-out``; it is killed ``--rewrites`` times while writing; a
   snapshot is destroyed when the file is then missing, empty or not the
   valid TOML of either run.

Prints the counts (the reference is the perfect score: 0 lost, 0 destroyed).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import tomllib
from pathlib import Path


JOURNAL_FLOW = textwrap.dedent('''
    import time
    from flowtui import FunctionProvider, agent, loop, workflow

    def model(messages, tools):
        time.sleep(0.001)
        return "x" * 300

    @agent(provider=FunctionProvider(model), prompt="p")
    class A:
        def after_response(self, r, ctx):
            ctx.n = ctx.get("n", 0) + 1

    @workflow(steps=[loop(steps=[A], until=lambda ctx: False, max_iterations=10**9)])
    class Busy:
        pass
''')

SNAPSHOT_FLOW = textwrap.dedent('''
    from pydantic import BaseModel
    from flowtui import FunctionProvider, State, agent, workflow

    class S(BaseModel):
        notes: list[str] = []

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class A:
        def __init__(self, s: S = State()):
            self.s = s
        def after_response(self, r, ctx):
            self.s.notes.extend(f"note {i} " + "z" * 200 for i in range(20000))

    @workflow(steps=[A], state=S)
    class Big:
        pass
''')


def flowtui(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "from flowtui.tui.cli import main; main()", *args], cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def journal_kills(n: int, work: Path) -> tuple[int, int, int]:
    from flowtui.runtime.journal import read_journal

    flow = work / "busy.py"
    flow.write_text(JOURNAL_FLOW)
    lost = torn = total = 0
    for i in range(n):
        path = work / f"j{i}.jsonl"
        proc = flowtui("run", str(flow), "--input", "go", "--journal", str(path), cwd=work)
        # mid-run: once the run has started writing its journal (a loaded machine takes longer to get there)
        deadline = time.monotonic() + 30
        while not (path.exists() and path.stat().st_size) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(random.random() * 1.5)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        notices: list = []
        seqs = [e.seq for e in read_journal(path, notices=notices)]
        total += len(seqs)
        lost += (max(seqs) - len(seqs)) if seqs else 1
        torn += len(notices)
    return total, lost, torn


def snapshot_kills(n: int, work: Path) -> tuple[int, int]:
    flow = work / "big.py"
    flow.write_text(SNAPSHOT_FLOW)
    snap = work / "snap.toml"
    subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run", str(flow),
                    "--no-journal", "--snapshot-out", str(snap)], cwd=work, check=True, capture_output=True)
    # time a whole rewrite, then kill inside its last part (the snapshot is written at the end)
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run", str(flow),
                    "--no-journal", "--snapshot-out", str(snap)], cwd=work, check=True, capture_output=True)
    whole = time.monotonic() - t0
    destroyed = 0
    for _ in range(n):
        proc = flowtui("run", str(flow), "--no-journal", "--snapshot-out", str(snap), cwd=work)
        time.sleep(whole * random.uniform(0.7, 0.98))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        try:
            data = tomllib.loads(snap.read_text())
            ok = len(data["state"]["notes"]) == 20000
        except (OSError, ValueError, KeyError):
            ok = False
        destroyed += not ok
    return n, destroyed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--rewrites", type=int, default=6)
    args = parser.parse_args()
    if args.kills < 0 or args.rewrites < 0:
        parser.error("--kills and --rewrites must be 0 or more")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        total, lost, torn = journal_kills(args.kills, work)
        print(f"journal: {args.kills} kill -9 mid-run: {total} events read back, {lost} lost, "
              f"{torn} torn last lines skipped")
        n, destroyed = snapshot_kills(args.rewrites, work)
        print(f"snapshot: {n} kill -9 during a rewrite: {destroyed} destroyed")


if __name__ == "__main__":
    main()
