"""What every test keeps to: it leaves the repository as it found it."""

from __future__ import annotations

from pathlib import Path

import pytest

RUNS = Path(__file__).resolve().parents[1] / ".flowtui" / "runs"


def _journals() -> set[str]:
    return {p.name for p in RUNS.iterdir()} if RUNS.is_dir() else set()


@pytest.fixture(autouse=True)
def _no_journal_left_in_the_repository(request: pytest.FixtureRequest):
    """A run started from the repository's root without ``--journal``/``--no-journal`` journals into
    its ``.flowtui/runs``: a developer's own runs get mixed with the suite's."""
    before = _journals()
    yield
    left = _journals() - before
    if left:
        for name in left:
            (RUNS / name).unlink(missing_ok=True)
        pytest.fail(f"{request.node.nodeid} left {sorted(left)} in the repository's .flowtui/runs: give its run "
                    "--journal under tmp_path, or --no-journal", pytrace=False)
