"""The run's edits, as the app's actions: promote, edit, delete, add, undo, and the tool call the
run is paused before (edit its arguments; approve or deny it when ``--approve`` asks).

Every edit goes to the run as a protocol command and comes back through the event stream; the
run refuses what would break it (the reason shows in the dialog). Dialogs that remove messages
say first what leaves with them, so the history stays a valid conversation with no surprise.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from flowtui.tui.client import cut_in, cut_inside

if TYPE_CHECKING:
    from flowtui.runtime import protocol as p
    from flowtui.tui.app import FlowApp


def _p():
    from flowtui.runtime import protocol

    return protocol


def _numbers(indices: list[int]) -> str:
    return ", ".join(f"#{i}" for i in indices)


def row_value(view: Any, target: str) -> tuple[str, Any]:
    """(what it is, its value) of the sidebar row ``target`` (``memory:i``, ``tasks:i``, ``field:name``)."""
    kind, _, key = target.partition(":")
    if kind in ("memory", "tasks"):
        items = view.memory if kind == "memory" else view.tasks
        i = int(key)
        return f"{kind} item {i + 1}", items[i] if 0 <= i < len(items) else None
    return f"state field {key}", view.state.get(key)


class RunEdits:
    """Mixin of :class:`flowtui.tui.app.FlowApp`: the run's edits."""

    # The approval pause whose dialog was last shown: (run id, seq); a run started over numbers from 1 again.
    _decided_at: tuple[str | None, int] = (None, -1)
    _reason_draft: tuple[tuple[Any, ...], str] | None = None  # (the call, a reason typed for it before esc)
    _decide_note = ""  # what the approval dialog says as it comes back (the call just edited)
    _checked_at = -1  # the pause whose history was last checked

    def _editable(self: FlowApp) -> bool:
        self.flush(everything=True)
        if self.main.looking is not None:
            self.notify("You are looking back at an earlier event: esc returns to the live run, where edits "
                        "apply.", severity="warning")
            return False
        view = self.client.view
        if view is None or view.run_id is None:
            self.notify("No run yet.", severity="warning")
            return False
        if view.status != "paused":
            hint = "pause it first (p)" if view.status == "running" else "r starts a new one"
            self.notify(f"Edits apply to a paused run; this one is {view.status}: {hint}.", severity="warning")
            return False
        return True

    async def edit(self: FlowApp, command: p.BaseModel) -> Any:
        """Send an edit and wait for its answer; a refusal raises ``ValueError`` with the reason (the dialog shows it)."""
        reply = await self.client.command(command)
        if not reply.ok:
            raise ValueError(reply.error)
        return reply.value

    def _edited(self: FlowApp, message: str) -> Any:
        def done(result: str | None) -> None:
            if result is not None:
                self.notify(message)
                self.wake()

        return done

    def _too_large_to_edit(self: FlowApp) -> bool:
        """A text cut on the way to the app is not edited here: saving the piece would replace the run's
        whole value with it."""
        target = self._sidebar_target()
        if target is None:
            i = self.main.conversation.cursor
            history = self.client.view.history
            cut = cut_in(history[i].content) if 0 <= i < len(history) else None
            what = f"This text is {cut[2]:,} characters" if cut else ""
        else:
            name, value = self.row_value(target)
            cut = cut_inside(value)
            what = f"{name.capitalize()} holds a text of {cut[2]:,} characters" if cut else ""
        if cut:
            self.notify(f"{what}: too large to edit here. o opens it whole.", severity="warning")
        return cut is not None

    def row_value(self: FlowApp, target: str) -> tuple[str, Any]:
        return row_value(self.client.view, target)

    def _sidebar_target(self: FlowApp) -> str | None:
        sidebar = self.main.sidebar
        return sidebar.highlighted_id if self.focused is sidebar else None

    def _message(self: FlowApp) -> int | None:
        """The history message under the conversation's cursor (None: none)."""
        i = self.main.conversation.cursor
        return i if self._sidebar_target() is None and 0 <= i < len(self.client.view.history) else None

    def _not_in_conversation(self: FlowApp, what: str) -> bool:
        """Another view is shown (what the model sees, the event log, the nodes): a key acting on a
        message would act on the conversation's hidden cursor, not on the row highlighted here."""
        view = self.main.current_view
        if view == "conversation":
            return False
        self.notify(f"{what} in the conversation (1), on the message under its cursor; in the sidebar (tab), "
                    "on the item under its cursor.", severity="warning")
        return True

    # --- messages -----------------------------------------------------------------------------
    def action_promote(self: FlowApp) -> None:
        from flowtui.runtime.wellformed import results_of
        from flowtui.tui.screens.dialogs import TextDialog

        if not self._editable() or self._not_in_conversation("m promotes a message"):
            return
        i = self.main.conversation.cursor
        history = self.client.view.history
        if not 0 <= i < len(history) or history[i].role != "assistant":
            self.notify("Put the cursor on an assistant message to promote it.", severity="warning")
            return
        if self._pending_call() is not None and self._makes_pending(i):  # refused by the run: said before the edit
            self._say_pending_stays(i)
            return
        results = results_of(history, i)
        along = f" Its tool results {_numbers(results)} leave the history with it." if results else ""
        cut = cut_in(history[i].content)
        if cut:  # too large to edit here: promoted whole, as the run holds it, if so asked
            from flowtui.tui.screens.dialogs import ConfirmDialog

            def answered(yes: bool | None) -> None:
                if yes:
                    self.run_worker(self._apply(_p().Promote(index=i), f"Message #{i} promoted to memory, whole."
                                                f"{along}"), group="command", exit_on_error=False)

            self.push_screen(ConfirmDialog(f"Message #{i} holds {cut[2]:,} characters, too many to edit here. "
                                           f"Promote it to memory whole? It leaves the history.{along} u undoes."),
                             answered)
            return
        self.push_screen(TextDialog(f"Promote message #{i} to memory", history[i].content,
                                    lambda text: self.edit(_p().Promote(index=i, text=text)), save_label="Promote",
                                    hint=f"It leaves the history and joins memory.{along} u undoes."),
                         self._edited(f"Message #{i} promoted to memory."))

    def action_edit(self: FlowApp) -> None:
        from flowtui.tui.screens.dialogs import TextDialog

        if not self._editable():
            return
        view = self.client.view
        target = self._sidebar_target()
        if target is None and self._not_in_conversation("e edits"):
            return
        if self._too_large_to_edit():
            return
        if target is not None:
            kind, _, key = target.partition(":")
            if kind in ("memory", "tasks"):
                i = int(key)
                items = view.memory if kind == "memory" else view.tasks
                self.push_screen(TextDialog(f"Edit {kind} item {i + 1}", items[i],
                                            lambda text: self.edit(_p().SetItem(bucket=kind, index=i, text=text))),
                                 self._edited(f"{kind.capitalize()} item {i + 1} edited."))
            else:
                value = view.state.get(key)
                text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                self.push_screen(TextDialog(f"Edit state field {key}", text,
                                            lambda t: self.edit(_p().SetField(name=key, text=t)),
                                            single_line=True, hint="Typed as JSON or plain text; checked "
                                            "against the field's type."),
                                 self._edited(f"State field {key} set."))
            return
        i = self.main.conversation.cursor
        if self._pending_call() is not None and self._makes_pending(i):
            self.edit_call()
            return
        if not 0 <= i < len(view.history):
            self.notify("Nothing selected: pick a message, or a memory item, task or field in the sidebar (tab).",
                        severity="warning")
            return
        self.push_screen(TextDialog(f"Edit message #{i} ({view.history[i].role})", view.history[i].content,
                                    lambda text: self.edit(_p().EditMessage(index=i, text=text))),
                         self._edited(f"Message #{i} edited."))

    def action_delete(self: FlowApp) -> None:
        target = self._sidebar_target()
        if target is not None and not target.startswith(("memory:", "tasks:")):
            self.notify("A state field cannot be deleted; e sets it.", severity="warning")
            return
        if not self._editable():
            return
        if target is None:
            if not self._not_in_conversation("d deletes"):
                self._delete_message()
            return
        kind, _, key = target.partition(":")
        self.run_worker(self._apply(_p().DeleteItem(bucket=kind, index=int(key)),
                                    f"{kind.capitalize()} item {int(key) + 1} deleted; u undoes."),
                        group="command", exit_on_error=False)

    def _delete_message(self: FlowApp) -> None:
        """``d`` on a message: a question that names everything that leaves with it."""
        from flowtui.runtime.wellformed import removal
        from flowtui.tui.screens.dialogs import ConfirmDialog

        i = self._message()
        if i is None:
            self.notify("Put the cursor on a message (or a memory item or task in the sidebar) to delete it.",
                        severity="warning")
            return
        history = self.client.view.history
        gone, trimmed = removal(history, i)
        call = self._pending_call()
        maker = next((j for j in gone if call is not None and self._makes_pending(j)), None)
        if maker is not None:  # the run refuses it: said now, not after a yes
            self._say_pending_stays(maker)
            return
        msg = history[i]
        question = f"Delete message #{i} ({msg.role})?"
        others = [j for j in gone if j != i]
        if msg.role == "tool" and (others or trimmed is not None):
            maker = trimmed if trimmed is not None else min(others)
            question = (f"Delete tool result #{i}? The call it answers leaves too (in #{maker}), so no call "
                        "is left unanswered.")
        if others:
            question += f" Leaving with it: {_numbers(others)}."
        if trimmed is not None:
            question += f" #{trimmed} stays, without that call."

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_worker(self._apply(_p().DeleteMessage(index=i), f"Deleted {_numbers(gone)}; u undoes."),
                                group="command", exit_on_error=False)

        self.push_screen(ConfirmDialog(question + " u undoes."), answered)

    # --- memory and tasks -----------------------------------------------------------------------
    def action_add_task(self: FlowApp) -> None:
        self._add("tasks", "Add a task")

    def action_add_memory(self: FlowApp) -> None:
        self._add("memory", "Add a memory item")

    def _add(self: FlowApp, bucket: str, title: str) -> None:
        from flowtui.tui.screens.dialogs import TextDialog

        if not self._editable():
            return

        async def add(text: str) -> Any:
            if not text.strip():
                raise ValueError("type some text first")
            return await self.edit(_p().AddItem(bucket=bucket, text=text))

        self.push_screen(TextDialog(title, "", add, single_line=True, save_label="Add", lines_ok=True),
                         self._edited(f"Added to {bucket}."))

    def action_undo(self: FlowApp) -> None:
        if self._editable():
            self.run_worker(self._apply(_p().Undo(), "Last edit undone.", nothing="Nothing to undo."),
                            group="command", exit_on_error=False)

    async def _apply(self: FlowApp, command: p.BaseModel, done: str, *, nothing: str | None = None) -> None:
        try:
            value = await self.edit(command)
        except (ValueError, ConnectionError) as exc:
            self.notify(str(exc), severity="warning")
            return
        self.notify(nothing if nothing is not None and value is False else done)
        self.wake()

    # --- the pending tool call --------------------------------------------------------------------
    def _pending_call(self: FlowApp) -> dict[str, Any] | None:
        """The tool call the run is paused before (id, name, args), if it is: its arguments as the history
        holds them now (an edit of the call changes them there, after the pause recorded them)."""
        view = self.client.view
        pause = view.pause if view is not None and view.status == "paused" else None
        call = pause.call if pause is not None and pause.point == "tool" else None
        if call is None or not call.get("id"):
            return call
        for msg in reversed(view.history):
            made = next((c for c in msg.tool_calls if c.id == call["id"]), None) if msg.role == "assistant" else None
            if made is not None:
                return {**call, "args": made.args}
        return call

    def _say_pending_stays(self: FlowApp, i: int) -> None:
        call = self._pending_call() or {}
        self.notify(f"Message #{i} asks for {call.get('name')}, the call the run is paused before, and cannot "
                    "leave before it is answered: step past the call first (or deny it, when the run asks for "
                    "approval).", severity="warning")

    def _makes_pending(self: FlowApp, i: int) -> bool:
        """Message ``i`` is the assistant message that made the pending call (or no message is selected)."""
        history = self.client.view.history
        if not 0 <= i < len(history):
            return True
        call = self._pending_call() or {}
        msg = history[i]
        return msg.role == "assistant" and any(c.id == call.get("id") for c in msg.tool_calls)

    def edit_call(self: FlowApp, then: Any = None) -> None:
        """Edit the arguments of the call the run is paused before (JSON, checked against the tool's schema)."""
        from flowtui.tui.screens.decide import call_text
        from flowtui.tui.screens.dialogs import TextDialog

        call = self._pending_call()
        if call is None:
            return
        cut = cut_inside(call.get("args"))
        if cut:
            self.notify(f"The call's arguments hold a text of {cut[2]:,} characters: too large to edit here "
                        "(the run holds them whole; approve, deny or go on as they are).", severity="warning")
            return

        said = f"The call of {call.get('name')} edited: the model sees it as edited."

        def done(result: str | None) -> None:
            if then is None:
                self._edited(said)(result)
                return
            if result is not None:  # (said in the dialog that asks again: at 80x24 a notice covered its Deny)
                self._decide_note = said
                self.wake()
            then()

        self.push_screen(TextDialog(f"Edit the call of {call.get('name')} (arguments, JSON)", call_text(call),
                                    lambda text: self.edit(_p().EditCall(text=text)), save_label="Save call",
                                    hint="Checked against the tool's schema when it is a pydantic class (a "
                                    "JSON-schema dict: unchecked); the model sees the call as edited. u undoes."), done)

    def at_pause(self: FlowApp) -> None:
        """Once per pause: say which watchpoint made it, say if the next model call would be refused,
        and ask about a call that waits."""
        view = self.client.view
        pause = view.pause if view is not None and view.status == "paused" else None
        if pause is None:
            return
        self.say_fired(pause)
        # (before a tool, a call waits for its result; an agent's own run() sends its own request, not the history)
        if pause.seq > self._checked_at and pause.point == "chat" and pause.request is None:
            self._checked_at = pause.seq
            self._check_history()
        if view.divergence is not None:  # a re-execution (--resume-from) that did otherwise than its journal:
            from flowtui.tui.screens.diverged import ask_about_divergence

            # said first, also where a call waits for approval (that pause's reason): continuing live is then
            # the decision, asked once the screen closes (moving on would approve the call unseen); deciding it
            # goes on live (Controller.proceed)
            go_on = self.action_resume if pause.reason != "approval" else lambda: None
            ask_about_divergence(self, go_on, self.action_stop)
        self.ask_decision()

    def _check_history(self: FlowApp) -> None:
        """History the flow's code broke (a tool message answering no call...): said before the call fails."""
        from flowtui.runtime.wellformed import problems

        found = problems(self.client.view.history)
        if found:
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            self.notify(f"{found[0]}{more}. The next model call will fail with this; d on the message "
                        "removes it (and what answers it).", title="The history is not a valid conversation",
                        severity="error", timeout=15)

    def ask_decision(self: FlowApp) -> None:
        """A call waits for approval (``--approve``): the decision dialog, once per pause."""
        from flowtui.tui.screens.decide import DecideDialog

        view = self.client.view
        call = self._pending_call()
        if call is None or view.pause.reason != "approval":
            return
        run_id, seq = self._decided_at
        if run_id == view.run_id and view.pause.seq <= seq:
            return
        if self.screen is not self.main:
            return  # another dialog is open: asked when it closes
        self._decided_at = (view.run_id, view.pause.seq)

        async def decide(decision: str, reason: str) -> Any:
            return await self.edit(_p().Decide(decision=decision, reason=reason))

        def decided(result: str | None) -> None:
            self._reason_draft = (key, dialog.draft) if result is None else None
            if result == "edit":
                self.edit_call(then=self._ask_again)
            elif result is None:
                # the cursor on the message that made the call, so e edits its arguments as said (it had followed
                # the result of a call denied before it, which e then edited)
                history = self.client.view.history
                made = next((i for i in range(len(history) - 1, -1, -1) if self._makes_pending(i)), None)
                if made is not None and self.main.conversation.cursor != made:
                    self.main.conversation.select(made)
                self.notify("The call waits for your decision: s runs it as it is, e edits its arguments, x stops the run.",
                            timeout=8)
            else:
                self.wake()

        agent = view.pause.path[-2] if len(view.pause.path) >= 2 else None
        key = (view.run_id, call.get("id"), call.get("name"))  # (a reason typed for this call, then esc: kept)
        draft = self._reason_draft[1] if self._reason_draft is not None and self._reason_draft[0] == key else ""
        dialog = DecideDialog(call, decide, agent=agent, draft=draft, note=self._decide_note)
        self._decide_note = ""
        self.push_screen(dialog, decided)

    def _ask_again(self: FlowApp) -> None:
        self.client.drain(0.05)  # the edit's events came before its answer: the call is asked about as edited
        self._decided_at = (None, -1)
        self.ask_decision()
