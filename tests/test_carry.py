"""A bucket replaced whole keeps, for each item that was there already, the event it came from: the
provenance "what the model sees" shows. Replacing a large bucket with another must not cost the
product of their sizes (30 s for a 20,000-item memory replaced by 20,000 new items; 2 minutes for 40,000)."""

from __future__ import annotations

import random
import threading
from types import SimpleNamespace

from flowtui.runtime.messages import Message
from flowtui.runtime.run_state import RunState

HANG = 60  # seconds: past this, the fold hangs


def greedy(old: list, origins: list, items: list, ev) -> list:
    """The rule, written plainly: each item takes the first equal old one after the last matched."""
    kept, j = [], 0
    for item in items:
        k = next((k for k in range(j, min(len(old), len(origins))) if old[k] == item), None)
        if k is None:
            kept.append((ev.seq, ev.origin))
        else:
            kept.append(origins[k])
            j = k + 1
    return kept


def replaced(bucket: str, old: list, items: list) -> list:
    run = RunState()
    run.bucket(bucket).extend(old)
    setattr(run, f"{bucket}_from", [(i + 1, f"origin {i}") for i in range(len(old))])
    run.carry(bucket, items, SimpleNamespace(seq=999, origin="user"))
    return getattr(run, f"{bucket}_from")


def test_items_kept_keep_their_events_in_order_and_new_ones_are_the_replacements():
    old = ["a", "b", "a", "c"]
    assert replaced("memory", old, ["a", "a", "d", "c", "b"]) == [
        (1, "origin 0"), (3, "origin 2"), (999, "user"), (4, "origin 3"), (999, "user")]


def test_the_rule_holds_for_texts_and_messages_alike():
    rng = random.Random(7)
    for _ in range(300):
        old = [rng.choice("abcde") for _ in range(rng.randint(0, 12))]
        items = [rng.choice("abcdef") for _ in range(rng.randint(0, 12))]
        origins = [(i + 1, f"origin {i}") for i in range(len(old))]
        ev = SimpleNamespace(seq=999, origin="user")
        assert replaced("memory", old, items) == greedy(old, origins, items, ev), (old, items)
        msgs = {c: Message(role="user" if c < "c" else "assistant", content=c.upper()) for c in "abcdef"}
        old_m, items_m = [msgs[c] for c in old], [msgs[c] for c in items]
        assert replaced("history", old_m, items_m) == greedy(old_m, origins, items_m, ev)


def test_messages_alike_in_text_but_not_equal_are_told_apart():
    plain = Message(role="tool", content="ok", tool_name="a", tool_call_id="c1")
    other = Message(role="tool", content="ok", tool_name="a", tool_call_id="c2")
    assert replaced("history", [plain, other], [other]) == [(2, "origin 1")]


def test_replacing_a_large_bucket_with_other_items_does_not_hang():
    old = [f"old {i}" for i in range(40_000)]
    new = [f"new {i}" for i in range(40_000)]
    out = []
    worker = threading.Thread(target=lambda: out.append(replaced("memory", old, new + old[:3])), daemon=True)
    worker.start()
    worker.join(HANG)
    assert not worker.is_alive(), "replacing 40,000 items with 40,000 others took over a minute"
    assert out[0][:2] == [(999, "user"), (999, "user")] and out[0][-3:] == [(1, "origin 0"), (2, "origin 1"),
                                                                             (3, "origin 2")]
