"""Modal dialogs: the first message, editing a text (promote, edit, add), confirm, a choice, help."""

from __future__ import annotations

import inspect
from collections.abc import Callable

from rich.table import Table
from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static, TextArea

from flowtui.tui.shown import shown, shown_markup, unshown
from flowtui.tui.widgets.boxes import Area, Box


def _no_blink(screen: ModalScreen) -> None:
    config = getattr(screen.app, "config", None)
    if config is not None and not getattr(config, "cursor_blink", True):
        for widget in screen.query("Input, TextArea"):
            widget.cursor_blink = False  # type: ignore[attr-defined]


class FirstMessageDialog(ModalScreen[str | None]):
    """Asks for the run's first user message (when ``--input`` was not given)."""

    keeps_notices = True  # opened by the run, not a key: what was said before it still stands

    BINDINGS = [Binding("escape", "cancel", "Start without input", id="first.cancel",
                        tooltip="Start the run with no first message")]

    def __init__(self, workflow: str) -> None:
        super().__init__()
        self.workflow = workflow

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(Text.assemble("First message for ", (shown(self.workflow), "bold")), classes="dialog-title")
            yield Box(placeholder="What should the flow work on?", id="first-input")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Start", variant="primary", id="first-start")
                yield Button("No input \\[esc]", id="first-none")

    def on_mount(self) -> None:
        _no_blink(self)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value or None)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(self.query_one(Input).value or None if event.button.id == "first-start" else None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class OneLineInput(Box):
    """A one-line box that hands a paste of several lines to its dialog as :class:`Lines` (an Input
    keeps a paste's first line only, dropping the rest without a word)."""

    class Lines(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def on_paste(self, event: events.Paste) -> None:
        if "\n" in event.text.strip("\r\n"):
            event.prevent_default()
            event.stop()
            at = self.cursor_position
            self.post_message(self.Lines(self.value[:at] + event.text + self.value[at:]))


class Refusal(Static):
    """Why a dialog refused what was typed. Cut short by the hint below it (on a short screen, the watch
    dialog's list of the state's fields was not shown), it takes the hint's room: it says what is wrong
    and what to write. The next refusal gives the hint back, while both fit."""

    def on_resize(self) -> None:
        hint = self.screen.query("#dialog-hint")
        if hint and self.get_content_height(self.screen.size, self.screen.size, self.content_region.width) \
                > self.content_region.height:
            hint.first().display = False


class TextDialog(ModalScreen[str | None]):
    """Edits a text and hands it to ``apply``; if ``apply`` raises, the reason shows and the dialog stays.

    Used to promote a message (its text, editable), edit a message, a memory
    item, a task or a state field, and to add a task.

    What was typed and then left with esc is kept in the app's ``text_drafts`` (when it has them), for the
    same dialog on the same text: opened again, the dialog holds it, and says so (esc on it unchanged
    forgets it). A refused edit of a call's arguments, then esc, lost every character typed.
    """

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="dialog.cancel", tooltip="Close without changing anything"),
        Binding("ctrl+s", "save", "Save", id="dialog.save", tooltip="Apply the edit"),
    ]

    def __init__(self, title: str, text: str, apply: Callable[[str], object], *, single_line: bool = False,
                 hint: str = "", save_label: str = "Save", lines_ok: bool = False, cursor: int | None = None) -> None:
        super().__init__()
        self.title_text = title
        self.text = text
        self.apply = apply
        # a text of several lines in a one-line box drew its line breaks raw, over the panes behind it
        self.single_line = single_line and "\n" not in text
        self.hint = hint
        self.save_label = save_label
        self.lines_ok = lines_ok  # a one-line box that becomes a text area when several lines are pasted
        # where to type on in the text (a watchpoint's subject, between a pattern's slashes); None: the
        # text is a value to replace, selected whole
        self.cursor = cursor
        self._drafts: dict[tuple[str, str], str] | None = None
        self._restored: str | None = None  # the draft the dialog opened with

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="text-dialog"):
            yield Label(Text(shown(self.title_text)), classes="dialog-title")
            # Credentials are shown as [redacted]; saving puts back the ones left untouched.
            if self.single_line:
                yield (OneLineInput if self.lines_ok else Box)(shown(self.text), id="dialog-input",
                                                                 select_on_focus=self.cursor is None)
            else:
                yield Area(shown(self.text), id="dialog-text", soft_wrap=True, show_line_numbers=False)
            yield Refusal("", id="dialog-error")
            if self.hint:
                yield Static(Text(self.hint, "dim"), id="dialog-hint")
            with Horizontal(classes="dialog-buttons"):
                yield Button(f"{self.save_label} \\[ctrl+s]", variant="primary", id="dialog-save")
                yield Button("Cancel \\[esc]", id="dialog-cancel")

    async def on_mount(self) -> None:
        _no_blink(self)
        if self.single_line and self.cursor is not None:
            box = self.query_one(Input)  # (counted from the end: what shown() changes is the name before it)
            box.cursor_position = len(box.value) - (len(self.text) - self.cursor)
        self._drafts = getattr(self.app, "text_drafts", None)
        draft = self._drafts.get(self._draft_key) if self._drafts is not None else None
        if draft is not None and draft != self.value:
            await self._restore(draft)

    @property
    def _draft_key(self) -> tuple[str, str]:
        return (self.title_text, self.text)

    async def _restore(self, draft: str) -> None:
        """Open on what was typed before esc: in a text area as an edit of the value (ctrl+z gives it back)."""
        self._restored = draft
        back = ""
        if self.single_line and self.lines_ok and "\n" in draft:  # lines pasted in the one-line box: the
            await self._grow(OneLineInput.Lines(draft))  # text area they made
            back = " (enter starts a new line, ctrl+s saves)"
        elif self.single_line:
            box = self.query_one(Input)
            box.value = draft
            box.cursor_position = len(draft)
        else:
            area = self.query_one(TextArea)
            area.replace(draft, (0, 0), area.document.end)
            area.move_cursor(area.document.end)
            back = "; ctrl+z gives back the value as it is"
        self.query_one("#dialog-error", Static).update(
            Text(f"What you typed before esc is back{back}; esc on it unchanged forgets it.", "dim"))

    @on(OneLineInput.Lines)
    async def _grow(self, message: OneLineInput.Lines) -> None:
        """Several lines pasted: the one-line box gives way to a text area holding them all."""
        box = self.query_one(OneLineInput)
        area = Area(message.text, id="dialog-text", soft_wrap=True, show_line_numbers=False)
        await self.query_one("#text-dialog").mount(area, before=box)
        await box.remove()
        self.single_line = False
        area.move_cursor(area.document.end)
        area.focus()
        _no_blink(self)
        self.query_one("#dialog-error", Static).update(Text(f"Several lines pasted: {self.save_label.lower()} "
                                                             "with ctrl+s (enter starts a new line).", "dim"))

    @property
    def value(self) -> str:
        if self.single_line:
            return self.query_one(Input).value
        return self.query_one(TextArea).text

    def _after_cursor(self) -> int:
        """How many characters follow the cursor: the text there is what the person left as it was."""
        if self.single_line:
            box = self.query_one(Input)
            return len(box.value) - box.cursor_position
        area = self.query_one(TextArea)
        return len(area.text) - area.document.get_index_from_location(area.cursor_location)

    async def action_save(self) -> None:
        text = unshown(self.value, self.text, after=self._after_cursor())
        try:
            result = self.apply(text)
            if inspect.isawaitable(result):  # an edit sent to the run: wait for its answer
                await result
        except Exception as exc:  # the run says why (a refused value, a run gone): show it, stay open
            for hint in self.query("#dialog-hint"):
                hint.display = True
            self.query_one("#dialog-error", Static).update(Text(f"✗ {shown(str(exc))}", "bold #ff5f5f"))
            self.query_one("#text-dialog").add_class("-refused")
            return
        if self._drafts is not None:
            self._drafts.pop(self._draft_key, None)
        self.dismiss(text)

    def action_cancel(self) -> None:
        if self._drafts is not None:
            typed = self.value
            if typed == shown(self.text) or typed == self._restored:  # nothing typed, or the draft left as it was
                self._drafts.pop(self._draft_key, None)
            else:
                self._drafts[self._draft_key] = typed
        self.dismiss(None)

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        await self.action_save()

    async def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "dialog-save":
            await self.action_save()
        else:
            self.action_cancel()


class ConfirmDialog(ModalScreen[bool]):
    """A yes/no question."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes", id="confirm.yes", tooltip="Yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm.no", tooltip="No"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(Text(shown(self.question)), classes="dialog-title")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Yes \\[y]", variant="warning", id="confirm-yes")
                yield Button("No \\[n]", id="confirm-no")

    def on_mount(self) -> None:
        # what a question asks is never undone by a stray enter: it focused Yes (a fork ran a journal's code)
        self.query_one("#confirm-no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "confirm-yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class ChoiceDialog(ModalScreen[str | None]):
    """A question with a few answers, each with its key; dismisses with the chosen answer's value
    (None: escape)."""

    BINDINGS = [Binding("escape", "choose('')", "Cancel", id="choice.cancel", tooltip="Close, nothing done")]

    def __init__(self, question: str, choices: list[tuple[str, str, str]], *, hint: str = "") -> None:
        """``choices``: (key, label, value) for each answer."""
        super().__init__()
        self.question, self.choices, self.hint = question, choices, hint

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(Text(shown(self.question)), classes="dialog-title")
            if self.hint:
                yield Static(Text(self.hint, "dim"))
            # a few answers side by side, when they fit the dialog (at 80 columns "Cancel [esc" lost its "]");
            # more (a list of files) one under the other
            with (Horizontal if len(self.choices) <= 3 and self._fit_side_by_side() else Vertical)(
                    classes="dialog-buttons"):
                for i, (key, label, value) in enumerate(self.choices):
                    yield Button(f"{shown_markup(label)} \\[{key}]", variant="primary" if i == 0 else "default",
                                 id=f"choice-{value}")
                yield Button("Cancel \\[esc]", id="choice-")

    def _fit_side_by_side(self) -> bool:
        """The buttons in one row fit the dialog (80% of the screen, at most 100 columns, less its border
        and padding): each is its label, `` [key]``, two columns of padding each side and two between."""
        room = min(100, self.app.size.width * 4 // 5) - 6
        labels = [f"{label} [{key}]" for key, label, _ in self.choices] + ["Cancel [esc]"]
        return sum(len(label) + 6 for label in labels) <= room

    def on_key(self, event) -> None:  # type: ignore[no-untyped-def]
        for key, _, value in self.choices:
            if event.key == key:
                event.stop()
                self.dismiss(value)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss((event.button.id or "choice-").removeprefix("choice-") or None)

    def action_choose(self, value: str) -> None:
        self.dismiss(value or None)


class HelpScreen(ModalScreen[None]):
    """Every key, grouped."""

    BINDINGS = [Binding("escape,q,question_mark", "close", "Close", id="help.close", tooltip="Close the help")]

    def __init__(self, groups: list[tuple[str, list[tuple[str, str]]]]) -> None:
        super().__init__()
        self.groups = groups

    def compose(self) -> ComposeResult:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold #ffd75f", no_wrap=True)
        table.add_column()
        for group, keys in self.groups:
            table.add_row(Text(group, "bold #87afd7"), "")
            for key, what in keys:
                table.add_row(key, what)
            table.add_row("", "")
        with Vertical(classes="dialog", id="help"):
            yield Label("flowtui keys", classes="dialog-title")
            with VerticalScroll(id="help-scroll"):
                yield Static(table, id="help-keys")
            yield Static(Text("↑ ↓ pgup pgdn scroll. Every action is also in the command palette (ctrl+p). "
                              "esc closes.", "dim"))

    def on_mount(self) -> None:
        self.query_one("#help-scroll").focus()  # the arrows and page keys scroll it

    def action_close(self) -> None:
        self.dismiss(None)
