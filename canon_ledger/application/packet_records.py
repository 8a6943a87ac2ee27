"""The packet record store: one ``PacketIssued`` in the log per distinct packet.

A record's id is derived from the packet id (``ids.packet_id``), and the packet id from the
packet's bytes, so a second issue of the same packet collides on the record's first version
and appends nothing. Records are aggregates of the ledger's own event store: an audit reads
them back through its repository.
"""

from __future__ import annotations

from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.persistence import IntegrityError

from canon_ledger.domain import ids
from canon_ledger.domain.packet_log import PacketRecord


class PacketRecords:
    """Stores and finds packet records in ``app``'s event store."""

    def __init__(self, app: Application[UUID]) -> None:
        self._app = app

    def record(self, record: PacketRecord) -> int | None:
        """Append PacketIssued once per distinct packet; returns its position, None if known."""
        try:
            recordings = self._app.save(record)
        except IntegrityError:
            return None  # the same packet (same bytes, same id) was issued before
        return recordings[-1].notification.id

    def get(self, packet_id: str) -> PacketRecord | None:
        """The record of ``packet_id``, None when no such packet was issued."""
        try:
            found: PacketRecord = self._app.repository.get(ids.packet_id(packet_id))
        except AggregateNotFoundError:
            return None
        return found
