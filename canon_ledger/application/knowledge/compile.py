"""compile_page and the nightly batch: drain stale pages, oldest drift first, within budget.

A page is compiled atomically: generate (and embed) first, then one save of PageCompiled.
A failure writes no page and leaves it stale, still serving its last good TLDR. Each LLM
attempt is reserved in the quota ledger before it is sent and settled after; 5xx answers
are retried (each retry is its own reserved call), a 429 stops the batch for the day.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from canon_ledger.application.knowledge.ports import (
    ChunkView,
    Embedder,
    KnowledgeReader,
    PageView,
    PageWriter,
    ProviderError,
    ProviderExhausted,
    ProviderThrottled,
    StaleTopic,
    TopicView,
)
from canon_ledger.application.knowledge.quota import Quota
from canon_ledger.application.ledger import CanonLedger
from canon_ledger.domain import ids
from canon_ledger.domain.quota import EMBED, GENERATE, QuotaRefused
from canon_ledger.domain.wiki import WikiPage, embedding_key, source_set_hash
from eventsourcing.application import AggregateNotFoundError

RETRIES_5XX = 3


class StopBatch(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


@dataclass
class CompileReport:
    budgeted: int | None
    compiled: int = 0
    skipped: int = 0
    failed: int = 0
    remaining_stale: int = 0
    stopped_reason: str = "done"  # budget | quota | done
    detail: str = ""
    pages: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"budgeted": self.budgeted, "compiled": self.compiled, "skipped": self.skipped, "failed": self.failed,
                "remaining_stale": self.remaining_stale, "stopped_reason": self.stopped_reason,
                "detail": self.detail, "pages": self.pages}


class WikiCompiler:
    def __init__(self, ledger: CanonLedger, reader: KnowledgeReader, catch_up: Callable[[int], int],
                 writer: PageWriter, embedder: Embedder | None, quota: Quota, provider: str,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.ledger = ledger
        self.reader = reader
        self.catch_up = catch_up
        self.writer = writer
        self.embedder = embedder
        self.quota = quota
        self.provider = provider
        self.sleep = sleep

    def stale(self, collection: str | None = None) -> list[StaleTopic]:
        self.catch_up(self.ledger.event_log.position())
        with self.reader.snapshot() as snap:
            return snap.stale(collection)

    def nightly(self, budget: int | None = None, collection: str | None = None,
                progress: Callable[[int, int], None] | None = None) -> CompileReport:
        if budget is None and self.writer.uses_quota:
            budget = self.quota.policy.compile_per_day
        report = CompileReport(budgeted=budget)
        todo = self.stale(collection)
        for n, item in enumerate(todo):
            if budget is not None and report.compiled >= budget:
                report.stopped_reason = "budget"
                break
            try:
                outcome = self.compile_page(item.topic.collection_id, item.topic.topic_id)
            except StopBatch as stop:
                report.stopped_reason, report.detail = stop.reason, str(stop)
                break
            except ProviderError as e:
                report.failed += 1
                report.pages.append({"topic": item.topic.topic_id, "outcome": "failed", "detail": str(e)})
                continue
            if outcome == "compiled":
                report.compiled += 1
            else:
                report.skipped += 1
            report.pages.append({"topic": item.topic.topic_id, "outcome": outcome})
            if progress is not None:
                progress(n + 1, len(todo))
        report.remaining_stale = len(self.stale(collection))
        if report.stopped_reason == "done" and report.remaining_stale and budget is not None and report.compiled >= budget:
            report.stopped_reason = "budget"
        return report

    def compile_page(self, collection: str, topic_id: str) -> str:
        """Compile one page; returns ``compiled`` or ``skipped`` (its sources reconverged)."""
        self.catch_up(self.ledger.event_log.position())
        with self.reader.snapshot() as snap:
            topics = snap.topics(collection)
            topic = next((t for t in topics if t.topic_id == topic_id), None)
            if topic is None:
                raise ProviderError(f"no topic {topic_id!r} in {collection!r}", sent=False)
            chunks = snap.topic_chunks(collection, topic_id)
            current = snap.page(collection, topic_id)
        sources = [{"chunk_id": c.chunk_id, "hash": c.hash} for c in chunks]
        set_hash = source_set_hash(sources)
        if current is not None and current.source_set_hash == set_hash and not current.stale:
            return "skipped"
        neighbours = _neighbours(topics, topic_id)
        draft = self._call(GENERATE, lambda: self.writer.write(topic, chunks, neighbours), self.writer.uses_quota)
        valid = {t.topic_id for t in topics}
        links = [link for link in draft.wikilinks if link in valid and link != topic_id]
        key = embedding_key(draft.title, draft.tldr, draft.tags)
        embedding = self._embedding(current, key, draft)
        page = {
            "title": draft.title, "tldr": draft.tldr, "body": draft.body, "tags": list(draft.tags),
            "wikilinks": links, "sources": sources, "source_set_hash": set_hash, "method": self.writer.name,
            "embedding_key": key if embedding is not None else None, "embedding": embedding,
            "embedder": self.embedder.name if embedding is not None and self.embedder else None,
        }
        try:
            aggregate: WikiPage = self.ledger.repository.get(ids.wiki_page_id(collection, topic_id))
        except AggregateNotFoundError:
            aggregate = WikiPage(collection_id=collection, topic_id=topic_id)
        aggregate.compile(page)
        self.ledger.save(aggregate)
        return "compiled"

    def _embedding(self, current: PageView | None, key: str, draft: Any) -> list[float] | None:
        embedder = self.embedder
        if embedder is None:
            return None
        if current is not None and current.embedding_key == key and current.embedding is not None:
            return current.embedding  # title + tldr + tags unchanged: no new embedding call
        text = f"{draft.title}\n{draft.tldr}\n{' '.join(draft.tags)}"
        vector: list[float] = self._call(EMBED, lambda: embedder.embed([text])[0], embedder.uses_quota)
        return vector

    def _call(self, kind: str, call: Callable[[], Any], metered: bool) -> Any:
        if not metered:
            return call()
        return metered_call(self.quota, self.provider, kind, "compile", call, self.sleep)


def metered_call(quota: Quota, provider: str, kind: str, purpose: str, call: Callable[[], Any],
                 sleep: Callable[[float], None] = time.sleep) -> Any:
    """``call()`` as one or more reserved calls of ``provider`` in the quota ledger: reserved for
    ``purpose`` before it is sent, settled after (``not_sent`` when it never reached the provider).
    A 5xx is retried (each retry its own reservation) up to ``RETRIES_5XX`` times; a refused
    reservation or a 429 raises ``StopBatch("quota")`` (a daily one marks the provider exhausted
    for the day); any other ``ProviderError`` is raised as it is."""
    for attempt in range(RETRIES_5XX + 1):
        try:
            call_id = quota.reserve(provider, kind, purpose)
        except QuotaRefused as e:
            raise StopBatch("quota", e.message) from None
        try:
            result = call()
        except ProviderExhausted as e:
            quota.settle(provider, call_id, "error")
            quota.exhaust(provider, str(e))
            raise StopBatch("quota", str(e)) from None
        except ProviderThrottled as e:
            quota.settle(provider, call_id, "error")
            raise StopBatch("quota", str(e)) from None
        except ProviderError as e:
            quota.settle(provider, call_id, "error" if e.sent else "not_sent")
            if getattr(e, "retryable", False) and attempt < RETRIES_5XX:
                sleep(min(8.0, 0.5 * 2**attempt))
                continue
            raise
        quota.settle(provider, call_id, "ok")
        return result
    raise AssertionError("unreachable")


def _neighbours(topics: list[TopicView], topic_id: str) -> list[TopicView]:
    index = next(i for i, t in enumerate(topics) if t.topic_id == topic_id)
    return [t for t in topics[max(0, index - 2): index + 3] if t.topic_id != topic_id]


def chunk_bodies(chunks: list[ChunkView]) -> list[str]:
    """Chunk texts without their breadcrumb prefix."""
    return [c.text.split("\n\n", 1)[1] if "\n\n" in c.text else c.text for c in chunks]
