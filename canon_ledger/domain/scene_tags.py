"""A scene card's tag lists: the one table of their names, the canon kind each names, and where
each goes.

Each order here is part of stored or issued bytes, so none may change: the table's own order
is the order of a card's tags in ``Chapter.SceneCardAdded`` (and of the checks that refuse a
card); ``card_line`` orders the lines of a rendered card (its text is stored in the read model
and packed as P0); ``packet_rank`` orders a scene's tagged entries in a packet's P1 and the
summarizer's role lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter


@dataclass(frozen=True)
class TagList:
    """One tag list of a scene card. ``name``: the card's list and the ``add_scene_card``
    field; ``kind``: the canon kind each of its keys must name (None: any kind); ``label``: its
    line on a rendered card ("Characters: mira, harl"); ``card_line`` and ``packet_rank``: its
    place on a rendered card and among a packet's tagged entries; ``role_list``: the
    summarizer's role lists name its entries ("characters: Mira (mira)")."""

    name: str
    kind: str | None
    label: str
    card_line: int
    packet_rank: int
    role_list: bool


TAG_LISTS: tuple[TagList, ...] = (
    TagList("characters", "character", "Characters", card_line=0, packet_rank=0, role_list=True),
    TagList("locations", "location", "Locations", card_line=1, packet_rank=1, role_list=True),
    TagList("threads", "thread", "Threads", card_line=2, packet_rank=3, role_list=False),
    TagList("items", "item", "Items", card_line=4, packet_rank=2, role_list=True),
    TagList("callbacks", None, "Callbacks", card_line=3, packet_rank=4, role_list=False),
)
TAG_LIST: dict[str, TagList] = {t.name: t for t in TAG_LISTS}
# The lists that name one kind, each with it (as a one-kind tuple: a callback names any kind).
TAG_KINDS: dict[str, tuple[str, ...]] = {t.name: (t.kind,) for t in TAG_LISTS if t.kind is not None}
ON_CARD: tuple[TagList, ...] = tuple(sorted(TAG_LISTS, key=attrgetter("card_line")))
IN_PACKET: tuple[TagList, ...] = tuple(sorted(TAG_LISTS, key=attrgetter("packet_rank")))
ROLE_LISTS: tuple[TagList, ...] = tuple(t for t in IN_PACKET if t.role_list)
