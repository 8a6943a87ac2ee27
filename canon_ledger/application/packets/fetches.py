"""The port reads a recipe makes whose arguments come from the request alone.

Each is a function of the request that gives the read as data (``ports.Call``: the port's
method itself and its arguments), so a store may fetch them together before anything is read
(``recipes.first_reads``, ``CanonSnapshot.prefetch``), and ``Reading.get`` makes each once per
packet. A read's source names the ones it makes (``reading.source``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from canon_ledger.application.packets.ports import (Call, CanonSnapshot, ChapterView, EntryView, Fact, Lore, SceneView,
                                                    StoryView)
from canon_ledger.application.packets.request import Request

T = TypeVar("T")
Fetch = Callable[[Request], Call[T]]

RECENT_SUMMARIES = 3  # chapter summaries before the chapter (P2), the nearest first
RECENT_TIMELINE = 5  # chapters whose timeline events are recent (P2)


def story(r: Request) -> Call[StoryView | None]:
    return Call(CanonSnapshot.story, (r.story_id,))


def chapter(r: Request) -> Call[ChapterView | None]:
    return Call(CanonSnapshot.chapter, (r.story_id, r.chapter))


def previous_chapter(r: Request) -> Call[ChapterView | None]:
    return Call(CanonSnapshot.chapter, (r.story_id, r.chapter - 1))


def scenes(r: Request) -> Call[list[SceneView]]:
    return Call(CanonSnapshot.scenes, (r.story_id, r.chapter))


def active_threads(r: Request) -> Call[list[EntryView]]:
    return Call(CanonSnapshot.active_entries, (r.story_id, r.chapter, "thread"))


def recent_summaries(r: Request) -> Call[list[tuple[int, Fact]]]:
    """The summaries of the RECENT_SUMMARIES chapters before the chapter."""
    return Call(CanonSnapshot.chapter_summaries, (r.story_id, max(1, r.chapter - RECENT_SUMMARIES), r.chapter - 1))


def latest_summaries(r: Request) -> Call[list[tuple[int, Fact]]]:
    """The summaries of the RECENT_SUMMARIES chapters up to the chapter (chat)."""
    return Call(CanonSnapshot.chapter_summaries, (r.story_id, max(1, r.chapter - RECENT_SUMMARIES + 1), r.chapter))


def volumes(r: Request) -> Call[list[tuple[int, Fact]]]:
    return Call(CanonSnapshot.volume_summaries, (r.story_id,))


def recent_timeline(r: Request) -> Call[list[EntryView]]:
    """The timeline events in force whose step took effect in the last RECENT_TIMELINE chapters."""
    return Call(CanonSnapshot.entries_since, (r.story_id, r.chapter, "timeline_event", r.chapter - RECENT_TIMELINE))


def lore(r: Request) -> Call[Lore]:
    return Call(CanonSnapshot.lore, (r.story_id,))


# Not by the request alone, but fetched ahead all the same: a paged read's first page
# (``after`` ""), and the reads by key together once their keys are known (``Reading.whole``).
def entries_page(r: Request, kind: str, after: str, limit: int) -> Call[list[EntryView]]:
    return Call(CanonSnapshot.entries_page, (r.story_id, r.chapter, kind, after, limit))


def entries_by_key(r: Request, keys: tuple[str, ...]) -> Call[list[EntryView]]:
    return Call(CanonSnapshot.entries_by_key, (r.story_id, r.chapter, keys))

