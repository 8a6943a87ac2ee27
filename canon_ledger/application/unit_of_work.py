"""A unit of work over the event-sourced repository.

Handlers load aggregates through it and hand it new ones; ``pending()`` is what one
``Application.save`` call will write atomically. In an atomic batch the same unit of work
spans every command, so later commands see earlier ones' unsaved changes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Repository
from eventsourcing.domain import Aggregate

from canon_ledger.application.repository import ShortFirstRepository

A = TypeVar("A", bound=Aggregate)


class UnitOfWork:
    def __init__(self, repository: Repository[UUID]) -> None:
        self._repository = repository
        self._seen: dict[UUID, Aggregate | None] = {}
        # Per command (see ``begin``): each aggregate it touched, with its pending count then.
        # Only those can hold its events, so finding them costs what the command touched,
        # not what the whole batch did (an atomic batch of n commands stays O(n)).
        self._touched: dict[UUID, int] = {}

    def begin(self) -> None:
        """A new command starts deciding: ``produced()`` will name only its events."""
        self._touched = {}

    def _touch(self, aggregate_id: UUID) -> None:
        if aggregate_id not in self._touched:
            found = self._seen.get(aggregate_id)
            self._touched[aggregate_id] = len(found.pending_events) if found is not None else 0

    def get(self, cls: type[A], aggregate_id: UUID) -> A | None:
        if aggregate_id not in self._seen:
            try:
                self._seen[aggregate_id] = self._repository.get(aggregate_id)
            except AggregateNotFoundError:
                self._seen[aggregate_id] = None
        self._touch(aggregate_id)
        found = self._seen[aggregate_id]
        if found is not None and not isinstance(found, cls):
            raise TypeError(f"{aggregate_id} is a {type(found).__name__}, not a {cls.__name__}")
        return found

    def prefetch(self, aggregate_ids: Iterable[UUID]) -> None:
        """Load those of ``aggregate_ids`` not seen yet, together (``ShortFirstRepository.get_many``),
        as ``get`` would one at a time, an absent one remembered as absent: a later ``get`` of
        any of them reads nothing. It touches none of them (``produced`` is unchanged)."""
        if not isinstance(self._repository, ShortFirstRepository):
            return
        wanted = [i for i in aggregate_ids if i not in self._seen]
        if wanted:
            self._seen.update(self._repository.get_many(wanted))

    def add(self, aggregate: Aggregate) -> None:
        self._touched.setdefault(aggregate.id, 0)  # new: every pending event is this command's
        self._seen[aggregate.id] = aggregate

    def pending(self) -> list[Aggregate]:
        """Changed aggregates, in the order they were first changed (the log reads causally)."""
        changed = [a for a in self._seen.values() if a is not None and a.pending_events]
        return sorted(changed, key=lambda a: a.pending_events[0].timestamp)

    def produced(self) -> list[Any]:
        """The events the current command added, in the order they happened."""
        events = [e for i, before in self._touched.items() if (a := self._seen.get(i)) is not None
                  for e in a.pending_events[before:]]
        return sorted(events, key=lambda e: e.timestamp)
