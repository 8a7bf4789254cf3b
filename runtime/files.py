"""Writing files that may hold a user's data: owner-only, and whole files atomically.

- Every file flowtui creates (journals, snapshots, cassettes) is created
  readable by its owner only (0600), and every folder it creates for them
  (``.flowtui/runs/``) 0700, whatever the umask.
- A whole-file output (a snapshot, a cassette) is written to a temporary file
  in the same folder, flushed, fsynced and renamed over the target: a reader
  (or a crash) sees the old file or the new one, never half of one.
- An append-only log (a journal) is opened for appending; if its last line
  was torn by a crash, a newline is added first so the next line stands
  alone (the reader skips the torn one).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import IO

FILE_MODE = 0o600
DIR_MODE = 0o700


def private_dir(path: Path) -> None:
    """Create folder ``path`` and any missing parents owner-only; existing folders are left as they are."""
    missing = []
    while not path.is_dir():
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=DIR_MODE)
        except FileExistsError:
            continue
        os.chmod(folder, DIR_MODE)  # mkdir's mode is masked by the umask


def open_append(path: Path) -> IO[bytes]:
    """``path`` opened for appending bytes (created 0600 if new), with a torn last line closed."""
    private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
    f = os.fdopen(fd, "ab", buffering=0)
    size = os.fstat(fd).st_size
    if size:
        with open(path, "rb") as r:
            r.seek(size - 1)
            if r.read(1) != b"\n":
                f.write(b"\n")
    return f


def create_new(directory: Path, stem: str, suffix: str) -> Path:
    """Create an empty, owner-only file ``<stem><suffix>`` in ``directory`` that did not exist
    before (``<stem>-2<suffix>``, ``-3``... on a collision); returns its path.

    The file is created with ``O_EXCL``, so two processes started in the same
    second never share it.
    """
    private_dir(directory)
    n = 1
    while True:
        path = directory / (f"{stem}{suffix}" if n == 1 else f"{stem}-{n}{suffix}")
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
            return path
        except FileExistsError:
            n += 1


def write_atomic(path: Path, data: bytes | str) -> bool:
    """Replace ``path`` with ``data`` atomically (owner-only); True when a file was replaced."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    path = Path(path)
    private_dir(path.parent)
    existed = path.exists()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")  # mkstemp: 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _sync_dir(path.parent)
    return existed


def _sync_dir(directory: Path) -> None:
    """Make the rename itself durable (where the platform allows opening a folder)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
