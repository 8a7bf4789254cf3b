"""``flowtui run``: a flow headless, with the live node tree on stderr.

    flowtui run flows/revisao.py --input "Olá" --memory plano=pro
    flowtui run flows/conta.py --input "Quanto devo?" --data conta_id=acme
    flowtui run flows/revisao.py --json > events.jsonl

Every run is journaled: its events go to
``.flowtui/runs/<Workflow>-<YYYYmmdd-HHMMSS>.jsonl`` in the current directory
(``--journal FILE`` picks the file, ``--no-journal`` writes none), and the
path is printed on stderr at the end (``flowtui replay`` opens it).

Exit codes: 0 the run finished (or was stopped), 1 it failed, 2 the flow
could not be loaded (or the command line is wrong). No traceback unless
``--debug``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import traceback
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from flowtui.runtime.secrets import redact, secret_values  # light: os and re only

JOURNAL_DIR = Path(".flowtui") / "runs"


def parse_pairs(pairs: list[str], *, option: str = "--memory", example: str = "plano=pro") -> dict[str, str]:
    """``["plano=pro", "userId=123"]`` → ``{"plano": "pro", "userId": "123"}``."""
    found: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"flowtui: {option} {pair!r}: expected KEY=VALUE, e.g. {option} {example}")
        found[key.strip()] = value
    return found


def parse_memory(pairs: list[str]) -> dict[str, str]:
    """``--memory`` pairs as a mapping (each becomes a ``key: value`` memory item)."""
    return parse_pairs(pairs)


def add_flow_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments ``flowtui run`` and the app share."""
    parser.add_argument("flow", metavar="FLOW[:Class]", help="the flow file, e.g. flows/revisao.py")
    parser.add_argument("--input", help="the first user message")
    parser.add_argument("--memory", action="append", default=[], metavar="KEY=VALUE",
                        help="seed durable memory (repeatable)")
    parser.add_argument("--model", help="use this litellm model for every agent (also FLOWTUI_MODEL)")
    parser.add_argument("--replies", metavar="FILE", help="serve every ScriptedProvider from this TOML file")
    cassette = parser.add_mutually_exclusive_group()
    cassette.add_argument("--record", metavar="FILE", help="keep every model exchange in this cassette file")
    cassette.add_argument("--replay", metavar="FILE", help="serve model replies from this cassette, no network")
    journal = parser.add_mutually_exclusive_group()
    journal.add_argument("--journal", metavar="FILE",
                         help=f"write every event to this JSONL file (default: {JOURNAL_DIR}/<Workflow>-<time>.jsonl)")
    journal.add_argument("--no-journal", action="store_true", help="do not journal the run")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")


def default_journal_path(workflow: str, *, now: datetime | None = None, directory: Path = JOURNAL_DIR) -> Path:
    """``.flowtui/runs/RevisaoWorkflow-20250101-120000.jsonl``; a suffix keeps two runs of one second apart."""
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    path = directory / f"{workflow}-{stamp}.jsonl"
    n = 1
    while path.exists():
        n += 1
        path = directory / f"{workflow}-{stamp}-{n}.jsonl"
    return path


def journal_path(args: argparse.Namespace, workflow: str) -> Path | None:
    """Where this run's journal goes: ``--journal``, none with ``--no-journal``, else the default."""
    if args.no_journal:
        return None
    return Path(args.journal) if args.journal else default_journal_path(workflow)


class TreePrinter:
    """Prints ``▸ workflow RevisaoWorkflow`` / ``◂ agent RevisorAgent 12ms ✓`` lines as nodes start and end."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.depth: dict[str, int] = {}
        self.secrets = secret_values()
        self._shown: str | None = None  # an error is shown once, at the deepest node that failed

    def __call__(self, ev: Any) -> None:
        if ev.type == "node.start":
            d = self.depth[ev.node_id] = self.depth.get(ev.parent_id, -1) + 1 if ev.parent_id else 0
            self.out.write(f"{'  ' * d}▸ {ev.kind} {ev.name}\n")
        elif ev.type == "node.end":
            d = self.depth.pop(ev.node_id, 0)
            mark = {"ok": "✓", "error": "✗", "stopped": "■"}.get(ev.status, "?")
            extra = ""
            if ev.error and ev.status == "error" and ev.error != self._shown:
                self._shown = ev.error
                extra = "  " + redact(ev.error.splitlines()[0], self.secrets)
            self.out.write(f"{'  ' * d}◂ {ev.kind} {ev.name} {_ms(ev.duration_ms)} {mark}{extra}\n")
        elif ev.type == "subscriber.error":
            self.out.write(redact(f"! subscriber {ev.subscriber} raised: {ev.error}\n", self.secrets))
        elif ev.type == "dispose.error":
            self.out.write(redact(f"! cleanup {ev.cleanup} raised: {ev.error}\n", self.secrets))
        else:
            return
        self.out.flush()


def _ms(ms: float) -> str:
    return f"{ms:.0f}ms" if ms >= 1 else f"{ms:.2f}ms"


async def _execute_then_close(app: Any, run: Any) -> Any:
    """The run, then the app's middlewares disposed (a failing dispose is shown, not fatal)."""
    from flowtui.runtime.errors import describe_error

    try:
        return await run.execute()
    finally:
        for name, exc in await app.dispose_all():
            print(redact(f"! {name} raised: {describe_error(exc)}", secret_values()), file=sys.stderr)


def main_run(argv: list[str]) -> int:
    # imported here, not at the top: the app imports this module for its arguments before its first paint
    from flowtui.runtime.errors import FlowLoadError, FlowtuiError
    from flowtui.runtime.events import event_json
    from flowtui.runtime.fold import RunView
    from flowtui.runtime.snapshot import snapshot_toml

    parser = argparse.ArgumentParser(prog="flowtui run", description="Run a flow headless.")
    add_flow_arguments(parser)
    parser.add_argument("--data", action="append", default=[], metavar="KEY=VALUE",
                        help="the run's data, read as ctx.data and never sent to the model (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the events as JSON lines on stdout")
    parser.add_argument("--from-snapshot", metavar="FILE", help="start from this TOML snapshot")
    parser.add_argument("--snapshot-out", metavar="FILE", help="write the final state as a TOML snapshot")
    try:
        args = parser.parse_args(argv)
        memory = parse_memory(args.memory)
        data = parse_pairs(args.data, option="--data", example="conta_id=acme")
    except SystemExit as exc:
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
        return 2
    from flowtui.runtime.loader import load_flow

    try:
        app = load_flow(args.flow, model=args.model, replies=args.replies, record=args.record,
                        replay=args.replay)
    except FlowLoadError as exc:
        print(f"flowtui: cannot load {args.flow}\n  {exc}", file=sys.stderr)
        if args.debug:
            traceback.print_exc()
        return 2
    except FlowtuiError as exc:  # e.g. a bad --replies file
        print(f"flowtui: {exc}", file=sys.stderr)
        return 2
    if args.json:
        secrets = secret_values()
        app.subscribe(lambda ev: (sys.stdout.write(redact(event_json(ev), secrets) + "\n"), sys.stdout.flush()))
    else:
        app.subscribe(TreePrinter(sys.stderr))
    view = None
    if args.snapshot_out:  # fold the events only when a snapshot is asked for
        view = RunView()
        app.subscribe(view.apply)
    journal = journal_path(args, app.workflow.name)
    try:
        run = app.prepare(args.input, memory=memory or None, data=data, journal=journal,
                          snapshot=args.from_snapshot)
    except FlowtuiError as exc:  # refused before the run started (e.g. a bad snapshot)
        print(f"flowtui: {exc}", file=sys.stderr)
        return 2
    try:
        output = asyncio.run(_execute_then_close(app, run))
    except KeyboardInterrupt:
        print("flowtui: interrupted", file=sys.stderr)
        return 1
    except Exception as exc:
        from flowtui.runtime.errors import describe_error

        print(f"flowtui: the run failed: {redact(describe_error(exc), secret_values())}", file=sys.stderr)
        if args.debug:
            traceback.print_exc()
        return 1
    finally:
        if run.journal is not None:
            run.journal.close()
        if view is not None and view.run_id is not None:
            Path(args.snapshot_out).write_text(snapshot_toml(view), encoding="utf-8")
        if journal is not None and journal.exists():
            print(f"journal: {journal}", file=sys.stderr)
    if not args.json and output is not None:
        print(redact(output, secret_values()))
    return 0
