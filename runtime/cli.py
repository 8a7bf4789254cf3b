"""``flowtui run``: a flow headless, with the live node tree on stderr.

    flowtui run flows/revisao.py --input "Olá" --memory plano=pro
    flowtui run flows/revisao.py --json > events.jsonl

Every run is journaled: its events go to
``.flowtui/runs/<Workflow>-<YYYYmmdd-HHMMSS>.jsonl`` in the current directory
(``--journal FILE`` picks the file, ``--no-journal`` writes none), and the
path is printed on stderr at the end (``flowtui replay`` opens it).

Exit codes: 0 the run finished (or was stopped), 1 it failed, 2 the flow
could not be loaded (or the command line is wrong). No traceback unless
``--debug``. Everything printed is made inert and redacted first
(:func:`printable`): a model's reply can neither drive the terminal nor leak a key.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import traceback
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from flowtui.runtime.inert import visible
from flowtui.runtime.secrets import redact, secret_values  # light: os and re only

JOURNAL_DIR = Path(".flowtui") / "runs"


def printable(text: str, secrets: Any = None) -> str:
    """``text`` as it may reach a terminal: credentials redacted, control characters shown."""
    return visible(redact(text, secret_values() if secrets is None else secrets))


def say(text: str, *, file: TextIO | None = None) -> None:
    """Print ``text`` (made :func:`printable`) on stderr, or ``file``."""
    print(printable(text), file=file or sys.stderr)


def parse_memory(pairs: list[str]) -> dict[str, str]:
    """``["plano=pro", "userId=123"]`` → ``{"plano": "pro", "userId": "123"}``."""
    memory: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"flowtui: --memory {pair!r}: expected KEY=VALUE, e.g. --memory plano=pro")
        memory[key.strip()] = value
    return memory


def add_flow_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments ``flowtui run`` and the app share."""
    parser.add_argument("flow", metavar="FLOW[:Class]", help="the flow file, e.g. flows/revisao.py")
    parser.add_argument("--input", help="the first user message")
    parser.add_argument("--memory", action="append", default=[], metavar="KEY=VALUE",
                        help="seed durable memory (repeatable)")
    parser.add_argument("--model", help="use this litellm model for every agent (also FLOWTUI_MODEL)")
    parser.add_argument("--replies", metavar="FILE", help="serve every ScriptedProvider from this TOML file")
    cassette = parser.add_mutually_exclusive_group()
    cassette.add_argument("--record", metavar="FILE",
                          help="keep every model exchange in this cassette file (replaced when the run ends)")
    cassette.add_argument("--replay", metavar="FILE", help="serve model replies from this cassette, no network")
    journal = parser.add_mutually_exclusive_group()
    journal.add_argument("--journal", metavar="FILE",
                         help=f"append every event to this JSONL file (default: a new "
                              f"{JOURNAL_DIR}/<Workflow>-<time>.jsonl per run)")
    journal.add_argument("--no-journal", action="store_true", help="do not journal the run")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")


def new_journal(workflow: str, *, now: datetime | None = None, directory: Path = JOURNAL_DIR) -> Path:
    """Create ``.flowtui/runs/RevisaoWorkflow-20250101-120000.jsonl`` (owner-only) and return it;
    runs started in the same second get ``-2``, ``-3``... (the file is created exclusively)."""
    from flowtui.runtime.files import create_new

    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    return create_new(directory, f"{workflow}-{stamp}", ".jsonl")


def journal_path(args: argparse.Namespace, workflow: str) -> Path | None:
    """Where this run's journal goes: ``--journal``, none with ``--no-journal``, else a new default file."""
    if args.no_journal:
        return None
    return Path(args.journal) if args.journal else new_journal(workflow)


def journal_note(path: Path, appended_to: int) -> str:
    """``journal: FILE``, or ``journal: appended run 3 to FILE`` when the file held runs before."""
    return f"journal: appended run {appended_to + 1} to {path}" if appended_to else f"journal: {path}"


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
            line = f"{'  ' * d}▸ {ev.kind} {ev.name}"
        elif ev.type == "node.end":
            d = self.depth.pop(ev.node_id, 0)
            mark = {"ok": "✓", "error": "✗", "stopped": "■"}.get(ev.status, "?")
            extra = ""
            if ev.error and ev.status == "error" and ev.error != self._shown:
                self._shown = ev.error
                extra = "  " + ev.error.splitlines()[0]
            line = f"{'  ' * d}◂ {ev.kind} {ev.name} {_ms(ev.duration_ms)} {mark}{extra}"
        elif ev.type == "subscriber.error":
            line = f"! subscriber {ev.subscriber} raised: {ev.error}"
        else:
            return
        self.out.write(printable(line, self.secrets).replace("\n", " ⏎ ") + "\n")
        self.out.flush()


def _ms(ms: float) -> str:
    return f"{ms:.0f}ms" if ms >= 1 else f"{ms:.2f}ms"


def _traceback() -> None:
    """The current exception's traceback (``--debug``), redacted and inert like everything printed."""
    say(traceback.format_exc().rstrip())


def json_printer(out: TextIO):
    """``--json``: each event as a JSON line (redacted, inert); streamed fragments stay out, as in the
    journal, since a credential split over several of them could be put back together."""
    from flowtui.runtime.encoding import encode_event
    from flowtui.runtime.secrets import Redactor

    redactor = Redactor.from_environment()

    def write(ev: Any) -> None:
        if ev.type != "chat.delta":
            out.write(encode_event(ev, redactor).decode("utf-8") + "\n")
            out.flush()

    return write


def main_run(argv: list[str]) -> int:
    # imported here, not at the top: the app imports this module for its arguments before its first paint
    from flowtui.runtime.errors import FlowLoadError, FlowtuiError
    from flowtui.runtime.fold import RunView
    from flowtui.runtime.snapshot import write_snapshot

    parser = argparse.ArgumentParser(prog="flowtui run", description="Run a flow headless.")
    add_flow_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the events as JSON lines on stdout")
    parser.add_argument("--from-snapshot", metavar="FILE", help="start from this TOML snapshot")
    parser.add_argument("--snapshot-out", metavar="FILE",
                        help="write the final state as a TOML snapshot (replaces the file, atomically)")
    try:
        args = parser.parse_args(argv)
        memory = parse_memory(args.memory)
    except SystemExit as exc:
        if isinstance(exc.code, str):
            say(exc.code)
        return 2
    from flowtui.runtime.loader import load_flow

    try:
        app = load_flow(args.flow, model=args.model, replies=args.replies, record=args.record,
                        replay=args.replay)
    except FlowLoadError as exc:
        say(f"flowtui: cannot load {args.flow}\n  {exc}")
        if args.debug:
            _traceback()
        return 2
    except FlowtuiError as exc:  # e.g. a bad --replies file
        say(f"flowtui: {exc}")
        return 2
    app.subscribe(json_printer(sys.stdout) if args.json else TreePrinter(sys.stderr))
    view = None
    if args.snapshot_out:  # fold the events only when a snapshot is asked for
        view = RunView()
        app.subscribe(view.apply)
    try:
        journal = journal_path(args, app.workflow.name)
    except OSError as exc:
        say(f"flowtui: cannot create the journal: {exc}; pick one with --journal FILE or use --no-journal")
        return 2
    try:
        run = app.prepare(args.input, memory=memory or None, journal=journal, snapshot=args.from_snapshot)
    except (FlowtuiError, OSError) as exc:  # refused before the run started (e.g. a bad snapshot)
        if journal is not None and not args.journal:
            journal.unlink(missing_ok=True)  # the new default file: a refused run leaves none
        say(f"flowtui: {exc}")
        return 2
    code = 0
    try:
        output = asyncio.run(run.execute())
    except KeyboardInterrupt:
        say("flowtui: interrupted")
        code, output = 1, None
    except Exception as exc:
        from flowtui.runtime.errors import describe_error

        say(f"flowtui: the run failed: {describe_error(exc)}")
        if args.debug:
            _traceback()
        code, output = 1, None
    finally:
        run.close_files()
        if view is not None and view.run_id is not None:
            replaced = write_snapshot(view, args.snapshot_out)
            say(f"snapshot: {'replaced' if replaced else 'wrote'} {args.snapshot_out}")
        if run.recorded is not None:
            say(f"cassette: {'replaced' if run.recorded else 'wrote'} {args.record}")
        if journal is not None and journal.exists():
            say(journal_note(journal, run.journal.appended_to))
    if code == 0 and not args.json and output is not None:
        say(output, file=sys.stdout)
    return code
