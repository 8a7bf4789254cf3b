"""The pending tool call (approve, deny, edit its arguments) and one event shown whole."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from rich.syntax import Syntax
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from flowtui.tui.shown import shown, shown_head


def call_text(call: dict[str, Any]) -> str:
    """A call's arguments as the JSON a person edits."""
    return json.dumps(call.get("args") or {}, ensure_ascii=False, indent=2)


class DecideDialog(ModalScreen[str | None]):
    """A tool call waits for a person (``--approve``): approve it, deny it with a reason (the
    model reads ``denied by the user: REASON``), or edit its arguments first.

    ``decide(decision, reason)`` sends the decision and raises with the run's reason when it
    is refused (shown, the dialog stays); dismisses with ``approve``, ``deny``, ``edit`` or
    None (closed: the run stays paused, the call undecided)."""

    # y and n, not a and d: a reason typed at once ("absolutely not") must not approve the call with its
    # first letter. Any other letter starts the reason (see on_key); n starts it too (a denial's).
    BINDINGS = [
        Binding("y", "approve", "Approve", id="decide.approve", tooltip="Run the call as shown"),
        Binding("n", "deny", "Deny", id="decide.deny", tooltip="Deny it: type the reason, enter sends it"),
        Binding("e", "edit", "Edit", id="decide.edit", tooltip="Edit the call's arguments first"),
        Binding("escape", "close", "Later", id="decide.close", tooltip="Decide later (the run stays paused)"),
    ]

    _keys = frozenset(key for binding in BINDINGS for key in binding.key.split(","))

    def __init__(self, call: dict[str, Any], decide: Callable[[str, str], Awaitable[Any]], *,
                 agent: str | None = None) -> None:
        super().__init__()
        self.call, self.decide, self.agent = call, decide, agent

    def compose(self) -> ComposeResult:
        name = shown(str(self.call.get("name")))
        who = f" asked by {shown(self.agent)}" if self.agent else ""
        with Vertical(classes="dialog", id="decide-dialog"):
            yield Label(Text.assemble("Tool call waiting for approval: ", (name, "bold"), who), classes="dialog-title")
            with VerticalScroll(id="decide-args"):
                yield Static(Text(shown(call_text(self.call))), id="decide-call")
            yield Input(placeholder="Reason, if you deny it (the model reads it); enter denies", id="decide-reason",
                        select_on_focus=False)  # the letter that moved the focus here stays
            yield Static("", id="dialog-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Approve \\[y]", variant="success", id="decide-approve")
                yield Button("Deny \\[n]", variant="error", id="decide-deny")
                yield Button("Edit arguments \\[e]", id="decide-edit")
            yield Static(Text("typing starts the reason · esc: decide later (the run waits; a run key then runs "
                              "the call as it is)", "dim"))

    def on_mount(self) -> None:
        self.query_one("#decide-approve", Button).focus()

    async def _send(self, decision: str) -> None:
        reason = self.query_one("#decide-reason", Input).value.strip() if decision == "deny" else ""
        try:
            await self.decide(decision, reason)
        except Exception as exc:
            self.query_one("#dialog-error", Static).update(Text(f"✗ {shown(str(exc))}", "bold #ff5f5f"))
            return
        self.dismiss(decision)

    async def action_approve(self) -> None:
        if not isinstance(self.focused, Input):
            await self._send("approve")

    def action_deny(self) -> None:
        if not isinstance(self.focused, Input):
            self.query_one("#decide-reason", Input).focus()

    def on_key(self, event: events.Key) -> None:
        """A letter typed where no text box has the focus is the reason's first letter (never a key of
        the app behind the dialog)."""
        if event.is_printable and event.character and event.key not in self._keys \
                and not isinstance(self.focused, Input):
            event.stop()
            event.prevent_default()
            box = self.query_one("#decide-reason", Input)
            box.focus()
            box.insert_text_at_cursor(event.character)

    def action_edit(self) -> None:
        if not isinstance(self.focused, Input):
            self.dismiss("edit")

    def action_close(self) -> None:
        self.dismiss(None)

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        await self._send("deny")

    async def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        which = event.button.id
        if which == "decide-approve":
            await self._send("approve")
        elif which == "decide-deny":
            await self._send("deny")
        else:
            self.dismiss("edit")


EVENT_CHARS = 200_000  # an event is drawn up to this many characters of its JSON
STRING_CHARS = 16_000  # ... and each string in it up to this many


def _cut_strings(value: Any) -> Any:
    """``value`` with each string longer than ``STRING_CHARS`` cut, saying by how much (made safe
    before the cut: what a cut leaves of a credential would match no rule)."""
    if isinstance(value, str):
        return value if len(value) <= STRING_CHARS else \
            f"{shown_head(value, STRING_CHARS)[:STRING_CHARS]}… (+{len(value) - STRING_CHARS:,} characters)"
    if isinstance(value, dict):
        return {k: _cut_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut_strings(v) for v in value]
    return value


class EventScreen(ModalScreen[None]):
    """One event whole: its JSON, pretty-printed (as the run sent it, so already redacted)."""

    BINDINGS = [Binding("escape,enter,q", "close", "Close", id="event.close", tooltip="Back to the event log")]

    def __init__(self, title: str, event: dict[str, Any] | str) -> None:
        super().__init__()
        self.title_text, self.event = title, event

    def compose(self) -> ComposeResult:
        text = (self.event if isinstance(self.event, str)
                else json.dumps(_cut_strings(self.event), ensure_ascii=False, indent=2))
        if len(text) > EVENT_CHARS:  # (a replayed journal's event is whole: 50 MB drawn froze the app a minute)
            text = shown_head(text, EVENT_CHARS)[:EVENT_CHARS] + f"\n… (+{len(text) - EVENT_CHARS:,} characters)"
        # shown(): a journal from elsewhere may hold control characters; JSON escapes them, but be sure
        body = Syntax(shown(text), "json", theme="ansi_dark", word_wrap=True, background_color="default")
        with Vertical(classes="dialog", id="event-screen"):
            yield Label(Text(shown(self.title_text)), classes="dialog-title")
            with VerticalScroll(id="event-json"):
                yield Static(body)
            yield Static(Text("esc closes", "dim"))

    def action_close(self) -> None:
        self.dismiss(None)
