"""Shared with the test flows: every model request they receive, in order."""

REQUESTS: list[tuple[str, list]] = []


def count(agent: str) -> int:
    return sum(1 for who, _ in REQUESTS if who == agent)

GATE = None  # an asyncio.Event a streaming test model awaits between fragments (tests set it)
