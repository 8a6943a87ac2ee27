"""The quota ledger: every LLM call is reserved before it is made and settled after, as
events on the provider's QuotaDay. A refused reservation is recorded too. A 429 marks the
provider exhausted until the day resets (midnight Pacific, when Gemini's daily quotas do)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo
from typing import Any

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.persistence import IntegrityError

from canon_ledger.application.ledger import CanonLedger
from canon_ledger.domain import ids
from canon_ledger.domain.quota import EMBED, GENERATE, QuotaDay, QuotaRefused


@dataclass(frozen=True)
class QuotaPolicy:
    generate_per_day: int = 20  # the Gemini free tier
    compile_per_day: int = 15  # of those, the nightly compile may use this many; the rest is chat headroom
    step_back_per_day: int = 5  # and search's step-back this many: one broad query spends one, once (cached)
    summarize_per_day: int = 15  # and `canon summarize` this many: one per chapter (or volume) summarised
    continuity_per_day: int = 5  # and `canon check --provider gemini` this many: one per draft and canon (cached)
    embed_per_day: int = 1000
    # Gemini's per-day quotas reset at midnight Pacific time: the ledger's days follow them.
    reset_zone: str = "America/Los_Angeles"

    def caps(self) -> dict[str, int]:
        return {GENERATE: self.generate_per_day, f"{GENERATE}:compile": self.compile_per_day,
                f"{GENERATE}:step-back": self.step_back_per_day, f"{GENERATE}:summarize": self.summarize_per_day,
                f"{GENERATE}:continuity": self.continuity_per_day,
                EMBED: self.embed_per_day}


def today_in(zone: str) -> date:
    return datetime.now(ZoneInfo(zone)).date()


class Quota:
    def __init__(self, ledger: CanonLedger, policy: QuotaPolicy | None = None,
                 today: Callable[[], date] | None = None, attempts: int = 10) -> None:
        self.ledger = ledger
        self.policy = policy or QuotaPolicy()
        self.today = today or (lambda: today_in(self.policy.reset_zone))
        self.attempts = attempts

    def _change(self, provider: str, change: Callable[[QuotaDay], Any]) -> Any:
        """Load today's QuotaDay, change it, save; on a race, reload and change again."""
        day = self.today().isoformat()
        for _ in range(self.attempts):
            try:
                aggregate: QuotaDay = self.ledger.repository.get(ids.quota_day_id(provider, day))
            except AggregateNotFoundError:
                aggregate = QuotaDay(provider=provider, day=day)
            try:
                result = change(aggregate)
            except QuotaRefused:
                self._save(aggregate)  # the refusal is on the record too
                raise
            if self._save(aggregate):
                return result
        raise QuotaRefused("quota_ledger_busy", f"could not record a {provider} call after {self.attempts} tries")

    def _save(self, aggregate: QuotaDay) -> bool:
        try:
            self.ledger.save(aggregate)
            return True
        except IntegrityError:
            return False

    def reserve(self, provider: str, kind: str, purpose: str) -> str:
        call_id = uuid.uuid4().hex
        self._change(provider, lambda d: d.reserve(call_id, kind, purpose, self.policy.caps()))
        return call_id

    def settle(self, provider: str, call_id: str, outcome: str) -> None:
        self._change(provider, lambda d: d.settle(call_id, outcome))

    def exhaust(self, provider: str, reason: str) -> None:
        self._change(provider, lambda d: d.exhaust(reason))

    def status(self, provider: str) -> dict[str, Any]:
        day = self.today()
        try:
            aggregate: QuotaDay = self.ledger.repository.get(ids.quota_day_id(provider, day.isoformat()))
        except AggregateNotFoundError:
            aggregate = QuotaDay(provider=provider, day=day.isoformat())
        caps = self.policy.caps()
        resets = datetime.combine(day + timedelta(days=1), time(0), tzinfo=ZoneInfo(self.policy.reset_zone))
        return {
            "provider": provider,
            "day": day.isoformat(),
            "generate": {"spent": aggregate.used(GENERATE), "cap": caps[GENERATE],
                         "left": max(0, caps[GENERATE] - aggregate.used(GENERATE)) if not aggregate.exhausted else 0,
                         "compile_spent": aggregate.used(GENERATE, "compile"), "compile_cap": caps[f"{GENERATE}:compile"],
                         "step_back_spent": aggregate.used(GENERATE, "step-back"),
                         "step_back_cap": caps[f"{GENERATE}:step-back"],
                         "summarize_spent": aggregate.used(GENERATE, "summarize"),
                         "summarize_cap": caps[f"{GENERATE}:summarize"],
                         "continuity_spent": aggregate.used(GENERATE, "continuity"),
                         "continuity_cap": caps[f"{GENERATE}:continuity"]},
            "embed": {"spent": aggregate.used(EMBED), "cap": caps[EMBED],
                      "left": max(0, caps[EMBED] - aggregate.used(EMBED)) if not aggregate.exhausted else 0},
            "refused": aggregate.refused,
            "exhausted": aggregate.exhausted,
            "resets_at": resets.isoformat(),
        }
