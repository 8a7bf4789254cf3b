"""``flowtui``: open a flow in the terminal app, or ``flowtui run ...`` headless.

Textual is imported only when the app is launched, so ``flowtui run`` stays
light.
"""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="flowtui",
        description="Build and debug LLM agent flows. `flowtui run FLOW ...` runs one headless.",
    )
    parser.add_argument("flow", metavar="FLOW[:Class]", help="the flow file, e.g. flows/revisao.py[:RevisaoWorkflow]")
    parser.add_argument("--input", metavar="TEXT", help="the first user message (asked for in a dialog otherwise)")
    parser.add_argument("--memory", metavar="KEY=VALUE", action="append", default=[],
                        help="seed a memory item (repeatable)")
    parser.add_argument("--model", metavar="MODEL", help="override every agent's model")
    parser.add_argument("--replies", metavar="FILE", help="scripted replies (TOML) for every ScriptedProvider")
    parser.add_argument("--journal", metavar="FILE", help="write every event to this JSONL file")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of load errors")
    return parser


def parse_memory(items: list[str], parser: argparse.ArgumentParser) -> dict[str, str] | None:
    memory: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            parser.error(f"--memory wants KEY=VALUE, got {item!r}")
        memory[key.strip()] = value
    return memory or None


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "run":
        from runtime.cli import main_run

        sys.exit(main_run(argv[1:]))
    if argv and argv[0] == "replay":
        try:
            from runtime.cli import main_replay  # type: ignore[attr-defined]
        except ImportError:
            print("flowtui replay: not available yet", file=sys.stderr)
            sys.exit(2)
        sys.exit(main_replay(argv[1:]))
    parser = build_parser()
    args = parser.parse_args(argv)
    memory = parse_memory(args.memory, parser)

    from tui.app import make_app

    app = make_app(args.flow, input=args.input, memory=memory, model=args.model, replies=args.replies,
                   journal=args.journal, debug=args.debug)
    app.run()
    sys.exit(app.return_code or 0)


if __name__ == "__main__":
    main()
