"""Story: the root every other aggregate hangs from.

Events -> evolve -> decide: the ``@event`` methods are the events and how they evolve
state; the public methods decide (and refuse) before triggering them.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from canon_ledger.domain import ids
from canon_ledger.domain.errors import RuleViolated

ROLES = ("planner", "writer", "qa", "summarizer", "chat")

# Defaults sized so that a late chapter's writer packet holds its canon (docs/benchmarks.md).
DEFAULT_BUDGETS = {"planner": 12000, "writer": 12000, "qa": 8000, "summarizer": 16000, "chat": 4000}


def with_default_budgets(budgets: dict[str, int]) -> dict[str, int]:
    """A story's per-role budgets: those given, the defaults for the rest."""
    return {**DEFAULT_BUDGETS, **budgets}


class Story(Aggregate):
    # The series it is a book or the bible of (``join_series``): class defaults, so a snapshot
    # taken before series existed loads as a story in none.
    series: str | None = None
    series_role: str | None = None

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

    class JoinedSeries(Aggregate.Event):
        """The story became a book of a series (``role`` "book", ``ordinal`` its place in reading
        order) or its bible (``role`` "bible", ``ordinal`` 0): ``domain.series``."""
        story_id: str
        series_id: str
        role: str
        ordinal: int

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

    def join_series(self, series_id: str, role: str, ordinal: int) -> None:
        """Join ``series_id`` as its bible or a book; a story joins one series at most."""
        self.require_joinable()
        self._join_series(story_id=self.story_id, series_id=series_id, role=role, ordinal=ordinal)

    def require_joinable(self) -> None:
        """Refuse joining a series when the story is in one already, by the rule it breaks."""
        if self.series is not None:
            if self.series_role == "bible":
                raise RuleViolated("series_bible_is_not_a_book",
                                   f"story {self.story_id!r} is the bible of series {self.series!r}: a bible is not a "
                                   "book of a series", "story_id")
            raise RuleViolated("story_in_one_series_at_most",
                               f"story {self.story_id!r} is a book of series {self.series!r} already", "story_id")

    @event(JoinedSeries)
    def _join_series(self, story_id: str, series_id: str, role: str, ordinal: int) -> None:
        self.series = series_id
        self.series_role = role
