"""``flowtui``: open a flow in the terminal app; ``flowtui run ...`` headless; ``flowtui replay JOURNAL``.

    flowtui flows/revisao.py --input "Olá"       # the app (arguments shared with `flowtui run`)
    flowtui run flows/revisao.py --input "Olá"   # headless, see runtime/cli.py
    flowtui replay .flowtui/runs/RevisaoWorkflow-20250101-120000.jsonl

Textual is imported only when the app (or the replay) is launched, so
``flowtui run`` stays light.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import sys
from pathlib import Path


def build_parser() -> argparse.ArgumentParser:
    """The app's parser: the same flow arguments as ``flowtui run``."""
    from runtime.cli import add_flow_arguments

    parser = argparse.ArgumentParser(
        prog="flowtui",
        description="Build and debug LLM agent flows in the terminal.",
        epilog="Also: `flowtui run FLOW ...` runs a flow headless; `flowtui replay JOURNAL` scrubs through a "
               "recorded run.",
    )
    add_flow_arguments(parser)
    return parser


def workflow_name(target: str) -> str:
    """The workflow a ``FLOW[:Class]`` target names, without importing it (for the journal's file name).

    ``:Class`` when given; else the one class decorated with ``@workflow`` in the file; else the file's stem.
    """
    path, sep, name = target.rpartition(":")
    if sep and path and name and not name.startswith(("\\", "/")):
        return name
    file = Path(target)
    try:
        tree = ast.parse(file.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return file.stem
    found = [node.name for node in tree.body if isinstance(node, ast.ClassDef)
             and any(_decorator_name(d) == "workflow" for d in node.decorator_list)]
    return found[0] if len(found) == 1 else file.stem


def _decorator_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else None


def app_options(args: argparse.Namespace) -> dict:
    """``make_app`` keyword arguments from the parsed command line (the journal path chosen here)."""
    from runtime.cli import journal_path, parse_memory

    options = dict(input=args.input, memory=parse_memory(args.memory) or None, model=args.model,
                   replies=args.replies, debug=args.debug)
    journal = journal_path(args, workflow_name(args.flow))
    options["journal"] = str(journal) if journal is not None else None
    from tui.session import LaunchConfig

    fields = {f.name for f in dataclasses.fields(LaunchConfig)}
    for name in ("record", "replay"):
        value = getattr(args, name)
        if value is None:
            continue
        if name not in fields:
            raise SystemExit(f"flowtui: --{name} is not supported by the app yet; use `flowtui run ... --{name}`")
        options[name] = value
    return options


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "run":
        from runtime.cli import main_run

        sys.exit(main_run(argv[1:]))
    if argv and argv[0] == "replay":
        from tui.replay import main_replay

        sys.exit(main_replay(argv[1:]))
    args = build_parser().parse_args(argv)
    try:
        options = app_options(args)
    except SystemExit as exc:
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
            sys.exit(2)
        raise

    from tui.app import make_app

    app = make_app(args.flow, **options)
    app.run()
    journal = options["journal"]
    if journal is not None and Path(journal).exists():
        print(f"journal: {journal}", file=sys.stderr)
    sys.exit(app.return_code or 0)


if __name__ == "__main__":
    main()
