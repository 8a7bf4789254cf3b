"""Untrusted text is inert: in a real terminal (a pty), nothing a model, a tool, the flow or a
journal from elsewhere writes changes the window title, writes the clipboard, leaves the
alternate screen or asks the terminal anything, in the app, the replay and `flowtui run`; and the
text is still there to read, in visible form."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from terminal import Terminal  # noqa: E402

from flowtui.runtime.inert import is_inert, unvisible, visible  # noqa: E402

HOSTILE = "tests/tui/flows/hostile.py"
REVIEW = "tests/tui/flows/review_fn.py"
VISIBLE = "␛]0;pwned␇␛]52;c;cHduZWQ=␇"  # how the payload's first two sequences look on screen
MARKUP = "[bold red]markup[/]"
# Textual's own: it sets the pointer shape with OSC 22, ended by BEL.
TEXTUAL_BEL = b"\x1b]22;default\x07"


def assert_inert(out: bytes, title: str) -> None:
    """No byte of the payload reached the terminal as a control sequence."""
    assert b"\x1b]0;pwned" not in out and b"\x1b]2;pwned" not in out and "pwned" not in title
    assert b"\x1b]52;" not in out  # the clipboard
    assert b"\x1b[6n" not in out  # a cursor-position request (its answer is typed into the shell)
    assert b"\x1b[?1049l" not in out[:-200]  # leaving the alternate screen (allowed at exit only)
    assert b"\xc2\x9b" not in out and b"\xc2\x9d" not in out  # C1 CSI / OSC
    assert "\u202e".encode() not in out  # right-to-left override
    assert out.count(b"\x07") == out.count(TEXTUAL_BEL)  # no BEL but Textual's own


@pytest.fixture
def journal(tmp_path) -> Path:
    from flowtui.tui.cli import main

    path = tmp_path / "hostile.jsonl"
    with pytest.raises(SystemExit) as exit:
        main(["run", HOSTILE, "--input", "hi", "--journal", str(path)])
    assert exit.value.code == 0
    return path


def test_the_app_draws_every_source_visibly_and_inertly(tmp_path):
    with Terminal.flowtui(HOSTILE, "--input", "hi \x1b]0;typed\x07", "--journal", str(tmp_path / "j.jsonl"),
                          cols=160, rows=48) as term:
        term.wait_for("paused before Hostile")
        term.send("c")
        term.wait_for("● finished")
        term.wait_for("note = ␛]0;pwned")  # the sidebar is drawn on its own beat, after the status line
        screen = term.text()
        assert VISIBLE in screen and MARKUP in screen  # the reply, and markup shown as written
        assert "memory ␛]0;pwned" in screen and "task ␛]0;pwned" in screen and "note = ␛]0;pwned" in screen
        assert "hostile = ␛]0;pwned" in screen and "hi ␛]0;typed␇" in screen  # ctx, what the user typed
        for key in "234":  # what the model sees, the event log, the node tree
            term.send(key)
            term.wait_for(lambda: "pwned" in term.text(), timeout=10)
        term.send("3")
        # the tool name the model chose, kept as a provider takes it back (its control characters made _)
        term.wait_for("tool tool__0_pwned")
        term.send("1")
        term.send("q")
        assert term.wait_exit(15) == 0
        assert_inert(bytes(term.output), term.title)


def test_the_replay_of_a_hostile_journal_is_inert(journal):
    with Terminal.flowtui("replay", str(journal), cols=160, rows=48) as term:
        term.wait_for("run result: finished")
        assert VISIBLE in term.text()
        for key in ["2", "3", "4", "1", "home", "end"]:
            term.send({"home": "\x1b[H", "end": "\x1b[F"}.get(key, key))
        term.wait_for(" · run.end · ")  # the position line, at the last event
        for _ in range(40):  # scrub back through every event
            term.send("\x1b[D")
        term.wait_for(lambda: "pwned" in term.text(), timeout=10)
        term.send("q")
        assert term.wait_exit(15) == 0
        assert_inert(bytes(term.output), term.title)


def test_a_workflow_name_from_someone_elses_journal_is_drawn_inertly(journal, tmp_path):
    import json

    lines = journal.read_text().splitlines()
    start = json.loads(lines[0])
    assert start["type"] == "run.start"
    start["workflow"] += "\x1b]0;pwned\x07\x1b[2J"
    start["state"] = {"field": 1}  # the sidebar's state section is titled with the workflow's name
    forged = tmp_path / "forged.jsonl"
    forged.write_text("\n".join([json.dumps(start), *lines[1:]]) + "\n")
    with Terminal.flowtui("replay", str(forged), cols=160, rows=48) as term:
        term.wait_for("run result: finished")
        term.send("\x1b[H")  # the first event: the state section is drawn
        term.wait_for(lambda: "State · " in term.text() and "␛]0;pwned" in term.text(), timeout=10)
        term.send("q")
        assert term.wait_exit(15) == 0
        assert b"\x1b[2J" not in bytes(term.output)[200:]  # the screen cleared by the app alone, at start
        assert_inert(bytes(term.output), term.title)


def test_a_budget_from_someone_elses_journal_is_drawn_inertly(journal, tmp_path):
    """The sidebar's budget line wrote ctx.budget's keys and values as they came."""
    import json

    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    forged_set = next(ev for ev in lines if ev["type"] == "ctx.set")
    forged_set.update(name="budget", value={"chat_calls": 3, "\x1b]0;pwned\x07\x1b[2J": "\x1b]52;c;cHduZWQ=\x07"})
    forged = tmp_path / "forged.jsonl"
    forged.write_text("\n".join(json.dumps(ev) for ev in lines) + "\n")
    with Terminal.flowtui("replay", str(forged), cols=160, rows=48) as term:
        term.wait_for("run result: finished")
        term.wait_for("budget 3 chat calls · ␛]0;p")  # (the sidebar cuts the rest)
        term.send("q")
        assert term.wait_exit(15) == 0
        assert b"\x1b[2J" not in bytes(term.output)[200:]  # the screen cleared by the app alone, at start
        assert_inert(bytes(term.output), term.title)


def test_flowtui_run_prints_inertly(tmp_path):
    with Terminal.flowtui("run", HOSTILE, "--input", "hi", "--journal", str(tmp_path / "j.jsonl"),
                          cols=200, rows=60) as term:
        assert term.wait_exit(30) == 0
        out = bytes(term.output)
        assert_inert(out, term.title)
        assert "final ␛]0;pwned␇".encode() in out and b"Unknown tool 'tool" in out
        assert b"\x07" not in out  # no Textual here: no BEL at all


def test_flowtui_run_json_and_the_journal_escape_every_control_character(tmp_path, journal):
    with Terminal.flowtui("run", HOSTILE, "--input", "hi", "--json", "--no-journal", cols=200, rows=60) as term:
        assert term.wait_exit(30) == 0
        assert_inert(bytes(term.output), term.title)
    raw = journal.read_bytes()
    assert b"\x1b" not in raw and b"\x07" not in raw and b"\xc2\x9b" not in raw and "\u202e".encode() not in raw
    assert b"\\u001b]0;pwned\\u0007" in raw and b"\\u009b" in raw and b"\\u202e" in raw


def test_a_load_error_holding_escapes_is_shown_inertly(tmp_path):
    flow = tmp_path / "bad.py"
    flow.write_text('raise RuntimeError("broken \\x1b]0;pwned\\x07 [bold]x[/bold]")\n')
    with Terminal.flowtui(str(flow), "--input", "x", cols=120, rows=30) as term:
        term.wait_for("Could not load the flow")
        term.wait_for("broken ␛]0;pwned␇ [bold]x[/bold]")
        term.send("q")
        term.wait_exit(15)
        assert_inert(bytes(term.output), term.title)
    with Terminal.flowtui("run", str(flow), cols=200, rows=30) as term:
        assert term.wait_exit(30) == 2
        assert_inert(bytes(term.output), term.title)
        assert "broken ␛]0;pwned␇".encode() in bytes(term.output)


def test_typed_bytes_that_are_no_utf8_arrive_as_replacement_characters_and_the_app_goes_on(tmp_path, journal):
    """A terminal set to Latin-1 typing `café`, a stray byte: Textual's input thread raised on it and
    the app closed with a traceback (exit 0), the run with it."""
    with Terminal.flowtui(REVIEW, "--journal", str(tmp_path / "j.jsonl"), cols=120, rows=30) as term:
        term.wait_for("First message")
        term.send(b"caf\xe7 \xff\xc3(ok")
        term.wait_for("caf\ufffd \ufffd\ufffd(ok")  # in the box the keys typed went to
        term.send("\r")
        term.wait_for("paused before")
        term.send(b"\xfe")
        term.send("c")
        term.wait_for("● finished")
        term.send("q")
        assert term.wait_exit(15) == 0
        assert "Traceback" not in term.text() and b"UnicodeDecodeError" not in term.output
    with Terminal.flowtui("replay", str(journal), cols=120, rows=30) as term:
        term.wait_for("replay")
        term.send(b"\xe7\xff")
        term.send("q")
        assert term.wait_exit(15) == 0
        assert b"UnicodeDecodeError" not in term.output


def test_an_app_textual_closes_with_a_traceback_exits_1(tmp_path):
    """Textual's panic (its input thread failing) closed the app with a traceback and exit code 0."""
    with Terminal.flowtui(REVIEW, "--input", "x", "--journal", str(tmp_path / "j.jsonl"), cols=120, rows=30,
                          env={"TEXTUAL_DRIVER": "broken_driver:BrokenInput"}) as term:
        assert term.wait_exit(30) == 1
        assert b"the input thread broke" in term.output


# --- the rule itself -------------------------------------------------------------------------------------

from hypothesis import given, strategies as st  # noqa: E402


@given(st.text())
def test_visible_text_is_always_inert_and_keeps_the_printable_text(text):
    shown = visible(text)
    assert is_inert(shown)
    printable = [c for c in text if c.isprintable() and is_inert(c)]  # (a filler that draws as nothing: escaped)
    assert all(c in shown for c in printable)


def test_visible_forms():
    assert visible("\x1b]0;pwned\x07") == "␛]0;pwned␇"
    assert visible("a\r\nb\rc\x7f\x08") == "a\nb␍c␡␈"
    assert visible("\x9b31m \u202eabc\u2066") == "\\x9b31m \\u202eabc\\u2066"
    assert visible("lone \ud800 surrogate") == "lone \\ud800 surrogate"  # none can be printed
    assert visible("tab\tand newline\n stay") == "tab\tand newline\n stay"
    # invisible ones a name could hide in ("zero\u200bwidth" looked like "zerowidth"); the joiners emoji
    # and some scripts need are left alone
    assert visible("zero\u200bwidth\ufeff\u200e\u2060") == "zero\\u200bwidth\\ufeff\\u200e\\u2060"
    assert visible("👨\u200d👩 \u200c") == "👨\u200d👩 \u200c"
    # tag characters spell ASCII invisibly: an instruction hidden in a tool's output, in plain sight
    hidden = "".join(chr(0xE0000 + ord(c)) for c in "HI")
    assert visible(f"sunny{hidden} 21C") == "sunny\\U000e0048\\U000e0049 21C"
    assert visible("soft\xadhy ls\u2028ps\u2029 filler\u3164") == "soft\\u00adhy ls\\u2028ps\\u2029 filler\\u3164"


def test_an_edit_keeps_the_line_ends_and_invisible_characters_it_left_alone():
    """\r\n came back \n, and U+2028 came back as a line break, after any edit of the text."""
    original = "crlf\r\nline2 lone\rcr ls\u2028y soft\xadhy tab\there"
    edited = visible(original).replace("line2", "LINE2")
    assert unvisible(edited, original) == original.replace("line2", "LINE2")
    assert unvisible(visible(original), original) == original
    assert re.fullmatch(r"[^\x00-\x08\x0b-\x1f\x7f-\x9f]*", visible("".join(map(chr, range(0xA0)))))


async def test_the_edit_dialog_shows_control_characters_and_saving_keeps_them():
    from conftest import make, paused, press_and_pause, wait_until

    from flowtui.tui.screens.dialogs import TextDialog

    app = make(HOSTILE, input="hi")
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        await press_and_pause(pilot, "n")  # the first turn, to the pause before the second agent turn
        view = app.client.view
        original = view.history[1].content
        assert "\x1b]0;pwned\x07" in original
        app.main.conversation.select(1)
        await pilot.press("e")
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="the edit dialog")
        area = app.screen.query_one("TextArea")
        assert "\x1b" not in area.text and "␛]0;pwned␇" in area.text
        area.text = area.text.replace("reply", "REPLY")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: "REPLY" in app.client.view.history[1].content, what="the edit")
        assert app.client.view.history[1].content == original.replace("reply", "REPLY")


def test_an_edit_near_the_start_saved_with_the_cursor_at_the_end_keeps_every_escape_after_it():
    """The cursor told where the text left as it was begins: at the end, none of it was, and 4,000 ESCs
    after the edit were saved as the character ␛ (past 20,000 characters nothing is aligned)."""
    original = "\x1b[1m" + "abc \x1b x\n" * 4000
    assert unvisible("Z" + visible(original), original, after=0) == "Z" + original


@pytest.mark.parametrize("where", ["start", "end"])
async def test_an_escape_typed_just_as_one_shown_stays_as_typed_wherever_it_is_typed(where):
    """The user message `A \\u202e B <U+202E> C`, and `A \\u202e B \\u202e C X` typed before it: the typed
    `\\u202e` went to the model as a real U+202E, and the real one as six characters."""
    from conftest import FLOWS, make, paused, wait_until

    from flowtui.tui.screens.dialogs import TextDialog

    original = "A \\u202e B \u202e C"
    typed = "A \\u202e B \\u202e C X"
    app = make(str(FLOWS / "review_fn.py"), input=original)
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        app.main.conversation.select(0)
        await pilot.press("e")
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="the edit dialog")
        area = app.screen.query_one("TextArea")
        area.move_cursor((0, 0) if where == "start" else area.document.end)
        await pilot.press(*[{"\\": "backslash", " ": "space"}.get(ch, ch) for ch in typed])
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.client.view.history[0].content != original, what="the edit")
        expected = typed + original if where == "start" else original + typed
        assert app.client.view.history[0].content == expected


async def test_a_long_text_for_the_pager_is_made_safe_apart_exactly_as_a_short_one():
    """Past a megabyte, the pager's text is made safe in a process of its own (the app stays
    responsive): the same text as shown() makes, every key hidden and every escape visible."""
    from flowtui.tui.shown import APART_CHARS, shown, shown_apart

    key = "sk-proj-" + "Ab3d" * 12
    line = f"row \x1b]0;pwned\x07 \x1b[31mred\x1b[0m key={key} é 日本 \ud800 end\n"
    text = line * (APART_CHARS // len(line) + 10)
    import asyncio

    ticks = 0

    async def tick() -> None:  # the event loop goes on meanwhile
        nonlocal ticks
        while True:
            await asyncio.sleep(0.001)
            ticks += 1

    ticker = asyncio.create_task(tick())
    made = await shown_apart(text)
    ticker.cancel()
    assert ticks > 5
    assert made == shown(text)
    assert key not in made and "\x1b" not in made and "\x07" not in made and "␛]0;pwned␇" in made


def test_a_paste_holding_escape_sequences_is_text_never_keys(tmp_path):
    """A line copied from coloured output, pasted: Textual's parser read `\\x1b[Kc` inside the paste as
    a sequence it did not know and sent it as keys (`c` continued the run, live), and in a dialog the
    text came reordered (`^[2JcdXab`)."""
    with Terminal.flowtui(REVIEW, "--input", "hi", "--journal", str(tmp_path / "j.jsonl"), cols=120,
                          rows=30) as term:
        term.wait_for("paused before")
        term.send(b"\x1b[200~error: \x1b[Kc and \x1b[0m x\x1b[201~")
        term.send("?")  # (answered after the paste: the paste is behind it)
        term.wait_for("flowtui keys")
        assert "paused before" in term.text() and "Promote" not in term.text(), term.text()
        term.send("\x1b")
        term.wait_for(lambda: "flowtui keys" not in term.text())
        term.send("A")
        term.wait_for("memory item")
        # in the box, as the panes would show it: drawn as it came, the paste wiped the screen (the
        # dialog and the panes gone) and set the window's title
        term.send(b"\x1b[200~Xab\x1b[2Jcd\x1b]0;pwned\x07\x1b[201~")
        term.wait_for("Xab␛[2Jcd␛]0;pwned␇")
        assert "memory item" in term.text() and "paused before" in term.text(), term.text()
        assert "pwned" not in term.title
        term.send("\x13")  # ctrl+s
        term.wait_for(lambda: "memory item" not in term.text())
        term.wait_for("Xab␛[2Jcd␛]0;pwned␇")  # in memory, whole and in order, as the box showed it
        assert "paused before" in term.text()
        term.send("q")
        assert term.wait_exit(15) == 0


def test_a_paste_is_taken_whole_however_the_reads_cut_it():
    """The terminal's input comes in reads of any length: a marker cut between two is still one."""
    from textual import events

    from flowtui.tui.driver import Pastes

    typed = "ab\x1b[Aq\x1b[200~error: \x1b[Kc\x00\x1b[201~\x1b[<0;3;4Mz"
    for cut in range(1, len(typed)):
        pastes = Pastes()
        parts = pastes.feed(typed[:cut]) + pastes.feed(typed[cut:]) + [pastes.flush()]
        keys = "".join(p for p in parts if isinstance(p, str))
        assert keys == "ab\x1b[Aq\x1b[<0;3;4Mz", (cut, parts)
        assert [p.text for p in parts if isinstance(p, events.Paste)] == ["error: ␛[Kc"], (cut, parts)
    # terminals send a paste's line breaks as \r: newlines, not ␍ (the box kept one line of ␍s)
    pastes = Pastes()
    parts = pastes.feed("\x1b[200~one\rtwo\r\nthree\x1b[201~")
    assert [p.text for p in parts if isinstance(p, events.Paste)] == ["one\ntwo\nthree"]
    # a bidi override or isolate reordered the box's line as drawn, and what draws as nothing (a mark, a
    # zero-width space, a soft hyphen, tag characters spelling "hi") went to the model unseen: shown as the
    # panes show them
    pastes = Pastes()
    parts = pastes.feed("\x1b[200~name: \u202eevil\u202c and \u2067x\u2069 \u200fmark soft\u00adhy a\u200bb"
                        "\U000e0068\U000e0069\x1b[201~")
    assert [p.text for p in parts if isinstance(p, events.Paste)] == [
        "name: \\u202eevil\\u202c and \\u2067x\\u2069 \\u200fmark soft\\u00adhy a\\u200bb\\U000e0068\\U000e0069"]


def test_ctrl_l_draws_the_whole_screen_again_after_something_else_wrote_on_the_terminal():
    """Something the flow started may write on the app's terminal by its path (/dev/pts/N, which is not
    the worker's stdout): the screen stayed garbled, the key bar gone, and nothing drew it again."""
    import os

    with Terminal.flowtui(REVIEW, "--input", "x", "--no-journal", cols=100, rows=30) as term:
        term.wait_for("paused before")
        term.wait_for("? keys")  # the key bar, drawn
        with open(os.readlink(f"/proc/{term.proc.pid}/fd/0"), "w") as tty:
            tty.write("\x1b[2J\x1b[H" + "GARBAGE " * 300)
        term.wait_for("GARBAGE")
        os.write(term.master, b"\x0c")  # ctrl+l

        def redrawn() -> bool:  # the whole screen: the redraw comes in several writes, the first wipes
            shown = term.text()
            return ("GARBAGE" not in shown and "paused before" in shown and "? keys" in shown
                    and shown.splitlines()[0].startswith("╭─ Conversation"))  # the panes' borders too

        term.wait_for(redrawn, timeout=15)
        os.write(term.master, b"q")
        term.wait_exit(15)
