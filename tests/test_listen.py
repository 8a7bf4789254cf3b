"""A run served on a socket (``flowtui run FLOW --listen``) against clients that misbehave: what
arrives before ``auth`` is bounded in size, time and number; every command after it gets one reply,
in order; addresses that cannot be used are refused with exit 2. Time bounds are generous."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from terminal import Terminal  # noqa: E402

from flowtui.runtime import protocol as p
from flowtui.runtime.errors import ConfigError
from flowtui.runtime.listen import MAX_FIRST_LINE, MAX_LINE, Listener, parse_address
from flowtui.runtime.sender import Owed
from flowtui.runtime.sender import MAX_BEHIND

ROOT = Path(__file__).resolve().parents[1]
HANG = 30  # seconds: past this, something hangs


def flowtui(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "from flowtui.tui.cli import main; main()", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def ran(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=HANG)


@pytest.fixture
def listening():
    proc = flowtui("run", "flows/revisao.py", "--input", "x", "--listen", "127.0.0.1:0", "--no-journal")
    port = int(proc.stderr.readline().rsplit(":", 1)[1])
    token = proc.stderr.readline().split()[1]
    yield proc, port, token
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def rest(proc: subprocess.Popen) -> tuple[str, str]:
    """What is left of the process's stdout and stderr, once it ends (``communicate`` would lose what
    ``readline`` has already buffered)."""
    pool = concurrent.futures.ThreadPoolExecutor(2)
    try:
        out, err = pool.submit(proc.stdout.read), pool.submit(proc.stderr.read)
        return out.result(timeout=HANG), err.result(timeout=HANG)
    finally:
        pool.shutdown(wait=False)  # a timeout: the caller kills the process, which ends the reads


def messages(sock: socket.socket, until, timeout: float = HANG) -> list[dict]:
    """What the server sent, until ``until(messages)`` holds or the connection ends."""
    sock.settimeout(timeout)
    buf, out = b"", []
    while not until(out):
        chunk = sock.recv(1 << 16)
        if not chunk:
            break
        buf += chunk
        *lines, buf = buf.split(b"\n")
        out += [json.loads(line) for line in lines if line.strip()]
    return out


def replies(msgs: list[dict]) -> list[tuple]:
    return [(m["id"], m["ok"], m["error"]) for m in msgs if m["type"] == "reply"]


def closed(sock: socket.socket) -> bool:
    """The server has closed its end (EOF, or a reset for what it left unread)."""
    sock.settimeout(HANG)
    try:
        while sock.recv(1 << 16):
            pass
    except ConnectionResetError:
        pass
    return True


def auth(token: str, **more) -> bytes:
    return json.dumps({"type": "auth", "token": token, **more}).encode() + b"\n"


BUSY = "another client is attached to this run (flowtui attach --take-over detaches it)"


# --- before auth ------------------------------------------------------------------------------
def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the server's memory from /proc")
def test_an_over_long_first_line_is_refused_and_closed_and_memory_stays_bounded(listening):
    proc, port, token = listening
    before = rss_kb(proc.pid)
    sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
    chunk = b"x" * (1 << 20)
    sent = 0
    try:
        while sent < 100 * len(chunk):  # 100 MB, no newline: the server stops reading long before
            sock.sendall(chunk)
            sent += len(chunk)
    except OSError:  # closed under us: what we want
        pass
    assert sent < 100 * len(chunk), "the server read 100 MB of a first line"
    assert closed(sock)
    assert rss_kb(proc.pid) - before < 32 * 1024  # KiB: not the megabytes sent
    c = socket.create_connection(("127.0.0.1", port), timeout=HANG)  # a real client still attaches
    c.sendall(auth(token))
    assert messages(c, lambda out: out)[0]["type"] == "hello"


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the server's memory from /proc")
def test_a_client_sending_large_edits_faster_than_the_run_takes_them_is_held_back(listening):
    """The worker process applies edits slower than a socket brings them: what was handed on and not
    taken yet grew without end (800 edits of 1 MiB: flowtui run at 2.2 GB). Now reading the client
    waits, every edit is still applied and answered, and the server stays small."""
    proc, port, token = listening
    before = rss_kb(proc.pid)
    sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
    sock.sendall(auth(token))
    answered: list[dict] = []
    reader = threading.Thread(target=lambda: answered.extend(
        m for m in messages(sock, lambda out: len(replies(out)) >= 400, timeout=120) if m["type"] == "reply"))
    reader.start()
    text, peak = "z" * (1 << 20), 0
    for i in range(400):
        sock.sendall(json.dumps({"type": "add_item", "id": i + 1, "bucket": "tasks", "text": text}).encode() + b"\n")
        if i % 10 == 0:
            peak = max(peak, rss_kb(proc.pid))
    reader.join(timeout=120)
    assert [(r["id"], r["ok"]) for r in answered] == [(i + 1, True) for i in range(400)], answered[-3:]
    assert peak - before < 256 * 1024, f"the server grew by {(peak - before) // 1024} MB"  # (KiB)


def test_a_flood_of_small_commands_is_answered_each_once_and_what_waits_for_the_run_is_bounded(tmp_path):
    """60-byte edits stayed under the 8 MiB the server hands on unread, and were read on at once: 25 MiB of them
    grew the serving process by 290 MB and the run's by 390 MB. Past 1,024 unanswered, one is refused at once.
    (The run is held in a tool that never returns: none is answered until the stop.)"""
    with serve(f"{MISBEHAVE}:SyncLoop", tmp_path / "j.jsonl") as (proc, port, token):
        sock = into_the_tool(port, token)
        n = 1100
        got: list[dict] = []
        reader = threading.Thread(target=lambda: got.extend(
            m for m in messages(sock, lambda out: len(replies(out)) >= n + 1, timeout=120) if m["type"] == "reply"))
        reader.start()
        sock.sendall(b"".join(json.dumps({"type": "add_item", "id": i, "bucket": "tasks", "text": f"t{i}"}).encode()
                              + b"\n" for i in range(2, n + 2)) + json.dumps({"type": "stop", "id": n + 2}).encode()
                     + b"\n")
        reader.join(timeout=150)
        assert sorted(r["id"] for r in got) == list(range(2, n + 3))  # each answered, once
        refused = [r["id"] for r in got if r["error"] == "1024 commands are still to be answered: send this one "
                                                          "again once their replies came"]
        # past the 1,024 handed on to the held run (up to MAX_QUEUED more were on their way to it, not counted yet)
        assert refused and refused == list(range(refused[0], n + 2)) and 1024 + 2 <= refused[0] <= 1024 + 2 + 64
        assert next(r for r in got if r["id"] == n + 2)["ok"]  # the stop, behind them all, was taken
        assert proc.wait(timeout=HANG) == 0


def test_a_first_line_just_too_long_is_refused_with_why(listening):
    proc, port, token = listening
    sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
    sock.sendall(b"y" * (MAX_FIRST_LINE + 1))  # no newline yet; the rest would never come
    refused = messages(sock, lambda out: out)
    assert replies(refused) == [(0, False, "the first line must be auth, under 64 KiB")]
    assert closed(sock)


class Idle:
    """A worker nobody authenticates to: the listener only sets these."""

    backlog: list[bytes] | None = None
    send = None


def on_a_listener(test, worker=None, **options):
    """Run ``test(port, listener)`` (blocking, in a thread) against a listener on this event loop."""
    async def main():
        listener = Listener(worker or Idle(), "127.0.0.1:0", token="t", **options)
        listener.start()
        try:
            return await asyncio.to_thread(test, listener.port, listener)
        finally:
            listener.close()

    return asyncio.run(main())


def test_a_silent_connection_is_refused_and_closed_at_the_auth_deadline():
    def test(port, listener):
        sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
        t0 = time.monotonic()
        said = messages(sock, lambda out: False)  # until the server closes
        assert replies(said) == [(0, False, "no auth within 0.5 s")]
        assert 0.4 < time.monotonic() - t0 < 10

    on_a_listener(test, auth_timeout=0.5)


def test_the_auth_deadline_is_one_for_the_whole_line_not_one_per_read():
    def test(port, listener):
        sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
        t0 = time.monotonic()
        stop = threading.Event()

        def dribble():  # a byte every 0.2 s never ends a line
            while not stop.is_set():
                try:
                    sock.sendall(b"{")
                except OSError:
                    return
                time.sleep(0.2)

        threading.Thread(target=dribble, daemon=True).start()
        try:
            said = messages(sock, lambda out: False)
        finally:
            stop.set()
        assert replies(said) == [(0, False, "no auth within 1 s")]
        assert time.monotonic() - t0 < 10

    on_a_listener(test, auth_timeout=1.0)


def test_silent_connections_are_bounded_and_cannot_keep_a_client_out(listening):
    """At most MAX_PENDING connections wait to authenticate: one more lets the oldest go (said to
    it), so connections that send nothing never lock the person with the token out."""
    from flowtui.runtime.listen import MAX_PENDING

    proc, port, token = listening
    silent = [socket.create_connection(("127.0.0.1", port), timeout=HANG) for _ in range(MAX_PENDING)]
    client = socket.create_connection(("127.0.0.1", port), timeout=HANG)
    client.sendall(auth(token))
    assert messages(client, lambda out: out)[0]["type"] == "hello"  # attached, the silent ones still open
    t0 = time.monotonic()
    assert replies(messages(silent[0], lambda out: False)) == [
        (0, False, f"let go before authenticating: {MAX_PENDING} newer connections were waiting")]
    assert time.monotonic() - t0 < 5  # at once, not at the auth deadline
    for sock in silent + [client]:
        sock.close()


# --- after auth -------------------------------------------------------------------------------
def test_a_refusal_pipelined_with_auth_is_never_lost(listening):
    proc, port, token = listening
    for attempt in range(6):
        sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
        sock.sendall(auth(token) + b'{"id":5,"type":"step",\n' + b'{"id":6,"type":"pause"}\n')
        got = replies(messages(sock, lambda out: len(replies(out)) >= 2))
        assert [(i, ok) for i, ok, _ in got] == [(-1, False), (6, True)], (attempt, got)
        sock.sendall(b'{"id":7,"type":"detach"}\n')
        assert replies(messages(sock, lambda out: replies(out))) == [(7, True, None)]
        sock.close()


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the server's memory from /proc")
def test_an_over_long_command_line_is_refused_read_on_unkept_and_the_connection_goes_on(listening):
    proc, port, token = listening
    sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
    sock.sendall(auth(token))
    messages(sock, lambda out: out)  # hello
    before = rss_kb(proc.pid)
    chunk = b"z" * (1 << 20)
    sock.sendall(b'{"id":5,"type":"add","bucket":"memory","item":"')
    for _ in range(MAX_LINE // len(chunk) * 3):  # three times the longest line a command may be
        sock.sendall(chunk)
    sock.sendall(b'"}\n{"id":6,"type":"pause"}\n')
    got = replies(messages(sock, lambda out: len(replies(out)) >= 2))
    assert got == [(-1, False, "a command line must be under 64 MiB; this one was read and dropped"),
                   (6, True, None)]
    assert rss_kb(proc.pid) - before < 2 * MAX_LINE // 1024  # KiB: at most one line's worth, not all of it


def test_a_client_that_never_reads_does_not_hold_the_run_and_ctrl_c_still_stops_it(tmp_path):
    import signal

    journal = tmp_path / "j.jsonl"
    proc = flowtui("run", "flows/revisao.py", "--input", "x", "--listen", "127.0.0.1:0", "--journal", str(journal))
    try:
        port = int(proc.stderr.readline().rsplit(":", 1)[1])
        token = proc.stderr.readline().split()[1]
        sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(auth(token))
        sock.settimeout(0.5)
        flood = b'{"type":"watch","id":3}\n' * 2000
        t0 = time.monotonic()
        while time.monotonic() - t0 < 4:  # commands pipelined, replies never read: the server's writes fill up
            try:
                sock.sendall(flood)
            except (TimeoutError, OSError):
                break
        other = socket.create_connection(("127.0.0.1", port), timeout=HANG)  # the server still answers
        other.sendall(auth(token))
        assert replies(messages(other, lambda out: out)) == [(0, False, BUSY)]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(HANG) == 0  # stopped, as a run stopped by ctrl-C is
        last = json.loads(journal.read_text().splitlines()[-1])
        assert last["type"] == "run.end" and last["status"] == "stopped"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_client_may_attach_again_as_soon_as_its_detach_is_answered(listening):
    proc, port, token = listening
    for attempt in range(200):
        sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
        sock.sendall(auth(token) + b'{"id":7,"type":"detach"}\n')
        got = messages(sock, lambda out: replies(out))
        assert got[0]["type"] == "hello", (attempt, got[:1])
        assert replies(got) == [(7, True, None)], attempt
        sock.close()


def test_auth_again_is_refused_as_already_authenticated(listening):
    proc, port, token = listening
    sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
    sock.sendall(auth(token) + b'{"id":3,"type":"auth","token":"anything"}\n' + b'{"id":4,"type":"pause"}\n')
    got = replies(messages(sock, lambda out: len(replies(out)) >= 2))
    assert got == [(3, False, "already authenticated: auth is the first line only"), (4, True, None)]


def test_a_command_cut_short_by_the_connections_end_is_not_carried_out_and_is_said(listening):
    """`printf '{...stop...}' | nc`: a last line without its line end was dropped in silence."""
    proc, port, token = listening
    sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
    sock.sendall(auth(token) + b'{"id":4,"type":"pause"}\n')
    assert replies(messages(sock, lambda out: len(replies(out)) >= 1)) == [(4, True, None)]
    sock.sendall(b'{"id":5,"type":"stop"}')
    sock.shutdown(socket.SHUT_WR)
    assert closed(sock)
    sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)  # the run goes on, and waits
    sock.sendall(auth(token) + b'{"id":6,"type":"pause"}\n')
    assert replies(messages(sock, lambda out: len(replies(out)) >= 1)) == [(6, True, None)]
    proc.kill()
    _, err = rest(proc)
    assert ("flowtui: the attached client closed its connection inside a command line (22 bytes, no line end): it "
            "was not carried out; a command ends with a line break") in err, err


def test_a_command_without_an_id_is_refused_not_carried_out(listening):
    """{"type": "step"} stepped the run and was answered with id 0, what a wrong token and a take-over are
    answered with; an id of null was refused."""
    proc, port, token = listening
    sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
    sock.sendall(auth(token) + b'{"type":"step"}\n' + b'{"id":4,"type":"pause"}\n')
    got = messages(sock, lambda out: any(m.get("id") == 4 for m in out))
    assert [m["type"] for m in got if m["type"].startswith("run.")] == ["run.start", "run.pause"], got  # no step
    assert replies(got) == [(-1, False, "not a command: a step command needs an id: a JSON integer from 1, "
                                        "which its reply carries back"), (4, True, None)]


def test_a_command_with_a_key_it_does_not_take_or_an_id_of_the_servers_is_refused(listening):
    """A misspelt key ({"reasn": ...}) and a run_id on a breakpoint were taken silently, and did nothing the
    client meant; an id of -1 or 0 was carried out, its reply not told from the server's refusals."""
    proc, port, token = listening
    sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
    sock.sendall(auth(token) + b'{"type":"stop","id":1,"reasn":"enough"}\n'
                 + b'{"type":"breakpoint","id":2,"name":"RevisorAgent","run_id":"r2"}\n'
                 + b'{"type":"step","id":-1}\n{"type":"step","id":0}\n{"type":"watch","id":3}\n')
    got = messages(sock, lambda out: any(m.get("id") == 3 for m in out))
    assert [m["type"] for m in got if m["type"].startswith("run.")] == ["run.start", "run.pause"], got  # no stop, no step
    said = replies(got)
    assert said[:2] == [
        (1, False, "not a command: stop.reasn: a stop command takes no such key (it takes id, type, reason)"),
        (2, False, "not a command: breakpoint.run_id: a breakpoint command takes no such key "
                   "(it takes id, type, name, on)")], said
    assert [(i, ok) for i, ok, _ in said[2:]] == [(-1, False), (-1, False), (3, True)], said
    assert all("step.id" in error for _, _, error in said[2:4]), said
    sock.close()


def test_a_line_with_no_type_or_an_unknown_one_is_told_so_in_words_and_blank_lines_before_auth_pass(listening):
    """{} was told "Unable to extract tag using discriminator 'type'", an unknown type was given every tag,
    auth (refused after the first line) among them, and a blank line before auth ended the connection."""
    proc, port, token = listening
    sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
    sock.sendall(b"\n\r\n" + auth(token) + b'{"id":1}\n{"type":"nope","id":2}\n{"type":"undo","id":3,"x":1}\n'
                 + b'{"type":"pause","id":4}\n')
    got = messages(sock, lambda out: any(m.get("id") == 4 for m in out))
    commands = "(the commands: start, step, next_turn, loop_once, continue, pause, stop, breakpoint, watch, promote, "
    said = replies(got)
    assert [(i, ok) for i, ok, _ in said] == [(1, False), (2, False), (3, False), (4, True)], said
    assert said[0][2].startswith('not a command: it has no "type" ' + commands), said
    assert said[1][2].startswith("not a command: no command is called 'nope' " + commands), said
    assert said[2][2] == "not a command: undo.x: an undo command takes no such key (it takes id, run_id, type)"
    sock.close()


def test_a_lone_surrogate_escape_in_a_command_is_told_what_it_is(listening):
    """"a\\ud800b" was refused as "unexpected end of hex escape", of a line whose escapes are four digits each."""
    proc, port, token = listening
    sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
    sock.sendall(auth(token) + b'{"id":1,"type":"add_memory","text":"a\\ud800b"}\n{"id":2,"type":"pause"}\n')
    said = replies(messages(sock, lambda out: any(m.get("id") == 2 for m in out)))
    assert said[0][:2] == (1, False) and said[0][2].startswith("not a command: Invalid JSON: unexpected end of hex "
                                                              "escape at line 1 column"), said
    assert said[0][2].endswith("one of \\ud800-\\udfff is half of a character, whose other half must follow: send "
                               "text as UTF-8, or escape whole characters)"), said
    assert said[1] == (2, True, None)


EVENT = b'{"type":"tool.result","seq":1,"content":"' + b"y" * (1 << 20) + b'"}\n'  # one big event, shared
# that many of it: more than a client may fall behind, past what the sockets' buffers take in (loopback's
# grow to several MiB each way: with 8 MiB over, a loaded machine's never dropped the stalled client)
OVER = MAX_BEHIND // len(EVENT) + 32


class Served:
    """A run that sends events: the listener serves its ``hello``, its backlog and the events as they
    come (:meth:`emit`, on the event loop as a worker does), and it answers every command."""

    owed = Owed()  # (each command is answered as it is handled: none is ever owed)

    def hello(self) -> p.Hello:
        return p.Hello(workflow="Flood", started=True)

    def emit(self, line: bytes) -> None:
        self.backlog.append(line)
        self.send(line, False)

    def handle(self, command) -> None:
        self.reply(command)

    def unsent(self) -> int:
        return 0  # each command is answered as it is handled

    def unanswered(self) -> int:
        return 0

    def reply(self, command, error=None, value=None) -> None:
        self.send(p.encode(p.Reply(id=command.id, ok=error is None, error=error, value=value)), True)

    def pause_for_next(self) -> None:
        pass


def attached(port: int, count: int) -> tuple[socket.socket, Any, list]:
    """A client, and the first ``count`` messages it gets (fewer: the connection closed first), each
    ``EVENT`` as "event", anything else as its type or, for a reply, (id, ok, error)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
    sock.sendall(auth("t"))
    reader = sock.makefile("rb")
    return sock, reader, read(reader, count)


def read(reader, count: int) -> list:
    got = []
    while len(got) < count and (line := reader.readline()):
        m = "event" if line == EVENT else json.loads(line)
        got.append(m if m == "event" else (m["id"], m["ok"], m["error"]) if m["type"] == "reply" else m["type"])
    return got


def test_a_run_that_sent_more_than_a_client_may_fall_behind_is_attached_to_with_every_event():
    """The backlog a client gets on attaching counted as it falling behind: once a run had sent 64 MiB,
    every client was dropped while it arrived, before its hello, and the run stayed paused for good."""
    def test(port, listener):
        listener.worker.backlog.extend([EVENT] * OVER)
        for attempt in range(2):  # and again once the first has detached
            sock, reader, got = attached(port, 1 + OVER)
            assert got == ["hello"] + ["event"] * OVER, (attempt, len(got))
            sock.sendall(b'{"id":7,"type":"detach"}\n')
            assert read(reader, 1) == [(7, True, None)]
            sock.close()

    on_a_listener(test, Served())


def test_a_client_that_stops_reading_is_dropped_and_the_next_one_gets_every_event(capsys):
    """The run goes on while its client reads nothing: the client is dropped once it is 64 MiB behind
    (said), and the next one gets all of it, the client's share included."""
    def test(port, listener):
        stalled, reader, got = attached(port, 1)
        assert got == ["hello"]
        for _ in range(OVER):
            listener._call(listener.worker.emit, EVENT)
        assert closed(stalled)
        deadline = time.monotonic() + HANG
        while True:  # its place is freed on the event loop, a moment after it was dropped
            sock, reader, got = attached(port, 1 + OVER)
            if got != [(0, False, BUSY)] or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert got == ["hello"] + ["event"] * OVER, len(got)
        sock.sendall(b'{"id":3,"type":"pause"}\n')  # and drives the run
        assert read(reader, 1) == [(3, True, None)]

    on_a_listener(test, Served())
    assert "the attached client was detached: it fell 64 MiB behind" in capsys.readouterr().err


# --- addresses --------------------------------------------------------------------------------
def test_parse_address_names_the_option_and_the_port_range():
    assert parse_address("127.0.0.1:65535") == ("127.0.0.1", 65535)
    assert parse_address(":0") == ("127.0.0.1", 0)
    with pytest.raises(ConfigError, match=r"^address 'nonsense': expected HOST:PORT"):
        parse_address("nonsense", option="address")
    with pytest.raises(ConfigError, match=r"^--listen '127.0.0.1:99999': port 99999 is out of range.*0-65535"):
        parse_address("127.0.0.1:99999")
    for other_digits in ("127.0.0.1:\u0663\u0663", "127.0.0.1:\uff10"):  # Arabic-Indic 33, fullwidth 0
        with pytest.raises(ConfigError, match="expected HOST:PORT"):
            parse_address(other_digits)


def test_listening_on_a_port_out_of_range_exits_2_naming_listen():
    done = ran("run", "flows/revisao.py", "--listen", "127.0.0.1:99999", "--no-journal")
    assert done.returncode == 2, done.stderr
    assert "--listen '127.0.0.1:99999'" in done.stderr and "0-65535" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("options,said", [
    (["--listen", ""], "flowtui: --listen '': expected HOST:PORT"),  # an unset variable: nothing served
    (["--listen", "127.0.0.1:0", "--token", " "], "flowtui: --token is only spaces"),  # (it said "empty")
    (["--listen", "127.0.0.1:0", "--token", ""], "flowtui: --token is empty"),  # it served under a random token
    # printed for the client to type: a control character would reach the terminal
    (["--listen", "127.0.0.1:0", "--token", "a\x1b]0;x\x07-long-enough-token"], "flowtui: --token holds control"),
])
def test_a_listen_that_would_serve_nothing_exits_2_saying_why(options, said):
    done = ran("run", "flows/revisao.py", "--input", "x", "--no-journal", *options)
    assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not done.stdout  # the flow did not run


def test_an_empty_flowtui_token_is_refused_naming_the_variable():
    """Set but empty (`FLOWTUI_TOKEN=$UNSET`): the run was served under a random token, unsaid."""
    done = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run", "flows/revisao.py",
                           "--input", "x", "--no-journal", "--listen", "127.0.0.1:0"], cwd=ROOT, capture_output=True,
                          text=True, timeout=HANG, env={**os.environ, "FLOWTUI_TOKEN": ""})
    assert done.returncode == 2 and "flowtui: FLOWTUI_TOKEN is empty" in done.stderr, done.stderr


def test_a_token_too_long_for_the_auth_line_is_refused_before_the_flow_loads():
    """It was served, and every client was then refused: its auth line was past 64 KiB."""
    done = ran("run", "flows/revisao.py", "--input", "x", "--no-journal", "--listen", "127.0.0.1:0",
               "--token", "T" * 70_000)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("flowtui: --token is 70,000 characters: a client's auth line, which holds it, must "
                                  "be under 64 KiB, so no client could attach; give a shorter one"), done.stderr


def test_listening_on_a_port_in_use_says_so_and_what_to_do():
    taken = socket.create_server(("127.0.0.1", 0))
    try:
        port = taken.getsockname()[1]
        done = ran("run", "flows/revisao.py", "--input", "x", "--no-journal", "--listen", f"127.0.0.1:{port}")
    finally:
        taken.close()
    assert done.returncode == 2
    assert f"--listen 127.0.0.1:{port}: that port is in use: pick another, or port 0 for a free one" in done.stderr


def test_a_served_run_refused_before_it_starts_leaves_no_journal(tmp_path):
    """Beyond loopback without --listen-public, an empty FLOWTUI_TOKEN: refused before the flow loads;
    a port in use (known only on binding): after, and the new journal is taken back. Each left an
    empty .flowtui/runs/*.jsonl in the folder it was run from."""
    flow = str(ROOT / "flows/revisao.py")

    def run(*args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run", flow,
                               "--input", "x", *args], cwd=tmp_path, capture_output=True, text=True, timeout=HANG,
                              env={**os.environ, **env})

    public = run("--listen", "0.0.0.0:0")
    assert public.returncode == 2 and "--listen-public" in public.stderr
    assert public.stdout == "" and "RevisaoWorkflow" not in public.stderr  # said before the flow loaded
    empty = run("--listen", "127.0.0.1:0", FLOWTUI_TOKEN="")
    assert empty.returncode == 2 and "FLOWTUI_TOKEN is empty" in empty.stderr
    taken = socket.create_server(("127.0.0.1", 0))
    try:
        in_use = run("--listen", f"127.0.0.1:{taken.getsockname()[1]}")
    finally:
        taken.close()
    assert in_use.returncode == 2 and "that port is in use" in in_use.stderr
    assert not (tmp_path / ".flowtui").exists()


def test_a_first_line_that_is_no_auth_is_told_what_it_must_be(listening):
    proc, port, token = listening
    for first in (b'{"type": "step", "id": 1}\n', b'GET / HTTP/1.1\n', b'{"type": "auth"}\n'):
        sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
        sock.sendall(first)
        (said,) = replies(messages(sock, lambda out: False))
        assert said[2].startswith('the first line must be {"type": "auth", "token": "..."}'), first
    # the right token, and something else wrong with the line: said by name (it was the form alone,
    # as if the token were wrong)
    for first, wrong in ((b'{"type": "auth", "token": "%s", "take_over": "yes"}\n', "auth.take_over: Input should "
                          "be a valid boolean"),
                         (b'{"type": "auth", "id": "abc", "token": "%s"}\n',
                          "auth.id: Input should be a valid integer"),
                         (b'{"type": "auth", "token": "%s", "type": "step"}\n', "the key 'type' is given twice")):
        sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
        sock.sendall(first % token.encode())
        (said,) = replies(messages(sock, lambda out: False))
        assert said[2].startswith('the first line must be {"type": "auth"') and wrong in said[2], said
        assert token not in said[2]


def test_attach_where_nothing_listens_says_so_in_words():
    free = socket.create_server(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    code, said = attached_in_a_terminal(port)
    assert code == 2
    assert f"flowtui attach: 127.0.0.1:{port}: nothing listens there (is flowtui run --listen serving" in said
    assert "Errno" not in said


def test_a_short_token_is_served_with_a_warning():
    proc = flowtui("run", "flows/revisao.py", "--input", "x", "--listen", "127.0.0.1:0", "--token", "abc",
                   "--no-journal")
    try:
        said = [proc.stderr.readline() for _ in range(4)]
        assert said[1] == "token: the one given with --token\n"  # not repeated into stderr's logs
        assert said[2].endswith(" --token TOKEN\n") and "abc" not in "".join(said)
        assert said[3].startswith("warning: a token of 3 characters can be guessed")
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("address,said", [
    ("127.0.0.1:99999", "0-65535"),
    ("nonsense", "expected HOST:PORT"),
])
def test_attach_to_an_address_that_cannot_be_used_exits_2(address, said):
    done = ran("attach", address, "--token", "x")
    assert done.returncode == 2 and done.stderr.startswith("flowtui attach: ") and said in done.stderr, done.stderr


def test_attach_with_a_token_no_run_takes_exits_2_saying_so_before_connecting():
    # it connected, and was told "the first line must be auth, under 64 KiB", though an auth line was sent
    done = ran("attach", "127.0.0.1:9", "--token", "t" * 70_000)
    assert done.returncode == 2
    assert done.stderr.startswith("flowtui attach: the token is 70,000 characters, longer than any run takes"), \
        done.stderr


def serving(behaviour) -> tuple[int, threading.Event]:
    """A port whose peer is not a flowtui run: it accepts, then ``behaviour(conn)``."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def accept():
        conn, _ = server.accept()
        behaviour(conn, stop)
        server.close()

    threading.Thread(target=accept, daemon=True).start()
    return server.getsockname()[1], stop


def attached_in_a_terminal(port: int) -> tuple[int, str]:
    """``flowtui attach`` on ``port``, in a terminal (the app needs one): its exit code and what it printed."""
    with Terminal.flowtui("attach", f"127.0.0.1:{port}", "--token", "x") as term:
        code = term.wait_exit(timeout=HANG)
        return code, term.output.decode("utf-8", "replace")


def attached_to(behaviour) -> tuple[int, int, str]:
    """``flowtui attach`` on a peer doing ``behaviour`` (let go after): its port, the exit code, what it printed."""
    port, stop = serving(behaviour)
    try:
        return port, *attached_in_a_terminal(port)
    finally:
        stop.set()


def test_attach_to_a_peer_that_closes_at_once_exits_2_naming_the_address():
    port, code, said = attached_to(lambda conn, stop: conn.close())
    assert code == 2, said
    assert f"flowtui attach: 127.0.0.1:{port}: the connection closed before the run answered" in said


def test_attach_to_a_run_of_another_protocol_version_exits_2_saying_which():
    def newer(conn, stop):
        conn.sendall(b'{"type":"hello","protocol":999,"workflow":"W"}\n')
        stop.wait(HANG)

    port, code, said = attached_to(newer)
    assert code == 2, said
    assert "speaks protocol 999; this flowtui speaks 1" in said and "Traceback" not in said


def test_attach_to_a_peer_that_never_answers_exits_2_after_the_wait():
    port, code, said = attached_to(lambda conn, stop: stop.wait(HANG))  # accepts, then holds the line, silent
    assert code == 2, said
    assert f"flowtui attach: 127.0.0.1:{port}: no answer within 10 s" in said
    assert "(gives up after 10 s)" in said and "gives up after 30" not in said  # the wait it shows is the one it has


def test_attach_to_a_peer_that_sends_no_line_says_what_it_sent():
    """A peer that sent a megabyte without a newline was said to have given no answer."""
    def babbling(conn, stop):
        conn.sendall(b"\x1b[2J" + b"x" * (1 << 20))
        stop.wait(HANG)

    port, code, said = attached_to(babbling)
    assert code == 2, said
    assert f"flowtui attach: 127.0.0.1:{port}: it sent 1,048,580 bytes but no line of the protocol within 10 s" in said
    assert "\x1b[2J" not in said


def test_what_a_served_flow_prints_is_redacted_inert_and_sent_to_the_client(tmp_path):
    import os

    key = "sk-test-1234567890abcdef1234567890abcdef"
    flow = tmp_path / "prints.py"
    flow.write_text(
        "import os, sys\n"
        "from flowtui import FunctionProvider, agent, workflow\n"
        "print('at import \\x1b]0;pwned\\x07', os.environ['OPENAI_API_KEY'])\n"
        "class A:\n"
        "    def after_response(self, response, ctx):\n"
        "        print('printing key:', os.environ['OPENAI_API_KEY'])\n"
        "        print('stderr key:', os.environ['OPENAI_API_KEY'], file=sys.stderr)\n"
        "A = agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt='p')(A)\n"
        "@workflow(steps=[A])\n"
        "class W:\n"
        "    pass\n")
    proc = flowtui("run", str(flow), "--input", "x", "--listen", "127.0.0.1:0", "--no-journal",
                   env=dict(os.environ, OPENAI_API_KEY=key))
    try:
        before = [proc.stderr.readline()]  # the address first: what the flow printed at import waits for it
        assert before[0].startswith("listening on"), before
        port = int(before[-1].rsplit(":", 1)[1])
        token = proc.stderr.readline().split()[1]
        sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
        sock.sendall(auth(token) + b'{"id":2,"type":"continue"}\n')
        got = messages(sock, lambda out: False)  # until the server closes: its last words included
        out, err = rest(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    everything = out + err + "".join(before) + json.dumps(got)
    assert key not in everything
    assert "at import ␛]0;pwned␇ [redacted]" in err  # printed at import: inert, redacted
    assert "printing key: [redacted]" in err and "stderr key: [redacted]" in err
    logs = [m["text"] for m in got if m.get("type") == "log"]
    assert "printing key: [redacted]" in logs and "stderr key: [redacted]" in logs
    assert out == "ok\n"


def test_a_peer_that_breaks_the_protocol_is_said_to_and_not_taken_for_what_the_flow_printed():
    hello = json.dumps({"type": "hello", "workflow": "W", "file": "w.py", "agents": ["A"], "tools": [], "pid": 1,
                        "started": True})

    def behaviour(conn, stop):
        conn.recv(1 << 16)  # auth
        conn.sendall(hello.encode() + b"\n" + b'{"seq":1,"type":"no.such.event"}\n' + b'{"type":"log","text":"hi"}\n')
        stop.wait(HANG)
        conn.close()

    port, stop = serving(behaviour)
    try:
        with Terminal.flowtui("attach", f"127.0.0.1:{port}", "--token", "x", cols=120, rows=40) as term:
            term.wait_for("broke the protocol")
            term.wait_for("a line from the run's process is not an event")  # (drawn a moment after, under load)
            assert "tagged-union" not in term.text()  # what is wrong, not the validator's names
            term.wait_for("The flow printed")  # what the flow printed still is: the log line
            term.send("q")
            assert term.wait_exit(HANG) == 0
    finally:
        stop.set()


def test_an_over_long_line_from_a_peer_is_left_out_unkept_and_the_app_goes_on():
    """A peer sends a 100 MB line: it is read to its end without being kept (the app's memory stays
    bounded), said, and the next messages are read as ever; q quits."""
    hello = json.dumps({"type": "hello", "workflow": "W", "file": "w.py", "agents": ["A"], "tools": [], "pid": 1,
                        "started": True})

    def behaviour(conn, stop):
        conn.recv(1 << 16)  # auth
        conn.sendall(hello.encode() + b"\n")
        block = b"x" * (1 << 20)
        for _ in range(100):
            conn.sendall(block)
        conn.sendall(b'\n{"type":"log","text":"after the long line"}\n')
        stop.wait(HANG)
        conn.close()

    port, stop = serving(behaviour)
    try:
        with Terminal.flowtui("attach", f"127.0.0.1:{port}", "--token", "x", cols=120, rows=40) as term:
            term.wait_for("a line of 104,857,600 bytes from the run's process")  # "was left out", wrapped
            term.wait_for("The flow printed")  # the line after it was read
            rss_kib = int(next(line.split()[1] for line in Path(f"/proc/{term.proc.pid}/status").read_text().splitlines()
                               if line.startswith("VmHWM:")))
            assert rss_kib < 400 * 1024  # the line was never held (it would be several times 100 MB)
            term.send("q")
            assert term.wait_exit(HANG) == 0
    finally:
        stop.set()


# --- a served run lives in a worker process of its own: the server survives its flow --------------

MISBEHAVE = "tests/tui/flows/misbehave.py"


@contextlib.contextmanager
def serve(flow: str, journal: Path):
    """``flowtui run FLOW --listen``: (the process, its port, its token); killed after, if still there."""
    proc = flowtui("run", flow, "--input", "x", "--listen", "127.0.0.1:0", "--journal", str(journal))
    try:
        port = int(proc.stderr.readline().rsplit(":", 1)[1])
        token = proc.stderr.readline().split()[1]
        yield proc, port, token
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def attach(port: int, token: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
    sock.sendall(auth(token))
    return sock


def events_until(sock: socket.socket, until) -> list[dict]:
    return messages(sock, lambda out: any(until(m) for m in out))


def paused_msg(m: dict) -> bool:
    return m.get("type") == "run.pause"


def in_the_tool(m: dict) -> bool:
    return m.get("type") == "node.start" and m.get("kind") == "tool"


def into_the_tool(port: int, token: str) -> socket.socket:
    """A client attached to a served run, which it continued until a tool began."""
    sock = attach(port, token)
    events_until(sock, paused_msg)
    sock.sendall(b'{"id":1,"type":"continue"}\n')
    events_until(sock, in_the_tool)
    return sock


def last_event(journal: Path) -> dict:
    return json.loads(journal.read_text().splitlines()[-1])


@pytest.mark.parametrize("how", ["stop command", "ctrl-C"])
def test_a_served_run_held_by_a_tool_that_never_returns_still_stops(tmp_path, how):
    """The flow's code runs in a worker, not in the serving process: a stop (a client's, or ctrl-C)
    ends the run within the grace period although the tool never returns, the client gets the
    run's end, the journal ends with it, and the server exits."""
    import signal

    journal = tmp_path / "j.jsonl"
    with serve(f"{MISBEHAVE}:SyncLoop", journal) as (proc, port, token):
        sock = into_the_tool(port, token)
        time.sleep(0.3)
        t0 = time.monotonic()
        if how == "ctrl-C":
            proc.send_signal(signal.SIGINT)
        else:
            sock.sendall(b'{"id":2,"type":"stop"}\n')
        got = events_until(sock, lambda m: m.get("type") == "run.end" and m.get("parent_id") is None)
        assert time.monotonic() - t0 < 10  # the grace period is 1 s; a loaded machine gets room
        end = got[-1]
        assert end["status"] == "stopped" and "tool t did not return" in end["reason"], end
        assert proc.wait(HANG) == 0
        assert last_event(journal)["type"] == "run.end" and last_event(journal)["status"] == "stopped"


def test_a_client_that_leaves_while_a_tool_never_returns_leaves_the_run_to_the_next_one(tmp_path):
    journal = tmp_path / "j.jsonl"
    with serve(f"{MISBEHAVE}:SyncLoop", journal) as (proc, port, token):
        first = into_the_tool(port, token)
        first.close()  # gone without a word, while the flow spins
        deadline = time.monotonic() + HANG
        while True:  # the server notices at once; the next client is let in and gets the run so far
            second = attach(port, token)
            got = messages(second, lambda out: any(m["type"] == "reply" or in_the_tool(m) for m in out))
            if got[0]["type"] == "hello":
                break
            assert time.monotonic() < deadline, got
            time.sleep(0.1)
        assert any(in_the_tool(m) for m in got)  # every event so far, up to where the flow spins
        second.sendall(b'{"id":5,"type":"stop"}\n')
        end = events_until(second, lambda m: m.get("type") == "run.end")[-1]
        assert end["status"] == "stopped"
        assert proc.wait(HANG) == 0


def test_a_served_flow_that_crashes_its_process_ends_failed_and_the_server_says_so(tmp_path):
    journal = tmp_path / "j.jsonl"
    with serve(f"{MISBEHAVE}:Segfault", journal) as (proc, port, token):
        sock = attach(port, token)
        events_until(sock, paused_msg)
        sock.sendall(b'{"id":1,"type":"continue"}\n')
        end = events_until(sock, lambda m: m.get("type") == "run.end")[-1]
        assert end["status"] == "failed" and "SIGSEGV" in end["error"]
        assert proc.wait(HANG) == 1
        assert last_event(journal)["status"] == "failed"
        assert "Traceback" not in proc.stderr.read()


def test_a_flood_of_wrong_tokens_keeps_no_client_out_of_a_run_with_a_long_token(listening):
    """Twenty connections trying wrong tokens again and again kept the rightful client out: tokens were
    checked one at a time, spaced, and past 16 waiting for their check the right one was refused unread.
    A long token (the random one) cannot be guessed at any rate: it is checked at once."""
    proc, port, token = listening
    flooding = threading.Event()

    def flood() -> None:
        while not flooding.is_set():
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=HANG) as sock:
                    sock.sendall(auth("a-wrong-token-" * 3))
                    sock.recv(1 << 16)
            except OSError:
                pass

    threads = [threading.Thread(target=flood, daemon=True) for _ in range(20)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(0.5)  # the flood under way
        for attempt in range(3):
            sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
            sock.sendall(auth(token) + b'{"type":"detach","id":1}\n')
            got = messages(sock, lambda out: replies(out))  # the detach's, or a refusal
            assert got and got[0]["type"] == "hello" and (1, True, None) in replies(got), (attempt, got[:2])
            sock.close()
    finally:
        flooding.set()
        for thread in threads:
            thread.join(HANG)
    proc.kill()
    _, err = rest(proc)
    assert re.search(r"flowtui: \d+ wrong tokens since the last count \(\d+ in all\), the last from 127", err), err


def test_the_count_of_wrong_tokens_names_the_last_one_and_none_is_left_unsaid(listening):
    """The count said the first wrong token's client as the last one's; and the wrong tokens since the
    last count were never said when the run ended before a client got in."""
    proc, port, token = listening
    ports = []
    for _ in range(3):
        sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
        ports.append(sock.getsockname()[1])
        sock.sendall(auth("wrong"))
        assert replies(messages(sock, lambda out: replies(out))) == [(0, False, "token rejected")]
        sock.close()
    proc.send_signal(signal.SIGINT)  # the run ends with nobody in
    _, err = rest(proc)
    assert f"flowtui: a wrong token, the last from 127.0.0.1:{ports[0]}" in err, err
    assert f"flowtui: 2 wrong tokens since the last count (3 in all), the last from 127.0.0.1:{ports[2]}" in err, err


def test_wrong_tokens_are_checked_a_few_a_second_and_counted_on_stderr(tmp_path):
    """Guessing a short token given with --token went at 500 tries a second, unseen. Wrong tokens are
    now spaced (however many connections try at once) and said; the right one still attaches."""
    err = (tmp_path / "err").open("w+")
    proc = subprocess.Popen([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run",
                             "flows/revisao.py", "--input", "x", "--listen", "127.0.0.1:0", "--no-journal"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err, text=True,
                            env={**os.environ, "FLOWTUI_TOKEN": "the-token-from-the-environment"})
    try:
        deadline = time.monotonic() + HANG
        while "listening on" not in (text := (tmp_path / "err").read_text()):
            assert time.monotonic() < deadline and proc.poll() is None, text
            time.sleep(0.05)
        port = int(text.split("listening on ", 1)[1].split()[0].rsplit(":", 1)[1])
        # FLOWTUI_TOKEN keeps the token off the command line; stderr (a supervisor's log) does not show it either
        assert "token: the one given with FLOWTUI_TOKEN" in text and "the-token-from-the-environment" not in text

        def guess(token: str) -> list[dict]:
            sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
            sock.sendall(auth(token))
            return messages(sock, lambda out: any(m["type"] in ("reply", "hello") for m in out))

        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            refused = list(pool.map(guess, [f"guess-{i}" for i in range(12)]))
        took = time.monotonic() - t0
        assert all(replies(got) and replies(got)[0][2] == "token rejected" for got in refused), refused
        assert took >= 11 * 0.25 * 0.9  # one check at a time, spaced after each wrong one (a lower bound)
        got = guess("the-token-from-the-environment")
        assert got[0]["type"] == "hello"
        said = (tmp_path / "err").read_text()
        assert re.search(r"flowtui: a wrong token, the last from 127\.0\.0\.1:\d+", said), said
        # the ones after the first, counted when the right one gets in (not left unsaid)
        assert re.search(r"flowtui: 11 wrong tokens since the last count \(12 in all\), the last from 127", said), said
    finally:
        proc.kill()
        proc.wait()


def test_connections_turned_away_unchecked_by_a_flood_of_wrong_tokens_are_said(tmp_path):
    """Past 16 waiting for their check, a connection is turned away unchecked, the right token's too: only the
    wrong tokens were said, and the one who runs the server never knew their client had been refused."""
    proc = flowtui("run", "flows/revisao.py", "--input", "x", "--listen", "127.0.0.1:0", "--no-journal",
                   env={**os.environ, "FLOWTUI_TOKEN": "the-token-from-the-environment"})
    try:
        port = int(proc.stderr.readline().rsplit(":", 1)[1])
        turned_away = threading.Event()

        def flood() -> None:
            while not turned_away.is_set():
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=HANG) as sock:
                        sock.sendall(auth("a-wrong-token"))
                        if b"too many connections" in sock.recv(1 << 16):
                            turned_away.set()
                except OSError:
                    pass

        threads = [threading.Thread(target=flood, daemon=True) for _ in range(24)]
        for thread in threads:
            thread.start()
        assert turned_away.wait(HANG)
        for thread in threads:
            thread.join(HANG)
        proc.send_signal(signal.SIGINT)
        _, err = rest(proc)
    finally:
        proc.kill()
        proc.wait()
    assert re.search(r"[\d,]+ connection\(s\) turned away unchecked, 16 waiting for their check already \(a client "
                     r"with the right token among them, if any, was told to try again\)", err), err


def test_a_breakpoint_with_no_name_is_refused_naming_the_field(listening):
    """breakpoint "", "   " or one with control characters was taken silently: a breakpoint nothing could
    ever hit (and the next client was told of it)."""
    proc, port, token = listening
    sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
    sock.sendall(auth(token) + b'{"id":2,"type":"breakpoint","name":""}\n'
                 + b'{"id":3,"type":"breakpoint","name":"   "}\n'
                 + b'{"id":4,"type":"breakpoint","name":"\\u001b[2J"}\n'
                 + b'{"id":6,"type":"breakpoint","name":"Esc\\u009b2J\\u009b31m"}\n'  # (C1's CSI)
                 + b'{"id":7,"type":"breakpoint","name":"evil\\u202eiveR"}\n'  # (a bidi override)
                 + b'{"id":8,"type":"breakpoint","name":"Ag\\nent"}\n'
                 + b'{"id":5,"type":"breakpoint","name":"RevisorAgent"}\n')
    got = messages(sock, lambda out: any(m.get("id") == 5 for m in out))
    *refused, named = (next(m for m in got if m.get("id") == n) for n in (2, 3, 4, 6, 7, 8, 5))
    for reply in refused:
        assert reply["ok"] is False and "name" in reply["error"], reply
        assert "an agent, tool or loop name: not blank, no control or invisible characters" in reply["error"], reply
    assert named["ok"] is True and named["value"] == ["RevisorAgent"], named


def test_a_stop_sent_with_a_reason_ends_the_run_saying_it(listening, tmp_path):
    proc, port, token = listening
    sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
    sock.sendall(auth(token) + b'{"id":2,"type":"stop","reason":"deploy window closed"}\n')
    got = messages(sock, lambda out: any(m.get("type") == "run.end" for m in out))
    end = next(m for m in got if m.get("type") == "run.end")
    assert end["status"] == "stopped" and end["reason"] == "deploy window closed", end


def test_sigterm_stops_a_served_run_whose_stderr_reader_has_gone(tmp_path):
    """stderr piped into a reader that left (| head): the next line printed failed the server (exit 1),
    and a SIGTERM after it was never acted on (saying 'stopping' failed before the stop was made), so
    a served run waited for ever. Now the run waits for its client, and SIGTERM stops it."""
    proc = flowtui("run", "flows/revisao.py", "--input", "x", "--listen", "127.0.0.1:0", "--no-journal")
    for _ in range(3):
        proc.stderr.readline()
    proc.stderr.close()
    time.sleep(1.0)  # the run's first line goes to the closed pipe meanwhile
    assert proc.poll() is None  # still serving
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=HANG) == 0  # stopped, not failed


def test_a_client_that_hung_up_without_detaching_does_not_keep_the_next_one_out(listening):
    """Reconnecting at once after closing without detach was refused 'another client is attached' about
    one time in seven: the new client waits the moment it takes to let the old one go."""
    proc, port, token = listening
    for attempt in range(20):
        first = socket.create_connection(("127.0.0.1", port), timeout=HANG)
        first.sendall(auth(token))
        first.settimeout(0.15)  # takes in what it is sent (hello, the events so far) a moment, then hangs up
        with contextlib.suppress(TimeoutError):
            while first.recv(1 << 20):
                pass
        first.close()
        second = socket.create_connection(("127.0.0.1", port), timeout=HANG)
        second.sendall(auth(token) + b'{"id":1,"type":"detach"}\n')
        got = messages(second, lambda out: bool(replies(out)))
        assert got[0]["type"] == "hello", (attempt, got[:1])
        second.close()


def test_a_client_that_shuts_its_writing_gets_the_replies_to_what_it_sent(listening):
    """A client that sends its commands and shuts its end (``nc -N``, a script's here-document) got no
    reply to any of them, although they were carried out: it could not tell which were refused."""
    proc, port, token = listening
    sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
    sock.sendall(auth(token) + b'{"id":1,"type":"pause"}\n{"id":2,"type":"promote","index":true}\n')
    sock.shutdown(socket.SHUT_WR)
    got = messages(sock, lambda out: False)  # all it is sent, to the connection's end
    assert got[0]["type"] == "hello"
    (two,) = [r for r in replies(got) if r[0] == 2]
    assert sorted(r[:2] for r in replies(got)) == [(1, True), (2, False)] and "index" in two[2], replies(got)
    assert proc.poll() is None  # and the run waits for the next client


def test_a_command_cut_short_by_the_connection_ending_is_not_carried_out(listening):
    """A last line without its newline (the client hung up mid-write) was executed, and its reply
    could not arrive: a step nobody saw answered. It is dropped."""
    proc, port, token = listening
    first = socket.create_connection(("127.0.0.1", port), timeout=HANG)
    first.sendall(auth(token))
    messages(first, lambda out: any(m["type"] == "hello" for m in out))
    first.sendall(b'{"id":2,"type":"step"}')
    first.shutdown(socket.SHUT_WR)
    assert closed(first)
    time.sleep(0.5)
    second = socket.create_connection(("127.0.0.1", port), timeout=HANG)
    second.sendall(auth(token) + b'{"id":3,"type":"pause"}\n')
    got = messages(second, lambda out: bool(replies(out)))
    second.settimeout(1.0)  # and what follows a moment (a step carried out late)
    with contextlib.suppress(TimeoutError):
        got += [json.loads(line) for line in second.recv(1 << 20).splitlines() if line.strip()]
    assert [m["type"] for m in got].count("run.resume") == 0, [m["type"] for m in got]


def test_a_client_that_takes_over_detaches_the_one_attached_and_drives_the_run(listening):
    """A terminal that froze while attached kept its place: the next client was refused until the
    server noticed (up to 30 s). --take-over detaches it, and says why to both ends."""
    proc, port, token = listening
    first = attach(port, token)
    events_until(first, paused_msg)
    other = socket.create_connection(("127.0.0.1", port), timeout=HANG)
    other.sendall(auth(token))
    assert replies(messages(other, lambda out: out)) == [(0, False, BUSY)]
    vague = socket.create_connection(("127.0.0.1", port), timeout=HANG)
    vague.sendall(auth(token, take_over="yes"))  # JSON's true only: anything else is no auth line
    assert replies(messages(vague, lambda out: out))[0][1] is False  # refused; the first is told nothing yet
    second = socket.create_connection(("127.0.0.1", port), timeout=HANG)
    second.sendall(auth(token, take_over=True))
    assert events_until(second, paused_msg)[0]["type"] == "hello"  # attached, with every event so far
    told = messages(first, lambda out: any(m.get("type") == "reply" for m in out))
    assert replies(told) == [(0, False, "another client took this run over (flowtui attach --take-over); "
                                        "the run goes on there")]
    assert closed(first)
    second.sendall(b'{"id":5,"type":"step"}\n')  # and the run is the new client's to drive
    assert (5, True, None) in replies(messages(second, lambda out: any(m.get("id") == 5 for m in out)))


def test_a_served_flow_says_its_address_first_and_its_load_notes_after(tmp_path):
    """A script reads the address off stderr's first line: the flow's import-time output and the load
    notes (a tool with no description) wait for it instead of pushing it down."""
    flow = tmp_path / "noted.py"
    flow.write_text(
        "from flowtui import FunctionProvider, agent, tool, workflow\n"
        "print('importing')\n"
        "@tool\ndef lookup(q: str) -> str:\n    return q\n"
        "@agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt='p', tools=[lookup])\nclass A:\n    pass\n"
        "@workflow(steps=[A])\nclass W:\n    pass\n")
    proc = flowtui("run", str(flow), "--input", "x", "--listen", "127.0.0.1:0", "--no-journal")
    try:
        first = proc.stderr.readline()
        assert first.startswith("listening on"), first
        token = proc.stderr.readline().split()[1]
        sock = socket.create_connection(("127.0.0.1", int(first.rsplit(":", 1)[1])), timeout=HANG)
        sock.sendall(auth(token) + b'{"id":2,"type":"continue"}\n')
        messages(sock, lambda out: False)
        out, err = rest(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "importing" in err and "tool lookup has no description" in err
    assert out == "ok\n"


def test_clients_taking_over_at_once_are_never_told_to_take_over(listening):
    """Several ``--take-over`` clients at once: one ends up attached, and one that lost the race was told
    "another client is attached to this run (flowtui attach --take-over detaches it)", which it had used."""
    proc, port, token = listening
    events_until(attach(port, token), paused_msg)
    socks = [socket.create_connection(("127.0.0.1", port), timeout=HANG) for _ in range(6)]
    for sock in socks:
        sock.sendall(auth(token, take_over=True))
    said = [messages(sock, lambda out: out) for sock in socks]
    refusals = [r for out in said for r in replies(out)]
    assert all(r[2] != BUSY for r in refusals), refusals
    assert {r[2] for r in refusals} <= {"another client attached at the same time as this one; try again",
                                        "another client took this run over (flowtui attach --take-over); "
                                        "the run goes on there"}, refusals


def test_a_served_run_without_input_still_says_its_address_first():
    """The note that a run without --input starts with no user message came before "listening on", which a
    script reads from stderr's first line."""
    proc = flowtui("run", "flows/revisao.py", "--listen", "127.0.0.1:0", "--no-journal")
    try:
        said = [proc.stderr.readline() for _ in range(4)]
    finally:
        proc.kill()
        proc.wait()
    assert said[0].startswith("listening on 127.0.0.1:") and said[1].startswith("token: "), said
    assert said[3] == "flowtui: no --input: the run starts with no user message (give --input TEXT for one)\n", said


def test_commands_sent_behind_a_stop_reach_the_run_after_it(listening):
    """stop was answered at once and sent to the run's process on the loop's next turn, so the step and
    the edit the client wrote after it got there first: paused before a tool, the tool ran once the
    stop had been answered, and the edit was journaled."""
    proc, port, token = listening
    sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
    sock.sendall(auth(token))
    seen, n = [], 0
    while not any(m.get("type") == "run.pause" and m.get("point") == "tool" for m in seen):
        got = messages(sock, lambda out: any(m.get("type") == "run.pause" for m in out))
        assert got, seen[-5:]
        seen += got
        if not any(m.get("type") == "run.pause" and m.get("point") == "tool" for m in got):
            n += 1
            sock.sendall(json.dumps({"type": "step", "id": n}).encode() + b"\n")
    sock.sendall(b'{"type":"stop","id":100}\n{"type":"step","id":101}\n'
                 b'{"type":"add_item","id":102,"bucket":"memory","text":"after stop"}\n')
    after = messages(sock, lambda out: any(m.get("type") == "run.end" for m in out)
                     and {100, 101, 102} <= {m.get("id") for m in out if m.get("type") == "reply"})
    answers = {m["id"]: m for m in after if m.get("type") == "reply"}
    assert answers[100]["ok"] is True
    assert answers[101]["ok"] is False and answers[102]["ok"] is False, answers
    assert not [m for m in after if m.get("type") == "node.end" and m.get("kind") == "tool"]  # the tool never ran
    assert not [m for m in after if m.get("type") == "state.append" and m.get("item") == "after stop"]
    assert next(m for m in after if m.get("type") == "run.end")["status"] == "stopped"


def test_what_a_client_typed_comes_back_redacted_in_replies_and_in_the_next_clients_hello():
    """The events of an edit said [redacted]; its reply gave the value typed as it was, and a breakpoint or a
    refused watchpoint named by a credential came back whole, to this client and to the next one's hello."""
    import os

    key = "sk-test-1234567890abcdef1234567890abcdef"
    proc = flowtui("run", "flows/revisao.py", "--input", "x", "--listen", "127.0.0.1:0", "--no-journal",
                   env=dict(os.environ, OPENAI_API_KEY=key))
    try:
        port = int(proc.stderr.readline().rsplit(":", 1)[1])
        token = proc.stderr.readline().split()[1]
        sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
        edits = [{"id": 2, "type": "set_field", "name": "problemas", "text": json.dumps([key])},
                 {"id": 3, "type": "breakpoint", "name": key, "on": True},
                 {"id": 4, "type": "watch", "expr": f"state.rodadas == '{key}'", "on": True},
                 {"id": 5, "type": "add_item", "bucket": "memory", "text": f"key {key}"}]
        sock.sendall(auth(token) + b"".join(json.dumps(e).encode() + b"\n" for e in edits))
        got = messages(sock, lambda out: any(m.get("id") == 5 for m in out))
        sock.close()
        answers = {m["id"]: m for m in got if m.get("type") == "reply"}
        assert answers[2]["ok"] and answers[3]["ok"] and not answers[4]["ok"], answers
        assert "[redacted]" in answers[2]["value"] and answers[3]["value"] == ["[redacted]"]
        again = socket.create_connection(("127.0.0.1", port), timeout=HANG)
        again.sendall(auth(token))
        hello = messages(again, lambda out: any(m.get("type") == "hello" for m in out))
        again.close()
    finally:
        proc.kill()
        proc.wait()
    assert key not in json.dumps(got) + json.dumps(hello)
    assert next(m for m in hello if m["type"] == "hello")["breakpoints"] == ["[redacted]"]


def test_a_refusal_never_sends_back_a_credential_or_a_control_character_the_command_held():
    """What a refusal quotes of the command came back as sent: a key given as a command's name, a key's name, a
    run_id, sent back whole (before auth too), and ESC and U+202E raw."""
    import os

    key = "sk-test-1234567890abcdef1234"
    proc = flowtui("run", "flows/revisao.py", "--input", "x", "--listen", "127.0.0.1:0", "--no-journal",
                   env={**os.environ, "OPENAI_API_KEY": key})
    try:
        port = int(proc.stderr.readline().rsplit(":", 1)[1])
        token = proc.stderr.readline().split()[1]
        first = socket.create_connection(("127.0.0.1", port), timeout=HANG)
        first.sendall(json.dumps({"type": key}).encode() + b"\n")
        (refused,) = [m for m in messages(first, lambda out: any(m["type"] == "reply" for m in out))
                      if m["type"] == "reply"]
        assert key not in refused["error"] and "[redacted]" in refused["error"], refused
        sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
        sent = [f'{{"type":"step","id":1,"{key}":1,"{key}":2}}', f'{{"type":"{key}","id":2}}',
                f'{{"type":"step","id":3,"{key}":1}}', f'{{"type":"count","id":4,"run_id":"{key}"}}',
                '{"type":"step","id":5,"\\u001b]0;pwned\\u0007\\u202e":1}']
        sock.sendall(auth(token) + "".join(line + "\n" for line in sent).encode())
        said = replies(messages(sock, lambda out: sum(m["type"] == "reply" for m in out) == len(sent)))
        assert len(said) == len(sent) and not any(ok for _, ok, _ in said), said
        for _, _, error in said:
            assert key not in error and "\x1b" not in error and "\u202e" not in error and "\x07" not in error, said
        errors = {ident: error for ident, _, error in said}
        assert all("[redacted]" in errors[ident] for ident in (1, 2, 3, 4)) and "␛]0;pwned" in errors[5], said
    finally:
        proc.kill()
        proc.wait()


def test_a_reply_longer_than_a_client_may_read_is_refused_in_its_place(monkeypatch):
    """A value of 70 MB fetched whole over attach: its reply was more than the client may fall behind by, the
    client was dropped, and its app said the run had ended, though it waited, paused."""
    import socket

    from flowtui.runtime import protocol as p
    from flowtui.runtime import spawn
    from flowtui.runtime.sender import Sender

    monkeypatch.setattr(spawn, "LINE_MAX", 1000)
    ours, theirs = socket.socketpair()
    gone: list[str] = []
    sender = Sender(ours, gone.append, behind=4000)
    sender(p.encode(p.Reply(id=7, ok=True, value="v" * 3000)), True)
    sender(p.encode(p.Reply(id=8, ok=True, value="small")), True)
    sender.finish()
    got = theirs.makefile("rb")
    refused, small = json.loads(got.readline()), json.loads(got.readline())
    theirs.close()
    assert (refused["id"], refused["ok"]) == (7, False) and refused["error"].startswith("its answer was 3,0"), refused
    assert "more than a line to an attached client may be (1,000); the run's journal holds the value whole" \
        in refused["error"]
    assert small["value"] == "small" and not gone
