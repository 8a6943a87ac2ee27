"""Declared recipes on both stores: a read's paging is data, and every compiler version is
reached through the one replay entry."""

from __future__ import annotations

from dataclasses import replace

import pytest

from canon_ledger.application.packets import compiler, replay
from canon_ledger.application.packets.recipes import RECIPES, Request
from canon_ledger.infrastructure.demo import STORY


@pytest.mark.parametrize("page", [1, 2])
def test_a_paged_read_gives_the_same_packet_whatever_its_page(projected_demo, page):
    """World rules read ``page`` at a time read every rule exactly once, in key order."""
    paged = {role: tuple(replace(r, page=page) if r.page else r for r in recipe) for role, recipe in RECIPES.items()}
    request = Request(STORY, "writer", 5, budget=100_000)
    with projected_demo.packets.reader.snapshot() as snap:
        whole = compiler.compile_packet(snap, request, projected_demo.packets.tokens, projected_demo.packets.retriever)
        again = compiler.compile_with(paged, compiler.COMPILER, snap, request, projected_demo.packets.tokens,
                                      projected_demo.packets.retriever)
    assert sum(i.kind == "world_rule" for i in whole.items) > page  # several pages, a last short one
    assert again.to_json() == whole.to_json()


def test_every_version_compiles_through_the_replay_entry(projected_demo):
    request = Request(STORY, "writer", 5, budget=100_000)
    with projected_demo.packets.reader.snapshot() as snap:
        tokens, retriever = projected_demo.packets.tokens, projected_demo.packets.retriever
        packets = {v: replay.compile_packet(snap, request, tokens, retriever, compiler=v)
                   for v in (1, 2, 3, 4, 5, 6, 7, compiler.COMPILER)}
        assert compiler.compile_packet(snap, request, tokens, retriever).hash == packets[compiler.COMPILER].hash
    # 8 changed only qa packets with a draft under review: its writer packet is 7's, and says 7
    assert {v: p.compiler for v, p in packets.items()} == {1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6, 7: 7, 8: 7}
    assert packets[8].to_json() == packets[7].to_json()
    # all read, nothing hidden as history; the demo's entries carry no recall rule and its goals
    # and summaries mention none that is not tagged
    assert packets[2].to_json() == packets[3].to_json() == packets[4].to_json() == packets[5].to_json() \
        == packets[6].to_json()
    # 7: P2 opens with chapter 4's ending (the demo's chapter is short: whole), so L1's chunk of
    # chapter 4 is a duplicate; the truncate stage says what is left and why
    ending = [i for i in packets[7].items if i.tier == "P2"][0]
    assert (ending.kind, ending.key, ending.status) == ("chapter_ending", "4", "included")
    assert not any(i.key.startswith("story:lamplight/chapter-00004") for i in packets[7].items)
    assert any(i.key.startswith("story:lamplight/chapter-00004") for i in packets[6].items)
    assert packets[7].stages[-1].detail.endswith("left: L1 found no more passages in the chapters before 5")
    assert [s.step for s in packets[1].stages] == ["scene-keys", "l0-recall", "l1-retrieval", "wiki", "budget"]
