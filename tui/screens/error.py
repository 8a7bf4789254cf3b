"""The screen shown when the flow file cannot load: file, line, class and the reason; ``r`` reloads."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import OptionList, Static

from flowtui.tui.shown import shown, shown_path
from flowtui.tui.widgets.keybar import KeyBar


class LoadErrorScreen(Screen):
    """A flow that failed to load, and what to do about it."""

    BINDINGS = [
        Binding("r", "app.reload", "Reload", id="error.reload", tooltip="Load the flow file again"),
        Binding("q", "app.quit", "Quit", id="error.quit", tooltip="Quit flowtui"),
    ]

    def __init__(self, target: str, error: BaseException, *, details: str | None = None,
                 title: str = "Could not load the flow", fix: str = "Fix the file") -> None:
        super().__init__()
        self.target = target
        self.error = error
        self.details = details
        self.title_text = title
        self.fix = fix

    def compose(self) -> ComposeResult:
        err = self.error  # a LoadError from the worker, or why the worker could not say (a load timeout)
        where = getattr(err, "file", None) or self.target
        line = getattr(err, "line", None)
        cls = getattr(err, "cls", None)
        message = getattr(err, "message", None) or str(err)
        head = Text(self.title_text, "bold #ff5f5f")
        loc = Text()
        loc.append("file  ", "dim")
        loc.append(shown_path(f"{where}"), "bold")  # (a line break in a file's name broke the line)
        if line:
            loc.append("\nline  ", "dim")
            loc.append(shown(str(line)), "bold")
        if cls:
            loc.append("\nclass ", "dim")
            loc.append(shown(str(cls)), "bold")
        with Vertical(id="error-box"):
            yield Static(head, id="error-title")
            yield Static(loc, id="error-where")
            yield Static(Text(shown(message)), id="error-message")  # once: file, line and class are above
            if self.details:
                yield Static(Text(shown(self.details), "dim"), id="error-details")
            choices = getattr(err, "choices", None) or ()
            if choices:  # which @workflow to run is what is wrong: pick one here, as FILE:NAME would
                yield Static(Text.assemble("Pick the workflow to run (", ("↑ ↓", "bold reverse"), " then ",
                                           ("enter", "bold reverse"), "), or ", self.fix[:1].lower() + self.fix[1:],
                                           " and press ", ("r", "bold reverse"), " to reload, or ",
                                           ("q", "bold reverse"), " to quit."), id="error-hint")
                yield OptionList(*(Text(shown(name)) for name in choices), id="error-choices")
            else:
                yield Static(Text.assemble(f"{self.fix}, then press ", ("r", "bold reverse"), " to reload, or ",
                                           ("q", "bold reverse"), " to quit."), id="error-hint")
        yield KeyBar([(1, "?", "keys", "help"), (2, "r", "reload", "reload"), (3, "q", "quit", "quit")])

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.app.run_workflow_named(self.error.choices[event.option_index])
