"""Events written before the package was named ``canon_ledger`` keep reading, projecting,
serving and auditing (both stores).

``tests/fixtures/v2-events.jsonl`` holds every stored event of a store written by the code just
before the rename: the demo serial, an ingested document, two compiled wiki pages, an API key and
the PacketIssued records of five chapter-5 packets. Its topics are the old ones
(``domain.story:Story.Started``); new events are written under ``canon_ledger.domain...``.
"""

from __future__ import annotations

import json
from pathlib import Path


from canon_ledger.application.keys import Keys
from canon_ledger.application.packets import replay
from canon_ledger.application.packets.recipes import Request
from canon_ledger.domain.commands import parse_line
from canon_ledger.domain.story import Story
from canon_ledger.domain.topics import legacy_topic, stored_topics
from canon_ledger.infrastructure.bootstrap import bootstrap
from canon_ledger.infrastructure.demo import STORY
from tests.fixture_log import load_fixture

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_stored_topics_name_the_current_and_the_pre_rename_topic() -> None:
    assert stored_topics(Story.Started) == ["canon_ledger.domain.story:Story.Started", "domain.story:Story.Started"]
    assert legacy_topic("eventsourcing.domain:Aggregate.Created") is None
    assert legacy_topic("canon_ledger.domainx:Thing") is None


def test_pre_rename_events_read_project_serve_and_audit(store_url) -> None:
    s = bootstrap(store_url)
    try:
        rows = load_fixture(s.ledger, "v2-events.jsonl")
        assert all(r["topic"].startswith("domain.") for r in rows)  # the fixture is what it claims
        history = list(s.ledger.event_log.history())
        assert len(history) == len(rows)
        writer = json.loads((FIXTURES / "v2-ch5-writer.json").read_text())
        qa = json.loads((FIXTURES / "v2-ch5-qa.json").read_text())
        for expected, role in ((writer, "writer"), (qa, "qa")):
            # compiled now by the compiler that issued it (later ones change its bytes: compiler 7
            # adds chapter 4's ending), live, through today's read models and retriever
            version = s.ledger.packet_records.get(expected["packet_id"]).compiler
            s.packets.packet(Request(STORY, role, 5, budget=expected["budget"]), record=False)  # caught up
            with s.packets.reader.snapshot() as snap:
                packet = replay.compile_packet(snap, Request(STORY, role, 5, budget=expected["budget"]),
                                               s.packets.tokens, s.packets.retriever, compiler=version)
            got = json.loads(packet.to_json())
            if store_url.startswith("sqlite"):  # the store that wrote the fixture: the same bytes
                assert packet.hash == expected["hash"], role
            # Both stores: the same canon items in the same order, and the same L1 recall. (On
            # PostgreSQL two near-tied L1 hits can swap places: a store difference older than the
            # rename, recorded in docs/benchmarks.md.)
            canon = [i for i in expected["items"] if i["tier"] != "P4"]
            assert [i for i in got["items"] if i["tier"] != "P4"] == canon, role
            assert sorted(i["key"] for i in got["items"] if i["tier"] == "P4") == sorted(
                i["key"] for i in expected["items"] if i["tier"] == "P4"), role
            report = s.auditor.audit(expected["packet_id"])  # its PacketIssued is an old event
            assert report.ok, role
            # Old receipts still name the command behind each source (a compiled wiki page has none:
            # the nightly compile is not a command).
            assert all(src.command_id for _, lineage in report.items for src in lineage
                       if not src.type.startswith("WikiPage."))
        assert [k.name for k in Keys(s.ledger).list()] == ["fixture-key"]  # filtered by topic
        assert s.views().drafts(STORY)  # the authoring read model projects from old topics too
        hits = s.search_service().search(["guild"], "lamps lit at dusk").hits
        assert hits and any("lamp" in str(h).lower() for h in hits)
        # A new command appends under the new topic, and both kinds read back together.
        s.ledger.apply([parse_line(json.dumps({"type": "record_chapter_summary", "command_id": "after-rename",
                                               "story_id": STORY, "chapter": 4, "text": "A new summary."}))])
        newest = s.ledger.event_log.records(len(rows) + 1, 10)
        assert newest and all(r.topic.startswith("canon_ledger.") for r in newest)
        after = s.packets.packet(Request(STORY, "writer", 5, budget=writer["budget"]), record=False)
        assert "A new summary." in after.to_json()
    finally:
        s.close()
