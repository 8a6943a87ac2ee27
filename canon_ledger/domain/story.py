"""Story: the root every other aggregate hangs from.

Events -> evolve -> decide: the ``@event`` methods are the events and how they evolve
state; the public methods decide (and refuse) before triggering them.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from canon_ledger.domain import ids

ROLES = ("planner", "writer", "qa", "summarizer", "chat")

# Defaults sized so that a late chapter's writer packet holds its canon (docs/benchmarks.md).
DEFAULT_BUDGETS = {"planner": 12000, "writer": 12000, "qa": 8000, "summarizer": 16000, "chat": 4000}


def with_default_budgets(budgets: dict[str, int]) -> dict[str, int]:
    """A story's per-role budgets: those given, the defaults for the rest."""
    return {**DEFAULT_BUDGETS, **budgets}


class Story(Aggregate):
    class Started(Aggregate.Created):
        class_version = 2
        story_id: str
        title: str
        style_guardrails: list[str]
        output_contract: str
        budgets: dict[str, int]
        receipts_scoped: bool

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            # Started before command ids were scoped per story: its older commands' receipts
            # are in the global namespace (``receipt.CommandReceipt``), so they are read too.
            state["receipts_scoped"] = False

    class LoreCapSet(Aggregate.Event):
        story_id: str
        share: int | None  # percent of a packet's budget; None: no cap

    @staticmethod
    def create_id(story_id: str, **_: Any) -> UUID:
        return ids.story_id(story_id)

    @event(Started)
    def __init__(
        self,
        story_id: str,
        title: str,
        style_guardrails: list[str],
        output_contract: str,
        budgets: dict[str, int],
        receipts_scoped: bool = True,
    ) -> None:
        self.story_id = story_id
        self.receipts_scoped = receipts_scoped  # False: receipts of its commands may be unscoped
        self.title = title
        self.style_guardrails = list(style_guardrails)
        self.output_contract = output_contract
        self.budgets = with_default_budgets(budgets)
        self.lore_share: int | None = None

    @classmethod
    def start(
        cls,
        story_id: str,
        title: str,
        style_guardrails: list[str],
        output_contract: str,
        budgets: dict[str, int] | None = None,
    ) -> Story:
        return cls(
            story_id=story_id,
            title=title,
            style_guardrails=list(style_guardrails),
            output_contract=output_contract,
            budgets=dict(budgets or {}),
            receipts_scoped=True,
        )

    def set_lore_cap(self, share: int | None) -> None:
        """The share of every packet's budget (percent, 1..100) the entries brought in by their
        own rule (mentioned, always-on) may take together; None: no cap. The cap it has already
        decides nothing."""
        if share == self.lore_share:
            return
        self._set_lore_cap(story_id=self.story_id, share=share)

    @event(LoreCapSet)
    def _set_lore_cap(self, story_id: str, share: int | None) -> None:
        self.lore_share = share
