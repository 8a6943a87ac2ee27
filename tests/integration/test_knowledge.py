"""The knowledge layer on both stores: ingest, staleness from events, compile, lint, quota."""

from __future__ import annotations

import json
import uuid

import pytest

from canon_ledger.application.knowledge.lint import lint
from canon_ledger.application.knowledge.quota import Quota, QuotaPolicy
from canon_ledger.domain.commands import parse_command
from canon_ledger.domain.quota import QuotaRefused
from tests.helpers import apply_demo

GUIDE = """# Lamplighting

How the Guild trims lamps.

## Wicks

Trim the wick once a night. A trimmed wick burns clean and shows its memory.

## Oil

Colza oil only. Whale oil smokes and clouds the glass.

## Curfew

After the ninth bell only licensed lamplighters walk the Quay.
"""


def _ingest(services, text: str, document: str = "guide.md", collection: str = "guild"):
    [result] = services.ledger.apply([parse_command({
        "type": "ingest_document", "command_id": uuid.uuid4().hex, "collection_id": collection,
        "document_id": document, "title": "Guild Guide", "text": text})])
    assert result.ok, result.as_dict()
    return result


def _edit(services, chunk_id: str, text: str):
    [result] = services.ledger.apply([parse_command({"type": "edit_chunk", "command_id": uuid.uuid4().hex,
                                                     "chunk_id": chunk_id, "text": text})])
    assert result.status == "applied", result.as_dict()


def _lint(services):
    services.knowledge.catch_up_serving()
    with services.knowledge_reader.snapshot() as snap:
        return lint(snap)


def _stale(services) -> list[str]:
    return [s.topic.topic_id for s in services.compiler("offline").stale()]


def test_ingest_twice_appends_only_a_receipt_and_a_changed_section_only_its_chunk(services) -> None:
    first = _ingest(services, GUIDE)
    position = services.ledger.event_log.position()
    assert _ingest(services, GUIDE).status == "unchanged"
    # Nothing of the document: only the receipt that keeps the new command id from naming another.
    assert [e.type for e in services.ledger.event_log.history(start=position + 1)] == ["CommandReceipt.Recorded"]
    position = services.ledger.event_log.position()
    _ingest(services, GUIDE.replace("Colza oil only.", "Rapeseed oil only."))
    new = [e for e in services.ledger.event_log.history(start=position + 1)]
    assert [e.type for e in new] == ["Document.ChunkEdited", "CommandReceipt.Recorded"]
    assert new[0].data["chunk_id"] == "guild/guide.md#lamplighting/oil/0"
    assert first.position < new[0].position


def test_staleness_follows_edits_and_reverts_with_no_compile(services) -> None:
    _ingest(services, GUIDE)
    compiler = services.compiler("offline")
    report = compiler.nightly()
    assert report.compiled == 4 and report.remaining_stale == 0 and report.stopped_reason == "done"
    chunk = "guild/guide.md#lamplighting/oil/0"
    _edit(services, chunk, "Whale oil is allowed now.")
    assert _stale(services) == ["guild/guide.md#lamplighting/oil"]
    with services.knowledge_reader.snapshot() as snap:
        page = snap.page("guild", "guild/guide.md#lamplighting/oil")
        assert page.stale and "Colza" in page.tldr  # still serving its last good TLDR
        assert [i.code for i in lint(snap).issues] == ["stale_tldr"]
    _edit(services, chunk, "Colza oil only. Whale oil smokes and clouds the glass.")
    assert _stale(services) == []
    assert _lint(services).green
    positions = services.ledger.event_log.position()
    assert compiler.nightly().compiled == 0 and services.ledger.event_log.position() == positions


def test_added_section_drifts_its_topic_and_removed_topics_orphan_pages(services) -> None:
    _ingest(services, GUIDE)
    services.compiler("offline").nightly()
    _ingest(services, GUIDE + "\n### Bells\n\nThe bell rings nine times.\n")  # a new chunk in the Curfew topic
    assert _stale(services) == ["guild/guide.md#lamplighting/curfew"]
    assert {i.code for i in _lint(services).issues} == {"compile_drift"}
    _ingest(services, GUIDE.replace("## Curfew\n\nAfter the ninth bell only licensed lamplighters walk the Quay.\n", ""))
    codes = {(i.code, i.topic_id) for i in _lint(services).issues}
    assert ("orphan_page", "guild/guide.md#lamplighting/curfew") in codes
    assert any(code == "broken_wikilink" for code, _ in codes)


def test_nightly_drains_oldest_drift_first_and_stops_at_the_budget(services) -> None:
    _ingest(services, GUIDE)
    compiler = services.compiler("offline")
    compiler.nightly()
    for topic in ("curfew", "wicks", "oil"):  # drift in this order
        chunk = f"guild/guide.md#lamplighting/{topic}/0"
        _edit(services, chunk, f"Changed {topic}.")
    report = compiler.nightly(budget=2)
    assert report.as_dict()["stopped_reason"] == "budget"
    assert [p["topic"] for p in report.pages] == ["guild/guide.md#lamplighting/curfew", "guild/guide.md#lamplighting/wicks"]
    assert report.remaining_stale == 1 and set(report.as_dict()) >= {"budgeted", "compiled", "skipped", "remaining_stale", "stopped_reason"}


def test_accepted_chapter_text_is_chunked_and_drafts_never_are(services) -> None:
    apply_demo(services)
    services.knowledge.catch_up_serving()
    with services.knowledge_reader.snapshot() as snap:
        topics = snap.topics("story:lamplight")
        texts = [c.text for t in topics for c in snap.topic_chunks("story:lamplight", t.topic_id)]
    assert len(topics) == 4  # four accepted chapters
    assert all("MARKER" not in t for t in texts)
    assert any("Fog sat on the Quay" in t for t in texts)


def test_embedding_is_not_recomputed_when_title_tldr_and_tags_are_unchanged(services) -> None:
    _ingest(services, GUIDE)
    compiler = services.compiler("offline")
    calls = []
    original = compiler.embedder.embed
    compiler.embedder.embed = lambda texts: calls.append(texts) or original(texts)
    compiler.nightly()
    assert len(calls) == 4
    # Re-ingest with a change that leaves the lead sentences (title, tldr, tags) as they were.
    _ingest(services, GUIDE.replace("shows its memory.", "shows its memory. Youths watch."))
    assert compiler.nightly().compiled == 1
    assert len(calls) == 4


def test_quota_ledger_reserves_settles_refuses_and_exhausts(services) -> None:
    quota = Quota(services.ledger, QuotaPolicy(generate_per_day=3, compile_per_day=2, embed_per_day=5))
    a = quota.reserve("gemini", "generate", "compile")
    quota.settle("gemini", a, "ok")
    b = quota.reserve("gemini", "generate", "compile")
    quota.settle("gemini", b, "not_sent")  # never sent: released
    c = quota.reserve("gemini", "generate", "compile")
    with pytest.raises(QuotaRefused) as refused:
        quota.reserve("gemini", "generate", "compile")  # compile's share (2) is used
    assert refused.value.code == "quota_spent"
    quota.settle("gemini", c, "error")
    chat = quota.reserve("gemini", "generate", "chat")  # chat headroom remains
    quota.settle("gemini", chat, "ok")
    status = quota.status("gemini")
    assert status["generate"]["spent"] == 3 and status["generate"]["left"] == 0 and status["refused"] == 1
    quota.exhaust("gemini", "429 RESOURCE_EXHAUSTED")
    with pytest.raises(QuotaRefused) as exhausted:
        quota.reserve("gemini", "embed", "compile")
    assert exhausted.value.code == "provider_exhausted"
    kinds = [e.type for e in services.ledger.event_log.history() if e.type.startswith("QuotaDay.")]
    assert kinds.count("QuotaDay.Reserved") == 4 and kinds.count("QuotaDay.Refused") == 2
    assert kinds.count("QuotaDay.Settled") == 4 and kinds.count("QuotaDay.Exhausted") == 1
    assert json.dumps(quota.status("gemini"))
