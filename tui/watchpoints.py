"""Watchpoints, as the app's actions: ``w`` sets one (on a state field in the sidebar, a dialog
prefilled with its change), ``W`` lists them to remove one, the palette does both, and the
control pane lists them. The run checks them (:mod:`flowtui.runtime.watching`); when one fires,
the pause says which and at which event, and a notification says what made it true.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from flowtui.tui.shown import shown, shown_markup

if TYPE_CHECKING:
    from flowtui.tui.app import FlowApp


def child_prefix(view: Any) -> str:
    """``Child: ``, what a watchpoint on the run the panes show starts with when it is a child workflow's."""
    run = view.shown if view is not None else None
    return f"{run.workflow}: " if run is not None and run.run_id != view.run_id and run.workflow else ""


def watch_hint(state: dict[str, Any], of: str = "") -> str:
    """The ``w`` dialog's examples, on the fields of the state shown (every flow was offered
    ``state.rodadas >= 3``, which only the example flow's state has); ``of``: its :func:`child_prefix`."""
    examples = []
    for name, value in state.items():
        if isinstance(value, bool):
            examples.append(f"{of}state.{name} == {'false' if value else 'true'}")
        elif isinstance(value, int):
            examples.append(f"{of}state.{name} >= {value + 1}")
        if len(examples) == 2:
            break
    said = ", ".join(examples or [f"{of}len(history) > 10"])
    return (f"A field alone pauses at each change; or a condition: {said}, memory ~ /plano/i, prompt.tokens > 6000, "
            "cost > 0.50, repeat(TOOL) >= 3 (README: Watchpoints).")


def _p():
    from flowtui.runtime import protocol

    return protocol


EXPR_SHOWN = 48  # of a refused watchpoint, the characters shown around the fault (one line in the dialog at 80x24)
EXPR_NOTIFIED = 30  # and in a notice (one line of it)


def refusal_text(reply: Any, width: int = EXPR_SHOWN) -> str:
    """A refused watchpoint as the dialog shows it (after its ``✗ ``): what, then the expression
    with a caret under the fault (``width`` characters of it around the fault at most: a line wrapped
    would put the caret under another part), then what to do."""
    where = reply.value if isinstance(reply.value, dict) else None
    if where is None:
        return reply.error or "refused"
    expr, column = where["expr"], where["column"]
    if len(expr) > width:  # a line the dialog would wrap, the caret then under another part: a window
        start = max(0, min(column - 1 - width // 2, len(expr) - width))
        expr = ("…" if start else "") + expr[start:start + width] + ("…" if start + width < len(expr) else "")
        column = column - start + (1 if start else 0)
    from flowtui.runtime.errors import cells

    def drawn(text: str) -> str:
        return shown(text).replace("\t", "⇥").replace("\n", "⏎")

    # two columns: the dialog's "✗ " prefix; the caret under the cells what comes before takes (a CJK
    # character two: it stood two columns left of the fault per character)
    lines = [f"{where['message']} (column {where['column']})", f"  {drawn(expr)}",
             "  " + " " * cells(drawn(expr[:column - 1])) + "^"]
    if where.get("hint"):
        lines.append(f"  {where['hint']}")
    return "\n".join(lines)


class RunWatches:
    """Mixin of :class:`flowtui.tui.app.FlowApp`: setting, listing and removing watchpoints."""

    _said_pause: Any = None  # the pause whose watchpoints were last announced

    def _watch_prefill(self: FlowApp) -> str:
        """What ``w`` starts from: the change of the state field under the sidebar's cursor (in a
        child workflow's run, limited to that workflow), a match on memory or tasks, else nothing."""
        target = self._sidebar_target()
        if target is None:
            return ""
        kind, _, key = target.partition(":")
        prefix = child_prefix(self.client.view)
        if kind == "field":
            return f"{prefix}state.{key}"
        return f"{prefix}{kind} ~ //i"

    def action_watch(self: FlowApp, prefill: str | None = None) -> None:
        from flowtui.tui.screens.dialogs import TextDialog

        if self.client.channel is None or self.client.view is None:
            self.notify("No run yet: w sets a watchpoint once the flow is loaded.", severity="warning")
            return
        text = self._watch_prefill() if prefill is None else prefill

        async def add(expr: str) -> Any:
            reply = await self.client.watch(expr.strip())
            if not reply.ok:
                raise ValueError(refusal_text(reply))

        def done(expr: str | None) -> None:
            if expr is not None:
                self.notify(f"Watchpoint {shown(expr.strip())} set: the run pauses {_when(expr)}.")
                self.flush(force=True)

        # typed on where the words go: after a field's name, between a pattern's slashes
        at = len(text) - 2 if text.endswith("//i") else len(text)
        view = self.client.view
        hint = watch_hint(view.shown.state, child_prefix(view))
        self.push_screen(TextDialog("Pause when… (a watchpoint)", text, add, single_line=True, hint=hint,
                                    save_label="Watch", cursor=at), done)

    def action_watchpoints(self: FlowApp) -> None:
        from flowtui.tui.screens.watches import WatchListDialog

        if self.client.channel is None:
            self.notify("No run yet.", severity="warning")
            return
        self.push_screen(WatchListDialog(self.client.watches, self.remove_watch, add=self.action_watch))

    async def remove_watch(self: FlowApp, expr: str) -> list[str]:
        """Clear watchpoint ``expr``; the watchpoints left (raises with the run's reason)."""
        reply = await self.client.watch(expr, on=False)
        if not reply.ok:
            raise ValueError(reply.error)
        self.notify(f"Watchpoint {shown(expr)} removed.")
        self.flush(force=True)
        return list(self.client.watches)

    def _remove_from_palette(self: FlowApp, expr: str) -> None:
        self.run_worker(self.remove_watch(expr), group="command", exit_on_error=False)

    def watch_commands(self: FlowApp) -> Iterator[tuple[str, str, Any]]:
        """The palette's watchpoint entries: remove each one set; watch each state field's change."""
        for expr in self.client.watches:
            yield (shown_markup(f"watch: remove {expr}"), "Stop pausing when this becomes true",
                   lambda expr=expr: self._remove_from_palette(expr))
        view = self.client.view
        if view is None:
            return
        prefix = child_prefix(view)
        for name in view.state:
            expr = f"{prefix}state.{name}"
            if expr not in self.client.watches:
                yield (shown_markup(f"watch: when {expr} changes"),
                       shown_markup(f"Pause after each change of {name} (edit the condition first)"),
                       lambda expr=expr: self.action_watch(expr))

    def say_refused_watches(self: FlowApp) -> None:
        """Watchpoints a new run refused (a reloaded flow lost a field): dropped, and said."""
        for reply in self.client.refused_watches:  # (the expression on a line of its own: the caret under the fault)
            self.notify(shown(refusal_text(reply, EXPR_NOTIFIED)), title="Watchpoint dropped", severity="warning",
                        timeout=10)
        self.client.refused_watches = []

    def say_fired(self: FlowApp, pause: Any) -> None:
        """Once per pause a watchpoint made: what made it true, at which event."""
        if not pause.watch or pause is self._said_pause:
            return
        self._said_pause = pause
        # a change watchpoint's detail names its subject already (state.rodadas: 1 → 2), a condition's
        # says the value that made it true (state.rodadas >= 2: state.rodadas = 2)
        lines = [(hit.detail if hit.detail and hit.detail.startswith(f"{hit.expr}: ")
                  else f"{hit.expr}: {hit.detail or 'true'}")
                 + f" (event #{hit.seq}" + (f", {hit.workflow})" if hit.workflow else ")") for hit in pause.watch]
        self.notify(shown("\n".join(lines)), title="Watchpoint", timeout=8)
        # the run may have taken one off (its pattern backtracked): the list as the run has it
        self.run_worker(self._relist_watches(), group="command", exit_on_error=False)

    async def _relist_watches(self: FlowApp) -> None:
        before = list(self.client.watches)
        if (await self.client.watch()).ok and self.client.watches != before:
            self.flush(force=True)


def _when(expr: str) -> str:
    """When a watchpoint pauses the run, in words: a field or bucket alone at each change of it ("when it becomes
    true" was said of ``state.n`` too), a condition when it becomes true."""
    from flowtui.runtime.watch import Changed, WatchError, parse

    try:
        alone = isinstance(parse(expr.strip()).condition, Changed)
    except WatchError:
        alone = False
    return "at each change of it" if alone else "when it becomes true"
