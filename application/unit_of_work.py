"""A unit of work over the event-sourced repository.

Handlers load aggregates through it and hand it new ones; ``pending()`` is what one
``Application.save`` call will write atomically. In an atomic batch the same unit of work
spans every command, so later commands see earlier ones' unsaved changes.
"""

from __future__ import annotations

from typing import TypeVar
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Repository
from eventsourcing.domain import Aggregate

A = TypeVar("A", bound=Aggregate)


class UnitOfWork:
    def __init__(self, repository: Repository) -> None:
        self._repository = repository
        self._seen: dict[UUID, Aggregate | None] = {}

    def get(self, cls: type[A], aggregate_id: UUID) -> A | None:
        if aggregate_id not in self._seen:
            try:
                self._seen[aggregate_id] = self._repository.get(aggregate_id)
            except AggregateNotFoundError:
                self._seen[aggregate_id] = None
        found = self._seen[aggregate_id]
        if found is not None and not isinstance(found, cls):
            raise TypeError(f"{aggregate_id} is a {type(found).__name__}, not a {cls.__name__}")
        return found  # type: ignore[return-value]

    def add(self, aggregate: Aggregate) -> None:
        self._seen[aggregate.id] = aggregate

    def pending(self) -> list[Aggregate]:
        """Changed aggregates, in the order they were first changed (the log reads causally)."""
        changed = [a for a in self._seen.values() if a is not None and a.pending_events]
        return sorted(changed, key=lambda a: a.pending_events[0].timestamp)

    def pending_counts(self) -> dict[UUID, int]:
        """How many events each aggregate has pending: what a command adds is what comes after."""
        return {i: len(a.pending_events) for i, a in self._seen.items() if a is not None}
