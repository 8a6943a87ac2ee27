"""Fill by tier under a token budget, with a reason for every candidate.

P0 never trims: if it does not fit, the packet is refused with the sizes in the message
(``refuse_over_budget``). Later tiers take what is left in order; an item that does not fit
is trimmed (when MIN_TRIM_TOKENS or more are left) or dropped. The same fact is never packed
twice, and a blocked candidate (hidden, not yet canon) is listed dropped, without its text.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any, cast

from canon_ledger.application.packets.packet import Item
from canon_ledger.application.packets.recipes import Candidate
from canon_ledger.application.packets.render import trimmed
from canon_ledger.domain.errors import CanonError
from canon_ledger.domain.tokens import TokenCounter

# The least room worth reading or trimming into: less holds no useful item.
MIN_TRIM_TOKENS = 32
_TIER = attrgetter("tier")  # tier names sort in tier order (a unit test holds TIERS sorted)
Load = Callable[[list[tuple[Any, ...]]], dict[tuple[Any, ...], str]]


class PacketError(CanonError):
    """The packet cannot be built as asked (budget, role, chapter ...)."""


def refuse_over_budget(candidates: list[Candidate], budget: int, role: str) -> None:
    p0 = sum(c.fact.tokens for c in candidates if c.tier == "P0")
    if p0 > budget:
        draft = sum(c.fact.tokens for c in candidates if c.tier == "P0" and c.kind == "draft_under_review")
        raise PacketError(
            "p0_exceeds_budget",
            f"the hard constraints (P0) need {p0} tokens"
            + (f", {draft} of them the draft under review," if draft else "")
            + f" but the {role} budget is {budget}; "
            "P0 is never trimmed: raise the budget or shorten the scene card, goals, guardrails or contract",
            "budget",
        )


def fill(candidates: list[Candidate], budget: int, tokens: TokenCounter, load: Load) -> list[Item]:
    packing = Packing(budget, tokens, load)
    packing.add(candidates)
    return packing.finish()


class Packing:
    """Fill by tier: one item per candidate, in tier order, across one or more ``add`` calls
    (each call's candidates come after the previous call's, tier for tier). Called after
    ``refuse_over_budget``, P0 always fits: only later tiers are ever trimmed."""

    def __init__(self, budget: int, tokens: TokenCounter, load: Load) -> None:
        self.remaining = budget
        self.tokens = tokens
        self.load = load
        self.items: list[Item] = []
        self._packed: dict[tuple[str, str], str] = {}
        self._unread: list[tuple[int, Any]] = []  # (item index, ref): included texts, fetched once at the end

    def add(self, candidates: list[Candidate]) -> None:
        # Stable: recipe order within a tier. Tier names sort in tier order ("P0" < ... < "P4").
        items, packed, tokens = self.items, self._packed, self.tokens
        remaining = self.remaining
        for c in sorted(candidates, key=_TIER):
            fact = c.fact
            size = fact.tokens
            identity = (c.kind, c.key)
            if c.blocked:
                items.append(_dropped(c, f"{c.blocked} ({c.reason})"))
            elif identity in packed:
                items.append(_dropped(c, f"duplicate of the {packed[identity]} item ({c.reason})"))
            elif size <= remaining:
                if fact.text is None:
                    self._unread.append((len(items), fact.ref))
                items.append(Item(c.tier, c.kind, c.key, fact.text or "", size, "included", c.reason, fact.sources))
                remaining -= size
                packed[identity] = c.tier
            elif remaining >= MIN_TRIM_TOKENS:
                if fact.text is not None:
                    full = fact.text
                else:  # a fact left without its text has its ref (ports.Fact)
                    ref = cast("tuple[Any, ...]", fact.ref)
                    full = self.load([ref])[ref]
                text = trimmed(full, remaining, tokens)
                used = tokens.count(text)
                items.append(Item(c.tier, c.kind, c.key, text, used, "trimmed",
                                  f"trimmed from {size} to {used} tokens to fit ({c.reason})", fact.sources))
                remaining -= used
                packed[identity] = c.tier
            else:
                items.append(_dropped(c, f"no space: needs {size} tokens, {remaining} left ({c.reason})"))
        self.remaining = remaining

    def finish(self) -> list[Item]:
        if self._unread:
            texts = self.load([ref for _, ref in self._unread])
            for i, ref in self._unread:
                self.items[i].text = texts[ref]
            self._unread = []
        return self.items


def _dropped(c: Candidate, reason: str) -> Item:
    # A dropped item carries no text: a hidden reveal must not leak through the viewer.
    return Item(c.tier, c.kind, c.key, "", 0, "dropped", reason, c.fact.sources)
