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

import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import IO


def not_text(data: bytes, exc: UnicodeDecodeError) -> str:
    """Why ``data`` (a file's bytes, read as UTF-8 with a BOM taken off) is no text, in words: a binary file
    (a NUL byte), else where the first byte that is no UTF-8 is (``not UTF-8 text (byte 0xe9 at line 1,
    column 15); save it as UTF-8``): a file saved as Latin-1 was said to be binary."""
    if b"\0" in data[:8192]:
        return "a binary file, not text"
    at = exc.start + len(data) - len(exc.object)  # (the decoder saw it without its BOM)
    line = data.count(b"\n", 0, at) + 1
    column = at - (data.rfind(b"\n", 0, at) + 1) + 1
    return f"not UTF-8 text (byte {data[at]:#04x} at line {line}, column {column}); save it as UTF-8"


def cannot_write(path: Path | str, what: str) -> str:
    """Why a journal cannot be written, and what to do instead."""
    return (f"cannot write the journal {path}: {what}; name a file you can write (--journal FILE; from Python, "
            "journal=), or run without one (--no-journal; from Python, leave journal= out)")


def not_a_file(path: Path, what: str = "a journal file") -> str | None:
    """Why ``path``, which exists, cannot be ``what``: a folder, or a pipe or device (reading one
    may never end, writing one may never succeed); None for a file, or a path that is not there."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:  # (a name too long was a traceback, or Python's "[Errno 36]" naming no option)
        if exc.errno == errno.ENAMETOOLONG:
            return "has a name longer than the file system takes"
        if exc.errno == errno.ELOOP:
            return f"is a loop of links, not {what}"
        return None  # missing: said where it is opened
    if stat.S_ISDIR(mode):
        return f"is a folder, not {what}"
    if not stat.S_ISREG(mode):
        return f"is a pipe or a device, not {what}"
    return None


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


def partial_of(path: Path, what: str) -> Path:
    """Where a run that did not finish puts the ``what`` (a ``snapshot``, a ``cassette``) that would have
    replaced ``path``, which it keeps (``cas.jsonl`` → ``cas.partial.jsonl``): a failed or stopped run cut a
    whole cassette or snapshot down. A name that holds something else (the run's own journal, the flow file,
    a file of the person's: each was replaced) or is a folder is passed over: ``cas.partial-2.jsonl``..."""
    for n in range(1, 21):
        candidate = path.with_name(f"{path.stem}.partial{'' if n == 1 else f'-{n}'}{path.suffix}")
        if replace_refusal(candidate, what, {}) is None:
            return candidate
    raise OSError(f"every name beside {path} for this run's {what} holds something else (up to {candidate.name}); "
                  "move some of them away")


def written_note(what: str, verb: str, given: Path | str, where: Path, status: str) -> str:
    """``cassette: replaced cas.jsonl``; of a run that did not finish, that it holds the run up to its end, or
    that the file given was kept and this run's is beside it (``verb`` "kept", ``where``)."""
    if verb == "kept":
        return (f"{what}: {given} kept as it was (the run {status} before its end); this run's {what} is "
                f"{Path(given).with_name(where.name)}")
    said = f"{what}: {verb} {given}"
    return said if status == "finished" else f"{said} (the run {status}: what it did up to there)"


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


SNAPSHOT_KEYS = ("workflow", "memory", "tasks", "history", "state", "state_none", "data")  # (here: no heavy import)


def _is_one(what: str, path: Path) -> bool:
    """Whether the file at ``path`` is a ``what`` already (a cassette begins with its header; a snapshot
    is TOML of a snapshot's keys): a file that is not is someone else's, and is not replaced."""
    with path.open("rb") as f:
        head = f.read(1 << 16)
    if not head.strip():
        return True
    if what == "cassette":
        return head.lstrip().startswith(b'{"flowtui_cassette"')
    import tomllib

    try:
        data = tomllib.loads(path.read_bytes().decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return False
    return set(data) <= set(SNAPSHOT_KEYS)


def replace_refusal(path: Path, what: str, keep: dict[Path, str]) -> str | None:
    """Why writing ``what`` (a ``snapshot``, a ``cassette``) over ``path`` must not happen, saying what to
    name instead; None when it may (nothing there, an empty file, or a ``what`` already). ``keep``: files
    of the run it must not be, and what each is."""
    if not str(path).strip():
        return f"no file named; name the {what} file"
    try:
        return _replace_refusal(path, what, keep)
    except (OSError, RuntimeError) as exc:  # a name too long, a loop of links: a traceback, exit 1
        return f"cannot be written ({path_fault(exc)}); name another file"


def path_fault(exc: BaseException) -> str:
    """What is wrong with a path, in words, from what looking at it raised (``File name too long``, a loop of
    links: Python 3.11's ``resolve`` raises ``RuntimeError`` for one)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return "a loop of links" if isinstance(exc, RuntimeError) else str(exc)


def _replace_refusal(path: Path, what: str, keep: dict[Path, str]) -> str | None:
    for other, which in keep.items():
        try:
            if path.resolve() == other.resolve() or (path.exists() and other.exists() and path.samefile(other)):
                return f"is {which}; name another file for the {what}"
        except OSError:
            continue
    if path.is_dir():
        return f"is a folder; name a file in it, e.g. {path / ('run.toml' if what == 'snapshot' else 'run.jsonl')}"
    if path.exists() or path.is_symlink():
        if path.is_symlink() or not path.is_file():
            return f"is a link, a pipe or a device, not a {what} file; name a file"
        try:
            if not _is_one(what, path):
                return f"holds something other than a {what}, which would be replaced; name a new file or a {what}"
        except OSError as exc:
            return f"cannot be read to see what it holds ({exc.strerror or exc}); name another file"
    parent = path.parent if str(path.parent) else Path(".")
    existing = next((p for p in (parent, *parent.parents) if p.exists()), Path("."))
    try:  # a file (or the folders to come) made there and gone: what the permissions alone do not say (as
        if existing == parent:  # root, /proc or a read-only disk: the run went on, then failed or lost its file)
            with tempfile.TemporaryFile(dir=parent):
                pass
        else:
            os.rmdir(tempfile.mkdtemp(prefix=".flowtui-", dir=existing))
    except OSError as exc:
        return (f"no file can be made in its folder {existing} ({exc.strerror or exc}); name a file in a folder "
                "you can write")
    return None
