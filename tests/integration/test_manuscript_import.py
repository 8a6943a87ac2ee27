"""``application.manuscript_import`` on both stores: a book becomes planned chapters with
accepted drafts; importing it again changes nothing; an edited chapter appends one accepted
draft; a chapter out of bounds writes nothing; the imported text reaches later packets (L1)."""

from __future__ import annotations

from typing import Any

import pytest

from canon_ledger.application.manuscript_import import accepted as accepted_texts, import_manuscript
from canon_ledger.application.packets.recipes import Request
from canon_ledger.domain.commands import parse_command
from canon_ledger.domain.bounds import MAX_CHAPTER_TEXT
from canon_ledger.domain.errors import CanonError
from canon_ledger.domain.manuscript import split
from canon_ledger.infrastructure.bootstrap import bootstrap

NAMES = ["Ilse", "Hobb", "the lamplighter", "Mara", "the clerk", "Odo"]


def book(edit: int | None = None) -> str:
    parts = ["The Lamplighter's Ledger\n\nFor M.\n"]
    for n in range(1, 7):
        body = (f"{NAMES[n - 1]} walked the harbour wall in the rain of chapter {n}. "
                f"The lamps of Saltmarsh burned low while {NAMES[(n + 2) % 6]} counted the ships.")
        if n == edit:
            body += " A sentence the author added later."
        parts.append(f"CHAPTER {n}. Night {n}\n\n{body}\n")
    return "\n".join(parts)


@pytest.fixture
def services(store_url: str) -> Any:
    s = bootstrap(store_url, embedder="hashing")
    yield s
    s.close()


def test_a_book_imports_once_and_an_edit_appends_one_accepted_draft(services: Any) -> None:
    first = import_manuscript(services.ledger, split(book()), "ledger", title="The Ledger", new_story=True)
    assert first.failed is None and first.counts == {"applied": 1 + 6 * 3}
    assert first.new_drafts == [1, 2, 3, 4, 5, 6]
    views = services.views()
    assert views.story_head("ledger") is not None
    chapter = views.chapter("ledger", 4)
    assert chapter is not None and chapter["text_accepted"] and chapter["volume"] == 1
    [accepted] = views.drafts("ledger", chapter=4, status="accepted")
    source = views.chapter("ledger", 3)["text_source"]

    again = import_manuscript(services.ledger, split(book()), "ledger", title="The Ledger", new_story=False)
    assert again.counts == {"duplicate": 6 * 3} and again.new_drafts == [] and again.position == first.position

    edited = import_manuscript(services.ledger, split(book(edit=3)), "ledger", title="The Ledger", new_story=False)
    assert edited.counts == {"duplicate": 6 * 3 - 2, "applied": 2} and edited.new_drafts == [3]
    assert len(services.views().drafts("ledger", chapter=3, status="accepted")) == 2
    assert services.views().chapter("ledger", 3)["text_source"] > source  # the new text is chapter 3's now

    again = import_manuscript(services.ledger, split(book(edit=3)), "ledger", title="The Ledger", new_story=False)
    assert again.counts == {"duplicate": 6 * 3} and again.new_drafts == []
    # Reverted to the first text: accepted again (a new draft), not skipped as its first import's duplicate.
    reverted = import_manuscript(services.ledger, split(book()), "ledger", title="The Ledger", new_story=False)
    assert reverted.counts == {"duplicate": 6 * 3 - 2, "applied": 2} and reverted.new_drafts == [3]
    assert accepted_texts(services.ledger, "ledger", [3])[3][1] == split(book()).chapters[2].text
    assert import_manuscript(services.ledger, split(book()), "ledger", title="The Ledger",
                             new_story=False).counts == {"duplicate": 6 * 3}


def test_a_chapter_out_of_bounds_writes_nothing(services: Any) -> None:
    before = services.ledger.event_log.position()
    huge = book() + f"\nCHAPTER 7. Too long\n\n{'word ' * (MAX_CHAPTER_TEXT // 5 + 1)}\n"
    with pytest.raises(CanonError):
        import_manuscript(services.ledger, split(huge), "ledger", title="The Ledger", new_story=True)
    assert services.ledger.event_log.position() == before  # checked before the first batch


def test_imported_chapters_reach_a_later_chapter_s_packet_through_l1(services: Any) -> None:
    import_manuscript(services.ledger, split(book()), "ledger", title="The Ledger", new_story=True)
    services.ledger.apply([parse_command({"type": "plan_chapter", "command_id": "plan-7", "story_id": "ledger",
                                          "chapter": 7, "volume": 1,
                                          "goals": ["Mara counts the ships on the harbour wall"]})])
    packet = services.packets.packet(Request("ledger", "writer", 7), record=False)
    cited = [i for i in packet.items if i.kind == "chunk"]
    assert cited and all(int(i.key.split("chapter-")[1][:5]) < 7 for i in cited), [i.key for i in cited]
