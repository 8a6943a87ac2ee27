"""How a projection's events fall into shares that workers may catch up apart (PostgreSQL):
by story for the story models (canon, authoring), by knowledge collection for the models of
collections (knowledge, the keyword index, the vectors).

A projection that can be split declares ``partitioning``. The invariants a ``Partitioning``
must hold, which a split build's exactly-once rests on (``projections.partitions``):

- ``of(event)`` names the one share each of the projection's events belongs to, and the
  projection's rows for one share are written only by that share's events (no row, total or
  statistic is shared between shares);
- every stored event of share ``s`` holds one of ``matches(s)`` (a field and its value) in its
  stored JSON, so the log can be read one share at a time without decoding the others;
- the first event of every share is of an ``openers`` type, and ``opened(event)`` names it:
  reading the openers finds every share that has an event, which is what lets a build's
  low-water mark move without reading the log once every share stands at the end.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from canon_ledger.domain.chunking import collection_story, story_collection
from canon_ledger.domain.document import Document
from canon_ledger.domain.story import Story
from canon_ledger.domain.wiki import WikiPage


@dataclass(frozen=True)
class Partitioning:
    name: str  # what one share is: "story", "collection"
    of: Callable[[Any], str | None]  # the share an event belongs to (None: not split)
    matches: Callable[[str], tuple[tuple[str, str], ...]]  # (field, value) pairs, one in each of the share's events
    openers: tuple[type, ...]  # the event types that open a share
    opened: Callable[[Any], str]  # the share an opening event opens
    story: Callable[[str], str | None]  # the story a share belongs to (None: a collection of no story)


def _story(event: Any) -> str | None:
    story = getattr(event, "story_id", None)
    return None if story is None else str(story)


BY_STORY = Partitioning("story", of=_story, matches=lambda story: (("story_id", story),),
                        openers=(Story.Started,), opened=lambda event: str(event.story_id), story=lambda share: share)



def _collection(event: Any) -> str | None:
    """A document's or page's collection; a story's accepted text goes to the story's collection."""
    collection = getattr(event, "collection_id", None)
    if collection is not None:
        return str(collection)
    story = getattr(event, "story_id", None)
    return None if story is None else story_collection(str(story))




def _collection_matches(collection: str) -> tuple[tuple[str, str], ...]:
    own = (("collection_id", collection),)
    story = collection_story(collection)
    return own if story is None else (*own, ("story_id", story))


def _opened_collection(event: Any) -> str:
    return story_collection(event.story_id) if isinstance(event, Story.Started) else str(event.collection_id)


BY_COLLECTION = Partitioning("collection", of=_collection, matches=_collection_matches,
                             openers=(Story.Started, Document.Ingested, WikiPage.Opened), opened=_opened_collection,
                             story=collection_story)


def partitioning_of(projection: Any) -> Partitioning | None:
    """The projection's partitioning, or None: a projection that declares none is never split."""
    return getattr(projection, "partitioning", None)
