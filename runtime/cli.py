"""``flowtui run``: a flow headless, with the live node tree on stderr.

    flowtui run flows/revisao.py --input "Olá" --memory plano=pro
    flowtui run flows/conta.py --input "Quanto devo?" --data conta_id=acme
    flowtui run flows/revisao.py --json > events.jsonl

Every run is journaled: its events go to
``.flowtui/runs/<Workflow>-<YYYYmmdd-HHMMSS>.jsonl`` in the current directory
(``--journal FILE`` picks the file, ``--no-journal`` writes none), and the
path is printed on stderr at the end (``flowtui replay`` opens it).

``--resume-from JOURNAL[@K]`` re-executes a recorded run with the flow's current
code, serving the journal's model replies and tool results up to event K and
checking every event against it, then goes on live (:mod:`flowtui.runtime.resume`).

Exit codes: 0 the run finished (or was stopped), 1 it failed, 2 the flow
could not be loaded (or the command line is wrong, or ``--resume-from`` names
no journal), 3 a re-executed run diverged from its journal (the report on
stderr), 4 it stopped at a ``--watch``, 5 stdout could not take the output, or
``--snapshot-out`` or the journal could not be written (a full disk). No traceback
unless ``--debug``. Everything printed is made inert and redacted first
(:func:`printable`): a model's reply can neither drive the terminal nor leak a key.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import re
import signal
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from flowtui.runtime.inert import visible
from flowtui.runtime.secrets import redact, secret_values  # light: os and re only

JOURNAL_DIR = Path(".flowtui") / "runs"


def printable(text: str, secrets: Any = None) -> str:
    """``text`` as it may reach a terminal: credentials redacted, control characters shown."""
    return visible(redact(text, secret_values() if secrets is None else secrets))


# The standard streams that were closed when flowtui started (``>&-``): the null device took their place.
CLOSED_AT_START: set[str] = set()


def stdout_to_null() -> None:
    """Point stdout at the null device: what is left in its buffer must not fail again as Python exits."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, sys.stdout.fileno())
    os.close(null)


def say(text: str, *, file: TextIO | None = None, secrets: Any = None) -> None:
    """Print ``text`` (made :func:`printable`) on stderr, or ``file``; ``secrets``: the credentials
    to redact, when the caller has them at hand (else they are read from the environment)."""
    if file is not None:  # (the output: its caller says when it could not be written)
        print(printable(text, secrets), file=file)
        return
    try:
        print(printable(text, secrets), file=sys.stderr)
    except OSError:  # the reader went away (| head): there is no one to tell, and the run goes on
        pass


def _seconds(text: str) -> float:
    """A positive number of seconds (argparse names the option when this raises)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of seconds greater than 0, e.g. 60")
    return value


class Once(argparse.Action):
    """An option given once: a second one is refused, not taken over the first in silence."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if getattr(namespace, self.dest, None) is not None:
            # (a token is a secret: neither is said)
            said = "" if self.dest == "token" else f" ({getattr(namespace, self.dest)!r}, then {values!r})"
            parser.error(f"{option_string} is given twice{said}: give it once")
        setattr(namespace, self.dest, values)


def parse_pairs(pairs: list[str], *, option: str = "--memory", example: str = "plano=pro") -> dict[str, str]:
    """``["plano=pro", "userId=123"]`` → ``{"plano": "pro", "userId": "123"}``."""
    found: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"flowtui: {option} {pair!r}: expected KEY=VALUE, e.g. {option} {example}")
        if key.strip() in found:  # the first would be dropped in silence
            raise SystemExit(f"flowtui: {option} {key.strip()!r} is given twice ({found[key.strip()]!r}, then "
                             f"{value!r}): give each key once")
        found[key.strip()] = value
    return found


def check_files(args: argparse.Namespace) -> None:
    """The files the flow arguments name, checked before anything runs (``SystemExit`` with why): one
    read that is a folder, a pipe or a device (read for ever, or all of memory), and one written that
    would replace something it is not (the flow's own source, the run's journal, a file that is no
    snapshot or cassette, a device). And ``FLOWTUI_MODEL``, as ``--model`` is, which it stands for."""
    # (light modules only: the app checks these before its first frame)
    from flowtui.runtime.files import cannot_write, not_a_file, replace_refusal
    from flowtui.runtime.loader import split_target

    if args.model is None and os.environ.get("FLOWTUI_MODEL"):  # checked as --model is (set empty: not set)
        try:  # (blank, it was taken as a model's name: the run failed at its first model call)
            args.model = model_name(os.environ["FLOWTUI_MODEL"], leave_out="unset it")
        except argparse.ArgumentTypeError as exc:
            raise SystemExit(f"flowtui: FLOWTUI_MODEL {exc}") from None
    if args.resume_from is not None:  # a re-execution starts as the recorded run started: another start
        given = [option for option, value in (("--input", args.input), ("--memory", args.memory or None),
                                              ("--data", args.data or None),
                                              ("--from-snapshot", getattr(args, "from_snapshot", None)))
                 if value is not None]  # (--input "" is another input too)
        if given:  # diverged at the run's start ("input: recorded "x", now "y""), exit 3, as if the code had
            raise SystemExit(f"flowtui: {' and '.join(given)} cannot be given with --resume-from: a re-execution "
                             "starts with the recorded run's input, memory and data; leave "
                             f"{'it' if len(given) == 1 else 'them'} out (a fork at event K keeps what the "
                             "run had there)")
    if args.journal and not args.no_journal:  # a pipe or a device: writing to it may never end
        why = not_a_file(Path(args.journal))
        if args.journal.endswith(("/", os.sep)):  # (a file was made, named as the folder: the slash was dropped)
            why = "is named as a folder (it ends in /), not a journal file"
        elif args.journal == "-":  # (a file named - was written)
            why = "is no file: the journal is written to one (flowtui run --json prints the events on stdout)"
        if why:
            raise SystemExit(f"flowtui: {cannot_write(args.journal, f'it {why}')}")
    for option in ("replies", "replay", "from_snapshot"):
        name = getattr(args, option, None)
        if name and name.startswith(("/dev/", "/proc/")) and os.path.isfile(real := os.path.realpath(name)):
            # /dev/stdin < FILE: the run's process has stdin of its own (empty), and read "holds no replies"
            name = real
            setattr(args, option, name)
        why = not_a_file(Path(name), "a file") if name else None
        if why:
            raise SystemExit(f"flowtui: --{option.replace('_', '-')} {name}: it {why}; name the file")
    keep = {split_target(args.flow)[0]: "the flow file"}
    if args.journal and not args.no_journal:
        keep[Path(args.journal)] = "the run's journal"
    for option, what in (("record", "cassette"), ("snapshot_out", "snapshot")):
        name = getattr(args, option, None)
        why = replace_refusal(Path(name), what, keep) if name is not None else None
        if why:
            raise SystemExit(f"flowtui: --{option.replace('_', '-')} {name!r}: {why}")
        if name:
            keep[Path(name)] = f"the --{option.replace('_', '-')} file"


def unknown_approvals(approve: Any, hello: Any) -> list[str]:
    """What to say of ``--approve`` names none of the loaded workflow's agents has as a tool (perhaps a
    child workflow's: said, not refused)."""
    import difflib

    said = []
    for name in sorted(set(approve or ()) - set(hello.tools) - {"all"}):
        close = "".join(f"; did you mean {m}?" for m in difflib.get_close_matches(name, hello.tools, n=1))
        said.append(f"--approve {name}: {hello.workflow}'s agents have no tool {name} (theirs: "
                    f"{', '.join(sorted(hello.tools)) or 'none'}{close}); it is asked about only if a child "
                    "workflow calls it")
    return said


def parse_memory(pairs: list[str]) -> dict[str, str]:
    """``--memory`` pairs as a mapping (each becomes a ``key: value`` memory item)."""
    return parse_pairs(pairs)


def argument_text(value: str) -> str:
    """A text argument as text: bytes in it that are not UTF-8 (a shell passes them as they are)
    become U+FFFD, as a model or a journal could not take them."""
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def model_name(value: str, leave_out: str = "leave --model out") -> str:
    """``--model``: a name (given empty, the flow's own models were used unsaid)."""
    if not value.strip():
        raise argparse.ArgumentTypeError(f"is empty: give a litellm model name, such as openai/gpt-4o-mini, or "
                                         f"{leave_out} for the flow's own models")
    if not value.isprintable() or value != value.strip():  # (a line break in it was printed as one)
        raise argparse.ArgumentTypeError(f"{value!r} holds a line break, a control character or spaces at its "
                                         "ends: give a litellm model name, such as openai/gpt-4o-mini")
    return value


def file_name(value: str) -> str:
    """A file argument whose name is UTF-8: the run's process names its files in messages and events,
    which are UTF-8 JSON (a name with a Latin-1 byte made ``flowtui run`` end in a traceback, and
    left the app waiting for a run that never started)."""
    if not value.strip():  # ("" was the current folder: "cannot load .: is a folder")
        raise argparse.ArgumentTypeError("is empty: name the file")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        shown = repr(os.fsencode(value))[2:-1]  # the bytes as the shell took them: caf\xe9.jsonl
        raise argparse.ArgumentTypeError(f"the file name {shown} is not UTF-8 (a run names its files in "
                                         "its events, which are UTF-8); rename the file") from None
    return value


def _options(parser: argparse.ArgumentParser) -> set[str]:
    """The long options ``parser`` takes (its usage names them all)."""
    return set(re.findall(r"--[\w-]+", parser.format_usage()))


def parse_flow_args(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """``parser.parse_args``, for a parser given :func:`add_flow_arguments`: an unknown option is
    named before a missing FLOW, with the option it looks like (``--inptu``: ``--input``)."""
    if parser.usage is None:  # FLOW shown as what it is, required (the usage said [FLOW[:Class]], then "required")
        parser.usage = parser.format_usage().removeprefix("usage: ").rstrip().replace("[FLOW[:Class]]", "FLOW[:Class]")
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        import difflib

        options = _options(parser)
        typed = next((u.split("=", 1)[0] for u in unknown if u.startswith("--") and u != "--"), None)
        # an option of flowtui run given to the app (`flowtui FLOW --json`: "did you mean --journal?")
        if parser.prog == "flowtui" and typed in _options(build_run_parser()):
            parser.error(f"{typed} is an option of flowtui run (the headless run), not of the app: "
                         f"flowtui run FLOW {typed} ...")
        if typed in options and "--" in argv:  # ("did you mean --input?" of --input itself)
            parser.error(f"unrecognized arguments: {' '.join(unknown)}; after --, every word is taken as it is, "
                         f"options too: put {typed} before the --")
        close = difflib.get_close_matches(typed, sorted(options), n=1) if typed else []
        parser.error(f"unrecognized arguments: {' '.join(unknown)}" + (f"; did you mean {close[0]}?" if close else ""))
    if args.flow is None:
        parser.error("the following arguments are required: FLOW[:Class]")
    return args


def add_flow_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments ``flowtui run`` and the app share."""
    # Optional to argparse, required by parse_flow_args: argparse reports a missing positional before an
    # option it does not know, and `flowtui --bogus` was told to give a FLOW, not that --bogus is no option.
    parser.add_argument("flow", metavar="FLOW[:Class]", nargs="?", type=file_name,
                        help="the flow file, e.g. flows/revisao.py")
    parser.add_argument("--input", type=argument_text, action=Once, help="the first user message")
    parser.add_argument("--memory", action="append", default=[], metavar="KEY=VALUE", type=argument_text,
                        help="seed durable memory (repeatable)")
    parser.add_argument("--data", action="append", default=[], metavar="KEY=VALUE", type=argument_text,
                        help="the run's data, read as ctx.data and never sent to the model (repeatable)")
    parser.add_argument("--model", type=model_name, action=Once,
                        help="use this litellm model for every agent (also FLOWTUI_MODEL)")
    parser.add_argument("--replies", metavar="FILE", type=file_name, action=Once,
                        help="serve every ScriptedProvider from this TOML file")
    cassette = parser.add_mutually_exclusive_group()
    cassette.add_argument("--record", metavar="FILE", type=file_name, action=Once,
                          help="keep every model exchange in this cassette file (replaced when the run ends)")
    cassette.add_argument("--replay", metavar="FILE", type=file_name, action=Once,
                          help="serve model replies from this cassette, no network")
    journal = parser.add_mutually_exclusive_group()
    journal.add_argument("--journal", metavar="FILE", type=file_name, action=Once,
                         help=f"append every event to this JSONL file (default: a new "
                              f"{JOURNAL_DIR}/<Workflow>-<time>.jsonl per run)")
    journal.add_argument("--no-journal", action="store_true", help="do not journal the run")
    parser.add_argument("--approve", action="append", default=[], metavar="TOOL",
                        help="pause before every call of this tool for a decision: approve, deny or edit "
                             "(repeatable; 'all' for every tool)")
    parser.add_argument("--resume-from", metavar="JOURNAL[@K]", type=file_name, action=Once,
                        help="re-execute that journal's run with this code: model replies and tool results "
                             "served from it up to event K (default: its end), every event checked, then live")
    parser.add_argument("--watch", action="append", default=[], metavar="EXPR",
                        help="pause when EXPR becomes true, e.g. 'state.rodadas >= 3', 'memory ~ /plano/i', "
                             "'cost > 0.50', 'repeat(ler_arquivo) >= 3' (repeatable; README: Watchpoints). "
                             "`flowtui run` without --listen stops the run there instead (exit 4)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")


def parse_watches(texts: list[str]) -> list[str]:
    """``--watch`` expressions, each parsed once here so a malformed one is refused before anything
    starts (``SystemExit`` with the column and a caret); fields are checked once the flow is loaded."""
    if not texts:
        return []  # the parser is not even imported (the app's first frame waits for nothing)
    from flowtui.runtime.errors import WatchError
    from flowtui.runtime.watch import parse

    for text in texts:
        try:
            parse(text)
        except WatchError as exc:
            raise SystemExit(exc.render("--watch: ")) from None
    return list(texts)


def refusal_text(error: str | None) -> str:
    """A refused start, as said on stderr: a refused ``--watch`` stands on its own (its caret is
    placed under the expression as the line starts); anything else says it is flowtui's."""
    error = error or "the run could not start"
    return error if error.startswith("--watch: ") else f"flowtui: {error}"


def new_journal(workflow: str, *, now: datetime | None = None, directory: Path = JOURNAL_DIR) -> Path:
    """Create ``.flowtui/runs/RevisaoWorkflow-20250101-120000.jsonl`` (owner-only) and return it;
    runs started in the same second get ``-2``, ``-3``... (the file is created exclusively)."""
    from flowtui.runtime.files import create_new

    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    return create_new(directory, f"{file_stem(workflow)}-{stamp}", ".jsonl")


def folders_to_make(directory: Path = JOURNAL_DIR) -> list[Path]:
    """The folders :func:`new_journal` makes, as :func:`take_back` takes them back."""
    return [folder for folder in (directory.parent, directory) if not folder.exists()]


def take_back(journal: Path, made: list[Path]) -> None:
    """A run refused before it started (or stopped before its start was answered) leaves no journal of
    its own making, nor the folders made for it. One its process wrote to is kept: it holds a run."""
    try:
        if journal.stat().st_size:
            return
        journal.unlink()
    except FileNotFoundError:
        pass
    for folder in reversed(made):
        with contextlib.suppress(OSError):  # (another run's journal is in it)
            folder.rmdir()


_UNSAFE_IN_NAME = re.compile(r"[^\w-]+")


def file_stem(name: str) -> str:
    """A workflow's name as part of a file name in the journal folder: ``@workflow(name=...)`` is any
    text, and one holding ``/`` stopped every run (no such folder), ``../../x`` wrote outside the folder,
    and an escape sequence made a file name the terminal acted on. Letters, digits, ``-`` and ``_``
    stay; any other run of characters (``.`` too) is one ``_``, none at either end; at most 80."""
    return _UNSAFE_IN_NAME.sub("_", name).strip("_")[:80] or "run"


def journal_note(path: Path, appended_to: int | None) -> str:
    """``journal: FILE``, or ``journal: appended run 3 to FILE`` when the file held runs before (None: a
    file too large to count them in, of which the run is the last)."""
    if appended_to is None:
        return f"journal: {path} (its last run)"
    return f"journal: appended run {appended_to + 1} to {path}" if appended_to else f"journal: {path}"


def _in(branch: tuple[str, str] | None, ev: Any) -> str:
    """`` (in loop la)``: the parallel branch a node runs in, but on the branch's own lines."""
    return f" (in {branch[1]})" if branch is not None and branch[0] != ev.node_id else ""


class TreePrinter:
    """Prints ``▸ workflow RevisaoWorkflow`` / ``◂ agent RevisorAgent 12ms ✓`` lines as nodes start and end."""

    def __init__(self, out: TextIO) -> None:
        from flowtui.runtime.events import end_note, failure_said

        self.out = out
        self.end_note, self.failure_said = end_note, failure_said
        self.depth: dict[str, int] = {}
        # node id -> the branch of a parallel step it runs in (its node id and label), said on its lines:
        # indented by depth alone, branches' lines mixed (agent A under loop lb, which A is not in)
        self.branch: dict[str, tuple[str, str] | None] = {}
        self.parallel: set[str] = set()
        self.secrets = secret_values()
        self._shown: str | None = None  # an error is shown once, at the deepest node that failed

    def __call__(self, ev: Any) -> None:
        if ev.type == "run.start" and ev.resumed_from is not None and ev.resumed_from.redacted:
            r = ev.resumed_from  # (the model then got "[redacted]" where the person had typed the key, unsaid)
            self._write(f"! {r.redacted} event(s) re-executed from {r.journal} carry a credential its journal holds "
                        f"as [redacted]: the run holds that text in its place, and what runs live after event "
                        f"#{r.at} gets it")
        if ev.type == "node.start":
            d = self.depth[ev.node_id] = self.depth.get(ev.parent_id, -1) + 1 if ev.parent_id else 0
            if ev.kind == "parallel":
                self.parallel.add(ev.node_id)
            branch = self.branch[ev.node_id] = ((ev.node_id, _node(ev)) if ev.parent_id in self.parallel
                                                else self.branch.get(ev.parent_id))
            line = f"{'  ' * d}▸ {_node(ev)}{_in(branch, ev)}"
            self._shown = None  # a node after the failure: its own error is news, even the same text
        elif ev.type == "node.end":
            d = self.depth.pop(ev.node_id, 0)
            self.parallel.discard(ev.node_id)
            branch = self.branch.pop(ev.node_id, None)
            mark = {"ok": "✓", "error": "✗", "stopped": "■"}.get(ev.status, "?")
            extra = ""
            error = self.failure_said(ev)
            if error and ev.status == "error" and error != self._shown:
                self._shown = error
                extra = "  " + error.splitlines()[0]
            elif note := self.end_note(ev):
                extra = f"  ({note})"
            line = f"{'  ' * d}◂ {_node(ev)}{_in(branch, ev)} {_ms(ev.duration_ms)} {mark}{extra}"
        elif ev.type == "subscriber.error":
            line = f"! subscriber {ev.subscriber} raised: {ev.error}"
        elif ev.type == "dispose.error":
            line = f"! cleanup {ev.cleanup} raised: {ev.error}"
        elif ev.type == "run.start" and ev.resumed_from is not None and ev.resumed_from.call:
            r = ev.resumed_from
            inside = (f"the call of tool {r.before_tool} (what it did there comes only from running it)"
                      if r.before_tool else f"{r.call} (a recorded reply is served only whole)")
            why = (f"event #{r.asked} is inside {inside}" if r.asked is not None else
                   f"the recorded run never returned from {r.call} (stopped or killed inside it)")
            line = f"! {why}: re-executed up to event #{r.at}, and that call runs live"
        elif ev.type == "run.start" and ev.resumed_from is not None and ev.resumed_from.torn:
            r = ev.resumed_from
            line = (f"! line {r.torn} of {r.journal}, its last, is cut short (its writer was killed?): re-executed "
                    f"up to event #{r.at}, the last written whole, then live")
        elif ev.type == "run.start" and ev.resumed_from is not None and ev.resumed_from.unended:
            r = ev.resumed_from
            line = (f"! {r.journal} stops at event #{r.at}, before its run's end (its writer was killed?): "
                    "re-executed up to there, then live")
        elif ev.type == "run.start" and ev.resumed_from is not None and ev.resumed_from.inside_edit:
            r = ev.resumed_from  # (a promote is two events: K between them held what nobody saw)
            line = (f"! event #{r.asked} is inside an edit ({r.inside_edit}): re-executed up to event #{r.at}, "
                    "before it")
        elif ev.type == "chat.attempt" and ev.retry_in_s is not None:
            # a wait before a retry (a server's Retry-After: 20 s) said as it starts, not only by the time it took
            d = self.depth.get(ev.node_id, 0) + 1
            status = f"HTTP {ev.status}: " if ev.status else ""
            line = (f"{'  ' * d}↻ attempt {ev.attempt} failed ({status}{(ev.error or '').splitlines()[0][:200]}); "
                    f"retrying in {ev.retry_in_s:.1f} s")
        elif ev.type == "run.pause" and ev.watch:
            from flowtui.runtime.control import watch_reason

            line = f"◆ {watch_reason(ev.watch)}"
        elif ev.type == "run.end" and ev.parent_id is None and ev.status != "failed" and ev.reason \
                and not ev.reason.startswith(("watchpoint ", "diverged from ")):
            # why a run ended early (a budget, ctx.stop(), a stop), in the app's words; the ■ alone said
            # nothing (a watchpoint's ◆, a failure's line and a divergence's report say theirs). Said by
            # ended(), once what the flow printed has all arrived (it came after, on its own pipe)
            self.last_word = f"■ {ev.status} ({ev.reason})"
            return
        else:
            return
        self._write(line)

    last_word: str | None = None

    def ended(self) -> None:
        """Say why the run ended early, after whatever the flow printed."""
        if self.last_word is not None:
            self._write(self.last_word)
            self.last_word = None

    def _write(self, line: str) -> None:
        try:
            self.out.write(printable(line, self.secrets).replace("\n", " ⏎ ") + "\n")
            self.out.flush()
        except OSError:  # the reader went away (2>&1 | head): as for say(), the run goes on
            pass


def _node(ev: Any) -> str:
    """``agent RevisorAgent``; the default loop (named "loop") is ``loop``, not ``loop loop``."""
    return ev.name if ev.name == ev.kind else f"{ev.kind} {ev.name}"


CLEANUPS_SAID_S = 3.0  # a run whose steps are done and whose cleanups have run this long says so


async def _said_cleanups(view: Any, say: Callable[[str], None]) -> None:
    """Once, when the run's steps are done and its cleanups (``ctx.on_dispose``) go on: a cleanup that
    never returns held ``flowtui run`` without a word (the app's status line says it)."""
    since = None
    while True:
        await asyncio.sleep(0.25)
        if view.status == "running" and view.ending():
            since = since or time.monotonic()
            if time.monotonic() - since >= CLEANUPS_SAID_S:
                say("flowtui: the run's steps are done, and its cleanups (ctx.on_dispose) are still running "
                    f"after {CLEANUPS_SAID_S:.0f} s (ctrl-C stops them)" if view.cleaning_up() else
                    f"flowtui: the run's steps are done, and it has not ended after {CLEANUPS_SAID_S:.0f} s "
                    "(ctrl-C stops it)")
                return
        else:
            since = None


async def _said_unstarted(view: Any, say: Callable[[str], None]) -> None:
    """Once, when the run has not started ``CLEANUPS_SAID_S`` after it was asked to: code that never returns
    while it is made (a provider factory, an agent's ``__init__``, a middleware's async ``setup(app)``) held
    ``flowtui run`` without a word (the app's status line says it)."""
    await asyncio.sleep(CLEANUPS_SAID_S)
    if view.run_id is None:
        say(f"flowtui: the run has not started after {CLEANUPS_SAID_S:.0f} s: making its agents, tools and "
            "providers, or a middleware's setup(app), has not returned (ctrl-C stops it)")


def _ms(ms: float) -> str:
    return f"{ms:.0f}ms" if ms >= 1 else f"{ms:.2f}ms"


def json_printer(out: TextIO):
    """``--json``: each event as the worker wrote it (redacted, inert); streamed fragments stay out,
    as in the journal, since a credential split over several of them could be put back together."""

    def write(line: bytes, ev: Any) -> None:
        if ev.type != "chat.delta" and not write.failed:
            try:
                out.write(line.decode("utf-8") + "\n")
                out.flush()
            except OSError as exc:  # a full disk, or its reader went away (| head): said once, at the
                write.failed = _unwritable(exc)  # end (the journal has every event); the run goes on

    write.failed = None
    return write


def listen_token(args: argparse.Namespace) -> dict[str, Any]:
    """The token a served run asks for, and where it was given (set but empty: refused, not random)."""
    if args.token is not None:
        return {"token": args.token, "token_from": "--token"}
    return {"token": os.environ.get("FLOWTUI_TOKEN"), "token_from": "FLOWTUI_TOKEN"}


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose errors show the arguments they quote as :func:`visible` text, credentials
    redacted: an argument holding ``ESC [2J`` or a title-setting sequence went to the terminal raw in
    "unrecognized arguments", and a key given as ``--input`` twice was printed whole."""

    def error(self, message: str) -> Any:
        super().error(visible(redact(message, secret_values())))


def build_run_parser() -> argparse.ArgumentParser:
    """``flowtui run``'s options: the app's (:func:`add_flow_arguments`) and its own."""
    parser = Parser(prog="flowtui run", description="Run a flow headless.")
    add_flow_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the events as JSON lines on stdout")
    parser.add_argument("--from-snapshot", metavar="FILE", type=file_name, action=Once,
                        help="start from this TOML snapshot")
    parser.add_argument("--snapshot-out", metavar="FILE", type=file_name, action=Once,
                        help="write the final state as a TOML snapshot (replaces the file, atomically)")
    parser.add_argument("--load-timeout", type=_seconds, default=None, metavar="S", action=Once,
                        help="give up on a flow whose import takes longer (default: 30 s)")
    parser.add_argument("--listen", metavar="HOST:PORT", action=Once,
                        help="serve the run to `flowtui attach` (port 0 picks one); it starts paused")
    parser.add_argument("--token", action=Once,
                        help="the token attaching clients must give (default: $FLOWTUI_TOKEN, which ps does not "
                             "show, else a random one, printed)")
    parser.add_argument("--listen-public", action="store_true",
                        help="allow --listen on an address other than loopback")
    return parser


def main_run(argv: list[str]) -> int:
    """``flowtui run``: a client of a worker process, like the app; see the module docstring."""
    try:
        args = parse_flow_args(build_run_parser(), argv)
        memory = parse_memory(args.memory)
        data = parse_pairs(args.data, option="--data", example="conta_id=acme")
        parse_watches(args.watch)
        check_files(args)
    except SystemExit as exc:
        if isinstance(exc.code, str):
            say(exc.code)
        return 0 if exc.code == 0 else 2  # (--help: 0)
    if args.listen is None and (args.token is not None or args.listen_public):  # it would be ignored
        say(f"flowtui: {'--token' if args.token is not None else '--listen-public'} is for a served run: give "
            "--listen HOST:PORT too, or leave it out")
        return 2
    if args.listen is not None:  # (an empty one, from an unset variable, is no address either)
        from flowtui.runtime.errors import ConfigError
        from flowtui.runtime.listen import checked

        try:
            checked(args.listen, public=args.listen_public, **listen_token(args))
        except ConfigError as exc:
            say(f"flowtui: {exc}")
            return 2
    if args.approve and args.listen is None:
        say("flowtui run: --approve needs a person to decide: open the flow in the app (flowtui FLOW "
            "--approve TOOL), or serve it with --listen and decide from `flowtui attach`")
        return 2
    args.start_sent = False  # set as the run is started: a ctrl-C before that stopped nothing that ran
    try:
        return asyncio.run(_run_headless(args, memory, data))
    except KeyboardInterrupt:  # a third ctrl-C while the worker is killed, or one before asyncio's handler
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # (one more, as this is said, would kill the process)
        if args.start_sent:
            return 1
        say(f"flowtui: stopped while {args.flow} was loading (ctrl-C); nothing of it ran")
        return 2


async def _run_headless(args: argparse.Namespace, memory: dict[str, str], data: dict[str, str]) -> int:
    """``flowtui run``: the run in a worker process, its tree (or events) printed; with ``--listen``,
    served to a client too (:mod:`flowtui.runtime.relay`), started paused."""
    from flowtui.runtime.channel import LOAD_TIMEOUT_S, Channel, LoadTimeout, elided_of, parse_events
    from flowtui.runtime.encoding import encode_event
    from flowtui.runtime.errors import ConfigError
    from flowtui.runtime.secrets import Redactor
    from flowtui.runtime.spawn import UNSTARTED, Options

    tree = TreePrinter(sys.stderr)
    printer = json_printer(sys.stdout) if args.json else None
    folded: list[Any] = []  # the RunView, made once the worker is on its way
    relay: Any = None  # with --listen: the client's side
    # Served: what would be printed before "listening on" (the flow's import-time output, the load notes,
    # the tree) waits for it, so a script reading stderr finds the address on its first line.
    held: list[Callable[[], None]] | None = [] if args.listen is not None else None

    def tell(text: str, **kw: Any) -> None:
        if held is not None:
            held.append(functools.partial(say, text, **kw))
        else:
            say(text, **kw)

    def release() -> None:
        """Print what waited for "listening on" (said, or never to be: the run ends before it is served)."""
        nonlocal held
        for deferred in held or ():
            deferred()
        held = None

    cut: list[Any] = []  # events whose long values reached us cut (served: as a client gets them; the journal has them)

    def on_lines(lines: list[bytes]) -> None:
        view = folded[0]
        batch = channel.in_order(parse_events(lines, lambda text: say(f"flowtui: {text}")), view.last_seq)
        for line, ev in batch:
            if elided_of(ev):
                cut.append(ev)
            view.apply(ev)
            if printer is not None:
                printer(line, ev)
            elif held is not None:
                held.append(functools.partial(tree, ev))
            else:
                tree(ev)
        if relay is not None:
            relay.relay([line for line, _ in batch])

    def on_log(text: str) -> None:  # what the flow printed
        text = redact(text, secrets)
        tell(text, secrets=())
        if relay is not None:
            relay.log(text)

    secrets = secret_values()  # once: a flow may print a line a microsecond
    # served: long values are cut as the app's own worker cuts them (a client fetches them whole); else every
    # value comes whole, as the output and a snapshot need it (a 100 MB tool result)
    served = args.listen is not None
    channel = Channel(on_lines, on_log=on_log, on_warning=lambda text: say(f"flowtui: {text}"), secrets=lambda: secrets)
    options = Options(target=args.flow, model=args.model, replies=args.replies, record=args.record,
                      replay=args.replay, snapshot=args.from_snapshot, wire_limit=None if served else 0,
                      debug=args.debug)
    # The worker first: it boots while this process imports what it needs.
    spawned = asyncio.ensure_future(channel.spawn(options, load_timeout=args.load_timeout or LOAD_TIMEOUT_S))
    await asyncio.sleep(0)
    from flowtui.runtime import protocol as p
    from flowtui.runtime.fold import RunView
    from flowtui.runtime.journal import runs_before
    from flowtui.runtime.snapshot import left_out_said, write_snapshot

    view = RunView()
    folded.append(view)
    journal = None
    appended_to: int | None = 0
    if not args.no_journal:
        if args.journal:
            journal, appended_to = Path(args.journal), runs_before(Path(args.journal))
    loop = asyncio.get_running_loop()
    terminated: list[str] = []  # a supervisor's SIGTERM while the flow loads: as a ctrl-C (asyncio.run's own)

    def on_terminate(main: asyncio.Task = asyncio.current_task()) -> None:  # type: ignore[assignment]
        terminated.append("SIGTERM")
        main.cancel()

    loop.add_signal_handler(signal.SIGTERM, on_terminate)
    try:
        hello = await spawned
    except LoadTimeout as exc:
        release()
        say(f"flowtui: cannot load {args.flow}\n  {exc}")
        return 2
    except asyncio.CancelledError:  # ctrl-C while the flow is imported: its process goes too
        await channel.kill()
        release()
        say(f"flowtui: stopped while {args.flow} was loading ({(terminated or ['ctrl-C'])[0]}); nothing of it ran")
        return 2
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
    if isinstance(hello, p.LoadError):
        release()
        if hello.option:  # the option's file is at fault (the message names both), not the flow
            say(f"flowtui: {hello.message}")
        else:
            where = f"{hello.file}{f':{hello.line}' if hello.line else ''}: " if hello.file else ""
            say(f"flowtui: cannot load {args.flow}\n  {where}{(hello.cls + ': ') if hello.cls else ''}{hello.message}")
        if args.debug and hello.traceback:
            say(hello.traceback.rstrip())
        await channel.wait()
        return 2
    for note in [*hello.notes, *unknown_approvals(args.approve, hello)]:
        tell(f"flowtui: {note}")
    made = folders_to_make()  # a refusal takes them back
    default_journal = not args.no_journal and journal is None

    def refused() -> None:
        if default_journal and journal is not None:
            take_back(journal, made)

    if default_journal:
        try:
            journal = new_journal(hello.workflow)
        except OSError as exc:
            release()
            say(f"flowtui: cannot create the journal: {exc}; pick one with --journal FILE or use --no-journal")
            await channel.kill()
            return 2
    channel.keep_journal(str(journal) if journal is not None else None)
    listener = None
    if args.listen is not None:
        from flowtui.runtime.listen import Listener
        from flowtui.runtime.relay import Relay

        try:
            listener = Listener(Relay(channel), args.listen, public=args.listen_public, **listen_token(args))
        except (ConfigError, OSError) as exc:  # (the port in use)
            refused()
            release()
            say(f"flowtui: {exc}")
            await channel.kill()
            return 2
        relay = listener.worker  # events from here on reach the client's backlog
    interrupts = 0

    def interrupted(signum: int = signal.SIGINT) -> None:
        """ctrl-C (or a supervisor's SIGTERM): stop cleanly within the grace period; again: kill now."""
        nonlocal interrupts
        interrupts += 1
        by = "ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        if interrupts == 1:  # the stop first: saying so may fail (stderr gone), stopping may not
            asyncio.ensure_future(channel.stop(reason=None if signum == signal.SIGINT
                                               else f"flowtui run received {signal.Signals(signum).name}"))
            say(f"flowtui: stopping the run ({by} again kills it)")
        else:
            asyncio.ensure_future(channel.kill(by=f"{by} again"))

    # Before the run starts: a ctrl-C that comes while the start is on its way still stops it.
    # A handler of Python's own, not the loop's: the loop learns of a signal through a pipe that a flood of
    # calls from other threads (a client's commands, with --listen) can fill, and a signal that finds it
    # full is lost. This one runs in the main thread whatever that pipe holds, and queues the stop.
    def on_signal(signum: int, frame: Any) -> None:
        loop.call_soon_threadsafe(interrupted, signum)

    previous = {signum: signal.signal(signum, on_signal) for signum in (signal.SIGINT, signal.SIGTERM)}
    # No --input is said once the start is taken (served: where it came, among what waits for "listening on"):
    # a start refused (a --watch naming no field) was told of a run that never started
    unasked = args.input is None and args.resume_from is None and getattr(args, "from_snapshot", None) is None
    noted = len(held) if held is not None else 0
    unstarted = asyncio.ensure_future(_said_unstarted(view, say))
    try:
        try:
            # Nobody drives a headless run: a watchpoint that fires stops it there. A served one starts
            # paused and waits for its client, as a watchpoint or a divergence makes it wait.
            args.start_sent = True
            reply = await channel.command(p.Start(
                input=args.input, memory=memory or None, data=data or None, paused=served, journal=channel.journal,
                watch=args.watch, on_watch="pause" if served else "stop", resume_from=args.resume_from,
                approve=args.approve, on_divergence="pause" if served else "stop"))
        except ConnectionError:  # killed (two ctrl-C) before the start was answered
            reply = None
            on_lines(channel.recover(view.last_seq))
            if view.run_id is None:  # no run started: none to end, none to journal
                refused()
                release()
                say(f"flowtui: stopped before the run started ({channel.ending(UNSTARTED)[1]}); nothing of it ran")
                if listener is not None:
                    listener.close()
                return 2
        if reply is not None and not reply.ok:  # refused before the run started (a bad snapshot, an unknown
            refused()  # state field in --watch)
            release()
            say(refusal_text(reply.error))
            await channel.kill()
            if listener is not None:
                listener.close()
            return 2
        if unasked and reply is not None:
            note = "flowtui: no --input: the run starts with no user message (give --input TEXT for one)"
            if held is not None:
                held.insert(noted, functools.partial(say, note))
            else:
                say(note)
        if listener is not None:
            listener.start()
            listener.announce(sys.stderr)
            release()
        cleanups = asyncio.ensure_future(_said_cleanups(view, say))
        try:
            await channel.ended_or_gone()
        finally:
            cleanups.cancel()
        if cut:
            await _whole_output(channel, view, cut, journal, say, fetch=not args.json,
                                kept_cut="--json" if args.json else "--snapshot-out" if args.snapshot_out else None)
        await channel.finish()
    finally:
        unstarted.cancel()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        tree.ended()
    if not channel.ended:  # killed, crashed, exited in a hook: what it journaled but never sent
        on_lines(channel.recover(view.last_seq))
    if not channel.ended:  # the run's end, said by us
        status, why = channel.ending(view.busy_with())
        event = channel.write_run_end(status, why, view.last_seq)
        if event is not None:
            view.apply(event)
            if relay is not None:
                relay.relay([encode_event(event, Redactor([]))])
        else:
            view.status = status
            view.error = view.reason = why
        say(f"flowtui: the run {status}: {why}")
    elif view.status == "failed":
        say(f"flowtui: the run failed: {view.error}")
    elif args.json and stopped_at_watchpoint(view):
        say(f"flowtui: the run stopped at a {view.reason}")  # (without --json, the tree said it)
    if listener is not None:
        listener.close()  # the attached client gets the run's end first
    snapshot_failed = False
    if args.snapshot_out and view.run_id is not None:
        from flowtui.runtime.files import partial_of, written_note

        try:
            target = Path(args.snapshot_out)
            kept = view.status != "finished" and target.exists()  # (see partial_of)
            target = partial_of(target, "snapshot") if kept else target
            replaced, gone = write_snapshot(view, target)
            said = f" (left out of [state]: {left_out_said(gone)}; a run from the snapshot starts at their " \
                   "defaults)" if gone else ""
            verb = "kept" if kept else "replaced" if replaced else "wrote"
            say(written_note("snapshot", verb, args.snapshot_out, target, view.status or "ended") + said)
        except OSError as exc:  # the disk filled, the folder changed hands during the run
            say(f"flowtui: could not write the snapshot {args.snapshot_out}: {exc.strerror or exc}")
            snapshot_failed = True
    if view.journal_error is not None:  # the run went on; its record did not
        say(f"flowtui: {view.journal_error}")
    elif journal is not None and journal.exists():
        say(journal_note(journal, appended_to))
    if view.divergence is not None:
        from flowtui.runtime.divergence import report

        say(f"flowtui: {report(view.divergence)}")
        return 3
    if view.status == "failed" or channel.muted:  # stopped by us: what it did after is unknown
        return 1
    unwritten = printer.failed if printer is not None else None
    if "stdout" in CLOSED_AT_START and (args.json or view.output is not None):
        unwritten = "it was closed when flowtui started"
    if not args.json and view.output is not None:
        try:
            say(view.output, file=sys.stdout)
            sys.stdout.flush()
        except OSError as exc:
            unwritten = _unwritable(exc)
    if unwritten:
        stdout_to_null()
        say(f"flowtui: the run {view.status}, but its {'events' if args.json else 'output'} could not be "
            f"written to stdout: {unwritten}" + (f" (the journal has it all: {journal})" if journal else ""))
        return 5
    if snapshot_failed or view.journal_error is not None:  # a file the run was to write is not whole
        return 5
    return 4 if stopped_at_watchpoint(view) else 0


async def _whole_output(channel: Any, view: Any, cut: list[Any], journal: Path | None,
                        say: Callable[..., None], *, fetch: bool, kept_cut: str | None) -> None:
    """The run's output whole, from its process (which serves ``fetch`` until it is let go), when its end
    reached us with the output cut; and what else was cut, said when ``kept_cut`` (--json prints it, a
    --snapshot-out holds it) keeps it so."""
    from flowtui.runtime import protocol as p
    from flowtui.runtime.channel import elided_of, within

    end = next((ev for ev in cut if fetch and ev.type == "run.end" and ev.run_id == view.run_id
                and "output" in elided_of(ev)), None)
    if end is not None:
        try:
            reply = await within(channel.command(p.Fetch(seq=end.seq, path="output")), FETCH_WAIT_S)
        except (ConnectionError, asyncio.TimeoutError):
            reply = None
        if reply is not None and reply.ok:
            view.output = reply.value
        else:
            say(f"flowtui: the run's output reached flowtui cut to its first {len(view.output or ''):,} characters, "
                f"and its process could not give it whole" + (f"; the journal has it: {journal}" if journal else ""))
    others = [ev.seq for ev in cut if ev is not end]
    if others and kept_cut:
        said = ", ".join(f"#{seq}" for seq in others[:5])
        said += f" and {len(others) - 5:,} more" if len(others) > 5 else ""
        say(f"flowtui: the long values of events {said} reached flowtui cut, as a served run sends them, and "
            f"{kept_cut} holds them so" + (f"; the journal has them whole: {journal}" if journal else ""))


FETCH_WAIT_S = 10.0  # a run's output fetched whole from its process, once the run has ended


def _unwritable(exc: OSError) -> str:
    """Why stdout took no more: its reader went away (``| head -1``), or its disk is full."""
    if isinstance(exc, BrokenPipeError):
        return "its reader went away (a broken pipe)"
    return exc.strerror or str(exc)


def stopped_at_watchpoint(view: Any) -> bool:
    """The run ended where a ``--watch`` fired (``flowtui run`` exits 4, so a script can tell)."""
    return view.status == "stopped" and (view.reason or "").startswith("watchpoint ")
