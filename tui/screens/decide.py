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
from flowtui.tui.widgets.boxes import Box


def call_text(call: dict[str, Any]) -> str:
    """A call's arguments as the JSON a person edits."""
    return json.dumps(call.get("args") or {}, ensure_ascii=False, indent=2)


class DecideDialog(ModalScreen[str | None]):
    """A tool call waits for a person (``--approve``): approve it, deny it with a reason (the
    model reads ``denied by the user: REASON``), or edit its arguments first.

    ``decide(decision, reason)`` sends the decision and raises with the run's reason when it
    is refused (shown, the dialog stays); dismisses with ``approve``, ``deny``, ``edit`` or
    None (closed: the run stays paused, the call undecided)."""

    keeps_notices = True  # opened by the run, not a key: what was said before it still stands

    # y and n, not a and d: a reason typed at once ("absolutely not") must not approve the call with its
    # first letter. y, n and e are read by on_key, not bindings: a binding's action runs later than the
    # keys behind it in a burst are read, and their order was lost.
    BINDINGS = [
        Binding("escape", "close", "Later", id="decide.close", tooltip="Decide later (the run stays paused)"),
    ]

    _typing = False  # the reason is started: every key is its text

    def __init__(self, call: dict[str, Any], decide: Callable[[str, str], Awaitable[Any]], *,
                 agent: str | None = None, draft: str = "", note: str = "") -> None:
        super().__init__()
        self.call, self.decide, self.agent = call, decide, agent
        self.draft = draft  # a reason typed before the dialog was closed undecided: typed on from there
        self.note = note  # said where a refusal is (the call's arguments just edited)

    def compose(self) -> ComposeResult:
        name = shown(str(self.call.get("name")))
        who = f" asked by {shown(self.agent)}" if self.agent else ""
        with Vertical(classes="dialog", id="decide-dialog"):
            yield Label(Text.assemble("Tool call waiting for approval: ", (name, "bold"), who), classes="dialog-title")
            with VerticalScroll(id="decide-args"):
                yield Static(Text(shown(call_text(self.call))), id="decide-call")
            yield Box(placeholder="Reason, if you deny it (the model reads it); enter denies", id="decide-reason",
                        select_on_focus=False)  # tab into it after typing: what was typed stays
            yield Static(Text(shown(self.note), "dim"), id="dialog-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Approve \\[y]", variant="success", id="decide-approve")
                yield Button("Deny \\[n]", variant="error", id="decide-deny")
                yield Button("Edit arguments \\[e]", id="decide-edit")
            yield Static(Text("y approves · n (or any other letter) starts the reason, enter denies with it · "
                              "e edits · esc: decide later (the run waits; a run key then runs the call as it is)",
                              "dim"))

    def on_mount(self) -> None:
        # enter, before anything is typed, denies (as the reason box says): with Approve focused, enter read as
        # "deny" by a person approved the call
        self.query_one("#decide-deny", Button).focus()
        if self.draft:
            self.query_one("#decide-reason", Input).value, self._typing = self.draft, True

    async def _send(self, decision: str) -> None:
        reason = self.query_one("#decide-reason", Input).value.strip() if decision == "deny" else ""
        try:
            await self.decide(decision, reason)
        except Exception as exc:
            self.query_one("#dialog-error", Static).update(Text(f"✗ {shown(str(exc))}", "bold #ff5f5f"))
            return
        self.dismiss(decision)

    def on_key(self, event: events.Key) -> None:
        """The dialog's keys, where no text box has the focus (tab into the reason box types there): y
        approves, e edits, n starts the reason, any other letter starts it with that letter. Once it is
        started every key is its text (never a key of the dialog, or of the app behind it), enter
        denies with it. The focus stays where it is: keys that come in one burst keep their order."""
        if isinstance(self.focused, Input):
            return
        box = self.query_one("#decide-reason", Input)
        key, letter = event.key, event.character if event.is_printable else None
        if self._typing and key == "enter":
            self.run_worker(self._send("deny"), exit_on_error=False)
        elif self._typing and key == "backspace":
            box.value = box.value[:-1]
        elif not self._typing and key == "y":
            self.run_worker(self._send("approve"), exit_on_error=False)
        elif not self._typing and key == "e":
            self.dismiss("edit")
        elif letter and (self._typing or key != "n"):
            self._typing = True
            box.value += letter
        elif key == "n":
            self._typing = True
            box.placeholder = "Type the reason the model reads; enter denies"
        else:
            return
        event.stop()
        event.prevent_default()

    def on_paste(self, event: events.Paste) -> None:
        """A paste where no text box has the focus is the reason too."""
        if not isinstance(self.focused, Input) and event.text:
            event.stop()
            self._typing = True
            box = self.query_one("#decide-reason", Input)
            box.value += " ".join(event.text.splitlines())

    def action_close(self) -> None:
        self.draft = self.query_one("#decide-reason", Input).value  # (esc lost it: reopened, the box was empty)
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
