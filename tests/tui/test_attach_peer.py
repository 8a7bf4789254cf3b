"""`flowtui attach` to a peer that is not flowtui: what it says is shown, never obeyed beyond the protocol.
The peer here is a few lines of asyncio speaking the protocol badly on purpose."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable

from conftest import make, paused, wait_until

HELLO = {"type": "hello", "protocol": 1, "workflow": "W", "agents": ["A"], "tools": [], "started": True}
START = {"seq": 1, "ts": 1.0, "run_id": "r1", "node_id": None, "parent_id": None, "origin": "runtime",
         "type": "run.start", "workflow": "W", "input": "x", "memory": [], "state": {}, "file": None, "data": {},
         "resumed_from": None}


def pause_before(name: str) -> dict:
    return {"seq": 2, "ts": 1.0, "run_id": "r1", "node_id": None, "parent_id": None, "origin": "runtime",
            "type": "run.pause", "point": "agent", "name": name, "reason": "start", "path": ["W", name],
            "prompt": "p", "request": None, "call": None, "watch": None}


async def peer(says: list[dict], heard: list[dict], refuse: str | None = None,
               leave: bool = False) -> tuple[asyncio.AbstractServer, int]:
    """A server that takes any token, says ``says``, and keeps what the client sends in ``heard``; with
    ``refuse``, it answers every command with that error; with ``leave``, it hangs up once it has said
    them."""

    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()  # the auth line
        writer.write(b"".join(json.dumps(m).encode() + b"\n" for m in says))
        await writer.drain()
        if leave:
            writer.close()
            return
        while line := await reader.readline():
            heard.append(json.loads(line))
            if refuse is not None:
                writer.write(json.dumps({"type": "reply", "id": heard[-1]["id"], "ok": False,
                                         "error": refuse}).encode() + b"\n")

    server = await asyncio.start_server(client, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def attached(port: int):
    return make(f"127.0.0.1:{port}", attach=("127.0.0.1", port, "any-token-will-do", False), journal=None)


def notices(app) -> Callable[[], str]:
    return lambda: " ".join(str(n.message) for n in app._notifications)  # (what the toasts say)


async def test_b_on_a_step_name_no_breakpoint_takes_says_so_and_the_app_stays():
    """A peer pausing before "A\\x1b[31m" (or a 400-character name): b raised a ValidationError and the
    app closed with a traceback."""
    for name in ("A\x1b[31m", "A" * 400):
        heard: list[dict] = []
        server, port = await peer([HELLO, START, pause_before(name)], heard)
        app = attached(port)
        try:
            async with app.run_test() as pilot:
                await paused(pilot)
                await pilot.press("b")
                await wait_until(pilot, lambda: "No breakpoint can be set on" in notices(app)(),
                                 what="the refusal")
                assert app.is_running and app.client.breakpoints == set()
                assert not [m for m in heard if m.get("type") == "breakpoint"]
        finally:
            server.close()


async def test_a_second_hello_is_ignored_and_never_asks_for_a_first_message():
    """A peer saying hello again as a run not started yet made the app ask "First message for Session
    expired: paste your OPENAI_API_KEY", and sent what was typed there to the peer."""
    heard: list[dict] = []
    again = {**HELLO, "started": False, "workflow": "Session expired: paste your OPENAI_API_KEY"}
    server, port = await peer([HELLO, again, START, pause_before("A")], heard)
    app = attached(port)
    try:
        async with app.run_test() as pilot:
            await paused(pilot)
            await pilot.pause(0.2)
            assert app.client.hello.workflow == "W"
            assert app.screen is app.main  # no dialog asking for a first message
            assert not [m for m in heard if m.get("type") == "start"]
            await wait_until(pilot, lambda: "sent a hello after its hello; it was ignored" in notices(app)(),
                             what="the warning")
    finally:
        server.close()


async def test_a_load_error_after_the_peers_hello_is_said_as_coming_after_it():
    """It was said as "a second load.error", though it was the first (after a hello)."""
    heard: list[dict] = []
    late = {"type": "load.error", "message": "boom"}
    server, port = await peer([HELLO, START, pause_before("A"), late], heard)
    app = attached(port)
    try:
        async with app.run_test() as pilot:
            await paused(pilot)
            await wait_until(pilot, lambda: "sent a load.error after its hello; it was ignored" in notices(app)(),
                             what="the warning")
            assert app.is_running and app.client.hello.workflow == "W"
    finally:
        server.close()


async def test_a_load_error_from_the_peer_is_said_as_one():
    """It was said as "the connection closed before the run answered", the peer's message lost."""
    heard: list[dict] = []
    error = {"type": "load.error", "message": "boom \x1b]0;x\x07", "file": "flow.py", "line": 5, "cls": None,
             "traceback": None}
    server, port = await peer([error], heard)
    app = attached(port)
    try:
        async with app.run_test() as pilot:
            await wait_until(pilot, lambda: not app.is_running, timeout=15, what="the app to give up")
        assert app.refused.startswith("the run could not load its flow: boom") and "(flow.py:5)" in app.refused
    finally:
        server.close()


@contextlib.asynccontextmanager
async def paused_on_peer(refuse: str | None = None) -> AsyncIterator[tuple]:
    """The app attached to a peer pausing before A, paused there: (app, pilot, what the peer heard)."""
    heard: list[dict] = []
    server, port = await peer([HELLO, START, pause_before("A")], heard, refuse)
    app = attached(port)
    try:
        async with app.run_test() as pilot:
            await paused(pilot)
            yield app, pilot, heard
    finally:
        server.close()


async def test_a_step_the_run_never_answers_is_said_unanswered():
    """A peer that takes commands and answers none: s showed nothing at all, the status as it was."""
    async with paused_on_peer() as (app, pilot, heard):
        await pilot.press("s")
        await wait_until(pilot, lambda: "The run has not answered for 3 s" in notices(app)(), timeout=15,
                         what="the notice")
        assert [m["type"] for m in heard if m.get("type") == "step"] == ["step"]


async def test_b_on_a_run_that_never_answers_is_not_said_set():
    """A mute peer: b said "Breakpoint on A set." though nothing had taken it."""
    async with paused_on_peer() as (app, pilot, heard):
        await pilot.press("b")
        await wait_until(pilot, lambda: "Breakpoint on A: the run has not answered for 3 s" in notices(app)(),
                         timeout=15, what="the notice")
        assert "Breakpoint on A set." not in notices(app)()
        assert [(m["type"], m["name"], m["on"]) for m in heard if m.get("type") == "breakpoint"] == [
            ("breakpoint", "A", True)]


async def test_a_breakpoint_the_run_refuses_is_said_and_put_back():
    async with paused_on_peer(refuse="no breakpoints here") as (app, pilot, heard):
        await pilot.press("b")
        await wait_until(pilot, lambda: "Breakpoint on A not set: no breakpoints here." in notices(app)(),
                         what="the refusal")
        assert app.client.breakpoints == set()


async def test_b_once_the_attached_run_has_ended_says_no_run_will_take_it():
    """b after an attached run finished said "Breakpoint on A set (for the next run)": no next run
    starts here (r says to reload it where it runs); nor once the app is detached from it."""
    end = {**START, "seq": 3, "type": "run.end", "status": "finished", "output": "ok", "error": None,
           "reason": None, "duration_ms": 1.0, "totals": None}
    for key in ("workflow", "input", "memory", "state", "file", "data", "resumed_from"):
        del end[key]
    server, port = await peer([HELLO, START, pause_before("A"), end], [], leave=True)
    app = attached(port)
    try:
        async with app.run_test() as pilot:
            await wait_until(pilot, lambda: app.client.view is not None and app.client.view.status == "finished",
                             what="the run's end")
            app.action_toggle_breakpoint("A")
            await wait_until(pilot, lambda: "No breakpoint can be set on A: the attached run has ended" in
                             notices(app)(), what="the refusal")
            assert "next run" not in notices(app)().replace("no next run", "") and app.client.breakpoints == set()
    finally:
        server.close()
    server, port = await peer([HELLO, START, pause_before("A")], [], leave=True)  # hangs up mid-run
    app = attached(port)
    try:
        async with app.run_test() as pilot:
            await wait_until(pilot, lambda: app.client.detached is not None, what="the app detached")
            app.action_toggle_breakpoint("A")
            await wait_until(pilot, lambda: "No breakpoint can be set on A: the app is detached from the run" in
                             notices(app)(), what="the refusal")
    finally:
        server.close()


async def test_an_attached_app_offers_no_reload_on_its_buttons_key_bar_help_or_palette():
    """r reload was on the key bar and a button of an attached app, which cannot reload: the flow's
    file is where the run lives (r only said so); f fork was in its help and palette, likewise."""
    from flowtui.tui.screens.dialogs import HelpScreen

    server, port = await peer([HELLO, START, pause_before("A")], [])
    app = attached(port)
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await paused(pilot)
            buttons = [str(b.label) for b in app.main.query("#buttons Button")]
            assert buttons and not any("eload" in label for label in buttons), buttons
            assert "reload" not in app.main.query_one("KeyBar").render().plain
            assert not any("reload" in str(c.title) or "fork" in str(c.title)
                           for c in app.get_system_commands(app.screen))
            await pilot.press("question_mark")
            await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), what="the help")
            assert "Reload the flow file" not in str(app.screen.groups) and "Fork:" not in str(app.screen.groups)
    finally:
        server.close()


async def test_a_malformed_hello_ends_the_attach_before_anything_is_shown_or_sent():
    """A hello missing its fields was left out, and the events after it were shown and stepped through
    for 10 s, until the app gave up waiting for a hello."""
    for first, said in (({"type": "hello", "protocol": 1}, "a malformed message"), (START, "an event")):
        heard: list[dict] = []
        server, port = await peer([first, START, pause_before("A")], heard)
        app = attached(port)
        try:
            async with app.run_test() as pilot:
                await pilot.press("s")
                await wait_until(pilot, lambda: not app.is_running, timeout=15, what="the app to give up")
            assert app.refused.startswith(f"it sent {said} before its hello: not a run served by flowtui run "
                                          "--listen"), app.refused
            assert heard == []  # nothing sent: no step, no start
        finally:
            server.close()


async def test_a_refused_token_is_said_as_refused_whatever_the_peer_sends_after_it():
    """A peer refusing the token then sending an event in the same breath: the attach said it sent an
    event before its hello, and "token rejected" was lost."""
    refusal = {"type": "reply", "id": 0, "ok": False, "error": "token rejected"}
    server, port = await peer([refusal, START], [])
    app = attached(port)
    try:
        async with app.run_test() as pilot:
            await wait_until(pilot, lambda: not app.is_running, timeout=15, what="the app to give up")
        assert app.refused == "token rejected"
    finally:
        server.close()


async def test_a_peer_that_hangs_up_before_its_run_starts_is_said_lost():
    """Closed after its hello, before any event: the app said "● idle" for ever, s did nothing, and
    nothing said the connection was gone (as it is once one event came)."""
    hello = {**HELLO, "file": "/x.py", "pid": 1, "notes": [], "breakpoints": [], "watches": [],
             "model_middlewares": []}
    server, port = await peer([hello], [], leave=True)
    app = attached(port)
    try:
        async with app.run_test() as pilot:
            await wait_until(pilot, lambda: "detached: the connection to the run was lost" in
                             str(app.main.query_one("#status").render()), what="the loss said")
            assert app.is_running
    finally:
        server.close()


async def test_every_protocol_fault_of_a_peer_is_said_and_listed_not_only_the_first():
    """Sixteen different faults arriving together were said as the first one "(+15 more like it)", the others lost;
    an event of an unknown type was said to be "no command" (listing the commands), and a reply to no command the
    app sent was ignored without a word."""
    heard: list[dict] = []
    unknown = {**pause_before("A"), "seq": 3, "type": "bogus.type"}
    stray = {"type": "reply", "id": 77, "ok": True, "error": None, "value": None}
    server, port = await peer([HELLO, START, pause_before("A"), unknown, stray, {**HELLO, "workflow": "again"}],
                              heard)
    app = attached(port)
    try:
        async with app.run_test() as pilot:
            await paused(pilot)
            await wait_until(pilot, lambda: "broke the protocol" in " ".join(str(n.title) for n in app._notifications),
                             what="the warning")
            said = notices(app)()
            assert "no event or message is of type 'bogus.type'" in said and "the commands:" not in said, said
            assert "a reply to a command this app never sent (id 77); it was ignored" in said, said
            assert "sent a hello after its hello; it was ignored" in said, said
            listed = "\n".join(app.client.faults)
            for fault in ("bogus.type", "(id 77)", "hello after its hello"):
                assert fault in listed, listed
    finally:
        server.close()
