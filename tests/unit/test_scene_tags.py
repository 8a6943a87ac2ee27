"""The scene card's tag lists are one table (``domain.scene_tags``): the command's fields, the
kinds a list names, a rendered card's lines and a packet's order all read it."""

from __future__ import annotations

from types import SimpleNamespace

from canon_ledger.application.packets import render
from canon_ledger.domain.commands import AddSceneCard
from canon_ledger.domain.scene_tags import IN_PACKET, ON_CARD, ROLE_LISTS, TAG_KINDS, TAG_LIST, TAG_LISTS


def test_every_tag_list_is_a_field_of_a_scene_card_command() -> None:
    assert {name for name in AddSceneCard.model_fields if name in TAG_LIST} == set(TAG_LIST)
    assert [t.name for t in TAG_LISTS] == ["characters", "locations", "threads", "items", "callbacks"]
    assert TAG_KINDS == {"characters": ("character",), "locations": ("location",), "threads": ("thread",),
                         "items": ("item",)}


def test_each_order_ranks_every_list_once() -> None:
    assert sorted(t.card_line for t in TAG_LISTS) == list(range(len(TAG_LISTS)))
    assert sorted(t.packet_rank for t in TAG_LISTS) == list(range(len(TAG_LISTS)))
    assert [t.name for t in ON_CARD] == ["characters", "locations", "threads", "callbacks", "items"]
    assert [t.name for t in IN_PACKET] == ["characters", "locations", "items", "threads", "callbacks"]


def test_a_rendered_card_and_the_role_lists_follow_the_table() -> None:
    card = render.scene_card(3, "3a", "Fog.", {t.name: [t.name[:3]] for t in TAG_LISTS})
    assert card.splitlines() == ["Scene 3a (chapter 3): Fog.", "Characters: cha", "Locations: loc", "Threads: thr",
                                 "Callbacks: cal", "Items: ite"]
    entries = [SimpleNamespace(kind=t.kind, key=t.name, name=t.label) for t in reversed(TAG_LISTS) if t.kind]
    assert render.role_lists(entries).splitlines() == [
        "Required role lists:", *(f"{t.name}: {t.label} ({t.name})" for t in ROLE_LISTS)]
    assert [t.name for t in ROLE_LISTS] == ["characters", "locations", "items"]
