"""PacketIssued v4: kept items in full (compactly), dropped ones summed up; what an audit can still tell."""

from __future__ import annotations

import hashlib

from canon_ledger.application.audit import _differences
from canon_ledger.application.packets.packet import TIERS, Item, Packet, Stage
from canon_ledger.application.packets.service import issued
from canon_ledger.domain.packet_log import PacketRecord, dropped_summary, kept_items


def _packet(*items: Item) -> Packet:
    return Packet("s", "writer", 3, None, 40, 100, "cl100k_base", tuple(items),
                  (Stage("truncate", "done", "-"),)).sealed()


KEPT = Item("P1", "character", "ilse", "Ilse.", 2, "included", "tagged", (7,))
RULE = Item("P3", "world_rule", "bells", "", 0, "dropped", "no space", (9,))
NODE = Item("P4", "development_chain", "c/n1", "", 0, "dropped", "hidden until chapter 9", (11,))


def test_tiers_sort_by_name_as_fill_assumes() -> None:
    assert list(TIERS) == sorted(TIERS)


def test_the_record_keeps_kept_items_and_sums_up_dropped_ones() -> None:
    record = issued(_packet(KEPT, RULE, NODE))
    assert [i["key"] for i in record.items] == ["ilse"]
    assert record.dropped == dropped_summary([("P3", "world_rule", "bells", (9,)), ("P4", "development_chain",
                                                                                   "c/n1", (11,))])
    assert record.dropped["count"] == 2


def test_dropped_summary_depends_on_order_and_sources() -> None:
    a, b = ("P3", "world_rule", "x", (1,)), ("P3", "world_rule", "y", (2,))
    assert dropped_summary([a, b]) != dropped_summary([b, a])
    assert dropped_summary([a]) != dropped_summary([("P3", "world_rule", "x", (3,))])
    assert dropped_summary([]) == {"count": 0, "digest": hashlib.sha256(b"[]").hexdigest()}


def test_v2_payload_upcasts_to_kept_items_and_a_summary() -> None:
    items = [{"tier": "P1", "kind": "character", "key": "ilse", "status": "included", "sources": [7]},
             {"tier": "P3", "kind": "world_rule", "key": "bells", "status": "dropped", "sources": [9]}]
    state = {"items": [dict(i) for i in items]}
    PacketRecord.PacketIssued.upcast_v2_v3(state)
    assert state["items"] == items[:1]
    assert state["dropped"] == dropped_summary([("P3", "world_rule", "bells", [9])])


def test_kept_items_are_written_compactly_and_read_back_whole() -> None:
    other = Item("P1", "character", "bran", "Bran.", 2, "trimmed", "tagged", (3, 5))
    rule = Item("P3", "world_rule", "bells", "Bells.", 2, "included", "world rule", (9,))
    record = issued(_packet(KEPT, rule, other, Item("P1", "character", "oda", "Oda.", 2, "included", "tagged", (8,))))
    [event] = record.collect_events()
    assert event.items == [["P1", "character", "included", [["ilse", 7], ["oda", 8]]],
                           ["P3", "world_rule", "included", [["bells", 9]]],
                           ["P1", "character", "trimmed", [["bran", 3, 5]]]]
    assert sorted(record.items, key=lambda i: i["key"]) == [
        {"tier": "P3", "kind": "world_rule", "key": "bells", "status": "included", "sources": [9]},
        {"tier": "P1", "kind": "character", "key": "bran", "status": "trimmed", "sources": [3, 5]},
        {"tier": "P1", "kind": "character", "key": "ilse", "status": "included", "sources": [7]},
        {"tier": "P1", "kind": "character", "key": "oda", "status": "included", "sources": [8]}]


def test_v3_payload_upcasts_to_compact_kept_items() -> None:
    items = [{"tier": "P1", "kind": "character", "key": "ilse", "status": "included", "sources": [7]},
             {"tier": "P3", "kind": "world_rule", "key": "bells", "status": "trimmed", "sources": [9, 12]},
             {"tier": "P1", "kind": "character", "key": "oda", "status": "included", "sources": [8]}]
    state = {"items": [dict(i) for i in items]}
    PacketRecord.PacketIssued.upcast_v3_v4(state)
    assert state["items"] == kept_items((i["tier"], i["kind"], i["key"], i["status"], i["sources"]) for i in items)
    assert state["items"] == [["P1", "character", "included", [["ilse", 7], ["oda", 8]]],
                              ["P3", "world_rule", "trimmed", [["bells", 9, 12]]]]


def test_differences_name_kept_items_and_count_dropped_ones() -> None:
    record = issued(_packet(KEPT, RULE, NODE))
    assert _differences(record, _packet(KEPT, RULE, NODE)) == []

    moved = Item("P3", "world_rule", "bells", "", 0, "dropped", "no space", (10,))
    assert _differences(record, _packet(KEPT, moved, NODE)) == ["dropped items differ: 2 recorded, 2 replayed"]

    lost = _differences(record, _packet(RULE, NODE))
    assert lost == ["recorded item P1 character ilse is not kept in the replay"]

    gained = Item("P3", "world_rule", "bells", "Bells.", 2, "included", "world rule", (9,))
    assert _differences(record, _packet(KEPT, gained, NODE)) == [
        "dropped items differ: 2 recorded, 1 replayed",
        "the replay keeps an item the record did not: P3 world_rule bells"]

    reworded = Item("P1", "character", "ilse", "Ilse!", 2, "included", "tagged", (7,))
    assert _differences(record, _packet(reworded, RULE, NODE)) == [
        "same items, statuses and sources; item texts or reasons differ (the record keeps hashes, not texts)"]
