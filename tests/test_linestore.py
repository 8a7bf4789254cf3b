"""The app keeps every line of a run packed: what it gives back is what it was given, in any access."""

from __future__ import annotations

import json
import random
import tracemalloc

import pytest

from flowtui.runtime.linestore import PACK, Lines


def _lines(n: int, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    made = []
    for i in range(n):
        kind = rng.random()
        if kind < 0.05:
            made.append(b"")  # any bytes at all: empty, a newline inside, not UTF-8
        elif kind < 0.1:
            made.append(b"a\nb\r\n\xff" * rng.randint(1, 5))
        else:
            made.append(json.dumps({"seq": i, "type": "ctx.set", "name": "counter", "value": i}).encode())
    return made


@pytest.mark.parametrize("n", [0, 1, PACK - 1, PACK, PACK + 1, 3 * PACK + 17])
def test_every_line_comes_back_as_given_by_index_slice_iteration_and_prefix(n):
    given = _lines(n)
    kept = Lines()
    for i in range(0, n, 37):  # as the app adds them: a batch at a time
        kept.extend(given[i:i + 37])
    assert len(kept) == n
    assert list(kept) == given
    assert [kept[i] for i in range(n)] == given
    assert [kept[i] for i in range(-1, -n - 1, -1)] == given[::-1]
    assert kept[5:n - 3:2] == given[5:n - 3:2]
    for k in (0, n // 2, n, n + 10):
        front = kept.prefix(k)
        assert len(front) == min(k, n) and list(front) == given[:k]
        if 0 < k <= n:
            assert front[-1] == given[k - 1]
    with pytest.raises(IndexError):
        kept[n]
    kept.append(b"one more")
    assert kept[n] == b"one more" and len(kept) == n + 1


def test_a_flood_of_event_lines_is_kept_in_a_fraction_of_what_a_list_of_them_costs():
    """A flow flooding events grew the app by about 210 bytes an event for the lines alone."""

    def line(i: int) -> bytes:  # as the run sends them
        return json.dumps({"seq": i, "ts": 1796349044.93 + i, "run_id": "r1-0c3c39", "node_id": "n2",
                           "parent_id": "n1", "origin": "hook:A.after_response", "type": "ctx.set",
                           "name": "counter", "value": i}).encode()

    n = 50_000
    raw = sum(len(line(i)) for i in range(n))
    tracemalloc.start()
    try:
        kept = Lines()
        for start in range(0, n, 32):  # a batch at a time, as they come
            kept.extend(line(i) for i in range(start, min(start + 32, n)))
        used = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert used < raw / 4, f"{used:,} bytes kept for {raw:,} bytes of lines"
    assert kept[n // 2] == line(n // 2) and kept[-1] == line(n - 1)
