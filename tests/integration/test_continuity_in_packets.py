"""The continuity check through the read models (both stores): a qa packet with a draft under
review carries its findings in P0 (compiler 8), sourced at the canon that proves them; it audits,
also after a finding is dismissed (the dismissal is read again from the log); every other packet
is compiler 7's, unchanged; the check's report reads the same findings with their evidence."""

from __future__ import annotations

from typing import Any

import pytest

from canon_ledger.application.packets.recipes import Request
from canon_ledger.infrastructure.bootstrap import bootstrap
from tests.helpers import applied

STORY = "ford"
DRAFT = "Mira waited at the gate. Harl walked into the hall, and Mira's blue eyes narrowed."


def _entry(key: str, name: str, valid_from: int, fields: dict[str, Any], n: int = 1) -> list[dict[str, Any]]:
    pid = f"{key}-{n}"
    return [{"type": "propose_canon", "command_id": f"p-{pid}", "story_id": STORY, "proposal_id": pid,
             "kind": "character", "key": key, "name": name, "aliases": [], "text": f"{name} of the ford.",
             "fields": fields, "valid_from": valid_from},
            {"type": "confirm_canon", "command_id": f"c-{pid}", "story_id": STORY, "proposal_id": pid}]


@pytest.fixture
def s(store_url: str) -> Any:
    services = bootstrap(store_url, embedder="hashing")
    applied(services,
           {"type": "start_story", "command_id": "start", "story_id": STORY, "title": "Ford",
            "style_guardrails": ["Past tense."], "output_contract": "Prose only."},
           *({"type": "plan_chapter", "command_id": f"plan-{n}", "story_id": STORY, "chapter": n, "volume": 1,
              "goals": [f"Chapter {n} at the ford"]} for n in (1, 2, 3)),
           *_entry("mira", "Mira", 1, {"eyes": "grey"}),
           *_entry("harl", "Harl", 1, {"state": "alive"}),
           *_entry("harl", "Harl", 2, {"state": "dead"}, n=2),
           {"type": "submit_draft", "command_id": "d-3", "story_id": STORY, "chapter": 3, "draft_id": "d3",
            "text": DRAFT})
    yield services
    services.close()


def _position(s: Any, qualname: str, **match: Any) -> int:
    return max(p for p, e in s.ledger.event_log.read(1, 10_000) if type(e).__qualname__ == qualname
               and all(getattr(e, k, None) == v for k, v in match.items()))


def test_the_qa_packet_carries_the_findings_and_audits(s: Any) -> None:
    packet = s.packets.packet(Request(STORY, "qa", 3, draft="d3"))
    assert packet.compiler == 8
    findings = [i for i in packet.items if i.kind == "continuity_finding"]
    assert [i.tier for i in findings] == ["P0", "P0"]
    dead = _position(s, "CanonEntry.Revised", key="harl")
    submitted = _position(s, "Draft.Submitted")
    (harl,) = [i for i in findings if "unavailable_character" in i.text]
    assert harl.sources == tuple(sorted((dead, submitted))) and "Harl" in harl.text
    assert any("field_conflict" in i.text and "'blue'" in i.text for i in findings)
    assert s.auditor.audit(packet.packet_id).ok
    # The report of the check: the same ids, in the JSON contract.
    report = s.continuity().check(STORY, "d3").as_dict()
    assert sorted(f["id"] for f in report["findings"]) == sorted(i.key for i in findings)
    (r,) = [f for f in report["findings"] if f["type"] == "unavailable_character"]
    assert r["span"] == {"start": DRAFT.index("Harl"), "end": DRAFT.index("Harl") + 4, "text": "Harl"}
    assert r["evidence"][0]["source"] == dead and r["evidence"][0]["valid_from"] == 2
    assert report["errors"] == 2 and report["chapter"] == 3


def test_a_dismissed_finding_leaves_the_packet_and_the_packet_still_audits(s: Any) -> None:
    report = s.continuity().check(STORY, "d3").as_dict()
    (harl,) = [f for f in report["findings"] if f["type"] == "unavailable_character"]
    applied(s, {"type": "dismiss_finding", "command_id": "dismiss", "story_id": STORY, "draft_id": "d3",
               "finding_id": harl["id"], "reason": "his ghost, on purpose"})
    after = s.continuity().check(STORY, "d3").as_dict()
    assert [f["id"] for f in after["findings"]] != [] and harl["id"] not in [f["id"] for f in after["findings"]]
    assert [f["id"] for f in after["dismissed"]] == [harl["id"]]
    packet = s.packets.packet(Request(STORY, "qa", 3, draft="d3"))
    assert harl["id"] not in [i.key for i in packet.items]
    record = s.ledger.packet_records.get(packet.packet_id)
    assert record.draft["dismissed"] == [[harl["id"], _position(s, "Draft.FindingDismissed")]]
    assert s.auditor.audit(packet.packet_id).ok


def test_packets_without_a_draft_are_compiler_7s(s: Any) -> None:
    for role in ("writer", "planner", "qa"):
        packet = s.packets.packet(Request(STORY, role, 3))
        assert packet.compiler == 7
        assert s.auditor.audit(packet.packet_id).ok
