"""QuotaDay: one provider's LLM calls on one (UTC) day, as events.

Every call is reserved before it is made and settled after; a reservation the caps do not
allow is refused (and recorded as refused). A provider that answers 429 is exhausted until
the day resets: nothing more is reserved that day. The free tier allows ~20 generate calls a
day; the nightly compile may use at most its own cap, leaving the rest for chat.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from canon_ledger.domain import ids
from canon_ledger.domain.errors import CanonError

GENERATE, EMBED = "generate", "embed"


def purpose_family(purpose: str) -> str:
    """What a purpose's cap counts it as: the purpose up to its first ``:`` (a call reserved for
    ``summarize:<story>:<chapter>`` is one of ``summarize``'s, and says which chapter it was for)."""
    return purpose.split(":", 1)[0]


class QuotaRefused(CanonError):
    """No call may be made now; ``code`` says why (``quota_spent``, ``provider_exhausted``)."""


class QuotaDay(Aggregate):
    class Opened(Aggregate.Created):
        provider: str
        day: str

    class Reserved(Aggregate.Event):
        call_id: str
        kind: str
        purpose: str

    class Refused(Aggregate.Event):
        call_id: str
        kind: str
        purpose: str
        reason: str

    class Settled(Aggregate.Event):
        call_id: str
        outcome: str

    class Exhausted(Aggregate.Event):
        reason: str

    @staticmethod
    def create_id(provider: str, day: str, **_: Any) -> UUID:
        return ids.quota_day_id(provider, day)

    @event(Opened)
    def __init__(self, provider: str, day: str) -> None:
        self.provider = provider
        self.day = day
        self.calls: dict[str, dict[str, str]] = {}  # call_id -> {kind, purpose, state}
        self.refused = 0
        self.exhausted: str | None = None  # why, once a 429 said so

    def used(self, kind: str, purpose: str | None = None) -> int:
        """Calls of ``kind`` reserved or spent (a reservation counts until settled as failed-free), of
        ``purpose``'s family (``purpose_family``) when one is given."""
        family = None if purpose is None else purpose_family(purpose)
        return sum(1 for c in self.calls.values()
                   if c["kind"] == kind and c["state"] in ("reserved", "spent")
                   and (family is None or purpose_family(c["purpose"]) == family))

    def reserve(self, call_id: str, kind: str, purpose: str, caps: dict[str, int]) -> None:
        """``caps``: the day's cap for ``kind`` (key ``kind``) and for this purpose's family
        (``kind:family``, ``purpose_family``)."""
        capped = f"{kind}:{purpose_family(purpose)}"
        reason = None
        if self.exhausted:
            reason = ("provider_exhausted", f"{self.provider} is exhausted for {self.day}: {self.exhausted}")
        elif self.used(kind) >= caps.get(kind, 0):
            reason = ("quota_spent", f"{self.provider} {kind} calls for {self.day}: {self.used(kind)} of {caps.get(kind, 0)} used")
        elif capped in caps and self.used(kind, purpose) >= caps[capped]:
            reason = ("quota_spent", f"{purpose_family(purpose)} may use {caps[capped]} {kind} calls a day; all are used")
        if reason is not None:
            self._refuse(call_id=call_id, kind=kind, purpose=purpose, reason=reason[1])
            raise QuotaRefused(reason[0], reason[1])
        self._reserve(call_id=call_id, kind=kind, purpose=purpose)

    @event(Reserved)
    def _reserve(self, call_id: str, kind: str, purpose: str) -> None:
        self.calls[call_id] = {"kind": kind, "purpose": purpose, "state": "reserved"}

    @event(Refused)
    def _refuse(self, call_id: str, kind: str, purpose: str, reason: str) -> None:
        self.refused += 1

    def settle(self, call_id: str, outcome: str) -> None:
        """``outcome``: ``ok`` or ``error`` (the call was made: it counts), ``not_sent`` (it did not)."""
        self._settle(call_id=call_id, outcome=outcome)

    @event(Settled)
    def _settle(self, call_id: str, outcome: str) -> None:
        self.calls[call_id]["state"] = "released" if outcome == "not_sent" else "spent"

    def exhaust(self, reason: str) -> None:
        if not self.exhausted:
            self._exhaust(reason=reason)

    @event(Exhausted)
    def _exhaust(self, reason: str) -> None:
        self.exhausted = reason
