"""Every packet of a 50-chapter generated serial audits OK by replay, on both stores, and
still does after a rebuild. On the hashing embedder (``rs``): the packets' L1 hits are recorded
and the audit replays the record, never the embedder; indexing the serial with the default
model (MiniLM) cost ~20 s a store and changes no audit path."""

from __future__ import annotations

import pytest

from canon_ledger.application.packets.recipes import Request
from canon_ledger.domain.commands import parse_command
from tests.generated_story import gen_story


@pytest.mark.slow
def test_every_packet_of_a_50_chapter_story_audits_ok(rs) -> None:
    services = rs
    commands = [parse_command(c) for c in gen_story.generate(chapters=50, entries=500)]
    for i in range(0, len(commands), 250):
        results = services.ledger.apply(commands[i: i + 250], atomic=True)
        assert all(r.status == "applied" for r in results), [r.as_dict() for r in results if r.status != "applied"][:3]
    story = gen_story.STORY
    issued = []
    for chapter in (1, 2, 10, 25, 49, 50):
        for role in ("planner", "writer", "qa", "chat", "summarizer"):
            issued.append(services.packets.packet(Request(story, role, chapter)))
    issued.append(services.packets.packet(Request(story, "writer", 50, budget=600)))  # trimmed and dropped items
    assert any(i.status == "trimmed" for i in issued[-1].items) or any(i.status == "dropped" for i in issued[-1].items)
    recalls = [services.ledger.packet_records.get(p.packet_id).recall for p in issued]
    assert sum(bool(r and r.get("hits")) for r in recalls) >= 5  # L1 hits recorded: the audits replay them
    for packet in issued:
        report = services.auditor.audit(packet.packet_id)
        assert report.ok and report.live == "ok", (packet.role, packet.chapter, report.differences, report.live)
        assert all(src.command_id for _, lineage in report.items for src in lineage)
    services.canon.rebuild()
    for packet in issued[::5]:
        assert services.auditor.audit(packet.packet_id).ok
