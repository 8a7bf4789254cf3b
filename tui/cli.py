"""``flowtui``: open a flow in the terminal app; ``flowtui run ...`` headless; ``flowtui replay JOURNAL``;
``flowtui diff A.jsonl B.jsonl``.

    flowtui flows/revisao.py --input "Olá"       # the app (arguments shared with `flowtui run`)
    flowtui run flows/revisao.py --input "Olá"   # headless, see runtime/cli.py
    flowtui replay .flowtui/runs/RevisaoWorkflow-20250101-120000.jsonl
    flowtui diff A.jsonl B.jsonl                 # two recorded runs compared, see runtime/diff_cli.py

Textual is imported only when the app (or the replay) is launched, so
``flowtui run`` stays light.
"""

from __future__ import annotations

# Only what the interpreter has loaded already: a ctrl-C lands as a KeyboardInterrupt traceback while
# this module is imported, before main() can catch it; so argparse and the rest are imported inside.
import os
import sys

TYPE_CHECKING = False  # (typing's own, without importing typing)
if TYPE_CHECKING:
    import argparse


def build_parser() -> argparse.ArgumentParser:
    """The app's parser: the same flow arguments as ``flowtui run``."""
    from flowtui.runtime.cli import Parser, add_flow_arguments

    parser = Parser(
        prog="flowtui",
        description="Build and debug LLM agent flows in the terminal.",
        epilog="Also: `flowtui run FLOW ...` runs a flow headless; `flowtui replay JOURNAL` scrubs through a "
               "recorded run; `flowtui diff A.jsonl B.jsonl` compares two; `flowtui attach HOST:PORT --token T` "
               "debugs a run served by `flowtui run FLOW --listen`.",
    )
    add_flow_arguments(parser)
    parser.add_argument("--version", action="version", version=f"flowtui {_version()}")
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("flowtui")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "(not installed)"


def app_options(args: argparse.Namespace) -> dict:
    """``make_app`` keyword arguments from the parsed command line (the journal path chosen here)."""
    from flowtui.runtime.cli import check_files, parse_memory, parse_pairs, parse_watches

    check_files(args)
    return dict(input=args.input, memory=parse_memory(args.memory) or None, model=args.model,
                data=parse_pairs(args.data, option="--data", example="conta_id=acme") or None,
                replies=args.replies, record=args.record, replay=args.replay, debug=args.debug,
                approve=list(args.approve), watch=parse_watches(args.watch), resume_from=args.resume_from,
                # each run (a reload starts one) gets its own file unless one is named
                journal=args.journal, journal_auto=not (args.journal or args.no_journal))


def main(argv: list[str] | None = None) -> None:
    try:
        _standard_streams()  # (in the try: it imports, and a ctrl-C there was a traceback on a slow start)
        _main(sys.argv[1:] if argv is None else argv)
    except KeyboardInterrupt:  # ctrl-C before a command put its own handling in place (while importing)
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)  # (one more, as this is said, would kill the process)
        if sys.stderr is not None:  # (started closed, and the interrupt came before it was reopened)
            sys.stderr.write("flowtui: stopped (ctrl-C) before the run started\n")
        sys.exit(2)
    except BrokenPipeError:  # what reads our output went away (`flowtui diff A B | head`): nothing to say
        from flowtui.runtime.cli import stdout_to_null

        stdout_to_null()  # else the exit's flush fails again
        sys.exit(1)


def _standard_streams() -> None:
    """A stdin, stdout or stderr started closed (``2>&-``) is the null device instead: Python leaves
    ``sys.stderr`` None (every message then failed, and said so on stdout), and the next file or
    pipe opened (the worker's) would take its number."""
    from flowtui.runtime.cli import CLOSED_AT_START

    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
        except OSError:
            if os.open(os.devnull, os.O_RDWR) != fd:  # the lowest free number: this one
                continue
            setattr(sys, name, open(fd, "r" if fd == 0 else "w", closefd=False))
            CLOSED_AT_START.add(name)  # (flowtui run's output to a closed stdout is lost: it says so)


def needs_a_terminal(what: str, instead: str = "to run a flow without one: flowtui run FLOW ...") -> None:
    """The app reads keys from stdin and draws on stderr: without a terminal there, say so (exit 2)
    instead of waiting for keys that never come. A terminal that says it cannot move its cursor
    (``TERM=dumb``: an editor's shell, a CI log) is refused too: the live app drew itself over and
    over there, at full CPU, deaf to ``q`` and ctrl-C (Rich takes such a terminal as 80x25, the
    terminal says otherwise). ``instead``: what to do without one."""
    from flowtui.runtime.cli import say

    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        say(f"flowtui: {what} needs a terminal (stdin and stderr are not one); {instead}")
        sys.exit(2)
    term = os.environ.get("TERM", "")
    if term.lower() in ("dumb", "unknown"):  # (what Rich calls a dumb terminal)
        say(f"flowtui: {what} needs a terminal that can move its cursor, and TERM={term} says this one "
            f"cannot; set TERM to the terminal's own (e.g. TERM=xterm-256color); {instead}")
        sys.exit(2)
    try:
        size = os.get_terminal_size(sys.stderr.fileno())
    except OSError:
        return
    if 0 in size:  # (a pseudo-terminal never given a size, `script` in a pipeline: drawn at full CPU, deaf to
        # SIGTERM and SIGHUP, nothing shown)
        say(f"flowtui: {what} needs a terminal with rows and columns, and this one says it is "
            f"{size.columns}x{size.lines}; give it a size (stty rows 40 cols 120); {instead}")
        sys.exit(2)


COMMANDS = ("run", "replay", "attach", "diff")


def _mistyped_command(first: str) -> str | None:
    """The command ``first`` misspells (``rnu``, ``relpay``), when it names no file."""
    import difflib

    from flowtui.runtime.loader import split_target

    if first.startswith("-") or "." in first or "/" in first or split_target(first)[0].exists():
        return None  # (a flow file named run, as run:Workflow too)
    close = difflib.get_close_matches(first, COMMANDS, n=1, cutoff=0.6)
    return close[0] if close else None


def _main(argv: list[str]) -> None:
    if argv and argv[0] == "run":
        from flowtui.runtime.cli import main_run

        sys.exit(main_run(argv[1:]))
    if argv and argv[0] == "replay":
        from flowtui.tui.replay import main_replay

        sys.exit(main_replay(argv[1:]))
    if argv and argv[0] == "attach":
        sys.exit(main_attach(argv[1:]))
    if argv and argv[0] == "diff":
        from flowtui.runtime.diff_cli import main_diff

        sys.exit(main_diff(argv[1:]))
    from flowtui.runtime.cli import parse_flow_args, say

    mistyped = _mistyped_command(argv[0]) if argv else None
    if mistyped:  # `flowtui rnu flows/x.py` said "unrecognized arguments: flows/x.py"
        say(f"flowtui: {argv[0]!r} is no command and no flow file; did you mean `flowtui {mistyped}`?")
        sys.exit(2)
    args = parse_flow_args(build_parser(), argv)
    try:
        options = app_options(args)
    except SystemExit as exc:
        if isinstance(exc.code, str):
            say(exc.code)
            sys.exit(2)
        raise
    from flowtui.runtime.loader import split_target

    path, _ = split_target(args.flow)
    if path.is_dir():
        from flowtui.runtime.loader import folder_problem

        say(f"flowtui: cannot load {args.flow}: {folder_problem(path)}")
        sys.exit(2)
    if not path.is_file():  # before the screen is taken: a typo is a plain error, exit 2
        say(f"flowtui: cannot load {args.flow}: no such flow file (resolved to {path.resolve()})")
        sys.exit(2)
    if args.resume_from is not None:  # the same: a journal that cannot be re-executed is said here
        from flowtui.runtime.errors import ResumeError
        from flowtui.runtime.resume import Resume

        try:
            Resume.load(args.resume_from)
        except ResumeError as exc:
            say(f"flowtui: {exc}")
            sys.exit(2)

    needs_a_terminal("the app")
    from flowtui.tui.client import LaunchConfig

    # The worker starts now: the flow loads while this process imports Textual and draws.
    head_start = LaunchConfig(target=args.flow, **options).worker_options().start_now()
    from flowtui.tui.app import make_app

    app = make_app(args.flow, head_start=head_start, **options)
    app.run()
    if app.signalled:  # (the run's end says it too; the command line gets it, and an exit code that does)
        import signal

        say(f"flowtui: ended by {signal.Signals(app.signalled).name}: the run was stopped")
    for note in [*app.client.journal_notes, *filter(None, [app.client.cassette_note])]:
        say(note)
    sys.exit(app.exit_code)


def main_attach(argv: list[str]) -> int:
    """``flowtui attach HOST:PORT --token T``: the app, on a run served by ``flowtui run --listen``."""
    from flowtui.runtime.cli import Parser, say
    from flowtui.runtime.errors import ConfigError
    from flowtui.runtime.listen import MAX_FIRST_LINE, parse_address, too_long

    parser = Parser(prog="flowtui attach",
                                     description="Open the app on a run that another process serves "
                                                 "(flowtui run FLOW --listen HOST:PORT).")
    parser.add_argument("address", metavar="HOST:PORT")
    parser.add_argument("--token", default=os.environ.get("FLOWTUI_TOKEN") or None,
                        help="the token the listening run printed (default: $FLOWTUI_TOKEN, which ps does not show)")
    parser.add_argument("--take-over", action="store_true",
                        help="detach the client attached now (a terminal that froze, a session left open) and "
                             "attach instead")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    args = parser.parse_args(argv)
    if not args.token:
        say("flowtui attach: give the token the listening run printed: --token TOKEN, or FLOWTUI_TOKEN in the "
            "environment")
        return 2
    try:
        host, port = parse_address(args.address, option="address")
    except ConfigError as exc:
        say(f"flowtui attach: {exc}")
        return 2
    if too_long(args.token):  # (said by the run as no auth line: "the first line must be auth")
        say(f"flowtui attach: the token is {len(args.token):,} characters, longer than any run takes (its auth "
            f"line is under {MAX_FIRST_LINE // 1024} KiB); give the token the listening run printed")
        return 2
    needs_a_terminal("flowtui attach", "without one, any client of the protocol can drive the run "
                                       "(README: the protocol)")
    from flowtui.tui.app import make_app

    app = make_app(args.address, attach=(host, port, args.token, args.take_over), journal=None, debug=args.debug)
    app.run()
    if app.refused:
        say(f"flowtui attach: {args.address}: {app.refused}")
        return 2
    if app.signalled:
        import signal

        say(f"flowtui attach: ended by {signal.Signals(app.signalled).name}: detached, the run waits for the next client")
    return app.exit_code


if __name__ == "__main__":
    main()
