"""WikiPage: a summary page compiled from one topic's chunks (llmwiki).

``PageCompiled`` records what it was made from (each source chunk's id and hash at compile,
and the hash of that set), how (extractive, or which model), and the page itself. A page is
stale when a cited chunk's hash moves; it keeps serving its last good TLDR meanwhile.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from canon_ledger.domain import ids


def source_set_hash(sources: list[dict[str, str]]) -> str:
    pairs = sorted((s["chunk_id"], s["hash"]) for s in sources)
    return hashlib.sha256(json.dumps(pairs).encode()).hexdigest()


PAGE_PREFIX = "page:"  # a page's id among a collection's documents: page:<topic id>


def page_doc_id(topic_id: str) -> str:
    return PAGE_PREFIX + topic_id


def page_summary(title: str, tldr: str) -> str:
    """What a page offers a reader (search, packets): its title and last good TLDR."""
    return f"{title}: {tldr}"


def embedding_key(title: str, tldr: str, tags: list[str]) -> str:
    """What a page's embedding is computed from: unchanged key, no new embedding call."""
    return hashlib.sha256(json.dumps([title, tldr, sorted(tags)]).encode()).hexdigest()


class WikiPage(Aggregate):
    class Opened(Aggregate.Created):
        collection_id: str
        topic_id: str

    class PageCompiled(Aggregate.Event):
        collection_id: str
        topic_id: str
        page: dict[str, Any]

    @staticmethod
    def create_id(collection_id: str, topic_id: str, **_: Any) -> UUID:
        return ids.wiki_page_id(collection_id, topic_id)

    @event(Opened)
    def __init__(self, collection_id: str, topic_id: str) -> None:
        self.collection_id = collection_id
        self.topic_id = topic_id
        self.compiled: dict[str, Any] | None = None

    def compile(self, page: dict[str, Any]) -> None:
        self._compiled(collection_id=self.collection_id, topic_id=self.topic_id, page=page)

    @event(PageCompiled)
    def _compiled(self, collection_id: str, topic_id: str, page: dict[str, Any]) -> None:
        self.compiled = dict(page)
