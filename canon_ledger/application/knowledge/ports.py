"""What the knowledge use cases need from the outside: the read model, and LLM providers."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class ChunkView:
    chunk_id: str
    text: str
    hash: str


@dataclass(frozen=True)
class TopicView:
    collection_id: str
    topic_id: str
    title: str
    document_id: str


@dataclass(frozen=True)
class PageView:
    collection_id: str
    topic_id: str
    title: str
    tldr: str
    tags: list[str]
    wikilinks: list[str]
    method: str
    source_set_hash: str
    embedding_key: str | None
    embedding: list[float] | None
    edited: int
    set_changed: int
    drift_since: int | None

    @property
    def stale(self) -> bool:
        return bool(self.edited or self.set_changed)


@dataclass(frozen=True)
class StaleTopic:
    topic: TopicView
    page: PageView | None  # None: never compiled
    drift_since: int


class KnowledgeSnapshot(Protocol):
    def collections(self) -> list[str]: ...
    def topics(self, collection_id: str) -> list[TopicView]: ...
    def topic_chunks(self, collection_id: str, topic_id: str) -> list[ChunkView]: ...
    def page(self, collection_id: str, topic_id: str) -> PageView | None: ...
    def pages(self, collection_id: str | None = None) -> list[PageView]: ...
    def stale(self, collection_id: str | None = None) -> list[StaleTopic]:
        """Never-compiled topics and drifted pages, oldest drift first."""
        ...


class KnowledgeReader(Protocol):
    def snapshot(self) -> AbstractContextManager[KnowledgeSnapshot]: ...


@dataclass
class PageDraft:
    title: str
    tldr: str
    body: str
    tags: list[str] = field(default_factory=list)
    wikilinks: list[str] = field(default_factory=list)


class ProviderError(Exception):
    """The call failed; no page is written. ``sent`` says whether it reached the provider."""

    def __init__(self, message: str, *, sent: bool = True) -> None:
        super().__init__(message)
        self.sent = sent


class ProviderExhausted(ProviderError):
    """The provider said its daily quota is spent (HTTP 429): stop until the day resets."""


class ProviderThrottled(ProviderError):
    """A short-term rate limit (429 that is not the daily quota): stop for now, not for the day."""


class PageWriter(Protocol):
    name: str  # "extractive" or "gemini:<model>"
    uses_quota: bool

    def write(self, topic: TopicView, chunks: list[ChunkView], neighbours: list[TopicView]) -> PageDraft: ...


class Embedder(Protocol):
    name: str
    uses_quota: bool

    def embed(self, texts: list[str]) -> list[list[float]]: ...

