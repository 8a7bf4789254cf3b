"""Fixtures for the app's tests: test flows on sys.path, no blinking, no network.

The flows run in a worker process: ``flowcapture`` (their shared module) talks
to the tests through a folder named by ``FLOWCAPTURE_DIR`` and knobs in the
environment, which the worker inherits. So does the network guard: a proxy
that refuses everything but loopback."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FLOWS = Path(__file__).resolve().parent / "flows"
REVIEW = "tests/tui/flows/review_fn.py"

for folder in (FLOWS, FLOWS.parents[1]):  # the test flows' shared module; the loopback OpenAI server
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))



@pytest.fixture(autouse=True)
def _quiet(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Run from the repo root (paths in snapshots), a fresh request log, and no real network."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("FLOWCAPTURE_DIR", str(tmp_path_factory.mktemp("capture")))
    # the test flows' shared module, for flows copied elsewhere (the worker imports them)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(FLOWS), os.environ.get("PYTHONPATH")])))
    for knob in ("TOOL_DELAY", "TOOL_GATE", "HOOK_RAISES", "GATES", "FAKE_CLOCK"):
        monkeypatch.delenv(f"FLOWCAPTURE_{knob}", raising=False)
    # the worker process: a proxy that refuses all but loopback
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost,::1")
    real_connect = socket.socket.connect

    def guarded(self, address):  # loopback only
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and host not in ("127.0.0.1", "::1", "localhost") and not host.startswith("/"):
            raise OSError(f"network blocked in tests: {address!r}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)


def make(target: str = REVIEW, **options):
    """The app under test: same factory as the CLI, no cursor blink."""
    from flowtui.tui.app import make_app

    options.setdefault("cursor_blink", False)
    return make_app(target, **options)


async def wait_until(pilot, cond: Callable[[], bool], timeout: float = 30.0, what: str = "condition") -> None:
    """Let the app run until ``cond()`` holds (no fixed sleeps)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.02)
    if hasattr(pilot.app, "flush"):  # (a replay has no run to flush)
        pilot.app.flush(everything=True, force=True)
    await pilot.pause(0.01)


def status(app) -> str:
    view = app.client.view
    return "none" if view is None else view.status


async def paused(pilot, *, after: int | None = None, timeout: float = 30.0) -> None:
    """Wait for the run to be paused (at a pause event newer than seq ``after``)."""
    app = pilot.app

    def ok() -> bool:
        app.flush(everything=True)
        view = app.client.view
        return view is not None and view.status == "paused" and (after is None or view.pause.seq > after)

    await wait_until(pilot, ok, timeout, "the run to pause")


async def ended(pilot, timeout: float = 30.0) -> None:
    app = pilot.app

    def ok() -> bool:
        app.flush(everything=True)
        return status(app) in ("finished", "failed", "stopped")

    await wait_until(pilot, ok, timeout, "the run to end")


async def press_and_pause(pilot, *keys: str) -> None:
    """Press keys on a paused run and wait until it pauses again."""
    for key in keys:
        seq = pilot.app.client.view.pause.seq
        await pilot.press(key)
        await paused(pilot, after=seq)


async def paged(pilot, key: str = "o") -> str:
    """Press ``key`` and return the text it opened in the pager. No terminal can be handed over in a
    test: the notification names the file, which is read and removed."""
    app = pilot.app
    await pilot.press(key)
    await wait_until(pilot, lambda: any("the text is in" in n.message for n in app._notifications),
                     timeout=30, what="the pager's text")
    said = next(n.message for n in app._notifications if "the text is in" in n.message)
    path = Path(said.rsplit(" ", 1)[-1])
    try:
        return path.read_text(encoding="utf-8")
    finally:
        path.unlink(missing_ok=True)


def types(app) -> list[str]:
    return [ev.type for ev in app.client.events]
