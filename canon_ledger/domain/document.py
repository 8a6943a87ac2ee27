"""Document: a knowledge-base text as hierarchical chunks, each with a content hash.

Re-ingesting appends only what changed: ``ChunkEdited`` for a chunk whose text moved,
``ChunkAdded`` / ``ChunkRemoved`` for chunks that appeared or went. ``edit_chunk`` changes one
chunk's body in place (and appends nothing when the chunk has that text already). Wiki pages
cite chunks by id and hash; these events are how they learn they went stale, and a revert
(same hash again) is how they learn they are fresh.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from canon_ledger.domain import ids
from canon_ledger.domain.chunking import Chunk, Section, content_hash, normalize_body
from canon_ledger.domain.errors import NotFound


class Document(Aggregate):
    class Ingested(Aggregate.Created):
        collection_id: str
        document_id: str
        title: str
        sections: list[dict[str, Any]]
        chunks: list[dict[str, Any]]

    class Restructured(Aggregate.Event):
        collection_id: str
        document_id: str
        title: str
        sections: list[dict[str, Any]]

    class ChunkAdded(Aggregate.Event):
        collection_id: str
        chunk: dict[str, Any]

    class ChunkEdited(Aggregate.Event):
        collection_id: str
        chunk_id: str
        text: str
        hash: str
        previous_hash: str

    class ChunkRemoved(Aggregate.Event):
        collection_id: str
        chunk_id: str
        previous_hash: str

    @staticmethod
    def create_id(collection_id: str, document_id: str, **_: Any) -> UUID:
        return ids.document_id(collection_id, document_id)

    @event(Ingested)
    def __init__(self, collection_id: str, document_id: str, title: str, sections: list[dict[str, Any]],
                 chunks: list[dict[str, Any]]) -> None:
        self.collection_id = collection_id
        self.document_id = document_id
        self.title = title
        self.sections = {s["section_id"]: list(s["breadcrumb"]) for s in sections}
        self.chunks: dict[str, dict[str, Any]] = {c["chunk_id"]: dict(c) for c in chunks}

    @classmethod
    def ingest(cls, collection_id: str, document_id: str, title: str, sections: list[Section],
               chunks: list[Chunk]) -> Document:
        return cls(collection_id=collection_id, document_id=document_id, title=title,
                   sections=[_section(s) for s in sections], chunks=[c.as_dict() for c in chunks])

    def reingest(self, title: str, sections: list[Section], chunks: list[Chunk]) -> None:
        new = {c.chunk_id: c for c in chunks}
        new_sections = {s.section_id: list(s.breadcrumb) for s in sections}
        if title != self.title or new_sections != self.sections:
            self._restructure(collection_id=self.collection_id, document_id=self.document_id, title=title,
                              sections=[_section(s) for s in sections])
        for chunk_id in [c for c in self.chunks if c not in new]:
            self._remove(collection_id=self.collection_id, chunk_id=chunk_id,
                         previous_hash=self.chunks[chunk_id]["hash"])
        for chunk in chunks:
            old = self.chunks.get(chunk.chunk_id)
            if old is None:
                self._add(collection_id=self.collection_id, chunk=chunk.as_dict())
            elif old["hash"] != chunk.hash:
                self._edit(collection_id=self.collection_id, chunk_id=chunk.chunk_id, text=chunk.text,
                           hash=chunk.hash, previous_hash=old["hash"])

    def edit_chunk(self, chunk_id: str, body: str) -> None:
        old = self.chunks.get(chunk_id)
        if old is None:
            raise NotFound("unknown_chunk", f"document {self.document_id!r} has no chunk {chunk_id!r}", "chunk_id")
        prefix = " > ".join(self.sections[old["section_id"]])
        text = f"{prefix}\n\n{normalize_body(body)}"
        if text == old["text"]:
            return  # the text it has: nothing changes
        self._edit(collection_id=self.collection_id, chunk_id=chunk_id, text=text, hash=content_hash(text),
                   previous_hash=old["hash"])

    @event(Restructured)
    def _restructure(self, collection_id: str, document_id: str, title: str, sections: list[dict[str, Any]]) -> None:
        self.title = title
        self.sections = {s["section_id"]: list(s["breadcrumb"]) for s in sections}

    @event(ChunkAdded)
    def _add(self, collection_id: str, chunk: dict[str, Any]) -> None:
        self.chunks[chunk["chunk_id"]] = dict(chunk)

    @event(ChunkEdited)
    def _edit(self, collection_id: str, chunk_id: str, text: str, hash: str, previous_hash: str) -> None:
        self.chunks[chunk_id] = {**self.chunks[chunk_id], "text": text, "hash": hash}

    @event(ChunkRemoved)
    def _remove(self, collection_id: str, chunk_id: str, previous_hash: str) -> None:
        del self.chunks[chunk_id]


def _section(s: Section) -> dict[str, Any]:
    return {"section_id": s.section_id, "breadcrumb": list(s.breadcrumb)}


def document_of_chunk(chunk_id: str) -> tuple[str, str]:
    """(collection_id, document_id) from ``collection/document#section/n``."""
    doc_key = chunk_id.rsplit("#", 1)[0]
    collection_id, _, document_id = doc_key.partition("/")
    if not collection_id or not document_id or "#" not in chunk_id:
        raise NotFound("unknown_chunk", f"{chunk_id!r} is not a chunk id (collection/document#section/n)", "chunk_id")
    return collection_id, document_id


def title_of(document_id: str, text: str) -> str:
    """A document's title when none is given: its first ``# `` heading, else its name."""
    for line in text.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    stem = PurePosixPath(document_id).stem
    return stem.replace("_", " ").replace("-", " ").strip() or document_id
