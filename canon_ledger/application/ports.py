"""What the application package's top-level use cases need from the outside: the plain-SQL
story views they read (``projections.story_views.StoryViews``), the log as stored records,
the audit's scratch replay of a story, and the writers and judges an LLM may stand behind.

The subpackages declare their own: ``packets.ports`` (the canon read model the compiler reads,
read-your-writes, L1 retrieval), ``retrieval.ports`` and ``knowledge.ports``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from canon_ledger.application.packets.ports import CanonSnapshot, DraftView
from canon_ledger.domain.continuity import Step


# -- the story views ------------------------------------------------------------------------------
class StoryReads(Protocol):
    """The story views a read filters by what a key may see (``canon_reads``), and the lorebook
    export reads (``projections.story_views.StoryViews``)."""

    def story_head(self, story_id: str) -> dict[str, Any] | None: ...

    def canon_as_of(self, story_id: str, chapter: int, kind: str | None = None, *,
                    active: bool = False) -> list[dict[str, Any]]: ...

    def entry(self, story_id: str, kind: str, key: str) -> dict[str, Any] | None: ...

    def chapter(self, story_id: str, number: int) -> dict[str, Any] | None: ...


class KnowledgeReads(StoryReads, Protocol):
    """The views who-knows-what reads (``who_knows``; ``projections.story_views.StoryViews``)."""

    def who_knows(self, story_id: str, chapter: int) -> dict[str, list[dict[str, Any]]]: ...

    def knowledge_of(self, story_id: str, character: str, chapter: int) -> dict[str, Any] | None: ...


class StoryListing(Protocol):
    """The story view (``projections.story_views.StoryViews.story``): its title, its chapters
    (``chapter``, ``volume``, ``summarised``, ``text_accepted``) and volumes (``volume``,
    ``summarised``), or None for a story never started."""

    def story(self, story_id: str) -> dict[str, Any] | None: ...


# -- the log --------------------------------------------------------------------------------------
class StoredEvents(Protocol):
    """The log, as stored records (``.id``: the position) and their decoding (``CanonLedger``)."""

    def records(self, start: int, limit: int, stop: int | None = None, topics: Sequence[str] = ()) -> list[Any]: ...

    def decode(self, record: Any) -> Any: ...


# -- the audit's replay ---------------------------------------------------------------------------
class Scratch(Protocol):
    """The canon of one story as of a past position, replayed from the log apart from the live
    read models (``infrastructure.scratch.ScratchCanon``); ``events``: what it projected, by
    position."""

    events: dict[int, Any]

    def snapshot(self) -> AbstractContextManager[CanonSnapshot]: ...
    def close(self) -> None: ...


ScratchFactory = Callable[[str, int], Scratch]  # (story, position) -> its replay


# -- writers and judges (an LLM, or the deterministic default) ------------------------------------
class SummaryWriter(Protocol):
    """Writes summaries: the extractive default (``domain.summary.ExtractiveSummariser``) or an LLM."""

    name: str  # the method: "extractive-v1", "gemini:<model>"
    uses_quota: bool  # each call is reserved in the quota ledger

    def summarise_chapter(self, title: str, number: int, text: str) -> str: ...

    def summarise_volume(self, title: str, number: int, summaries: list[tuple[int, str]]) -> str: ...


class Judge(Protocol):
    """An LLM that reviews a draft against an evidence table (``--provider gemini``)."""

    name: str
    note: str  # how the last review was answered ("one call ...", "from cache, no call"), for its stage

    def judge(self, report: dict[str, Any], draft: DraftView, evidence: list[Step]) -> list[dict[str, Any]]:
        """Findings in the report's schema (``Finding.as_dict``), or an exception (quota, 429, 5xx)."""
