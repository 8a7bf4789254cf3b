"""A run's event lines, as they came, kept packed.

The app keeps every line the run sent (the event log shows any of them, and looking back folds
them again), and a run served with ``--listen`` keeps them for whoever attaches later. A flow
flooding events grew the app by about 245 bytes an event, 210 of them the lines themselves
(``bench/tui_bench.py``'s flood: a quarter of a gigabyte a million events). Lines are packed a
thousand at a time with zlib (JSON lines of one run repeat their keys: about 14 to 1, under a
millisecond a pack); the ones not yet a full pack, and the last pack read, stay as they came.

One thread adds lines while another may read them (a served run's sender thread sends the
backlog to a client attaching): a lock keeps each access whole.
"""

from __future__ import annotations

import threading
import zlib
from array import array
from collections.abc import Iterable, Iterator, Sequence
from itertools import accumulate
from typing import overload

PACK = 1024  # lines a pack


class Lines(Sequence[bytes]):
    """A list of byte lines that only grows: ``append``, ``extend``, ``len``, indexing, iteration, and
    ``prefix(k)`` (the first ``k``, without copying them)."""

    def __init__(self, lines: Iterable[bytes] = ()) -> None:
        self._packs: list[tuple[bytes, array]] = []  # (the pack's bytes compressed, where each line ends)
        self._tail: list[bytes] = []
        self._open: tuple[int, list[bytes]] | None = None  # the last pack read, unpacked
        self._lock = threading.Lock()
        self.extend(lines)

    def __len__(self) -> int:
        with self._lock:
            return self._len()

    def _len(self) -> int:
        return len(self._packs) * PACK + len(self._tail)

    def append(self, line: bytes) -> None:
        with self._lock:
            self._tail.append(line)
            if len(self._tail) >= PACK:
                self._pack()

    def extend(self, lines: Iterable[bytes]) -> None:
        with self._lock:
            self._tail.extend(lines)
            while len(self._tail) >= PACK:
                self._pack()

    def _pack(self) -> None:
        lines, self._tail = self._tail[:PACK], self._tail[PACK:]
        ends = array("Q", accumulate(map(len, lines)))
        self._packs.append((zlib.compress(b"".join(lines), 1), ends))

    def _unpacked(self, n: int) -> list[bytes]:
        if self._open is not None and self._open[0] == n:
            return self._open[1]
        blob, ends = self._packs[n]
        data = zlib.decompress(blob)
        lines = [data[start:end] for start, end in zip((0, *ends), ends)]
        self._open = (n, lines)
        return lines

    @overload
    def __getitem__(self, i: int) -> bytes: ...

    @overload
    def __getitem__(self, i: slice) -> list[bytes]: ...

    def __getitem__(self, i: int | slice) -> bytes | list[bytes]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        with self._lock:
            n = self._len()
            if i < 0:
                i += n
            if not 0 <= i < n:
                raise IndexError("line index out of range")
            pack, at = divmod(i, PACK)
            return self._tail[at] if pack == len(self._packs) else self._unpacked(pack)[at]

    def __iter__(self) -> Iterator[bytes]:
        with self._lock:
            packs, tail = list(self._packs), list(self._tail)  # (packs never change: shared, not copied)
        for blob, ends in packs:
            data = zlib.decompress(blob)  # (not kept: a walk through every line leaves no copy behind)
            yield from (data[start:end] for start, end in zip((0, *ends), ends))
        yield from tail

    def prefix(self, k: int) -> Prefix:
        return Prefix(self, k)


class Prefix(Sequence[bytes]):
    """The first ``k`` lines of a :class:`Lines` (what the panes show while looking back at event k;
    what a client attaching to a served run is owed)."""

    def __init__(self, lines: Lines, k: int) -> None:
        self._lines, self._k = lines, max(0, min(k, len(lines)))

    def __len__(self) -> int:
        return self._k

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._k))]
        if i < 0:
            i += self._k
        if not 0 <= i < self._k:
            raise IndexError("line index out of range")
        return self._lines[i]
