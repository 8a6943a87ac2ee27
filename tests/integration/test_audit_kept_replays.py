"""The auditor keeps its last replays by (story, position) (``application.audit.KEPT_REPLAYS``):
audits of packets issued at one position replay the story once and report what fresh replays
report, also when threads audit at once; a replay is built again once evicted or after a
failure; a position the log has not reached is never kept."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from canon_ledger.application import audit as audit_module
from canon_ledger.application.audit import Auditor
from canon_ledger.application.packets.recipes import Request
from canon_ledger.domain.commands import parse_line
from canon_ledger.infrastructure.demo import STORY

ROLES = ("planner", "writer", "qa", "chat")


def _counting(auditor: Auditor) -> list[tuple[str, int]]:
    """Count the replays ``auditor`` builds (its scratch factory, wrapped)."""
    built: list[tuple[str, int]] = []
    factory = auditor.scratch

    def counted(story: str, position: int) -> Any:
        built.append((story, position))
        return factory(story, position)

    auditor.scratch = counted
    return built


def _fresh(services: Any) -> Auditor:
    """An auditor of the same store with nothing kept."""
    a = services.auditor
    return Auditor(a.ledger, a.scratch, a.live, a.live_catch_up, a.tokens)


def test_audits_at_one_position_replay_once_and_report_as_fresh_replays(demo: Any) -> None:
    packets = [demo.packets.packet(Request(STORY, role, chapter)) for role in ROLES for chapter in (1, 5)]
    assert len({p.position for p in packets}) == 1
    expected = [_fresh(demo).audit(p.packet_id).as_dict() for p in packets]  # a replay each
    built = _counting(demo.auditor)
    assert [demo.auditor.audit(p.packet_id).as_dict() for p in packets] == expected
    assert built == [(STORY, packets[0].position)]
    assert all(e["verdict"] == "ok" and e["live"] == "ok" for e in expected)
    # Threads at once: one replay shared a call at a time, the same reports.
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(lambda p: demo.auditor.audit(p.packet_id).as_dict(), packets * 3)) == expected * 3
    assert len(built) == 1
    travelled = demo.auditor.packet_at(Request(STORY, "writer", 5, budget=packets[3].budget), packets[3].position)
    assert travelled.to_json() == packets[3].to_json() and len(built) == 1


def test_an_evicted_replay_is_built_again_and_a_position_past_the_log_is_not_kept(demo: Any,
                                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(audit_module, "KEPT_REPLAYS", 1)
    first = demo.packets.packet(Request(STORY, "writer", 5))
    demo.ledger.apply([parse_line(json.dumps({
        "type": "record_chapter_summary", "command_id": "later", "story_id": STORY, "chapter": 4, "text": "rewritten"}))])
    second = demo.packets.packet(Request(STORY, "writer", 5))
    assert second.position > first.position and second.hash != first.hash
    built = _counting(demo.auditor)
    assert demo.auditor.audit(first.packet_id).ok and demo.auditor.audit(second.packet_id).ok
    assert demo.auditor.audit(first.packet_id).ok  # the second evicted the first: built again
    assert built == [(STORY, first.position), (STORY, second.position), (STORY, first.position)]
    # Past the log's end (events may still land at or before it): a replay of the call's own, each time.
    beyond = demo.ledger.event_log.position() + 5
    request = Request(STORY, "writer", 5, budget=second.budget)
    assert demo.auditor.packet_at(request, beyond).hash == demo.auditor.packet_at(request, beyond).hash == second.hash
    assert built[3:] == [(STORY, beyond), (STORY, beyond)]


def test_a_replay_that_failed_mid_read_is_not_kept(demo: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    packet = demo.packets.packet(Request(STORY, "writer", 5))
    built = _counting(demo.auditor)
    assert demo.auditor.audit(packet.packet_id).ok
    compile_packet = audit_module.compile_packet

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a fault mid-read")

    monkeypatch.setattr(audit_module, "compile_packet", broken)
    with pytest.raises(RuntimeError):
        demo.auditor.audit(packet.packet_id)
    monkeypatch.setattr(audit_module, "compile_packet", compile_packet)
    assert demo.auditor.audit(packet.packet_id).ok
    assert built == [(STORY, packet.position)] * 2  # the failed one was closed, then built again
    demo.auditor.close()  # the kept replays closed (twice: harmless); the next audit builds one again
    demo.auditor.close()
    assert demo.auditor.audit(packet.packet_id).ok and len(built) == 3
