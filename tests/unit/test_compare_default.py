"""The compare page's default "from" (``packet_view.previous_change``): just before the latest
event the packet cites, at or before the packet's own position; none before the chapter's plan."""

from __future__ import annotations

from typing import Any

from canon_ledger.application.packet_view import previous_change


def packet(position: int, *sources: list[int]) -> dict[str, Any]:
    return {"position": position, "items": [{"tier": "P1", "kind": "character", "key": f"k{i}", "sources": s}
                                            for i, s in enumerate(sources)]}


def test_the_default_is_just_before_the_latest_event_the_packet_cites() -> None:
    assert previous_change(packet(119, [114], [1], [99, 26], [119], [45]), planned_at=112) == 118
    # An event after the story's position is not the story's (an L1 hit of a shared collection): ignored.
    assert previous_change(packet(119, [114], [400]), planned_at=112) == 113


def test_no_default_when_the_latest_cited_event_planned_the_chapter_or_nothing_is_cited() -> None:
    assert previous_change(packet(112, [112], [1]), planned_at=112) is None
    assert previous_change(packet(90, [80]), planned_at=112) is None  # only events before the plan
    assert previous_change(packet(119), planned_at=112) is None
    assert previous_change(packet(119, []), planned_at=None) is None
    assert previous_change(packet(50, [7]), planned_at=None) == 6
