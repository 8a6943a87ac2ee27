"""The viewer's arithmetic, from packet JSON: the budget bar and the comparison of two packets."""

from __future__ import annotations

from typing import Any

from canon_ledger.application.packet_view import budget_bar, by_tier, diff_packets


def item(tier: str, kind: str, key: str, text: str = "t", status: str = "included", tokens: int = 10) -> dict[str, Any]:
    return {"tier": tier, "kind": kind, "key": key, "text": text, "tokens": tokens, "status": status,
            "reason": "r", "sources": [1]}


def packet(items: list[dict[str, Any]], budget: int = 100) -> dict[str, Any]:
    tiers = []
    for tier in ("P0", "P1", "P2", "P3", "P4"):
        mine = [i for i in items if i["tier"] == tier]
        tiers.append({"tier": tier, **{s: sum(i["status"] == s for i in mine) for s in ("included", "trimmed", "dropped")},
                      "tokens": sum(i["tokens"] for i in mine if i["status"] != "dropped")})
    return {"budget": budget, "used_tokens": sum(t["tokens"] for t in tiers), "tiers": tiers, "items": items}


def test_the_bar_has_a_segment_per_tier_and_the_rest_of_the_budget() -> None:
    p = packet([item("P0", "scene_card", "1a", tokens=30), item("P1", "character", "a", tokens=20),
                item("P1", "character", "b", status="dropped", tokens=0)])
    bar = budget_bar(p)
    assert [s.name for s in bar] == ["P0", "P1", "P2", "P3", "P4", "left"]
    assert sum(s.tokens for s in bar if s.name != "left") == p["used_tokens"] == 50
    assert bar[-1].tokens == 50 and abs(sum(s.share for s in bar) - 1.0) < 1e-9


def test_a_zero_budget_draws_nothing_and_divides_by_nothing() -> None:
    bar = budget_bar(packet([], budget=0))
    assert all(s.tokens == 0 and s.share == 0.0 for s in bar)


def test_items_group_by_tier_and_filter_by_status() -> None:
    p = packet([item("P1", "character", "a"), item("P1", "character", "b", status="dropped", tokens=0),
                item("P3", "history", "a@1")])
    groups = by_tier(p, "dropped")
    assert [t["tier"] for t, _ in groups] == ["P0", "P1", "P2", "P3", "P4"]
    assert [[i["key"] for i in items] for _, items in groups] == [[], ["b"], [], [], []]
    assert sum(len(items) for _, items in by_tier(p)) == 3


def test_the_comparison_names_what_was_added_removed_and_changed() -> None:
    before = packet([item("P1", "character", "ilse", "v1"), item("P1", "character", "oskar"),
                     item("P2", "thread", "debt")])
    after = packet([item("P1", "character", "ilse", "v2", tokens=12), item("P1", "character", "oskar"),
                    item("P3", "history", "ilse@1")])
    changes = diff_packets(before, after)
    assert [(c.change, c.key) for c in changes] == [
        ("changed", ("P1", "character", "ilse")), ("added", ("P3", "history", "ilse@1")),
        ("removed", ("P2", "thread", "debt"))]
    assert changes[0].what == ["text", "tokens"] and changes[0].before["text"] == "v1" and changes[0].after["text"] == "v2"


def test_a_status_change_is_a_change_and_the_same_packet_has_none() -> None:
    before = packet([item("P1", "character", "ilse")])
    after = packet([item("P1", "character", "ilse", status="trimmed")])
    assert [c.what for c in diff_packets(before, after)] == [["status"]]
    assert diff_packets(after, after) == []


def test_the_same_key_twice_in_a_tier_stays_two_items() -> None:
    before = packet([item("P1", "thread", "t"), item("P1", "thread", "t", status="dropped", tokens=0)])
    after = packet([item("P1", "thread", "t")])
    assert [(c.change, c.before["status"]) for c in diff_packets(before, after)] == [("removed", "dropped")]
