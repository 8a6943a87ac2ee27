"""CommandReceipt: saved with the command's own events, in the same transaction.

Its id derives from ``command_id``: a retried command collides on the receipt and writes
nothing. The digest tells a true retry from a different command reusing an id. Since
class version 2 it also lists the events the command produced ("originator_id:version"),
which is how an audit names the command behind every fact.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from canon_ledger.domain import ids


class CommandReceipt(Aggregate):
    @staticmethod
    def create_id(command_id: str, **_: Any) -> UUID:
        return ids.receipt_id(command_id)

    class Recorded(Aggregate.Created):
        class_version = 2
        command_id: str
        command_type: str
        story_id: str | None
        digest: str
        events: list[str]

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            # v1 receipts did not list their events; audits fall back to the save they closed.
            state["events"] = []

    @event(Recorded)
    def __init__(self, command_id: str, command_type: str, story_id: str | None, digest: str, events: list[str]) -> None:
        self.command_id = command_id
        self.command_type = command_type
        self.story_id = story_id
        self.digest = digest
        self.events = list(events)


def event_ref(originator_id: Any, version: int) -> str:
    return f"{originator_id}:{version}"
