"""CommandReceipt: saved with the command's own events, in the same transaction.

Its id derives from ``command_id`` within the command's scope (its story, or for a knowledge
command its collection: ``scope_of``): a retried command collides on the receipt and writes
nothing, and two stories never share a command id (neither learns the other's ids from a
refusal, nor can claim one first). The digest tells a true retry from a different command
reusing an id. Since class version 2 it lists the events the command produced
("originator_id:version"), which is how an audit names the command behind every fact.
Since class version 3 it names its ``scope``; receipts written before are in one global
namespace (``scope`` None) and are still honoured, for their own story only. A command that
changed nothing records a receipt with no events, so its id cannot later name another command.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from canon_ledger.domain import ids


def scope_of(command: Any) -> str:
    """The namespace of ``command``'s id: ``story:<story_id>``, or ``collection:<id>`` for the
    knowledge commands (a chunk id starts with its collection, which holds no ``/``)."""
    story = getattr(command, "story_id", None)
    if story is not None:
        return f"story:{story}"
    collection = getattr(command, "collection_id", None)
    if collection is None:
        collection = str(getattr(command, "chunk_id", "")).split("/", 1)[0]
    return f"collection:{collection}"


class CommandReceipt(Aggregate):
    @staticmethod
    def create_id(command_id: str, scope: str | None = None, **_: Any) -> UUID:
        return ids.receipt_id(command_id, scope)

    class Recorded(Aggregate.Created):
        class_version = 3
        command_id: str
        command_type: str
        story_id: str | None
        digest: str
        events: list[str]
        scope: str | None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            # v1 receipts did not list their events; audits fall back to the save they closed.
            state["events"] = []

        @staticmethod
        def upcast_v2_v3(state: dict[str, Any]) -> None:
            state["scope"] = None  # the global namespace of ids

        @property
        def closes_its_save(self) -> bool:
            """A v1 receipt: it names no events, and an event no receipt names belongs to the first
            such receipt of its story after it. (A scoped receipt with no events is a command that
            changed nothing.)"""
            return not self.events and self.scope is None

    @event(Recorded)
    def __init__(self, command_id: str, command_type: str, story_id: str | None, digest: str, events: list[str],
                 scope: str | None) -> None:
        self.command_id = command_id
        self.command_type = command_type
        self.story_id = story_id
        self.digest = digest
        self.events = list(events)
        self.scope = scope



def event_ref(originator_id: Any, version: int) -> str:
    return f"{originator_id}:{version}"
