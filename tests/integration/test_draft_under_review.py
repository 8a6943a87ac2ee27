"""The QA packet sees the draft it checks (both stores): ``Request.draft`` puts one submitted
draft in P0 as ``draft_under_review``, labelled unconfirmed, and recalls the canon it mentions;
no other packet (any role, or a qa packet naming no draft) holds it; an accepted, rejected,
unknown or other chapter's draft is refused and nothing is recorded; the packet audits, also
after the draft is decided, and a record whose draft source is not that draft's submission
does not."""

from __future__ import annotations

from typing import Any

import pytest

from canon_ledger.application.packets.recipes import Request
from canon_ledger.domain.errors import CanonError
from canon_ledger.domain.packet_log import PacketRecord
from canon_ledger.infrastructure.bootstrap import bootstrap
from tests.helpers import applied

STORY = "tide"
DRAFT_TEXT = "DRAFT-UNDER-REVIEW-MARKER. Mara rows past the Lantern Reef while the gulls scream."


@pytest.fixture
def s(store_url: str) -> Any:
    services = bootstrap(store_url, embedder="hashing")
    applied(services,
           {"type": "start_story", "command_id": "start", "story_id": STORY, "title": "Tide",
            "style_guardrails": ["Past tense."], "output_contract": "Prose only."},
           *({"type": "plan_chapter", "command_id": f"plan-{n}", "story_id": STORY, "chapter": n, "volume": 1,
              "goals": [f"Chapter {n} happens at sea"]} for n in (1, 2, 3)),
           {"type": "propose_canon", "command_id": "p-mara", "story_id": STORY, "proposal_id": "mara", "kind": "character",
            "key": "mara", "name": "Mara", "aliases": [], "text": "Mara is a rower.", "fields": {}, "valid_from": 1},
           {"type": "confirm_canon", "command_id": "c-mara", "story_id": STORY, "proposal_id": "mara"},
           {"type": "propose_canon", "command_id": "p-reef", "story_id": STORY, "proposal_id": "reef",
            "kind": "location", "key": "lantern-reef", "name": "Lantern Reef", "aliases": ["the reef"],
            "text": "REEF-CANON-MARKER: the Lantern Reef sinks boats at low tide.", "fields": {}, "valid_from": 1},
           {"type": "confirm_canon", "command_id": "c-reef", "story_id": STORY, "proposal_id": "reef"},
           {"type": "add_scene_card", "command_id": "card-2a", "story_id": STORY, "chapter": 2, "scene_id": "2a",
            "summary": "Mara sets out.", "characters": ["mara"], "locations": [], "threads": [], "callbacks": [],
            "items": []},
           {"type": "submit_draft", "command_id": "d-2", "story_id": STORY, "chapter": 2, "draft_id": "d2",
            "text": DRAFT_TEXT})
    yield services
    services.close()


def _texts(packet: Any) -> str:
    return "\n".join(i.text for i in packet.items)


def test_the_qa_packet_holds_the_draft_in_p0_labelled_and_recalls_what_it_mentions(s: Any) -> None:
    packet = s.packets.packet(Request(STORY, "qa", 2, draft="d2"))
    (item,) = [i for i in packet.items if i.kind == "draft_under_review"]
    assert (item.tier, item.key, item.status) == ("P0", "d2", "included")
    assert item.text.startswith("UNCONFIRMED DRAFT under review (draft d2, chapter 2): not canon.")
    assert DRAFT_TEXT in item.text and item.tokens == s.packets.tokens.count(item.text)
    submitted = next(p for p, e in s.ledger.event_log.read(1, 1000) if type(e).__qualname__ == "Draft.Submitted")
    assert item.sources == (submitted,)
    assert any(st.step == "review" and "draft d2" in st.detail for st in packet.stages)
    # The reef is named only in the draft: recalled by that mention, with it in the reason.
    (reef,) = [i for i in packet.items if i.key == "lantern-reef"]
    assert reef.tier == "P1" and reef.reason == 'mentioned in the draft under review as "Lantern Reef"'
    # The same qa packet without the draft: no draft text and no reef (nothing else mentions it).
    plain = s.packets.packet(Request(STORY, "qa", 2))
    assert "DRAFT-UNDER-REVIEW-MARKER" not in _texts(plain) and "REEF-CANON-MARKER" not in _texts(plain)
    assert plain.packet_id != packet.packet_id
    record = s.ledger.packet_records.get(packet.packet_id)
    assert record.draft == {"draft_id": "d2", "position": submitted}
    assert s.ledger.packet_records.get(plain.packet_id).draft is None


def test_no_other_packet_holds_the_draft(s: Any) -> None:
    s.packets.packet(Request(STORY, "qa", 2, draft="d2"))
    for role in ("planner", "writer", "qa", "summarizer", "chat"):
        for chapter in (1, 2, 3):
            try:
                packet = s.packets.packet(Request(STORY, role, chapter, budget=100_000))
            except CanonError:
                continue  # the summarizer of a chapter with no text
            assert "DRAFT-UNDER-REVIEW-MARKER" not in packet.to_json(), (role, chapter)


@pytest.mark.parametrize("role", ["planner", "writer", "summarizer", "chat"])
def test_a_draft_is_refused_in_every_other_role(s: Any, role: str) -> None:
    end = s.ledger.event_log.position()
    with pytest.raises(CanonError) as refused:
        s.packets.packet(Request(STORY, role, 2, draft="d2"))
    assert (refused.value.code, refused.value.field) == ("draft_only_for_review", "draft")
    assert s.ledger.event_log.position() == end  # nothing recorded


def test_an_unknown_accepted_rejected_or_other_chapters_draft_is_refused_and_nothing_recorded(s: Any) -> None:
    applied(s, {"type": "submit_draft", "command_id": "d-3a", "story_id": STORY, "chapter": 3, "draft_id": "d3a",
               "text": "Accepted text."},
           {"type": "accept_draft", "command_id": "a-3a", "story_id": STORY, "draft_id": "d3a"},
           {"type": "submit_draft", "command_id": "d-3b", "story_id": STORY, "chapter": 3, "draft_id": "d3b",
            "text": "Rejected text."},
           {"type": "reject_draft", "command_id": "r-3b", "story_id": STORY, "draft_id": "d3b",
            "reason": "off tone"})
    end = s.ledger.event_log.position()
    cases = [(Request(STORY, "qa", 2, draft="nope"), "unknown_draft", "draft"),
             (Request(STORY, "qa", 3, draft="d3a"), "draft_not_under_review", "draft"),
             (Request(STORY, "qa", 3, draft="d3b"), "draft_not_under_review", "draft"),
             (Request(STORY, "qa", 3, draft="d2"), "draft_is_for_another_chapter", "chapter")]
    for request, code, field in cases:
        with pytest.raises(CanonError) as refused:
            s.packets.packet(request)
        assert (refused.value.code, refused.value.field) == (code, field), request
    with pytest.raises(CanonError) as refused:
        s.packets.packet(Request(STORY, "qa", 3, draft="d3b"))
    assert "rejected (off tone)" in refused.value.message
    with pytest.raises(CanonError) as refused:  # time travel replays canon only
        s.packet(Request(STORY, "qa", 2, draft="d2"), at=end)
    assert refused.value.code == "draft_not_replayed"
    assert s.ledger.event_log.position() == end


def test_the_draft_must_fit_p0_whole(s: Any) -> None:
    with pytest.raises(CanonError) as refused:
        s.packets.packet(Request(STORY, "qa", 2, budget=30, draft="d2"))
    assert refused.value.code == "p0_exceeds_budget" and "of them the draft under review" in refused.value.message


def test_the_review_packet_audits_also_after_the_draft_is_accepted(s: Any) -> None:
    packet = s.packets.packet(Request(STORY, "qa", 2, draft="d2"))
    report = s.auditor.audit(packet.packet_id)
    assert report.ok and report.live == "ok", report.as_dict()
    lineage = {i.kind: l for i, l in report.items}["draft_under_review"]
    assert [(x.type, x.command_id, x.command_type) for x in lineage] == [("Draft.Submitted", "d-2", "submit_draft")]
    applied(s, {"type": "accept_draft", "command_id": "a-2", "story_id": STORY, "draft_id": "d2"})
    later = s.auditor.audit(packet.packet_id)
    assert later.ok and later.replayed_hash == packet.hash
    # Accepted now: a new review of it is refused; its text reaches packets only as chapter text.
    with pytest.raises(CanonError):
        s.packets.packet(Request(STORY, "qa", 2, draft="d2"))


def test_a_record_whose_draft_source_is_another_event_does_not_audit(s: Any) -> None:
    packet = s.packets.packet(Request(STORY, "qa", 2, draft="d2"))
    record = s.ledger.packet_records.get(packet.packet_id)
    forged_id = "pkt_" + "f" * 24
    s.ledger.packet_records.record(PacketRecord(
        packet_id=forged_id, story_id=STORY, role="qa", chapter=2, scene=None, budget=record.budget,
        position=record.position, hash=record.hash, tokenizer=record.tokenizer, compiler=record.compiler,
        recall=record.recall, items=[], dropped=record.dropped,
        draft={"draft_id": "d2", "position": record.draft["position"] - 1}))
    report = s.auditor.audit(forged_id)
    assert not report.ok and report.replayed_hash != packet.hash
