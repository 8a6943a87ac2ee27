"""What a projection runner knows of the log without reading it.

A packet request asks a read model to reflect the log up to some position. Most requests
follow an event that is none of the model's (a ``PacketIssued``), or one this process has
just appended; reading the log back to find that out costs a query each time. A runner
therefore remembers two facts, learnt from its catch-ups and from what this process appends
(``EventLogReader.watch``), and never from guessing:

- ``QuietRange``: positions (after, last] hold none of the projection's events;
- ``OwnAppends``: positions (after, last] hold exactly these records of the projection's
  topics, appended by this process right after what the runner knew.

``LogMemory`` keeps both for one runner. Whatever it holds stays true whoever writes next:
positions are never reused, and a build's tracking row never moves back. A fact it was not
told (an append of another process) is simply missing, and the runner reads the log instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from canon_ledger.application.event_log import Appended


def follows(events: Sequence[tuple[Any, ...]], last: int) -> bool:
    """Do ``events`` (position first) take up exactly the positions after ``last``, no gap?"""
    return bool(events) and all(e[0] == last + i for i, e in enumerate(events, start=1))


class QuietRange:
    """A range (after, last] of the log known to hold none of one projection's events.

    Invariants: ``after <= last``; the build was seen at ``after`` or later, so it reflects the
    log up to ``last`` (its tracking row never moves back). The range only grows, or moves on
    to a later one: an older fact never replaces a newer one. A build whose tracking row is at
    or past ``after`` therefore reflects the log up to ``last`` with no read."""

    __slots__ = ("after", "last")

    def __init__(self) -> None:
        self.after, self.last = 0, 0

    def note(self, first: int, last: int) -> None:
        """None of the projection's events lie in (first, last], and the build reflects ``last``."""
        if first <= self.last and last >= self.after:  # overlapping or touching: one range
            self.after, self.last = min(self.after, first), max(self.last, last)
        elif first > self.last:  # a later range: the one the next request asks about
            self.after, self.last = first, last

    def reflects(self, position: int, target: int) -> bool:
        """Does a build tracked at ``position`` reflect the log up to ``target``?"""
        return position >= target or (self.after <= position and target <= self.last)

    def appended(self, events: Sequence[tuple[Any, ...]], topics: Sequence[str]) -> None:
        """Events just appended, as (position, topic, ...): extend the range over them if they
        follow it directly, without a gap, and none is the projection's."""
        if follows(events, self.last) and not any(e[1] in topics for e in events):
            self.last = events[-1][0]


class OwnAppends:
    """Events of one projection that this process appended right after what it knew of the log.

    Invariant: positions (after, last] hold exactly ``records`` (position, stored record) of
    the projection's topics, in order, and nothing else of them. A catch-up starting inside it
    projects them from memory instead of reading them back (see docs/benchmarks.md)."""

    __slots__ = ("after", "last", "records")

    def __init__(self, after: int) -> None:
        self.after = self.last = after
        self.records: list[tuple[int, Any]] = []

    def extend(self, events: Sequence[Appended], topics: Sequence[str]) -> None:
        """Events appended right after ``last`` (the caller checks that they follow it)."""
        self.records += [(e[0], e[2]) for e in events if e[1] in topics]
        self.last = events[-1][0]

    def reflected(self, position: int) -> None:
        """The model reflects the log up to ``position``: forget what it has projected."""
        if position > self.after:
            self.after = position
            self.records = [r for r in self.records if r[0] > position]


class LogMemory:
    """One runner's ``QuietRange`` and ``OwnAppends`` for a projection of ``topics``; at most
    ``limit`` own records are held (past that, the log is read). Not thread-safe: the caller
    serialises catch-ups and appends (``ReadModels`` holds one lock for both)."""

    def __init__(self, topics: Sequence[str], limit: int) -> None:
        self.topics = topics
        self.limit = limit
        self.quiet = QuietRange()
        self.own: OwnAppends | None = None

    @property
    def reflected_up_to(self) -> int:
        """A position the build is known to reflect (0 before anything was learnt)."""
        return self.quiet.last

    def reflects(self, position: int, target: int) -> bool:
        """Does a build tracked at ``position`` reflect the log up to ``target``?"""
        return self.quiet.reflects(position, target)

    def appended(self, events: list[Appended]) -> None:
        """What this process just appended: grows the quiet range over others' events, or
        keeps the projection's own (at most ``limit``; past that, forgets them)."""
        topics = self.topics
        own = self.own
        if own is None:
            if not follows(events, self.quiet.last):
                return
            if not any(e[1] in topics for e in events):
                self.quiet.appended(events, topics)
                return
            own = self.own = OwnAppends(self.quiet.last)
        elif not follows(events, own.last):
            return  # someone else wrote in between; what it holds stays true
        own.extend(events, topics)
        if len(own.records) > self.limit:
            self.own = None

    def events_between(self, position: int, goal: int,
                       decode: Callable[[Any], Any]) -> list[tuple[int, Any]] | None:
        """The projection's events in (position, goal], as ``decode`` gives them from their
        records, if every one of them is held in memory; else None (the log must be read)."""
        own = self.own
        if own is None or goal > own.last or not self.quiet.reflects(position, own.after):
            return None
        return [(p, decode(record)) for p, record in own.records if position < p <= goal]

    def caught_up(self, position: int) -> None:
        """The build reflects the log up to ``position``, its tracking row is there."""
        self.quiet.note(position, position)
        own = self.own
        if own is not None:
            if position >= own.last:
                self.own = None
            else:
                own.reflected(position)

    def quiet_between(self, position: int, goal: int) -> None:
        """A read found none of the projection's events in (position, goal]: the build,
        tracked at ``position``, reflects ``goal``."""
        self.quiet.note(position, goal)
        if self.own is not None:
            self.own.reflected(goal)
