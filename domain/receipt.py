"""CommandReceipt: saved with the command's own events, in the same transaction.

Its id derives from ``command_id``: a retried command collides on the receipt and writes
nothing. The digest tells a true retry from a different command reusing an id.
"""

from __future__ import annotations

from typing import Any

from eventsourcing.domain import Aggregate, event

from domain import ids


class CommandReceipt(Aggregate):
    @staticmethod
    def create_id(command_id: str, **_: Any):  # type: ignore[override]
        return ids.receipt_id(command_id)

    @event("Recorded")
    def __init__(self, command_id: str, command_type: str, story_id: str | None, digest: str) -> None:
        self.command_id = command_id
        self.command_type = command_type
        self.story_id = story_id
        self.digest = digest
