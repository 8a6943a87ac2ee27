"""Deterministic aggregate ids.

Ids derive from the natural keys the authoring app sends (story id, chapter number,
proposal id, ...), so "does it exist?" is one primary-key read, and two writers creating
the same thing collide on the store's unique (id, version=1) instead of both winning.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from uuid import UUID, uuid5

NAMESPACE = UUID("6f1c2c5e-3b7a-4c56-9a39-0c7e8f0b7a11")


def content_digest(*parts: object) -> str:
    """24 hex digits of the sha256 of ``parts``: the content part of the command ids an importer
    derives (a manuscript's chapters, ``canon summarize``'s summaries), so that the same content
    gives the same id and applying it again is a duplicate. Never change it: stores hold its ids."""
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8", "surrogatepass")).hexdigest()[:24]


@lru_cache(maxsize=65536)
def _id(*parts: object) -> UUID:
    return uuid5(NAMESPACE, "\x1f".join(str(p) for p in parts))


def story_id(story: str) -> UUID:
    return _id("story", story)


def series_id(series: str) -> UUID:
    return _id("series", series)


def chapter_id(story: str, chapter: int) -> UUID:
    return _id("chapter", story, chapter)


def volume_id(story: str, volume: int) -> UUID:
    return _id("volume", story, volume)


def draft_id(story: str, draft: str) -> UUID:
    return _id("draft", story, draft)


def proposal_id(story: str, proposal: str) -> UUID:
    return _id("proposal", story, proposal)


def canon_entry_id(story: str, kind: str, key: str) -> UUID:
    return _id("canon", story, kind, key)


def receipt_id(command_id: str, scope: str | None = None) -> UUID:
    """A command's receipt: ``command_id`` within ``scope`` (``receipt.scope_of``: its story or
    collection), so that two stories never share a command id. ``None``: the one namespace
    receipts had before they were scoped, read only to honour those older receipts."""
    return _id("command", command_id) if scope is None else _id("command", scope, command_id)


def packet_id(packet: str) -> UUID:
    return _id("packet", packet)


def document_id(collection: str, document: str) -> UUID:
    return _id("document", collection, document)


def wiki_page_id(collection: str, topic: str) -> UUID:
    return _id("wiki", collection, topic)


def quota_day_id(provider: str, day: str) -> UUID:
    return _id("quota", provider, day)


def api_key_id(token_hash: str) -> UUID:
    return _id("api-key", token_hash)


def api_key_name_id(name: str) -> UUID:
    return _id("api-key-name", name)


def viewer_session_id(session_hash: str) -> UUID:
    return _id("viewer-session", session_hash)
